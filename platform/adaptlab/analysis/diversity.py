"""Topic diversity of a set of texts from their embeddings (reference 004, Section 3.4.2).

For embeddings ``X`` [N, d] (typically the benchmark's contexts; rows are L2-normalised here):

- **average cosine distance**: the mean of ``1 - cos(x_i, x_j)`` over all unordered pairs
  ``i != j``, computed exactly in O(N d) as ``1 - (||sum_i x_i||^2 - N) / (N (N - 1))``.
- **topics**: k-means (scikit-learn ``KMeans``, k-means++ init, ``n_init`` restarts,
  ``random_state = seed``) on the normalised rows for every ``k`` in ``k_range``; the optimal
  ``k`` maximises the cosine silhouette (ties: the smaller ``k``).
- **silhouette** (Rousseeuw 1987) with the cosine distance: for point ``i`` in cluster ``A``,
  ``a(i)`` is its mean distance to the other members of ``A``, ``b(i)`` the smallest mean
  distance to another cluster, ``s(i) = (b - a) / max(a, b)`` (0 for singleton clusters); the
  score is the mean of ``s(i)``. Computed exactly in O(N k d) from per-cluster sums of the unit
  vectors; equal to ``sklearn.metrics.silhouette_score(X, labels, metric="cosine")``.
- **topic entropy**: the Shannon entropy of the cluster-size proportions divided by
  ``log k`` (1 = all topics equally large; 0 when ``k = 1``).

A 2-D map of the points (PCA or t-SNE) coloured by topic is drawn by
:func:`adaptlab.analysis.plots.plot_topic_map` from :func:`topic_map`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from adaptlab.analysis._rows import metric_row
from adaptlab.errors import ConfigError

__all__ = [
    "TopicDiversity",
    "average_cosine_distance",
    "cosine_silhouette",
    "topic_diversity",
    "topic_entropy",
    "topic_map",
]


def _unit_rows(x: object) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] < 2:
        raise ConfigError(f"embeddings must be a 2-D [n_points >= 2, dim] array, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ConfigError("embeddings contain NaN or infinite values")
    norms = np.linalg.norm(a, axis=1, keepdims=True)
    if (norms == 0).any():
        raise ConfigError(f"{int((norms == 0).sum())} embeddings are zero vectors: cosine distance is undefined")
    return a / norms


def average_cosine_distance(embeddings: object) -> float:
    """Mean cosine distance over all pairs ``i != j`` of the rows of ``embeddings``."""
    x = _unit_rows(embeddings)
    n = x.shape[0]
    s = x.sum(axis=0)
    sq = float((x * x).sum())  # = n up to round-off
    return float(1.0 - (float(s @ s) - sq) / (n * (n - 1.0)))


def _silhouette_kernel(x: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Per-point cosine silhouette for unit rows ``x`` and labels ``0..k-1``."""
    k = int(labels.max()) + 1
    sizes = np.bincount(labels, minlength=k).astype(np.float64)
    sums = np.zeros((k, x.shape[1]))
    np.add.at(sums, labels, x)
    dots = x @ sums.T  # [N, k]: sum of cosines to each cluster
    self_dot = (x * x).sum(axis=1)
    n = x.shape[0]
    own = sizes[labels]
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_dist = 1.0 - dots / sizes[None, :]
        a = ((own - 1.0) - (dots[np.arange(n), labels] - self_dot)) / (own - 1.0)
    mean_dist[np.arange(n), labels] = np.inf
    mean_dist[:, sizes == 0] = np.inf
    b = mean_dist.min(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = (b - a) / np.maximum(a, b)
    s[own <= 1] = 0.0
    return np.nan_to_num(s)


def _encode_labels(labels: object, n: int) -> np.ndarray:
    lab = np.asarray(labels)
    if lab.shape != (n,):
        raise ConfigError(f"labels must have shape ({n},), got {lab.shape}")
    _, codes = np.unique(lab, return_inverse=True)
    return codes.astype(np.int64)


def cosine_silhouette(embeddings: object, labels: object) -> float:
    """Mean silhouette with cosine distance; needs ``2 <= n_labels <= n_points - 1``."""
    x = _unit_rows(embeddings)
    codes = _encode_labels(labels, x.shape[0])
    k = int(codes.max()) + 1
    if not 2 <= k <= x.shape[0] - 1:
        raise ConfigError(
            f"silhouette needs 2 <= number of clusters <= n_points - 1, got {k} clusters, {x.shape[0]} points"
        )
    return float(_silhouette_kernel(x, codes).mean())


def topic_entropy(labels: object) -> float:
    """Shannon entropy of the cluster sizes divided by ``log k`` (``k`` = distinct labels)."""
    lab = np.asarray(labels).ravel()
    if lab.size == 0:
        raise ConfigError("topic_entropy needs at least one label")
    _, counts = np.unique(lab, return_counts=True)
    k = counts.size
    if k < 2:
        return 0.0
    p = counts / counts.sum()
    return float(-(p * np.log(p)).sum() / np.log(k))


@dataclass(frozen=True)
class TopicDiversity:
    """Topic diversity of one set of embeddings (``labels`` for the optimal ``k``)."""

    avg_cosine_distance: float
    optimal_k: int
    silhouette: float
    topic_entropy: float
    labels: np.ndarray
    silhouette_by_k: dict[int, float]
    n_points: int
    seed: int
    indices: np.ndarray | None = field(default=None)
    """Rows of the input that were clustered (``None``: all of them)."""

    def to_metric_rows(self, system: str = "", dataset: str = "") -> list[dict[str, Any]]:
        """Rows ``avg_cosine_distance``, ``n_topics``, ``silhouette``, ``topic_entropy``."""
        extra = {
            "n_points": self.n_points,
            "seed": self.seed,
            "silhouette_by_k": {str(k): v for k, v in self.silhouette_by_k.items()},
        }
        return [
            metric_row(
                system, dataset, "avg_cosine_distance", self.avg_cosine_distance, extra={"n_points": self.n_points}
            ),
            metric_row(system, dataset, "n_topics", float(self.optimal_k), extra=extra),
            metric_row(system, dataset, "silhouette", self.silhouette, extra=extra),
            metric_row(system, dataset, "topic_entropy", self.topic_entropy, extra={"k": self.optimal_k}),
        ]


def topic_diversity(
    embeddings: object,
    *,
    k_range: Iterable[int] = range(2, 21),
    seed: int = 0,
    n_init: int = 4,
    sample_size: int | None = None,
) -> TopicDiversity:
    """Average cosine distance, optimal number of topics by silhouette, silhouette, topic entropy.

    ``sample_size`` clusters a seeded random subset of that many rows (large corpora); the
    average cosine distance always uses all rows. ``k`` values ``>= n_points`` are skipped.
    """
    from sklearn.cluster import KMeans

    x_all = _unit_rows(embeddings)
    avg = average_cosine_distance(x_all)
    idx = None
    x = x_all
    if sample_size is not None:
        if int(sample_size) < 3:
            raise ConfigError(f"sample_size must be >= 3, got {sample_size!r}")
        if int(sample_size) < x_all.shape[0]:
            rng = np.random.default_rng(seed)
            idx = np.sort(rng.choice(x_all.shape[0], size=int(sample_size), replace=False))
            x = x_all[idx]
    ks = sorted({int(k) for k in k_range})
    valid = [k for k in ks if 2 <= k <= x.shape[0] - 1]
    if not valid:
        raise ConfigError(f"no k in k_range={ks} satisfies 2 <= k <= n_points - 1 = {x.shape[0] - 1}")
    if int(n_init) < 1:
        raise ConfigError(f"n_init must be >= 1, got {n_init!r}")
    scores: dict[int, float] = {}
    best: tuple[float, int, np.ndarray] | None = None
    for k in valid:
        labels = KMeans(n_clusters=k, n_init=int(n_init), random_state=int(seed)).fit_predict(x)
        codes = _encode_labels(labels, x.shape[0])
        if int(codes.max()) + 1 < 2:
            continue
        s = float(_silhouette_kernel(x, codes).mean())
        scores[k] = s
        if best is None or s > best[0]:
            best = (s, k, labels.astype(np.int64))
    if best is None:
        raise ConfigError("k-means found a single cluster for every k: the embeddings are (nearly) identical")
    s, k, labels = best
    return TopicDiversity(avg, k, s, topic_entropy(labels), labels, scores, int(x.shape[0]), int(seed), idx)


def topic_map(embeddings: object, *, method: str = "pca", seed: int = 0, perplexity: float = 30.0) -> np.ndarray:
    """2-D coordinates [N, 2] of the normalised rows by ``pca`` or ``tsne`` (scikit-learn, seeded;
    t-SNE uses the exact gradient up to 500 points, Barnes-Hut above; ``perplexity`` is capped
    at ``(N - 1) / 3``)."""
    x = _unit_rows(embeddings)
    m = str(method).lower()
    if m == "pca":
        from sklearn.decomposition import PCA

        return PCA(n_components=2, random_state=int(seed)).fit_transform(x)
    if m in ("tsne", "t-sne"):
        from sklearn.manifold import TSNE

        perp = min(float(perplexity), max(1.0, (x.shape[0] - 1) / 3.0))
        algo = "exact" if x.shape[0] <= 500 else "barnes_hut"  # exact is faster on small sets
        return TSNE(n_components=2, random_state=int(seed), init="pca", perplexity=perp, method=algo).fit_transform(x)
    raise ConfigError(f"unknown map method {method!r}; expected 'pca' or 'tsne'")
