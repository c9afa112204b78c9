"""The setup's sources come without cargo: `scripts/setup.sh fetch` downloads the pinned
crates from crates.io's download endpoint, checks their sha256 and unpacks them.

The setup runs from a scratch copy of `scripts/` (so its `.deps/` is empty) with a PATH
that has no cargo, apt-get, curl, wget, git or cmake, against a loopback server standing
in for the endpoint (QMEMO_CRATES_URL) that serves the very .crate files this
checkout's setup downloaded and checked. Setup's own run on a fresh machine is the test
of the real endpoint.
"""

from __future__ import annotations

import http.server
import os
import shutil
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, run_command

HIDDEN_TOOLS = {"cargo", "rustc", "apt-get", "cmake", "git", "curl", "wget"}
CRATES = {"oqs-sys": "0.11.0+liboqs-0.13.0", "blake3": "1.8.7"}   # scripts/setup.sh's pins


def path_without(tools: set[str], bin_dir: Path) -> str:
    """A PATH of one folder linking every system tool except `tools`."""
    bin_dir.mkdir()
    for folder in ("/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"):
        if not os.path.isdir(folder):
            continue
        for entry in os.scandir(folder):
            target = bin_dir / entry.name
            if entry.name not in tools and not target.exists() and os.access(entry.path, os.X_OK):
                target.symlink_to(entry.path)
    return str(bin_dir)


class Endpoint:
    """A loopback server laid out like crates.io's download endpoint (NAME/NAME-VERSION.crate)."""

    def __init__(self, root: Path):
        self.root = root
        self.requests: list[str] = []
        endpoint = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=str(root), **kwargs)

            def do_GET(self):
                endpoint.requests.append(urllib.parse.unquote(self.path))
                super().do_GET()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint(tmp_path: Path) -> Iterator[Endpoint]:
    root = tmp_path / "endpoint"
    for name, version in CRATES.items():
        crate = REPO_ROOT / ".deps" / "crates" / f"{name}-{version}.crate"
        assert crate.is_file(), f"{crate} missing: run scripts/setup.sh (its fetch step keeps the crates there)"
        (root / name).mkdir(parents=True)
        shutil.copy(crate, root / name / crate.name)
    served = Endpoint(root)
    yield served
    served.close()


def scratch_setup(tmp_path: Path, endpoint: Endpoint, **extra: str) -> tuple[Path, dict[str, str]]:
    clone = tmp_path / "clone"
    shutil.copytree(REPO_ROOT / "scripts", clone / "scripts")
    env = {"PATH": path_without(HIDDEN_TOOLS, tmp_path / "bin"), "HOME": str(tmp_path),
           "QMEMO_CRATES_URL": endpoint.url, **extra}
    return clone, env


def test_the_fetch_step_needs_no_cargo_and_downloads_once(tmp_path: Path, endpoint: Endpoint):
    clone, env = scratch_setup(tmp_path, endpoint)
    result = run_command(["bash", str(clone / "scripts" / "setup.sh"), "fetch"], env=env, cwd=clone, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(endpoint.requests) == ["/blake3/blake3-1.8.7.crate",
                                         "/oqs-sys/oqs-sys-0.11.0+liboqs-0.13.0.crate"]
    src = clone / ".deps" / "src"
    cmake = (src / "oqs-sys-0.11.0+liboqs-0.13.0" / "liboqs" / "CMakeLists.txt").read_text()
    assert "set(OQS_VERSION_MINOR 13)" in cmake
    assert 'BLAKE3_VERSION_STRING "1.8.7"' in (src / "blake3-1.8.7" / "c" / "blake3.h").read_text()
    # Nothing else was made: no build, no cargo manifest, no cargo home.
    assert sorted(p.name for p in (clone / ".deps").iterdir()) == ["crates", "logs", "src"]
    assert not (tmp_path / ".cargo").exists()
    # A second run checks its stamps and downloads nothing.
    again = run_command(["bash", str(clone / "scripts" / "setup.sh"), "fetch"], env=env, cwd=clone, timeout=60)
    assert again.returncode == 0, again.stderr
    assert len(endpoint.requests) == 2


def test_a_crate_whose_sha256_is_not_the_pinned_one_is_refused_and_not_kept(tmp_path: Path, endpoint: Endpoint):
    served = endpoint.root / "blake3" / "blake3-1.8.7.crate"
    tampered = bytearray(served.read_bytes())
    tampered[len(tampered) // 2] ^= 0x01
    served.write_bytes(bytes(tampered))
    clone, env = scratch_setup(tmp_path, endpoint)
    result = run_command(["bash", str(clone / "scripts" / "setup.sh"), "fetch"], env=env, cwd=clone, timeout=120)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("setup: ERROR: step 'fetch': fetch_crate: blake3 1.8.7: ")
    assert "is not the pinned 6d9e454fc11f76977dc803893aff6304ed33d6a26efae8696573bea74baa27ae" in lines[0]
    deps = clone / ".deps"
    assert not (deps / "src" / "blake3-1.8.7").exists()
    assert sorted(p.name for p in (deps / "crates").iterdir()) == ["oqs-sys-0.11.0+liboqs-0.13.0.crate"]


def test_an_unreachable_endpoint_is_one_line_naming_the_address(tmp_path: Path, endpoint: Endpoint):
    clone, env = scratch_setup(tmp_path, endpoint)
    endpoint.close()        # nothing listens there any more
    result = run_command(["bash", str(clone / "scripts" / "setup.sh"), "fetch"], env=env, cwd=clone, timeout=120)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"could not download {endpoint.url}/oqs-sys/" in lines[0], result.stderr


def test_cargo_is_never_asked_for(tmp_path: Path, endpoint: Endpoint):
    """The whole setup, no cargo on PATH: past the apt and fetch steps, it stops at the
    liboqs step on the (empty) prefix given, never on cargo."""
    clone, env = scratch_setup(tmp_path, endpoint, QMEMO_LIBOQS_PREFIX=str(tmp_path / "empty-prefix"))
    result = run_command(["bash", str(clone / "scripts" / "setup.sh")], env=env, cwd=clone, timeout=120)
    assert result.returncode == 1
    assert "cargo" not in (result.stdout + result.stderr).replace(str(tmp_path), "<tmp>")
    assert "missing packages" not in result.stderr and "installing Debian packages" not in result.stdout
    assert "has no lib/liboqs.so" in result.stderr
    assert (clone / ".deps" / "src" / "blake3-1.8.7" / "c" / "blake3.h").is_file()
