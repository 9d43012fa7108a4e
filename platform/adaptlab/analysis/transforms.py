"""Post-processing transforms of an embedding space, fitted on the corpus (reference 000, Sec. 2.5).

Each transform is fitted on the corpus embeddings ``X`` [N, d] only and then applied, unchanged,
to corpus and query embeddings, so the transformed space can be searched and evaluated exactly
like another model variant. Statistics are computed in float64; outputs are float32 and, by
default (``renormalize=True``), L2-normalised again so that the inner product stays the cosine
similarity adaptlab uses everywhere.

- ``standardize`` (Timkey & van Schijndel 2021): ``x' = (x - mu) / sigma`` per dimension
  (``sigma`` with ``ddof = 0``; a constant dimension keeps ``sigma = 1``).
- ``whiten`` (Su et al. 2021; Jung et al. 2023): with the covariance ``Sigma = U Lambda U^T``
  (``ddof = 1``), ``x' = (x - mu) U Lambda^{-1/2}``; eigenvalues below ``eps * max(Lambda)`` are
  raised to it. ``n_components`` keeps only the leading directions (BERT-whitening-k).
- ``abtt``, all-but-the-top (Mu, Bhat & Viswanath 2018): remove the mean and the projections on
  the top ``D`` principal components ``u_1..u_D`` of the centred corpus:
  ``x' = (x - mu) - sum_i (u_i^T (x - mu)) u_i``; default ``D = max(1, round(d / 100))``, their
  rule of thumb. (The paper calls this transform "PCA".)
- ``none``: the identity (with the same optional re-normalisation).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

from adaptlab.errors import ConfigError

__all__ = [
    "AllButTheTop",
    "EmbeddingTransform",
    "Identity",
    "Standardize",
    "TRANSFORMS",
    "TransformedSpace",
    "Whiten",
    "make_transform",
    "transform_space",
]


def _as_matrix(x: object, what: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] == 0:
        raise ConfigError(f"{what} must be a non-empty 2-D [n, dim] array, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ConfigError(f"{what} contain NaN or infinite values")
    return a


class EmbeddingTransform(ABC):
    """A transform fitted on corpus embeddings: ``fit(corpus)`` then ``transform(x)``."""

    name: str = ""

    def __init__(self, *, renormalize: bool = True) -> None:
        self.renormalize = bool(renormalize)
        self.dim_: int | None = None

    def fit(self, corpus: object) -> EmbeddingTransform:
        x = _as_matrix(corpus, "corpus embeddings")
        self._fit(x)
        self.dim_ = int(x.shape[1])
        return self

    def transform(self, x: object) -> np.ndarray:
        if self.dim_ is None:
            raise ConfigError(f"transform {self.name!r} is not fitted: call fit(corpus_embeddings) first")
        a = _as_matrix(x, "embeddings")
        if a.shape[1] != self.dim_:
            raise ConfigError(f"transform {self.name!r} was fitted on dimension {self.dim_}, got {a.shape[1]}")
        out = self._apply(a)
        if self.renormalize:
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            out = out / np.where(norms > 0, norms, 1.0)
        return out.astype(np.float32)

    def fit_transform(self, corpus: object) -> np.ndarray:
        return self.fit(corpus).transform(corpus)

    def params(self) -> dict[str, Any]:
        """The settings (not the fitted arrays), for provenance."""
        return {"name": self.name, "renormalize": self.renormalize}

    @abstractmethod
    def _fit(self, x: np.ndarray) -> None: ...

    @abstractmethod
    def _apply(self, x: np.ndarray) -> np.ndarray: ...


class Identity(EmbeddingTransform):
    name = "none"

    def _fit(self, x: np.ndarray) -> None:
        pass

    def _apply(self, x: np.ndarray) -> np.ndarray:
        return x


class Standardize(EmbeddingTransform):
    """Per-dimension z-scores with the corpus mean and standard deviation."""

    name = "standardize"

    def _fit(self, x: np.ndarray) -> None:
        self.mean_ = x.mean(axis=0)
        sd = x.std(axis=0)
        self.scale_ = np.where(sd > 0, sd, 1.0)

    def _apply(self, x: np.ndarray) -> np.ndarray:
        return (x - self.mean_) / self.scale_


class Whiten(EmbeddingTransform):
    """Whitening ``(x - mu) U Lambda^{-1/2}`` from the corpus covariance."""

    name = "whiten"

    def __init__(self, *, n_components: int | None = None, eps: float = 1e-6, renormalize: bool = True) -> None:
        super().__init__(renormalize=renormalize)
        if n_components is not None and int(n_components) < 1:
            raise ConfigError(f"whiten: n_components must be >= 1, got {n_components!r}")
        if not eps > 0:
            raise ConfigError(f"whiten: eps must be > 0, got {eps!r}")
        self.n_components = None if n_components is None else int(n_components)
        self.eps = float(eps)

    def _fit(self, x: np.ndarray) -> None:
        if x.shape[0] < 2:
            raise ConfigError("whiten: need at least 2 corpus embeddings to estimate a covariance")
        self.mean_ = x.mean(axis=0)
        lam, u = np.linalg.eigh(np.cov(x, rowvar=False, ddof=1))
        lam, u = lam[::-1], u[:, ::-1]
        lam = np.maximum(lam, self.eps * max(float(lam[0]), np.finfo(float).tiny))
        k = x.shape[1] if self.n_components is None else min(self.n_components, x.shape[1])
        self.matrix_ = u[:, :k] / np.sqrt(lam[:k])

    def _apply(self, x: np.ndarray) -> np.ndarray:
        return (x - self.mean_) @ self.matrix_

    def params(self) -> dict[str, Any]:
        return {**super().params(), "n_components": self.n_components, "eps": self.eps}


class AllButTheTop(EmbeddingTransform):
    """Remove the mean and the top ``n_components`` principal directions of the corpus."""

    name = "abtt"

    def __init__(self, *, n_components: int | None = None, renormalize: bool = True) -> None:
        super().__init__(renormalize=renormalize)
        if n_components is not None and int(n_components) < 0:
            raise ConfigError(f"abtt: n_components must be >= 0, got {n_components!r}")
        self.n_components = None if n_components is None else int(n_components)

    def _fit(self, x: np.ndarray) -> None:
        self.mean_ = x.mean(axis=0)
        d = self.n_components if self.n_components is not None else max(1, round(x.shape[1] / 100))
        d = min(d, x.shape[1])
        centred = x - self.mean_
        if d == 0:
            self.components_ = np.zeros((0, x.shape[1]))
            return
        _, _, vt = np.linalg.svd(centred, full_matrices=False)
        self.components_ = vt[:d]

    def _apply(self, x: np.ndarray) -> np.ndarray:
        c = x - self.mean_
        return c - (c @ self.components_.T) @ self.components_

    def params(self) -> dict[str, Any]:
        return {**super().params(), "n_components": self.n_components}


TRANSFORMS: dict[str, type[EmbeddingTransform]] = {
    "abtt": AllButTheTop,
    "none": Identity,
    "standardize": Standardize,
    "whiten": Whiten,
}
"""Transform classes by canonical name."""

_ALIASES = {
    "none": "none",
    "identity": "none",
    "baseline": "none",
    "standardize": "standardize",
    "standardise": "standardize",
    "standardized": "standardize",
    "standardised": "standardize",
    "zscore": "standardize",
    "whiten": "whiten",
    "whitening": "whiten",
    "whitened": "whiten",
    "abtt": "abtt",
    "all-but-the-top": "abtt",
    "all_but_the_top": "abtt",
    "pca": "abtt",
}


def make_transform(name: str, **params: Any) -> EmbeddingTransform:
    """An unfitted transform by name (``none``, ``standardize``, ``whiten``, ``abtt``; aliases
    such as ``whitening`` and ``pca`` are accepted)."""
    key = _ALIASES.get(str(name).strip().lower().replace(" ", "-"))
    if key is None:
        raise ConfigError(f"unknown transform {name!r}; expected one of {', '.join(sorted(TRANSFORMS))}")
    try:
        return TRANSFORMS[key](**params)
    except TypeError as e:
        raise ConfigError(f"transform {key!r}: invalid parameters {sorted(params)}: {e}") from e


@dataclass(frozen=True)
class TransformedSpace:
    """Corpus and query embeddings after one fitted transform."""

    corpus: np.ndarray
    queries: np.ndarray
    transform: EmbeddingTransform


def transform_space(corpus: object, queries: object, method: str = "whiten", **params: Any) -> TransformedSpace:
    """Fit ``method`` on ``corpus`` and apply it to ``corpus`` and ``queries`` [n, d]."""
    t = make_transform(method, **params).fit(corpus)
    return TransformedSpace(t.transform(corpus), t.transform(queries), t)
