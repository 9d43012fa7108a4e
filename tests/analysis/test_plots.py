import numpy as np
import pytest

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
from adaptlab.errors import ConfigError

PNG = b"\x89PNG\r\n\x1a\n"


def _is_png(path):
    data = path.read_bytes()
    return data[:8] == PNG and len(data) > 2000


def test_density_forest_curves_thresholds(tmp_path, records_good, records_bad):
    recs = [records_good, records_bad]
    p = plot_similarity_densities([similarity_distributions(r, k=5) for r in recs], tmp_path / "f" / "dens.png")
    assert _is_png(p)
    p = plot_ci_forest(["base", "ft", "pt-ft"], [0.6, 0.7, 0.72], [0.5, 0.65, float("nan")], [0.7, 0.75, 0.8],
                       tmp_path / "forest.png", measure="ndcg@10")
    assert _is_png(p)
    curves = [ndcg_curve_from_records(r, n_resamples=20) for r in recs]
    assert _is_png(plot_ndcg_curves(curves, tmp_path / "curves.png", title="nDCG"))
    thr = [similarity_thresholds(r, k=5, n_resamples=50) for r in recs]
    assert _is_png(plot_thresholds(thr, tmp_path / "thr.png"))


def test_shift_and_topic_map(tmp_path):
    rng = np.random.default_rng(0)
    assert _is_png(plot_shift_histograms({"base": rng.normal(1, 0.1, 200), "ptft": rng.normal(1.2, 0.1, 200)},
                                         tmp_path / "shift.png"))
    assert _is_png(plot_topic_map(rng.normal(size=(60, 2)), rng.integers(0, 4, 60), tmp_path / "map.png"))


def test_plot_errors(tmp_path):
    with pytest.raises(ConfigError):
        plot_ci_forest([], [], [], [], tmp_path / "x.png")
    with pytest.raises(ConfigError):
        plot_topic_map(np.zeros((3, 3)), [0, 1, 2], tmp_path / "x.png")
    with pytest.raises(ConfigError):
        plot_similarity_densities([], tmp_path / "x.png")
