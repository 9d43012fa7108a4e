"""The report's writer: a list of blocks (headings, paragraphs, tables, images, preformatted
text) written as Markdown and as HTML, tables through the one renderer of
:mod:`adaptlab.analysis.present`, so the report prints the digits the CLI and LaTeX print."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adaptlab.analysis.plots import DEFAULT_DPI, FIGURE_FORMATS, figure_bytes
from adaptlab.analysis.present import CellValue, render_table, terminal_escape, terminal_escape_lines
from adaptlab.errors import ConfigError

__all__ = ["Document", "Page", "slug"]

_CSS = (
    "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto}"
    "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;"
    "text-align:right}td:first-child,th:first-child{text-align:left}img{max-width:100%}</style>"
)


def slug(text: str) -> str:
    """``text`` as a figure file name part (letters, digits, ``._-``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "x"


class Document:
    """Blocks rendered to Markdown and to HTML."""

    def __init__(self) -> None:
        self.blocks: list[tuple[Any, ...]] = []

    def h(self, level: int, text: str) -> None:
        self.blocks.append(("h", level, text))

    def p(self, text: str) -> None:
        self.blocks.append(("p", text))

    def table(self, header: Sequence[str], rows: Sequence[Sequence[CellValue]]) -> None:
        self.blocks.append(("table", list(header), [list(r) for r in rows]))

    def img(self, rel: str, alt: str, src: str | None = None, width: int | None = None) -> None:
        """An image: Markdown links the file ``rel``; HTML shows ``src`` (a ``data:`` URI, so the
        page needs no other file) at ``width`` CSS pixels, or links ``rel`` without one."""
        self.blocks.append(("img", rel, alt, src, width))

    def pre(self, text: str) -> None:
        self.blocks.append(("pre", text))

    def markdown(self) -> str:
        """The document as Markdown (text escaped as for a terminal: no raw control character)."""
        out: list[str] = []
        for b in self.blocks:
            kind = b[0]
            if kind == "h":
                out.append("#" * b[1] + " " + terminal_escape(b[2]))
            elif kind == "p":
                out.append(terminal_escape(b[1]))
            elif kind == "table":
                out.append(render_table(b[1], b[2], "markdown"))
            elif kind == "img":
                out.append(f"![{terminal_escape(b[2])}]({terminal_escape(b[1])})")
            elif kind == "pre":
                out.append("```\n" + terminal_escape_lines(b[1]) + "\n```")
            out.append("")
        return "\n".join(out)

    def html(self, title: str) -> str:
        """The document as one HTML page."""
        out = [
            "<!DOCTYPE html>",
            "<html><head><meta charset='utf-8'>",
            f"<title>{_esc(title)}</title>",
            _CSS,
            "</head><body>",
        ]
        for b in self.blocks:
            kind = b[0]
            if kind == "h":
                out.append(f"<h{b[1]}>{_esc(b[2])}</h{b[1]}>")
            elif kind == "p":
                out.append(f"<p>{_esc(b[1])}</p>")
            elif kind == "table":
                out.append(render_table(b[1], b[2], "html"))
            elif kind == "img":
                out.append(_html_img(*b[1:]))
            elif kind == "pre":
                out.append(f"<pre>{html.escape(terminal_escape_lines(b[1]))}</pre>")
        out.append("</body></html>")
        return "\n".join(out)


def _esc(text: str) -> str:
    return html.escape(terminal_escape(text))


def _html_img(rel: str, alt: str, src: str | None, width: int | None) -> str:
    size = f" style='width:{width}px'" if width else ""
    return f"<p><img src='{html.escape(src or rel)}' alt='{_esc(alt)}' data-file='{_esc(rel)}'{size}></p>"


@dataclass(frozen=True)
class Page:
    """Where one dataset's section goes: the document, the output folder and its figures."""

    doc: Document
    out: Path
    figdir: Path
    ds: str
    store: Any = None
    fmt: str = "png"
    dpi: int = DEFAULT_DPI
    order: Mapping[str, int] = field(default_factory=dict)
    """Each system's place (baseline first, then study order); systems not in it come after, by name."""

    def rank(self, system: str) -> tuple[int, str]:
        """Sort key of ``system`` in this page's tables and figures."""
        return self.order.get(system, 1 << 30), system

    def __post_init__(self) -> None:
        if self.fmt not in FIGURE_FORMATS:
            raise ConfigError(f"figure format {self.fmt!r}: expected one of {', '.join(FIGURE_FORMATS)}")

    def figure(self, fig: Any, name: str, alt: str, caption: str) -> Path:
        """Write ``fig`` to ``figures/<dataset>_<name>.<fmt>``, embed it in the HTML (PNG or SVG as
        a ``data:`` URI; a PDF report embeds a PNG of the same figure) and add its one-line caption
        (what to look for). Returns the file written."""
        path = self.figdir / f"{slug(self.ds)}_{name}.{self.fmt}"
        data = figure_bytes(fig, self.fmt, dpi=self.dpi)
        path.write_bytes(data)
        shown = self.fmt if self.fmt in ("png", "svg") else "png"
        if shown != self.fmt:
            data = figure_bytes(fig, shown, dpi=self.dpi)
        mime = "image/svg+xml" if shown == "svg" else "image/png"
        src = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
        width = int(round(float(fig.get_size_inches()[0]) * 96))
        self.doc.img(path.relative_to(self.out).as_posix(), alt, src, width)
        self.doc.p(f"Figure: {caption}")
        return path
