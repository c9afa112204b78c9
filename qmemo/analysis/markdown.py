"""Markdown building blocks for the reports: tables, number formats, source lines.

Every table in a qMEMO report says which result file it came from (`source_note`), so
a reader can trace a figure to a run. Formatting is pure and locale-free: thousands
separators are commas, "-" stands for a value the results do not have.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from qmemo.errors import ConfigError

MISSING = "-"


def _missing(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and not math.isfinite(value))


def num(value: float | None, digits: int = 0) -> str:
    """1234.5 -> "1,235" (digits=0) or "1,234.50" (digits=2)."""
    return MISSING if _missing(value) else f"{value:,.{digits}f}"


def times(value: float | None, digits: int = 1) -> str:
    """A ratio or headroom: 12.34 -> "12.3x"; a positive ratio too small to show -> "<0.01x"."""
    if _missing(value):
        return MISSING
    smallest = 10 ** -digits
    return f"<{smallest:.{digits}f}x" if 0 < value < smallest else f"{value:,.{digits}f}x"


def headroom_x(value: float | None) -> str:
    """A headroom: two decimals below 10x, where 0.99x vs 1.0x decides a verdict; one above."""
    return times(value, 2 if value is not None and value < 10 else 1)


def percent(fraction: float | None, digits: int = 1) -> str:
    """0.125 -> "12.5%"."""
    return MISSING if _missing(fraction) else f"{fraction * 100:,.{digits}f}%"


def si_bytes(value: float | None) -> str:
    """Bytes in SI units (kB = 1,000 B): 1,234,000 -> "1.23 MB"."""
    if _missing(value):
        return MISSING
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:,.2f} {unit}"
    return f"{value:,.0f} B"


def seconds(value: float | None) -> str:
    """0.0123 -> "12.3 ms", 2.5 -> "2.50 s"."""
    if _missing(value):
        return MISSING
    return f"{value * 1e3:,.1f} ms" if abs(value) < 1 else f"{value:,.2f} s"


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], align: str | None = None) -> str:
    """A GitHub-flavoured Markdown table; `align` is one letter per column (l, r, c)."""
    align = align or "l" + "r" * (len(headers) - 1)
    if len(align) != len(headers):
        # A delimiter row of another width is not a table to GitHub or CommonMark: the
        # whole table would render as one paragraph of pipes.
        raise ValueError(f"{len(align)} alignments for {len(headers)} columns: {headers}")
    marks = {"l": ":---", "r": "---:", "c": ":---:"}
    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join(marks[a] for a in align) + "|"]
    for row in rows:
        cells = [MISSING if cell is None else str(cell).replace("|", "\\|") for cell in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def source_note(*sources: str | Path) -> str:
    """The line under a table naming the result files it came from."""
    names = ", ".join(f"`{s}`" for s in dict.fromkeys(str(s) for s in sources if s))
    return f"_Source: {names}_" if names else "_Source: computed from the model only_"


def cited(shown: str, source: str | Path, pointer: str) -> str:
    """A figure with the file and JSON key it was read from: "5,859 (`sweep.json` `rows[3].committed_tps`)".

    One form everywhere, so a reader can follow it and a test can check that the file at
    that key holds the figure shown (tests/integration/test_report_headline.py)."""
    return f"{shown} (`{source}` `{pointer}`)"


def splice(doc: str, block: str, begin: str, end: str, source: str = "the doc") -> str:
    """`doc` with the text between the markers `begin` and `end` replaced by `block` (a
    generated block in a hand-written page: README's results, docs/schemes.md's table);
    ConfigError naming `source` when a marker is missing."""
    start, stop = doc.find(begin), doc.find(end)
    if start < 0 or stop < start:
        raise ConfigError(f"{source} lacks the markers {begin!r} ... {end!r}")
    return doc[:start + len(begin)] + "\n" + block.strip("\n") + "\n" + doc[stop:]


def anchor(title: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens."""
    return "".join(c for c in title.lower() if c.isalnum() or c in " -").replace(" ", "-")


def image(file: str, alt: str) -> str:
    """A plot embedded by its file name (the plots sit beside REPORT.md)."""
    return f"![{alt}]({file})"


@dataclass(frozen=True, slots=True)
class Section:
    """One section of a report: its title, its Markdown body and the plot files it drew."""

    title: str
    body: str
    plots: tuple[str, ...] = ()

    def render(self, level: int = 2) -> str:
        return f"{'#' * level} {self.title}\n\n{self.body}"
