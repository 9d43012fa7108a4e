"""The topic map: a 2-D map of the contexts coloured by topic (reference 004, Figure 1)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from adaptlab.analysis.plots.figure import DEFAULT_DPI, Target, _figure, _finish
from adaptlab.errors import ConfigError

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def plot_topic_map(
    coords: Any, labels: Any, path: Target = None, *, title: str | None = None, dpi: int = DEFAULT_DPI
) -> Figure:
    """Scatter of 2-D ``coords`` [N, 2] coloured by topic ``labels`` [N]."""
    xy = np.asarray(coords, dtype=np.float64)
    lab = np.asarray(labels)
    if xy.ndim != 2 or xy.shape[1] != 2 or lab.shape != (xy.shape[0],) or xy.shape[0] == 0:
        raise ConfigError(f"plot_topic_map: coords must be [N, 2] and labels [N], got {xy.shape} and {lab.shape}")
    _, codes = np.unique(lab, return_inverse=True)
    fig = _figure(5.5, 5.0)
    ax = fig.subplots()
    ax.scatter(xy[:, 0], xy[:, 1], c=codes, cmap="tab20", s=8, alpha=0.8)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_xlabel("map dimension 1")
    ax.set_ylabel("map dimension 2")
    ax.set_title(title or f"{codes.max() + 1} topics (colour = topic)")
    return _finish(fig, path, dpi)
