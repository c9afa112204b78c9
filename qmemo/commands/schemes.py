"""`qmemo schemes`: every signature scheme, its sizes, implementation and a self-test; with
`--vectors`, every verifier of every scheme held to the third-party vectors
(qmemo.crypto.vectors) - behind a flag because it takes about 10 s (kat_sig signs every
known-answer entry), and this command is the first a user runs."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.table import Table

    from qmemo.crypto.vectors import SourceResult


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--no-self-test", action="store_true", help="skip the self-tests")
    parser.add_argument("--verifier", choices=("fast", "liboqs"), default="fast",
                        help="Falcon's and ML-DSA's verifier: fast (default; qMEMO's: cached keys, "
                             "variable-time) or liboqs")
    parser.add_argument("--vectors", action="store_true",
                        help="also run the third-party vectors (Wycheproof, NIST ACVP, NIST and liboqs KATs) "
                             "through every verifier of every scheme, both of Falcon's and ML-DSA's "
                             "whatever --verifier says (about 10 s); exit 1 on any disagreement, or a "
                             "source that gives a verifier no case")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import dataclasses

    import orjson
    from rich.console import Console
    from rich.table import Table

    from qmemo.crypto.liboqs import cpu_extensions, liboqs_library_path
    from qmemo.crypto.schemes import get_scheme, scheme_names
    from qmemo.crypto.selftest import self_test

    rows = []
    for name in scheme_names():
        scheme = get_scheme(name, args.verifier)   # its `implementation` names the code that verifies
        result = None if args.no_self_test else self_test(scheme)
        rows.append((scheme.info, result))
    vector_results = _vector_results() if args.vectors else []
    if args.json:
        print(orjson.dumps([
            {**dataclasses.asdict(info), "self_test": dataclasses.asdict(result) if result else None,
             **({"vectors": [_vector_json(r) for r in vector_results if r.scheme == info.name]} if args.vectors else {})}
            for info, result in rows
        ], option=orjson.OPT_INDENT_2).decode())
    else:
        console = Console()
        caption = f"liboqs: {liboqs_library_path()}  CPU: " + ", ".join(
            f"{k} {'yes' if v else 'no'}" for k, v in cpu_extensions().items())
        if not args.vectors:
            caption += "\nthird-party vectors through every verifier: qmemo schemes --vectors"
        table = Table(title="Signature schemes", caption=caption)
        for column, justify in [("scheme", "left"), ("id", "right"), ("NIST", "right"),
                                ("pk B", "right"), ("sk B", "right"), ("sig max B", "right"),
                                ("implementation", "left"), ("self-test", "left")]:
            table.add_column(column, justify=justify, no_wrap=column == "scheme")
        for info, result in rows:
            verdict = "-" if result is None else (
                "[green]ok[/]" if result.passed else f"[red]{result.detail}[/]")
            table.add_row(info.name, str(info.scheme_id), str(info.nist_level) if info.nist_level else "-",
                          str(info.public_key_bytes), str(info.secret_key_bytes), str(info.max_signature_bytes),
                          info.implementation, verdict)
        console.print(table)
        if args.vectors:
            console.print(vector_table(vector_results))
            for line in _failure_lines(vector_results):
                console.print(line, markup=False, highlight=False, soft_wrap=True)
    self_tests_ok = all(result is None or result.passed for _, result in rows)
    return 0 if self_tests_ok and all(r.ok for r in vector_results) else 1


def _vector_results() -> list[SourceResult]:
    from qmemo.crypto.vectors import check_all

    return check_all()


def _vector_json(result: SourceResult) -> dict[str, object]:
    return {"verifier": result.verifier_label, "implementation": result.implementation, "source": result.source,
            "origin": result.origin, "cases": result.cases, "passed": result.passed,
            "not_applicable": result.not_applicable, "error": result.error, "failing": result.failing_cases()}


def vector_table(results: list[SourceResult]) -> Table:
    """One row per scheme and verifier, one line per source: passed of the cases that apply."""
    from rich.table import Table

    table = Table(title="Third-party vectors", caption=f"{_liboqs_build()}; sources: tests/vectors/*/README.md "
                  "(repository, commit, path, sha256); n/a: cases with a context string, for a verifier that takes none")
    for column in ("scheme", "verifier", "vectors passed"):
        table.add_column(column, no_wrap=column == "scheme")
    rows: dict[tuple[str, str], list[str]] = {}
    for result in results:
        rows.setdefault((result.scheme, result.verifier_label), []).append(_vector_line(result))
    for (scheme, verifier), lines in rows.items():
        table.add_row(scheme, verifier, "\n".join(lines))
    return table


def _liboqs_build() -> str:
    """Which liboqs build the liboqs rows describe (the setup records when it built it)."""
    from qmemo.crypto.liboqs import build_info, liboqs_version

    info = build_info()
    name = info.get("build_name") or f"liboqs {liboqs_version()}"   # names the ML-DSA patch where there is one
    built = info.get("built_at")
    return f"{name}" + (f" built {built}" if built else " (not built by the setup)")


def _vector_line(result: SourceResult) -> str:
    from rich.markup import escape

    if result.error is not None:
        return f"[red]{escape(result.source)}: {escape(result.error)}[/]"
    colour = "green" if result.ok else "red"
    na = f" ({result.not_applicable} n/a)" if result.not_applicable else ""
    return f"{escape(result.source)} [{colour}]{result.passed}/{result.applicable}[/]{na}"


# Failing cases shown per source; --json lists them all.
SHOWN_FAILURES = 5


def _failure_lines(results: list[SourceResult]) -> list[str]:
    lines = []
    for result in results:
        if result.error is None and result.applicable == 0:
            lines.append(f"{result.scheme} ({result.verifier_label}): {result.source} gave it no case "
                         f"({result.cases} read, {result.not_applicable} n/a): nothing was checked")
        failing = result.failing_cases()
        if failing:
            lines.append(f"{result.scheme} ({result.verifier_label}) disagrees with {result.source} "
                         f"on {len(failing)} cases:")
            lines.extend(f"  {line}" for line in failing[:SHOWN_FAILURES])
            if len(failing) > SHOWN_FAILURES:
                lines.append(f"  ... and {len(failing) - SHOWN_FAILURES} more (qmemo schemes --vectors --json lists all)")
    return lines
