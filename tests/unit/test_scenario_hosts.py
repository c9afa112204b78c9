"""Host bookkeeping that needs no root: the one-line refusal without root, and which names a sweep may touch."""

from __future__ import annotations

import pytest

from qmemo.errors import SetupError
from qmemo.scenario import hosts


def test_without_root_the_runner_refuses_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hosts.os, "geteuid", lambda: 1000)
    with pytest.raises(SetupError) as error:
        hosts.require_root_and_netns()
    assert "needs root" in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("name, pid", [("qms4242br", 4242), ("qms4242n0", 4242), ("qms17n31", 17), ("qms9g", 9),
                                       ("qms9a@if12", 9)])
def test_our_link_names_carry_the_runners_pid(name: str, pid: int) -> None:
    match = hosts._LINK_RE.match(name)
    assert match is not None and int(match.group(1)) == pid


@pytest.mark.parametrize("name", ["eth0", "qmsbr", "qms12x", "docker0", "qms12n"])
def test_other_link_names_are_never_swept(name: str) -> None:
    assert hosts._LINK_RE.match(name) is None


def test_namespace_names_carry_the_runners_pid() -> None:
    match = hosts._NS_RE.match("qms-4242-node-0")
    assert match is not None and match.group(1) == "4242"
    assert hosts._NS_RE.match("other-4242-node-0") is None


def test_a_forwarding_rule_is_recognised_with_its_runners_pid() -> None:
    rule = "-A FORWARD " + " ".join(hosts.forward_rule("qms4242br"))
    match = hosts._FORWARD_RE.match(rule)
    assert match is not None and (match.group(1), match.group(2)) == ("qms4242br", "4242")


@pytest.mark.parametrize("rule", ["-A FORWARD -i qms4242br -o qms17br -j ACCEPT",      # two bridges: not ours
                                  "-A FORWARD -i docker0 -o docker0 -j ACCEPT",
                                  "-A DOCKER-USER -i qms+ -o qms+ -j ACCEPT",
                                  "-A FORWARD -i qms4242br -o qms4242br -j DROP"])
def test_other_rules_are_never_swept(rule: str) -> None:
    assert hosts._FORWARD_RE.match(rule) is None
