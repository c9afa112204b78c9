"""Every verifier the scheme registry offers, held to third-party vectors: 0 disagreements.

One test per scheme x verifier x source (qmemo.crypto.vector_sources says which sources,
qmemo.crypto.vectors how a case is run); a failure names every case that disagrees, with
its tcId or KAT count, its comment and its flags. Nothing here is marked expected-to-fail: a verifier that gives
another verdict than the source's fails, whatever the reason.

Also: every vector file is the one its folder's README.md describes (sha256), no file
there is unlisted, and the trimmed ACVP file is what tests/vectors/trim_third_party.py
makes from liboqs's copy in the crate the setup downloads.
"""

from __future__ import annotations

import gzip
import importlib
import importlib.util
import io
import json
import tarfile

import pytest

from qmemo.crypto import vector_files, vector_sources, vectors
from qmemo.crypto.schemes import backend_of, scheme_names, verifiers_of
from qmemo.errors import CryptoError, SetupError
from tests.conftest import REPO_ROOT, VENV_BIN, run_command

CASES = [(name, verifier, source.label) for name in scheme_names()
         for verifier in verifiers_of(name) for source in vector_sources.sources_of(name)]
VECTOR_FOLDERS = ("wycheproof", "acvp", "nist_kat")
OQS_CRATE = REPO_ROOT / ".deps" / "crates" / "oqs-sys-0.11.0+liboqs-0.13.0.crate"
ACVP_IN_CRATE = "oqs-sys-0.11.0+liboqs-0.13.0/liboqs/tests/ACVP_Vectors/ML-DSA-sigVer-FIPS204/internalProjection.json"


@pytest.fixture(scope="module", autouse=True)
def known_answers_made_two_at_a_time():
    """kat_sig runs once per scheme for the whole module, two at a time (about 6 s, not 11)."""
    vector_files.prefetch_kats(name for name in scheme_names() if backend_of(name, "liboqs") == "liboqs")


def source_named(name: str, label: str) -> vector_sources.VectorSource:
    return next(source for source in vector_sources.sources_of(name) if source.label == label)


@pytest.mark.parametrize(("name", "verifier", "label"), CASES,
                         ids=[f"{n}-{vectors.verifier_label(n, v)}-{label.replace(' ', '_')}" for n, v, label in CASES])
def test_verifier_gives_every_case_of_the_source_its_verdict(name, verifier, label):
    result = vectors.check_source(name, verifier, source_named(name, label))
    assert result.error is None, result.error
    assert result.cases > 0, f"{label} has no cases for {name}"
    failing = result.failing_cases()
    if failing:
        pytest.fail(f"{name} with the {result.verifier_label} verifier disagrees with {label} ({result.origin}) "
                    f"on {len(failing)} of {result.cases} cases:\n" + "\n".join(failing), pytrace=False)
    assert result.passed + result.not_applicable == result.cases


@pytest.mark.parametrize("name", [n for n in scheme_names() if n.startswith("ML-DSA")])
def test_only_a_verifier_without_a_context_argument_leaves_context_cases_out(name):
    for verifier in verifiers_of(name):
        for result in vectors.check_scheme(name, verifier):
            cases = vector_sources.cases_of(source_named(name, result.source))
            with_context = sum(bool(case.context) for case in cases)
            assert result.not_applicable == (with_context if backend_of(name, verifier) != "liboqs" else 0)


def test_every_wycheproof_case_is_read():
    for name in scheme_names():
        for source in vector_sources.sources_of(name):
            if not source.label.startswith("wycheproof"):
                continue
            file = next(f for f in vector_files.manifest("wycheproof")
                        if source.origin().endswith(f.removesuffix(".gz")))
            stated = json.loads(vector_files.read_vector_file("wycheproof", file))["numberOfTests"]
            assert len(vector_sources.cases_of(source)) == stated, file


