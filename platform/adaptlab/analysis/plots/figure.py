"""The figure plumbing every plot shares: an Agg-canvas Figure, readable font sizes, titles that fit,
saving by suffix (PNG, PDF, SVG) and rendering in memory.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from adaptlab.errors import ConfigError

if TYPE_CHECKING:
    from matplotlib.figure import Figure


DEFAULT_DPI = 200
"""Resolution of saved PNG figures (dots per inch); vector formats ignore it."""


FIGURE_FORMATS = ("png", "pdf", "svg")
"""The formats :func:`save_figure` writes, chosen by the file suffix."""


_TICK_PT, _LABEL_PT, _TITLE_PT, _LEGEND_PT = 10.0, 11.0, 12.0, 9.5


Target = str | Path | None


def _figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def check_dpi(dpi: Any) -> int:
    """``dpi`` as an int, or a ConfigError naming the valid range."""
    if isinstance(dpi, bool) or not isinstance(dpi, (int, np.integer)) or not 10 <= int(dpi) <= 2400:
        raise ConfigError(f"dpi: expected an integer from 10 to 2400, got {dpi!r}")
    return int(dpi)


def figure_format(path: str | Path) -> str:
    """The format of a figure file from its suffix (``png``, ``pdf`` or ``svg``)."""
    fmt = Path(path).suffix.lower().lstrip(".")
    if fmt not in FIGURE_FORMATS:
        raise ConfigError(
            f"figure file {str(path)!r}: unsupported suffix {Path(path).suffix or '(none)'!r}; "
            f"expected one of {', '.join('.' + f for f in FIGURE_FORMATS)}"
        )
    return fmt


def save_figure(fig: Figure, path: str | Path, *, dpi: int = DEFAULT_DPI) -> Path:
    """Save ``fig`` to ``path`` in the format of its suffix (PNG at ``dpi``); returns the path.
    A PNG is exactly ``figsize * dpi`` pixels (no tight cropping: the layout is constrained)."""
    fmt = figure_format(path)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(figure_bytes(fig, fmt, dpi=dpi))
    return p


def figure_bytes(fig: Figure, fmt: str = "png", *, dpi: int = DEFAULT_DPI) -> bytes:
    """``fig`` rendered in memory as ``fmt`` (``png``, ``pdf`` or ``svg``)."""
    if fmt not in FIGURE_FORMATS:
        raise ConfigError(f"figure format {fmt!r}: expected one of {', '.join(FIGURE_FORMATS)}")
    buf = io.BytesIO()
    meta = {"Date": None} if fmt == "svg" else {}
    fig.savefig(buf, format=fmt, dpi=check_dpi(dpi), metadata=meta)
    return buf.getvalue()


def _readable(fig: Figure) -> None:
    """Raise every tick label, axis label, title and legend text to the minimum readable size."""
    for ax in fig.axes:
        ax.tick_params(labelsize=_TICK_PT)
        for text, size in ((ax.xaxis.label, _LABEL_PT), (ax.yaxis.label, _LABEL_PT), (ax.title, _TITLE_PT)):
            text.set_fontsize(max(text.get_fontsize(), size))
    legends = [ax.get_legend() for ax in fig.axes] + list(fig.legends)
    for leg in (lg for lg in legends if lg is not None):
        for text in [*leg.get_texts(), leg.get_title()]:
            text.set_fontsize(max(text.get_fontsize(), _LEGEND_PT))


def title_texts(fig: Figure) -> list[Any]:
    """The non-empty title Text objects of ``fig``: its suptitle and every visible axes' titles."""
    texts = [getattr(fig, "_suptitle", None)]
    texts += [
        t
        for ax in fig.axes
        if ax.get_visible()
        for t in (ax.title, getattr(ax, "_left_title", None), getattr(ax, "_right_title", None))
    ]
    return [t for t in texts if t is not None and t.get_visible() and t.get_text()]


def _fit_titles(fig: Figure) -> None:
    """Wrap every title wider than the canvas (or reaching past an edge) onto more lines, so no
    title is clipped (issue 30: the similarity-density title was cut at both edges): after a
    layout pass, a title whose box leaves ``[0, width]`` is refilled with proportionally fewer
    characters per line, up to 6 times."""
    import textwrap

    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]  # the Agg canvas of _figure has one
    width = fig.bbox.width
    for text in title_texts(fig):
        words = " ".join(text.get_text().split())
        for _ in range(6):
            box = text.get_window_extent(renderer)
            if box.x0 >= 0 and box.x1 <= width:
                break
            per_line = max(max(len(line) for line in text.get_text().split("\n")), 1)
            chars = int(per_line * 0.95 * width / max(box.width, 1))
            chars = max(8, min(chars, per_line - max(1, per_line // 6)))  # narrower, even if only off-centre
            text.set_text(textwrap.fill(words, chars))
            fig.draw_without_rendering()


def _finish(fig: Figure, path: Target, dpi: int) -> Figure:
    """Readable fonts, titles that fit the canvas; saved to ``path`` when one is given; the Figure returned."""
    _readable(fig)
    _fit_titles(fig)
    check_dpi(dpi)
    if path is not None:
        save_figure(fig, path, dpi=dpi)
    return fig
