"""Which C baseline a devnet here is set against: this machine's and this liboqs build's, named.

The fingerprint decides "this machine"; find_c_baseline picks the best matching run;
the dashboard's title says which run it is, how old, and how it was measured.
"""

import dataclasses
import json
import shutil
from pathlib import Path

from rich.console import Console

from qmemo.bench.c_baseline import find_c_baseline
from qmemo.bench import fingerprint
from qmemo.bench.c_summary import Fingerprint, read_summary, write_summary
from qmemo.monitor.view import Baseline, NodePoll, Snapshot, age_text, render
from tests.unit.api_documents import metrics_snapshot

FIXTURE = Path(__file__).parents[1] / "fixtures" / "c-baseline-quick" / "summary.json"
HERE = Fingerprint("aaaaaaaaaaaa", "AMD EPYC", 2, "f1", "0.13.0", "-O3; liboqs.so sha256 11")
ELSEWHERE = dataclasses.replace(HERE, id="bbbbbbbbbbbb", liboqs_build="-O2; liboqs.so sha256 22")


def fake_liboqs(prefix: Path, library: bytes, cmake_flags: str = "-G Ninja") -> Path:
    (prefix / "lib").mkdir(parents=True)
    (prefix / "lib" / "liboqs.so").write_bytes(library)
    (prefix / "share" / "liboqs").mkdir(parents=True)
    (prefix / "share" / "liboqs" / "build-info.json").write_text(
        json.dumps({"liboqs_version": "0.13.0", "cmake_flags": cmake_flags, "c_flags_release": "-O3"}))
    return prefix


def test_the_fingerprint_is_stable_and_tells_one_liboqs_build_from_another(tmp_path):
    one = fake_liboqs(tmp_path / "one", b"build one")
    same = fake_liboqs(tmp_path / "same", b"build one")
    rebuilt = fake_liboqs(tmp_path / "rebuilt", b"build two")
    other_flags = fake_liboqs(tmp_path / "flags", b"build one", cmake_flags="-G Ninja -DOQS_DIST_BUILD=OFF")
    assert fingerprint.current(one) == fingerprint.current(one)
    assert fingerprint.current(one) == fingerprint.current(same)      # the path is not part of it
    assert fingerprint.current(one).id != fingerprint.current(rebuilt).id
    assert fingerprint.current(one).id != fingerprint.current(other_flags).id
    assert fingerprint.current(one).liboqs_version == "0.13.0"


def results_with(tmp_path, *runs):
    """A results/ folder holding the fixture's summary once per (folder, profile, complete, created, fingerprint)."""
    base = read_summary(FIXTURE)
    for folder, profile, complete, created, print_ in runs:
        (tmp_path / folder).mkdir(parents=True)
        write_summary(tmp_path / folder / "summary.json",
                      dataclasses.replace(base, run_id=folder, profile=profile, complete=complete, created=created,
                                          quick=profile != "full", fingerprint=print_))
    return tmp_path


def test_no_baseline_of_this_machine_means_none_even_when_others_exist(tmp_path):
    results = results_with(tmp_path, ("old", "full", True, "2026-11-20T10:00:00+00:00", ELSEWHERE),
                           ("unmarked", "full", True, "2026-11-21T10:00:00+00:00", None))
    assert find_c_baseline("Falcon-512", HERE, results) is None


def test_a_full_run_of_this_machine_beats_a_newer_quick_one_and_the_newest_full_wins(tmp_path):
    results = results_with(tmp_path, ("full-old", "full", True, "2026-11-20T10:00:00+00:00", HERE),
                           ("full-new", "full", True, "2026-11-21T10:00:00+00:00", HERE),
                           ("quick-newest", "quick", False, "2026-11-22T10:00:00+00:00", HERE),
                           ("full-elsewhere", "full", True, "2026-11-23T10:00:00+00:00", ELSEWHERE))
    assert find_c_baseline("Falcon-512", HERE, results).run_id == "full-new"
    shutil.rmtree(results / "full-old")
    shutil.rmtree(results / "full-new")
    assert find_c_baseline("Falcon-512", HERE, results).run_id == "quick-newest"


def test_a_run_without_the_schemes_verify_rate_is_not_a_baseline_for_it(tmp_path):
    results = results_with(tmp_path, ("run", "quick", False, "2026-11-22T10:00:00+00:00", HERE))
    assert find_c_baseline("Falcon-512", HERE, results) is not None
    assert find_c_baseline("No-Such-Scheme", HERE, results) is None