@pytest.mark.parametrize("folder", VECTOR_FOLDERS)
def test_every_vector_file_has_the_sha256_its_readme_gives(folder):
    entries = vector_files.manifest(folder)
    assert entries, f"tests/vectors/{folder}/README.md lists no file"
    on_disk = {path.name for path in (REPO_ROOT / "tests" / "vectors" / folder).iterdir() if path.name != "README.md"}
    assert on_disk <= set(entries), f"files in tests/vectors/{folder} that its README does not list: {on_disk - set(entries)}"
    for name in entries:
        if folder == "nist_kat":
            assert name == "falcon512-KAT.rsp"
            assert vector_files.nist_falcon512_kat().startswith(vector_files.NIST_FALCON512_HEADER + b"count = 0\n")
        else:
            assert (REPO_ROOT / "tests" / "vectors" / folder / name).is_file(), name
            vector_files.read_vector_file(folder, name)   # raises SetupError on another sha256


def test_a_vector_file_with_another_sha256_is_refused(tmp_path, monkeypatch):
    (tmp_path / "acvp").mkdir()
    (tmp_path / "acvp" / "README.md").write_text((REPO_ROOT / "tests" / "vectors" / "acvp" / "README.md").read_text())
    (tmp_path / "acvp" / "ML-DSA-sigVer-FIPS204.json.gz").write_bytes(gzip.compress(b"{}"))
    monkeypatch.setattr(vector_files, "VECTORS_DIR", tmp_path)
    vector_files.manifest.cache_clear()
    try:
        with pytest.raises(SetupError, match="not the published"):
            vector_files.read_vector_file("acvp", "ML-DSA-sigVer-FIPS204.json.gz")
    finally:
        vector_files.manifest.cache_clear()


def test_the_trimmed_acvp_file_is_what_the_script_makes_from_liboqss_copy():
    spec = importlib.util.spec_from_file_location("trim_third_party", REPO_ROOT / "tests" / "vectors" / "trim_third_party.py")
    trim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(trim)
    with tarfile.open(OQS_CRATE) as crate:
        original = crate.extractfile(ACVP_IN_CRATE).read()
    trim.checked(original, trim.ACVP_MLDSA_ORIGINAL_SHA256, ACVP_IN_CRATE)
    made = (json.dumps(trim.trim_acvp_mldsa(json.load(io.BytesIO(original))), indent=1) + "\n").encode()
    assert made == vector_files.read_vector_file("acvp", "ML-DSA-sigVer-FIPS204.json.gz")


def test_a_kat_signed_message_is_split_into_the_registry_signature_format():
    case = vector_sources.cases_of(source_named("Falcon-512", "nist falcon512-KAT"))[0]
    assert case.signature[0] == 0x39 and len(case.signature) <= 752   # header, nonce, compressed s2
    assert vector_sources.cases_of(source_named("Falcon-padded-512", "liboqs KAT Falcon-padded-512"))[0].signature[0] == 0x39


def test_qmemo_schemes_vectors_gives_each_scheme_and_verifier_its_sources_and_counts():
    done = run_command([str(VENV_BIN / "qmemo"), "schemes", "--vectors", "--json", "--no-self-test"], timeout=300)
    rows = {row["name"]: row["vectors"] for row in json.loads(done.stdout)}
    shown = {(name, entry["verifier"], entry["source"]) for name, entries in rows.items() for entry in entries}
    assert shown == {(n, vectors.verifier_label(n, v), label) for n, v, label in CASES}
    disagreeing = 0
    for entries in rows.values():
        for entry in entries:
            assert entry["error"] is None, entry
            assert entry["passed"] + entry["not_applicable"] + len(entry["failing"]) == entry["cases"], entry
            disagreeing += len(entry["failing"])
    fast_44 = {entry["source"]: entry for entry in rows["ML-DSA-44"] if entry["verifier"] == "fast"}
    assert (fast_44["wycheproof mldsa_44_verify"]["cases"], fast_44["wycheproof mldsa_44_verify"]["passed"],
            fast_44["wycheproof mldsa_44_verify"]["not_applicable"]) == (180, 173, 7)
    assert fast_44["wycheproof mldsa_44_verify"]["origin"].startswith("C2SP/wycheproof dac1dd4729fd")
    assert done.returncode == (1 if disagreeing else 0), done.stderr


