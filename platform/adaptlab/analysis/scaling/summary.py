"""The short scaling summary of ``compare`` and ``inspect``: a sentence per fit, and its rows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from adaptlab.analysis.scaling.fit import _curves, fit_scaling
from adaptlab.analysis.scaling.result import ScalingFit
from adaptlab.models.variants import BASE, system_name
from adaptlab.stats import BootstrapConfig


def scale_curve_fits(
    per_query: Mapping[str, Any],
    measure: str,
    *,
    dataset: str = "",
    boot: BootstrapConfig | None = None,
    only: tuple[str, str] | None = None,
) -> list[ScalingFit]:
    """:func:`fit_scaling` of the systems that form scale curves (``<label>-base`` and at least 2
    scales of ``<label>-<variant>-s<N>``), [] when none do; ``only``: that (label, variant)."""
    names = [str(n) for n in per_query]
    curves = {k: v for k, v in _curves(names).items() if len(v) >= 2 and (only is None or k == only)}
    if not curves:
        return []
    keep = {system_name(label, BASE) for label, _v in curves} | {s for v in curves.values() for _n, s in v}
    fits = fit_scaling({n: v for n, v in per_query.items() if str(n) in keep}, measure, dataset=dataset, boot=boot)
    return [f for f in fits if (f.label, f.variant) in curves]


def comparison_scaling(result: Any) -> list[ScalingFit]:
    """The scale curves among the systems of a :class:`~adaptlab.analysis.compare.Comparison`
    (every dataset and measure), fitted with its bootstrap settings."""
    fits: list[ScalingFit] = []
    for g in result.groups:
        fits += scale_curve_fits(dict(zip(g.names, g.values)), g.measure, dataset=g.dataset, boot=result.boot)
    return fits


def _sentence(f: ScalingFit) -> str:
    from adaptlab.analysis.present import format_interval, format_number

    pct = f"{f.confidence * 100:g}%"
    where = f" on {f.dataset} ({f.n_queries} queries)" if f.dataset else f" ({f.n_queries} queries)"
    return (
        f"{f.label} {f.variant}{where}: {format_number(f.slope_per_10x)} {f.measure} per 10x more documents at the "
        f"largest scale ({max(f.scales)}; {pct} CI {format_interval(*f.slope_per_10x_ci)}, {f.model} fit over "
        f"scales {', '.join(map(str, f.scales))}), {f.trend}; predicted gain at {f.next_scale} documents "
        f"{format_number(f.predicted_next)} {format_interval(*f.predicted_next_ci)}, an extrapolation of the "
        "fitted curve."
    )


def scaling_summary(fits: Sequence[ScalingFit], style: str = "text") -> str:
    """One paragraph on the scale curves (module doc): per variant its gain over its own base per
    10x more documents at the largest scale with CI, whether it still rises there, and the
    predicted gain at 2x the largest scale, stated as an extrapolation; "" without fits. Stored
    names are escaped for the terminal, and in ``style`` ``"latex"`` / ``"html"`` for those."""
    import html

    from adaptlab.analysis.present import latex_escape, terminal_escape

    if not fits:
        return ""
    f = fits[0]
    text = terminal_escape(
        f"Data scaling (gain over each variant's own base; percentile bootstrap over "
        f"{f.n_resamples} paired resamples of the queries): " + " ".join(_sentence(x) for x in fits)
    )
    if style == "latex":
        return latex_escape(text)
    return html.escape(text) if style == "html" else text


def scaling_summary_rows(fits: Sequence[ScalingFit]) -> list[dict[str, Any]]:
    """The numbers of :func:`scaling_summary`, one flat dict per fit (JSON and CSV outputs)."""
    return [
        {
            "dataset": f.dataset,
            "measure": f.measure,
            "label": f.label,
            "variant": f.variant,
            "form": f.model,
            "scales": ",".join(map(str, f.scales)),
            "slope_per_10x": f.slope_per_10x,
            "slope_per_10x_ci_low": f.slope_per_10x_ci[0],
            "slope_per_10x_ci_high": f.slope_per_10x_ci[1],
            "trend": f.trend,
            "next_scale": f.next_scale,
            "predicted_next": f.predicted_next,
            "predicted_next_ci_low": f.predicted_next_ci[0],
            "predicted_next_ci_high": f.predicted_next_ci[1],
            "extrapolation": True,
            "confidence": f.confidence,
            "n_queries": f.n_queries,
            "n_resamples": f.n_resamples,
        }
        for f in fits
    ]
