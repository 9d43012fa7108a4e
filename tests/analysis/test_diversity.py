import numpy as np
import pytest
from scipy.spatial.distance import pdist
from sklearn.metrics import silhouette_score

from adaptlab.analysis import average_cosine_distance, cosine_silhouette, topic_diversity, topic_entropy, topic_map
from adaptlab.errors import ConfigError


def _blobs(n_per=30, k=3, dim=10, spread=0.15, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, dim))
    x = np.vstack([c + spread * rng.normal(size=(n_per, dim)) for c in centres])
    return x, np.repeat(np.arange(k), n_per)


def test_average_cosine_distance_matches_pdist():
    x = np.random.default_rng(0).normal(size=(40, 6))
    assert average_cosine_distance(x) == pytest.approx(pdist(x, "cosine").mean(), abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_silhouette_equals_sklearn(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(80, 7))
    labels = rng.integers(0, 5, size=80)
    labels[0] = 5  # a singleton cluster scores 0, as in scikit-learn
    assert cosine_silhouette(x, labels) == pytest.approx(silhouette_score(x, labels, metric="cosine"), abs=1e-10)


def test_topic_entropy_by_hand():
    assert topic_entropy([0, 0, 1, 1]) == pytest.approx(1.0)
    p = np.array([3, 1]) / 4
    assert topic_entropy([0, 0, 0, 1]) == pytest.approx(-(p * np.log(p)).sum() / np.log(2))
    assert topic_entropy([2, 2, 2]) == 0.0


def test_topic_diversity_finds_the_blobs_and_matches_sklearn():
    x, truth = _blobs()
    r = topic_diversity(x, k_range=range(2, 7), seed=0)
    assert r.optimal_k == 3
    assert r.silhouette == pytest.approx(silhouette_score(x, r.labels, metric="cosine"), abs=1e-10)
    assert r.silhouette == max(r.silhouette_by_k.values())
    assert r.topic_entropy == pytest.approx(1.0)  # three equal blobs
    assert set(r.silhouette_by_k) == {2, 3, 4, 5, 6}
    again = topic_diversity(x, k_range=range(2, 7), seed=0)
    np.testing.assert_array_equal(r.labels, again.labels)
    rows = {row["measure"]: row["value"] for row in r.to_metric_rows("s", "d")}
    assert rows["n_topics"] == 3 and rows["silhouette"] == pytest.approx(r.silhouette)
    sub = topic_diversity(x, k_range=range(2, 5), sample_size=45, seed=1)
    assert sub.labels.shape == (45,) and sub.indices is not None and sub.n_points == 45


def test_topic_map_shapes():
    x, _ = _blobs(n_per=10)
    assert topic_map(x).shape == (30, 2)
    assert topic_map(x, method="tsne", seed=0).shape == (30, 2)


def test_errors():
    with pytest.raises(ConfigError, match="zero vectors"):
        average_cosine_distance(np.array([[0.0, 0.0], [1.0, 0.0]]))
    with pytest.raises(ConfigError, match="k_range"):
        topic_diversity(np.eye(3), k_range=[5])
    with pytest.raises(ConfigError, match="clusters"):
        cosine_silhouette(np.eye(3), [0, 0, 0])
    with pytest.raises(ConfigError, match="method"):
        topic_map(np.eye(3), method="umap")