def test_the_vectors_table_names_each_source_with_its_count_and_the_failing_cases():
    from rich.console import Console

    from qmemo.commands.schemes import _failure_lines, vector_table

    case = vector_sources.VectorCase("tcId 7", "z too large", ("InfinityNormViolation",), b"", b"", b"", valid=False)
    results = [
        vectors.SourceResult("ML-DSA-44", "fast", "mldsa-vt", "wycheproof mldsa_44_verify", "C2SP/wycheproof", 180, 173, 7, ()),
        vectors.SourceResult("ML-DSA-44", "liboqs", "liboqs", "wycheproof mldsa_44_verify", "C2SP/wycheproof", 180, 179, 0,
                             (vectors.Disagreement(case, "verify", True),)),
        vectors.SourceResult("Ed25519", "fast", "libsodium", "wycheproof ed25519", "C2SP/wycheproof", 0, 0, 0, (),
                             error="tests/vectors/wycheproof/ed25519_test.json.gz has sha256 00, not the published 11"),
    ]
    console = Console(width=200, record=True, color_system=None)
    console.print(vector_table(results))
    text = console.export_text()
    assert "wycheproof mldsa_44_verify 173/173 (7 n/a)" in text
    assert "wycheproof mldsa_44_verify 179/180" in text
    assert "libsodium" in text and "not the published" in text
    assert _failure_lines(results) == [
        "ML-DSA-44 (liboqs) disagrees with wycheproof mldsa_44_verify on 1 cases:",
        "  tcId 7 (z too large; InfinityNormViolation): expected invalid; verify accepted it"]


def test_a_source_that_gives_a_verifier_no_case_is_no_pass(monkeypatch, capsys):
    import argparse

    from qmemo.commands import schemes as schemes_command

    empty = vector_sources.VectorSource("Ed25519", "an emptied file", lambda: "nowhere", lambda: ())
    read_nothing = vectors.check_source("Ed25519", "fast", empty)
    assert (read_nothing.error, read_nothing.cases, read_nothing.disagreements) == (None, 0, ())
    assert not read_nothing.ok
    all_context = vectors.SourceResult("ML-DSA-44", "fast", "mldsa-vt", "context only", "x", 14, 0, 14, ())
    assert not all_context.ok
    assert schemes_command._failure_lines([read_nothing]) == [
        "Ed25519 (libsodium): an emptied file gave it no case (0 read, 0 n/a): nothing was checked"]
    monkeypatch.setattr(schemes_command, "_vector_results", lambda: [read_nothing])
    status = schemes_command.run(argparse.Namespace(json=True, no_self_test=True, verifier="fast", vectors=True))
    capsys.readouterr()
    assert status == 1


def test_qmemo_schemes_without_vectors_says_how_to_run_them():
    done = run_command([str(VENV_BIN / "qmemo"), "schemes", "--no-self-test"], env={"COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    assert "qmemo schemes --vectors" in done.stdout


FAST_CODE_PATHS = [("qmemo.crypto.falcon_vt", "FalconVtVerifier", path, name)
                   for path in ("clean", "avx2") for name in scheme_names() if name.startswith("Falcon")] + \
                  [("qmemo.crypto.mldsa_vt", "MldsaVtVerifier", path, name)
                   for path in ("ref", "avx2") for name in scheme_names() if name.startswith("ML-DSA")]


@pytest.mark.parametrize(("module_name", "class_name", "path", "name"), FAST_CODE_PATHS,
                         ids=[f"{name}-{path}" for _, _, path, name in FAST_CODE_PATHS])
def test_the_fast_verifier_gives_every_verdict_under_each_of_its_code_paths(module_name, class_name, path, name):
    """The registry's fast verifier runs the code path liboqs's CPU test picks; the other one
    (portable or AVX2) must give the same verdicts. A fresh verifier with a cache of its own:
    a cached key's layout belongs to the code path that prepared it."""
    module = importlib.import_module(module_name)
    default = module.implementation()
    try:
        module.select_implementation(path)
    except CryptoError:
        pytest.skip(f"this CPU cannot run the {path} code")
    try:
        verifier = getattr(module, class_name)(name, cache_capacity=8)
        for source in vector_sources.sources_of(name):
            result = vectors.check_source(name, "fast", source, instance=verifier)
            assert result.error is None, result.error
            assert not result.disagreements, "\n".join(result.failing_cases())
    finally:
        module.select_implementation(default)