def text_of(snapshot, width=200):
    console = Console(width=width, record=True, color_system=None)
    console.print(render(snapshot))
    return console.export_text()


def node(name, verifier):
    def poll(t, count, seconds):
        return NodePoll(f"http://{name}", t, metrics_snapshot(name, verify_count=count, verify_seconds=seconds,
                                                               verifier=verifier))
    return poll


def two_polls(baseline, *nodes):
    before = Snapshot(1000.0, [n(1000.0, 0, 0.0) for n in nodes], baseline)
    return Snapshot(1002.0, [n(1002.0, 3000, 0.2) for n in nodes], baseline, previous=before)


QUICK = Baseline(10_000.0, "results/r/summary.json", 30_000.0, run_id="20261123T170000Z-quick",
                 measured_at_s=1002.0 - 185, kind="quick, verify only")


def test_the_first_screen_names_the_run_its_age_and_how_it_was_measured():
    text = text_of(two_polls(QUICK, node("node-0", "liboqs")))
    assert "run 20261123T170000Z-quick" in text and "quick, verify only" in text
    assert "measured 3 min ago" in text
    assert "NOT this machine" not in text


def test_each_node_is_set_against_the_row_of_the_verifier_it_runs():
    text = text_of(two_polls(QUICK, node("node-0", "fast"), node("node-1", "liboqs")))
    # 3,000 verifications in 0.2 s of verify time: 15,000/s per core.
    [fast] = [line for line in text.splitlines() if "node-0" in line and "C fast verifier" in line]
    [libo] = [line for line in text.splitlines() if "node-1" in line and "C liboqs" in line]
    assert "15,000" in fast and "50%" in fast       # of the fast verifier's 30,000
    assert "15,000" in libo and "150%" in libo      # of liboqs's 10,000


def test_a_fast_node_gets_no_figure_from_a_baseline_without_the_fast_verifier():
    text = text_of(two_polls(dataclasses.replace(QUICK, fast_verify_per_s=None), node("node-0", "fast")))
    [row] = [line for line in text.splitlines() if "node-0" in line and "not in this run" in line]
    assert "%" not in row.split("not in this run")[1]


def test_another_machines_baseline_is_shown_as_such():
    text = text_of(two_polls(dataclasses.replace(QUICK, this_machine=False), node("node-0", "liboqs")))
    assert "NOT this machine or liboqs build" in text


def test_a_baseline_measured_on_a_busy_machine_says_so_on_the_first_screen():
    # Its rates are low, so a node set against it can show more than 100% of C.
    assert "BUSY" not in text_of(two_polls(QUICK, node("node-0", "liboqs")))
    text = text_of(two_polls(dataclasses.replace(QUICK, busy_load=7.4), node("node-0", "liboqs")))
    assert "measured BUSY (load 7.4): C figures low" in text


def test_ages_read_as_a_person_would_say_them():
    assert age_text(42) == "measured 42 s ago"
    assert age_text(185) == "measured 3 min ago"
    assert age_text(7_300) == "measured 2 h ago"
    assert age_text(3 * 86_400) == "measured 3 days ago"
    assert age_text(None) == "age unknown"


def test_a_baseline_named_by_path_from_another_machine_is_marked_so(tmp_path):
    from qmemo.monitor.poll import MonitorConfig, load_baseline

    elsewhere = results_with(tmp_path, ("run-elsewhere", "quick", True, "2026-11-22T10:00:00+00:00", ELSEWHERE))
    baseline = load_baseline(MonitorConfig(node_urls=[], baseline_path=elsewhere / "run-elsewhere" / "summary.json"))
    assert baseline.run_id == "run-elsewhere" and baseline.kind == "quick"
    assert baseline.this_machine is False and baseline.verify_per_s


def test_the_report_falls_back_to_this_machines_verify_only_run_when_there_is_no_latest(tmp_path, monkeypatch):
    # A fresh clone after its first devnet.sh: one verify-only run, never results/latest.
    import qmemo.analysis.results as results_module

    here = fingerprint.current()
    results = results_with(tmp_path / "results", ("first-quick", "quick", False, "2026-11-23T18:15:13+00:00", here),
                           ("elsewhere", "full", True, "2026-11-23T18:20:00+00:00", ELSEWHERE))
    monkeypatch.setattr(results_module, "DEFAULT_RESULTS", results / "latest")
    assert results_module.load_results().baseline.run_id == "first-quick"
    assert results_module.load_results(results / "elsewhere").baseline.run_id == "elsewhere"   # named: as named
