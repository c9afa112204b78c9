"""REPORT.html: the report's Markdown rendered as one self-contained HTML page.

The report has one source of content, the Markdown that `report.render` writes to
REPORT.md; this module is only a second renderer of that same text, so the two files can
never say different things. The page must open anywhere, offline and attached to a mail:
every plot is embedded as a data: URI and the style sheet is inline, so the page names no
external asset. It never computes or rewords a figure.
"""

from __future__ import annotations

import base64
import html
import mimetypes
from pathlib import Path

from markdown_it import MarkdownIt
from markdown_it.token import Token

from qmemo.analysis.markdown import anchor
from qmemo.errors import ConfigError

# Readable on a laptop and in print: a text column as wide as a laptop screen, tables in a
# smaller type whose figures never wrap, so a 16-column table fits the column; a wider one
# scrolls sideways inside its own box rather than squeeze. Numbers right-aligned by the
# Markdown's own alignment marks.
_CSS = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d2125;
       max-width: 1280px; margin: 2em auto; padding: 0 1.5em; }
h1 { border-bottom: 2px solid #d0d7de; padding-bottom: .3em; }
h2 { border-bottom: 1px solid #d0d7de; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: 1em 0; display: block; max-width: 100%; overflow-x: auto;
        font-size: 13px; line-height: 1.35; }
th, td { border: 1px solid #d0d7de; padding: .25em .4em; }
th { background: #f3f5f7; vertical-align: bottom; }
td { white-space: nowrap; }
td:first-child { white-space: normal; min-width: 10em; }
tr:nth-child(even) td { background: #fafbfc; }
td, th { font-variant-numeric: tabular-nums; }
code { font: 12px ui-monospace, "SFMono-Regular", Menlo, monospace; background: #f3f5f7;
       padding: .1em .3em; border-radius: 3px; }
img { max-width: 100%; border: 1px solid #e1e4e8; }
em { color: #57606a; }
"""


def _data_uri(path: Path) -> str:
    mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot embed the plot {path} in REPORT.html: {exc.strerror}") from None
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def _parser() -> MarkdownIt:
    # CommonMark plus GitHub's tables: exactly what qmemo.analysis.markdown writes.
    return MarkdownIt("commonmark", {"html": False}).enable("table")


def render_html(markdown: str, asset_dir: Path, title: str) -> str:
    """The page for `markdown`, whose images are files in `asset_dir` (embedded here)."""
    md = _parser()
    tokens = md.parse(markdown)
    for i, token in enumerate(tokens):
        if token.type == "heading_open":  # GitHub's anchors: the contents' links work in both files
            token.attrSet("id", anchor(tokens[i + 1].content))
        for child in token.children or ():
            _embed(child, asset_dir)
    body = md.renderer.render(tokens, md.options, {})
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n{body}</body>\n</html>\n")


def _embed(token: Token, asset_dir: Path) -> None:
    """An image token's file becomes a data: URI; a remote image is refused, not fetched."""
    if token.type != "image":
        return
    src = str(token.attrGet("src") or "")
    if "://" in src or src.startswith("//"):
        raise ConfigError(f"REPORT.html embeds local plots only, not {src}")
    token.attrSet("src", _data_uri(asset_dir / src))
