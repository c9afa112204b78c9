"""The qMEMO home: $QMEMO_HOME, else the checkout the package runs from, else none."""

from __future__ import annotations

from pathlib import Path

from qmemo.paths import HOME, HOME_ENV, NO_HOME, find_home, is_checkout
from tests.conftest import REPO_ROOT


def fake_checkout(folder: Path) -> Path:
    (folder / "bench_c").mkdir(parents=True)
    (folder / "scripts").mkdir()
    (folder / "scripts" / "setup.sh").write_text("")
    return folder


def test_qmemo_home_wins_over_the_package_checkout(tmp_path):
    assert find_home({HOME_ENV: str(tmp_path)}, package_parent=fake_checkout(tmp_path / "co")) == tmp_path


def test_an_editable_install_finds_its_checkout(tmp_path):
    checkout = fake_checkout(tmp_path / "co")
    assert find_home({}, package_parent=checkout) == checkout


def test_a_wheel_install_without_qmemo_home_has_no_home(tmp_path):
    site_packages = tmp_path / "site-packages"
    site_packages.mkdir()
    assert find_home({}, package_parent=site_packages) is None
    assert find_home({HOME_ENV: ""}, package_parent=site_packages) is None   # empty is unset


def test_this_checkout_is_a_checkout_and_the_tests_run_from_it():
    assert is_checkout(REPO_ROOT) and HOME == REPO_ROOT


def test_the_no_home_message_is_one_line_naming_qmemo_home():
    assert "\n" not in NO_HOME and HOME_ENV in NO_HOME
