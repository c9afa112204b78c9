"""Put the scheme A/B table of a report into docs/schemes.md, so no figure there is typed in.

`scripts/schemes-ab.sh --update-docs` runs one sweep per scheme, then `qmemo report`
over the run folders, then this: the main table of the report's "Schemes side by side"
section (qmemo.analysis.scheme_ab) replaces the block between two markers in the doc,
under a line naming the command, the time and the machine's load.

    python -m qmemo.analysis.scheme_ab_doc REPORT.md docs/schemes.md --note "..."

It never measures or computes a figure: it copies the report's own lines. A report
without the section, or a doc without both markers, is an error naming the file, and
the doc is left untouched.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from qmemo.analysis.markdown import splice as splice_between
from qmemo.errors import ConfigError, QmemoError

SECTION = "Schemes side by side"
BEGIN = "<!-- schemes-ab:begin (scripts/schemes-ab.sh --update-docs writes this block; do not edit) -->"
END = "<!-- schemes-ab:end -->"


def report_table(report: str, source: str = "the report") -> str:
    """The first Markdown table under the report's "Schemes side by side" heading."""
    lines = report.splitlines()
    heading = re.compile(rf"^#+\s+{re.escape(SECTION)}\s*$")
    start = next((i for i, line in enumerate(lines) if heading.match(line)), None)
    if start is None:
        raise ConfigError(f"{source} has no '{SECTION}' section (it needs two or more --devnet runs)")
    rows: list[str] = []
    for line in lines[start + 1:]:
        if line.startswith("#"):          # the next section: no table in this one
            break
        if line.startswith("|"):
            rows.append(line)
        elif rows:                        # the first table ended
            break
    if len(rows) < 3:                     # header, delimiter, at least one scheme
        raise ConfigError(f"{source}: the '{SECTION}' section holds no table of schemes")
    return "\n".join(rows)


def splice(doc: str, block: str, source: str = "the doc") -> str:
    """`doc` with the text between BEGIN and END replaced by `block`."""
    return splice_between(doc, block, BEGIN, END, source)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m qmemo.analysis.scheme_ab_doc", description=__doc__.split("\n")[0])
    parser.add_argument("report", type=Path, help="REPORT.md of `qmemo report --devnet A --devnet B ...`")
    parser.add_argument("doc", type=Path, help="the Markdown file holding the markers (docs/schemes.md)")
    parser.add_argument("--note", default="", help="a line put above the table: how and when it was measured")
    args = parser.parse_args(argv)
    try:
        table = report_table(args.report.read_text(), str(args.report))
        doc = args.doc.read_text()
        args.doc.write_text(splice(doc, (args.note + "\n\n" if args.note else "") + table, str(args.doc)))
    except (OSError, QmemoError) as exc:
        print(f"scheme_ab_doc: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
