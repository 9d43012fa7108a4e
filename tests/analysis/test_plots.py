import struct

import numpy as np
import pytest
from matplotlib.figure import Figure

from adaptlab.analysis import (
    ndcg_curve_from_records,
    plot_ci_forest,
    plot_ndcg_curves,
    plot_shift_histograms,
    plot_similarity_densities,
    plot_thresholds,
    plot_topic_map,
    similarity_distributions,
    similarity_thresholds,
)
from adaptlab.analysis.plots import figure_bytes, plot_forest, plot_paired_differences, save_figure
from adaptlab.errors import ConfigError

PNG = b"\x89PNG\r\n\x1a\n"


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) of a PNG from its IHDR chunk."""
    assert data[:8] == PNG
    return struct.unpack(">II", data[16:24])


def assert_readable(fig: Figure, minimum: float = 9.0) -> None:
    """Every visible tick label, axis label and legend text is at least ``minimum`` points."""
    fig.canvas.draw()
    for ax in (a for a in fig.axes if a.get_visible()):
        texts = [*ax.get_xticklabels(), *ax.get_yticklabels(), ax.xaxis.label, ax.yaxis.label]
        if ax.get_legend() is not None:
            texts += ax.get_legend().get_texts()
        sizes = [t.get_fontsize() for t in texts if t.get_text()]
        assert sizes and min(sizes) >= minimum


def test_figures_are_returned_readable_and_saved_when_asked(tmp_path, records_good, records_bad):
    recs = [records_good, records_bad]
    dens = plot_similarity_densities([similarity_distributions(r, k=5) for r in recs])
    curves = [ndcg_curve_from_records(r, n_resamples=20) for r in recs]
    figs = [
        dens,
        plot_ndcg_curves(curves, title="nDCG"),
        plot_thresholds([similarity_thresholds(r, k=5, n_resamples=50) for r in recs]),
    ]
    for fig in figs:
        assert isinstance(fig, Figure)
        assert_readable(fig)
    assert not list(tmp_path.iterdir())  # no path: nothing written
    # the old call style (a path) still saves, in the suffix's format
    fig = plot_similarity_densities(
        [similarity_distributions(r, k=5) for r in recs], tmp_path / "f" / "dens.png", dpi=80
    )
    w, h = fig.get_size_inches()
    assert png_size((tmp_path / "f" / "dens.png").read_bytes()) == (round(w * 80), round(h * 80))


@pytest.mark.parametrize("dpi", [100, 200])
def test_png_size_follows_figsize_and_dpi(tmp_path, dpi):
    fig = plot_ci_forest(
        ["base", "ft"], [0.6, 0.7], [0.5, 0.65], [0.7, 0.75], tmp_path / "forest.png", measure="ndcg@10", dpi=dpi
    )
    w, h = fig.get_size_inches()
    width, height = png_size((tmp_path / "forest.png").read_bytes())
    assert (width, height) == (round(w * dpi), round(h * dpi))
    assert width >= 3 * dpi  # a figure, not a strip


def test_vector_formats_by_suffix(tmp_path):
    fig = plot_topic_map(np.random.default_rng(0).normal(size=(30, 2)), np.arange(30) % 3)
    assert save_figure(fig, tmp_path / "map.pdf").read_bytes()[:5] == b"%PDF-"
    svg = save_figure(fig, tmp_path / "map.svg").read_text()
    assert "<svg" in svg and "</svg>" in svg
    assert figure_bytes(fig, "png", dpi=50)[:8] == PNG
    with pytest.raises(ConfigError, match=r"map\.jpg.*expected one of \.png, \.pdf, \.svg"):
        save_figure(fig, tmp_path / "map.jpg")
    with pytest.raises(ConfigError, match="dpi"):
        plot_topic_map(np.zeros((3, 2)), [0, 1, 2], dpi=0)


def test_forest_draws_point_estimates_one_panel_per_measure():
    est = {
        "ndcg@10": {"base": (0.61, 0.55, 0.66), "ft": (0.70, 0.64, 0.75)},
        "mrr@10": {"base": (0.50, 0.45, 0.56), "ft": (0.58, 0.52, 0.63), "pt-ft": (0.6, float("nan"), 0.7)},
    }
    fig = plot_forest(est, title="synth")
    axes = [a for a in fig.axes if a.get_visible()]
    assert [a.get_title() for a in axes] == ["ndcg@10", "mrr@10"]
    rows = {t.get_text(): y for t, y in zip(axes[0].get_yticklabels(), axes[0].get_yticks())}
    assert rows == {"base": 2, "ft": 1, "pt-ft": 0}  # first seen on top
    points = {a.get_title(): sorted(a.lines[0].get_xdata()) for a in axes}
    assert points == {"ndcg@10": [0.61, 0.70], "mrr@10": [0.50, 0.58, 0.6]}
    assert_readable(fig)
    with pytest.raises(ConfigError, match=r"estimates\['ndcg@10'\]\['x'\]"):
        plot_forest({"ndcg@10": {"x": (0.1, 0.2)}})


def test_paired_differences_marked_by_adjusted_p():
    rows = [
        {
            "system": "ft",
            "compared_to": "base",
            "measure": "acc@5",
            "value": 0.1,
            "ci_low": 0.02,
            "ci_high": 0.18,
            "p_value": 0.01,
            "p_adjusted": 0.03,
            "adjustment": "holm",
        },
        {
            "system": "ptft",
            "compared_to": "base",
            "measure": "acc@5",
            "value": 0.05,
            "ci_low": -0.01,
            "ci_high": 0.11,
            "p_value": 0.02,
            "p_adjusted": 0.06,
            "adjustment": "holm",
        },
        {
            "system": "pt",
            "compared_to": "base",
            "measure": "acc@5",
            "value": -0.02,
            "ci_low": -0.05,
            "ci_high": 0.01,
            "p_value": 0.3,
        },
    ]
    fig = plot_paired_differences(rows)
    ax = fig.axes[0]
    filled, hollow, cross = ax.collections[-3:]
    # ft's raw and adjusted p are both < 0.05; ptft's raw p is < 0.05 but its Holm p is not
    assert [tuple(o) for o in filled.get_offsets()] == [(0.1, 2.0)]
    assert [tuple(o) for o in hollow.get_offsets()] == [(0.05, 1.0)]
    assert [tuple(o) for o in cross.get_offsets()] == [(-0.02, 0.0)]
    assert [t.get_text() for t in fig.legends[0].get_texts()][0] == "Holm-adjusted p < 0.05"
    with pytest.raises(ConfigError, match="row 0 lacks compared_to"):
        plot_paired_differences([{"system": "a", "measure": "m", "value": 0.1}])


def test_ndcg_curves_have_integer_k_ticks_up_to_the_largest_k(records_good):
    curve = ndcg_curve_from_records(records_good, ks=(1, 2, 5, 10, 20, 50, 100), n_resamples=20)
    ax = plot_ndcg_curves([curve]).axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["1", "5", "10", "20", "50", "100"]
    assert ax.get_xlim()[1] >= 100 and not ax.xaxis.get_minorticklocs().size
    assert list(ax.lines[0].get_ydata()) == pytest.approx(list(curve.values))  # the point estimate


def test_shift_and_topic_map(tmp_path):
    rng = np.random.default_rng(0)
    fig = plot_shift_histograms(
        {"base": rng.normal(1, 0.1, 200), "ptft": rng.normal(1.2, 0.1, 200)}, tmp_path / "shift.png", dpi=60
    )
    assert isinstance(fig, Figure) and (tmp_path / "shift.png").read_bytes()[:8] == PNG
    assert_readable(plot_topic_map(rng.normal(size=(60, 2)), rng.integers(0, 4, 60)))


def test_plot_errors(tmp_path):
    with pytest.raises(ConfigError):
        plot_ci_forest([], [], [], [], tmp_path / "x.png")
    with pytest.raises(ConfigError):
        plot_topic_map(np.zeros((3, 3)), [0, 1, 2], tmp_path / "x.png")
    with pytest.raises(ConfigError):
        plot_similarity_densities([], tmp_path / "x.png")
    with pytest.raises(ConfigError, match="distinct"):
        plot_ci_forest(["a", "a"], [0.1, 0.2], [0, 0], [1, 1])
    assert not list(tmp_path.iterdir())


# -- one axis per score scale: BM25 scores (0 to ~40) never share an axis with cosine similarities --
def _dists(system: str, rand, corr, topk):
    from types import SimpleNamespace

    return SimpleNamespace(
        system=system,
        dataset="d",
        k=5,
        rand=np.asarray(rand, float),
        corr=np.asarray(corr, float),
        topk=np.asarray(topk, float),
    )


def _bm25_and_cosine(rng: np.random.Generator):
    bm25 = _dists("bm25", np.r_[np.zeros(60), rng.uniform(0, 3, 20)], rng.uniform(0, 40, 80), rng.gamma(4.0, 4.0, 400))
    minilm = _dists("minilm", rng.normal(0.15, 0.08, 80), rng.normal(0.6, 0.1, 80), rng.normal(0.55, 0.05, 400))
    return bm25, minilm


def test_density_panels_have_one_axis_per_score_scale():
    from adaptlab.analysis.plots import score_scale

    rng = np.random.default_rng(0)
    bm25, minilm = _bm25_and_cosine(rng)
    fig = plot_similarity_densities([bm25, minilm])
    ax_bm25, ax_cos = (a for a in fig.axes if a.get_visible())
    assert ax_cos.get_xlim()[1] <= 1.1 and ax_bm25.get_xlim()[1] > 30  # the cosines are not squeezed into a spike
    assert not ax_bm25.get_shared_x_axes().joined(ax_bm25, ax_cos)
    assert score_scale(bm25.rand, bm25.corr) == "nonnegative" and score_scale(minilm.topk) == "similarity"
    # BM25's density: nothing below the smallest possible score 0, and it still integrates to 1
    for line in ax_bm25.get_lines():
        assert line.get_xdata().min() >= 0.0
    red = ax_bm25.get_lines()[0]
    assert np.trapezoid(red.get_ydata(), red.get_xdata()) == pytest.approx(1.0, abs=0.03)
    # two systems on the cosine scale share theirs
    other = _dists("bge", rng.normal(0.2, 0.1, 80), rng.normal(0.7, 0.1, 80), rng.normal(0.6, 0.05, 400))
    a, b = (x for x in plot_similarity_densities([minilm, other]).axes if x.get_visible())
    assert a.get_shared_x_axes().joined(a, b)


def _threshold(system: str, tau):
    from types import SimpleNamespace

    tau = np.asarray(tau, float)
    acc = np.linspace(0.6, 0.2, tau.size)
    return SimpleNamespace(
        system=system,
        k=5,
        tau=tau,
        acc_boot_mean=acc,
        acc_ci_low=acc - 0.05,
        acc_ci_high=acc + 0.05,
        base_acc=0.6,
        chosen=1,
        chosen_tau=float(tau[1]),
    )


def test_threshold_figure_has_one_panel_per_score_scale():
    two = plot_thresholds([_threshold("bm25", np.linspace(2, 30, 12)), _threshold("minilm", np.linspace(0.3, 0.7, 12))])
    assert len(two.axes) == 2
    cos, bm = two.axes
    assert cos.get_xlim()[1] < 1.0 < bm.get_xlim()[0] + 2  # the similarity panel first, BM25 on its own
    assert [t.get_text() for t in cos.get_legend().get_texts()][0] == "minilm"
    one = plot_thresholds([_threshold("a", np.linspace(0.3, 0.7, 12)), _threshold("b", np.linspace(0.2, 0.6, 12))])
    assert len(one.axes) == 1
