"""The C ledger's refusal codes, generated from qmemo.core.refusals.RULES.

`python -m qmemo.node.ledger_codes` writes qmemo/node/native/ledger_codes.h: an X-macro
list of every rule the ledger reports, in RULES's order, from which ledger.h makes its
`C_*` enum and ledger_module.c its `CODE_NAMES` (what Python reads the numbers by). The
header is committed, so the C builds without Python and reads whole at review;
tests/unit/test_ledger_codes.py regenerates it and fails when the two differ.
"""

from __future__ import annotations

import sys
from pathlib import Path

from qmemo.core.refusals import NATIVE_RULES

HEADER = Path(__file__).resolve().parent / "native" / "ledger_codes.h"
_KINDS = {"decode": "Transaction.decode's errors", "transaction": "a transaction's rules (check_transaction_form, "
          "charge, Mempool.check, the held queue)", "eviction": "the pool's evictions", "block": "a block's body"}


def header_text() -> str:
    """ledger_codes.h as `python -m qmemo.node.ledger_codes` writes it."""
    lines = ["/*",
             " * ledger_codes.h - GENERATED from qmemo/core/refusals.py's RULES by",
             " * `python -m qmemo.node.ledger_codes`: edit the table, not this file.",
             " *",
             " * X(C_<RULE>, \"<error code>\") for every refusal and eviction the ledger reports, in",
             " * the order of their numbers (0 is C_NONE). ledger.h makes the enum from it,",
             " * ledger_module.c the names Python reads the numbers by.",
             " */",
             "#ifndef QMEMO_LEDGER_CODES_H",
             "#define QMEMO_LEDGER_CODES_H",
             "",
             "#define QMEMO_LEDGER_CODES(X) \\"]
    kind = None
    for rule in NATIVE_RULES:
        if rule.kind != kind:
            kind = rule.kind
            lines.append(f"\t/* {_KINDS[kind]} */ \\")
        lines.append(f"\tX(C_{rule.name.upper()}, \"{rule.error_code}\") \\")
    lines += ["", "#endif", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    HEADER.write_text(header_text())
    sys.stdout.write(f"wrote {HEADER}\n")
