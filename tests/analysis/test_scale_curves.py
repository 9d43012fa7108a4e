"""Scale curves from hand-made metrics rows: parsing names, CI bands, paired gains, the figure."""

from __future__ import annotations

import pytest

from adaptlab.analysis.scale_curves import curves_table, parse_system_name, plot_scale_curves, scale_curves


def test_parse_system_name():
    assert parse_system_name("minilm-base") == ("minilm", "base", None)
    assert parse_system_name("minilm-ft-s100") == ("minilm", "ft", 100)
    assert parse_system_name("minilm-pt-ft-s10") == ("minilm", "pt-ft", 10)
    assert parse_system_name("bge-small-en-merged-s700") == ("bge-small-en", "merged", 700)
    assert parse_system_name("minilm") is None and parse_system_name("minilm-ft-100") is None


def _row(system, value, lo, hi, compared_to=None, p=None, measure="acc@5"):
    return {
        "system": system,
        "measure": measure,
        "value": value,
        "ci_low": lo,
        "ci_high": hi,
        "compared_to": compared_to,
        "p_value": p,
    }


ROWS = [
    _row("m-base", 0.50, 0.40, 0.60),
    _row("m-ft-s100", 0.70, 0.60, 0.80),
    _row("m-ft-s10", 0.55, 0.45, 0.65),
    _row("m-pt-s10", 0.45, 0.35, 0.55),
    _row("m-ft-s10", 0.05, -0.01, 0.11, "m-base", 0.20),
    _row("m-ft-s100", 0.20, 0.12, 0.28, "m-base", 0.002),
    _row("m-pt-s10", -0.05, -0.09, -0.01, "m-base", 0.03),
    _row("m-ft-s100", 0.9, 0.8, 1.0, measure="acc@1"),  # another measure: ignored
    _row("other", 0.3, 0.2, 0.4),  # not a scale-study name: ignored
]


def test_curves_from_rows(tmp_path):
    curves = scale_curves(ROWS, "acc@5")
    assert [(c.label, c.variant) for c in curves] == [("m", "pt"), ("m", "ft")]
    ft = curves[1]
    assert [p.n_documents for p in ft.points] == [10, 100]  # sorted by scale
    assert (ft.points[1].value, ft.points[1].ci_low, ft.points[1].ci_high) == (0.70, 0.60, 0.80)
    assert (ft.points[1].gain, ft.points[1].p_value) == (0.20, 0.002)
    assert ft.base == (0.50, 0.40, 0.60)
    table = curves_table(curves)
    assert len(table) == 3 and table[0]["variant"] == "pt" and table[0]["gain"] == -0.05
    assert scale_curves(ROWS, "acc@5", label="x") == []
    fig = plot_scale_curves(curves, tmp_path / "fig" / "scale.png", title="acc@5 vs scale")
    assert len(fig.axes) == 2 and (tmp_path / "fig" / "scale.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["10", "100"]  # plain scales, no 10^1


def test_curves_from_a_summary():
    np = pytest.importorskip("numpy")
    from adaptlab.evaluation import summarise
    from adaptlab.metrics import PerQueryMetrics

    rng = np.random.default_rng(0)
    qids = [f"q{i}" for i in range(40)]
    base = (rng.random(40) < 0.5).astype(float)
    better = np.maximum(base, (rng.random(40) < 0.5).astype(float))
    per_query = {
        name: PerQueryMetrics(query_ids=qids, values={"acc@5": v}, excluded=[])
        for name, v in (("m-base", base), ("m-ft-s10", better))
    }
    summary = summarise(per_query, n_resamples=200, seed=0, baseline="m-base")
    (curve,) = scale_curves(summary, "acc@5")
    assert curve.variant == "ft" and curve.points[0].gain == pytest.approx(better.mean() - base.mean())
    assert curve.points[0].p_value is not None
