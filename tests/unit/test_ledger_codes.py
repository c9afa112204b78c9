"""The refusal codes are one table (qmemo.core.refusals.RULES): the C ledger's header is
generated from it and must match it, the extension's names are the table's, and every
rule with a sentence builds its error with its code."""

from __future__ import annotations

import pytest

from qmemo.core.refusals import BLOCK, NATIVE_RULES, RECEIPT, RECEIPTS, RULES, TRANSACTION, block_refusal, \
    receipt_refusal, receipts_refusal, refusal
from qmemo.node.ledger import native, reason_name, rule_name
from qmemo.node.ledger_codes import HEADER, header_text


def test_the_committed_header_is_the_one_the_table_generates() -> None:
    assert HEADER.read_text() == header_text(), \
        "ledger_codes.h is stale: run `python -m qmemo.node.ledger_codes` and rebuild (bash scripts/setup.sh)"


def test_the_extension_names_its_codes_as_the_table_does() -> None:
    """A stale build (the header changed, the extension not rebuilt) fails here, by name."""
    assert native().CODE_NAMES == ("", *(rule.error_code for rule in NATIVE_RULES))
    assert rule_name(native().HELD_NONCE_CONFLICT) == "held_nonce_conflict"
    stale = 1 + [rule.name for rule in NATIVE_RULES].index("nonce_stale")     # numbered from 1, after C_NONE
    assert reason_name(native().REORG | stale) == "reorg_nonce_stale"


def test_rule_names_are_unique_and_every_rule_that_refuses_has_a_sentence() -> None:
    assert len({rule.name for rule in RULES}) == len(RULES)
    assert len(NATIVE_RULES) < native().REORG      # the reorg bit stays clear of every code
    for rule in RULES:
        assert (rule.error is not None) == bool(rule.sentence), rule.name


@pytest.mark.parametrize("rule", [rule for rule in RULES if rule.sentence], ids=lambda rule: rule.name)
def test_every_sentence_builds_its_error_with_its_code(rule) -> None:
    build = {TRANSACTION: lambda: refusal(rule.name, 3, 4), BLOCK: lambda: block_refusal(rule.name, -1, 3, 4),
             RECEIPT: lambda: receipt_refusal(rule.name, 3, 4), RECEIPTS: lambda: receipts_refusal(rule.name, 3, 4)}
    error = build[rule.kind]()
    assert isinstance(error, rule.error) and error.code == rule.error_code and "{" not in error.detail


def test_a_rule_of_another_kind_is_our_bug() -> None:
    with pytest.raises(ValueError, match="no such transaction rule"):
        refusal("wrong_merkle_root")
    with pytest.raises(ValueError, match="no such receipt rule"):
        receipt_refusal("fee_too_low")
