"""`qmemo schemes`: every signature scheme, its sizes, implementation and a self-test."""

from __future__ import annotations

import argparse


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--no-self-test", action="store_true", help="skip the self-tests")
    parser.add_argument("--verifier", choices=("fast", "liboqs"), default="fast",
                        help="Falcon's and ML-DSA's verifier: fast (default; qMEMO's: cached keys, "
                             "variable-time) or liboqs")
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
    if args.json:
        print(orjson.dumps([
            {**dataclasses.asdict(info), "self_test": dataclasses.asdict(result) if result else None}
            for info, result in rows
        ], option=orjson.OPT_INDENT_2).decode())
    else:
        table = Table(title="Signature schemes", caption=f"liboqs: {liboqs_library_path()}  CPU: "
                      + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in cpu_extensions().items()))
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
        Console().print(table)
    return 0 if all(result is None or result.passed for _, result in rows) else 1
