"""Scale curves: a measure against the data scale, one curve per adaptation variant.

From the evaluation of a scale study (its :class:`~adaptlab.evaluation.EvaluationSummary`, or
the store's ``metrics`` rows of one evaluation), for one dataset and one measure:

- each variant's value with its bootstrapped 95% CI at every scale (the CI band), and
- the paired gain over the model family's own base, ``variant - <label>-base`` with its CI and
  bootstrap p-value (ColBERT variants against ``colbert-base``, not the bi-encoder's base),

read from the system names of :func:`adaptlab.models.variants.system_name`
(``minilm-ft-s100``: variant ``ft`` at 100 documents; ``minilm-base``: the base model, a
horizontal reference). This is the view of 004 ("Evaluating the Robustness of Dense Retrievers
in Interdisciplinary Domains", section 4) of how the gain grows with domain data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adaptlab.analysis.plots.figure import DEFAULT_DPI, _figure, _finish
from adaptlab.errors import ConfigError
from adaptlab.metrics import Measure
from adaptlab.models.variants import BASE, curve_order, parse_system_name, system_name

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["ScaleCurve", "ScalePoint", "curves_table", "parse_system_name", "plot_scale_curves", "scale_curves"]

# parse_system_name (imported above, re-exported) reads the names of adaptlab.models.variants.


@dataclass(frozen=True)
class ScalePoint:
    """One variant at one scale: the value with its CI, and the paired gain over the base."""

    n_documents: int
    value: float
    ci_low: float
    ci_high: float
    gain: float | None = None
    gain_ci_low: float | None = None
    gain_ci_high: float | None = None
    p_value: float | None = None
    p_adjusted: float | None = None  # within the (dataset, measure) family, when stored

    @property
    def p_decision(self) -> float | None:
        """The p-value significance is read from: adjusted when stored, else raw."""
        return self.p_adjusted if self.p_adjusted is not None else self.p_value


@dataclass(frozen=True)
class ScaleCurve:
    """A variant's points in increasing scale; ``base`` = (value, ci_low, ci_high) of the base."""

    label: str
    variant: str
    measure: str
    points: tuple[ScalePoint, ...]
    base: tuple[float, float, float] | None = None


def _rows_of(source: Any) -> list[Mapping[str, Any]]:
    if hasattr(source, "metric_rows") and hasattr(source, "systems"):  # EvaluationSummary
        return source.metric_rows({s: s for s in source.systems}, "")
    if hasattr(source, "to_pylist"):  # pyarrow.Table
        return source.to_pylist()
    if hasattr(source, "to_dict") and hasattr(source, "columns"):  # pandas.DataFrame
        return source.to_dict("records")
    return list(source)


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and x != x)


def _gain_rows(
    paired: Mapping[tuple[str, str], Mapping[str, Any]],
    system: str,
    base: str,
) -> tuple[float | None, float | None, float | None, float | None, float | None]:
    """``(gain, ci_low, ci_high, p, p_adjusted)`` of ``system - base`` from a stored paired row in
    either direction (a row ``base`` vs ``system`` is turned round), or all None."""
    pair, sign = paired.get((system, base)), 1.0
    if pair is None:
        pair, sign = paired.get((base, system)), -1.0
    if pair is None:
        return None, None, None, None, None
    lo, hi = float(pair["ci_low"]), float(pair["ci_high"])
    if sign < 0:
        lo, hi = -hi, -lo
    return (
        sign * float(pair["value"]),
        lo,
        hi,
        float(pair["p_value"]),
        None if _missing(pair.get("p_adjusted")) else float(pair["p_adjusted"]),
    )


def scale_curves(source: Any, measure: str, *, label: str | None = None) -> list[ScaleCurve]:
    """One :class:`ScaleCurve` per (label, variant) for ``measure``.

    ``source``: an EvaluationSummary, or ``metrics`` rows (pyarrow Table, DataFrame or dicts
    with ``system``, ``measure``, ``value``, ``ci_low``, ``ci_high``, ``compared_to``,
    ``p_value``) of **one** evaluation on one dataset (e.g. ``store.metrics(run_id=[...])``
    for the run ids of one commit). Paired gains are taken from the rows comparing a variant
    with its **own** base ``<label>-base`` (``colbert-ft-s10`` against ``colbert-base``,
    ``minilm-ft-s10`` against ``minilm-base``), stored in either direction; a variant without
    such a row has no gain (``gain`` None), whatever else it was compared with. Variants come in
    the order pt, ft, pt-ft, merged.
    """
    want = str(Measure.parse(measure))
    single: dict[str, Mapping[str, Any]] = {}
    paired: dict[tuple[str, str], Mapping[str, Any]] = {}
    for row in _rows_of(source):
        if str(Measure.parse(row["measure"])) != want:
            continue
        if _missing(row.get("compared_to")):
            single[str(row["system"])] = row
        else:
            paired[(str(row["system"]), str(row["compared_to"]))] = row
    points: dict[tuple[str, str], list[ScalePoint]] = {}
    bases: dict[str, tuple[float, float, float]] = {}
    for system, row in single.items():
        parsed = parse_system_name(system)
        if parsed is None or (label is not None and parsed[0] != label):
            continue
        lab, variant, n = parsed
        if variant == BASE:
            bases[lab] = (float(row["value"]), float(row["ci_low"]), float(row["ci_high"]))
            continue
        assert n is not None
        points.setdefault((lab, variant), []).append(
            ScalePoint(
                n,
                float(row["value"]),
                float(row["ci_low"]),
                float(row["ci_high"]),
                *_gain_rows(paired, system, system_name(lab, BASE)),
            )
        )
    return [
        ScaleCurve(lab, variant, want, tuple(sorted(pts, key=lambda p: p.n_documents)), bases.get(lab))
        for (lab, variant), pts in sorted(points.items(), key=lambda kv: (kv[0][0], curve_order(kv[0][1])))
    ]


def _draw_gains(gx: Any, c: ScaleCurve, i: int, n_curves: int, color: str) -> bool:
    """Error bars of one curve's paired gains (filled: p < 0.05); False when it has none."""
    import numpy as np

    gains = [p for p in c.points if p.gain is not None]
    if not gains:
        return False
    gxs = np.array([p.n_documents for p in gains], dtype=float) * (1 + 0.03 * (i - n_curves / 2))
    g = np.array([p.gain for p in gains])
    # a point estimate may lie outside its percentile interval: such a bar has length 0, never < 0
    # (_gain_rows sets a gain and its interval together, so the condition drops no point)
    err = np.clip(
        np.array(
            [
                [p.gain - p.gain_ci_low, p.gain_ci_high - p.gain]
                for p in gains
                if p.gain is not None and p.gain_ci_low is not None and p.gain_ci_high is not None
            ]
        ).T,
        0.0,
        None,
    )
    gx.errorbar(gxs, g, yerr=err, color=color, fmt="none", capsize=3)
    sig = np.array([p.p_decision is not None and p.p_decision < 0.05 for p in gains])
    gx.scatter(gxs[sig], g[sig], color=color, s=30)
    gx.scatter(gxs[~sig], g[~sig], facecolors="none", edgecolors=color, s=30)
    gx.plot([], [], color=color, marker="o", label=f"{c.label} {c.variant} - {c.label} base")
    return True


def plot_scale_curves(
    curves: Sequence[ScaleCurve],
    path: str | Path | None = None,
    *,
    title: str | None = None,
    ci: str = "95% CI",
    dpi: int = DEFAULT_DPI,
) -> Figure:
    """Two panels: the measure against the number of documents (log axis) per variant with CI
    bands and each model family's base as a dashed line with its band; and the paired gain over
    the family's own base with its CI (error bars), points with p < 0.05 filled (the
    multiplicity-adjusted p when the rows carry one). ``ci`` names the interval level (legend
    and axis labels). Returns the Figure; saved to ``path`` when given (format from its suffix,
    PNG at ``dpi``), as every :mod:`adaptlab.analysis.plots` function."""
    if not curves:
        raise ConfigError("plot_scale_curves: nothing to plot")
    import numpy as np
    from matplotlib.ticker import NullLocator

    fig = _figure(12.0, 4.8)
    ax, gx = fig.subplots(1, 2, sharex=True)
    xs_all = [p.n_documents for c in curves for p in c.points]
    any_gain = False
    for i, c in enumerate(curves):
        color = f"C{i % 10}"
        xs = np.array([p.n_documents for p in c.points], dtype=float)
        ax.plot(xs, [p.value for p in c.points], marker="o", color=color, label=f"{c.label} {c.variant}")
        ax.fill_between(xs, [p.ci_low for p in c.points], [p.ci_high for p in c.points], color=color, alpha=0.15)
        err = np.clip([[p.value - p.ci_low for p in c.points], [p.ci_high - p.value for p in c.points]], 0.0, None)
        ax.errorbar(xs, [p.value for p in c.points], yerr=err, fmt="none", color=color, alpha=0.6, capsize=2)
        any_gain |= _draw_gains(gx, c, i, len(curves), color)
    bases = {c.label: c.base for c in curves if c.base is not None}
    lo, hi = min(xs_all), max(xs_all)
    for j, (lab, (value, b_lo, b_hi)) in enumerate(sorted(bases.items())):
        style = ("--", ":", "-.")[j % 3]
        ax.axhline(value, color="k", linestyle=style, linewidth=1, label=f"{lab} base")
        ax.fill_between([lo, hi], [b_lo, b_lo], [b_hi, b_hi], color="k", alpha=0.07)
    measure = curves[0].measure
    scales = sorted({int(x) for x in xs_all})
    for a in (ax, gx):
        a.set_xscale("log")
        a.set_xticks(scales, labels=[str(x) for x in scales])  # the scales themselves, not 10^1
        a.xaxis.set_minor_locator(NullLocator())
        a.set_xlabel("documents in the data scale (log scale)")
        a.grid(alpha=0.3)
    ax.set_ylabel(measure)
    ax.set_title(f"{measure} per variant (bands: {ci})")
    gx.axhline(0.0, color="k", linewidth=1)
    gx.set_ylabel(f"{measure}: variant - own base")
    gx.set_title(f"paired gain over own base (bars: {ci}; filled: p < 0.05)")
    ax.legend(title=f"shaded: {ci}")
    if any_gain:
        gx.legend()
    else:
        gx.text(
            0.5,
            0.5,
            "no paired comparison with the own base is stored",
            transform=gx.transAxes,
            ha="center",
            va="center",
            fontsize=10,
        )
    if title:
        fig.suptitle(title)
    return _finish(fig, path, dpi)


def curves_table(curves: Iterable[ScaleCurve]) -> list[dict[str, Any]]:
    """Flat rows (label, variant, measure, n_documents, value, CI, gain, gain CI, p) for printing."""
    return [
        {
            "label": c.label,
            "variant": c.variant,
            "measure": c.measure,
            "n_documents": p.n_documents,
            "value": p.value,
            "ci_low": p.ci_low,
            "ci_high": p.ci_high,
            "gain": p.gain,
            "gain_ci_low": p.gain_ci_low,
            "gain_ci_high": p.gain_ci_high,
            "p_value": p.p_value,
            "p_adjusted": p.p_adjusted,
        }
        for c in curves
        for p in c.points
    ]
