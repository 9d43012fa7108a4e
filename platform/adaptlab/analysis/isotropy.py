"""Isotropy of an embedding space: Mu et al.'s partition-function ratio and IsoScore.

``V`` is the [N, d] matrix of embeddings (one row per text; adaptlab's embeddings are
L2-normalised, transformed spaces may not be).

**I_A (Mu, Bhat & Viswanath 2018, "All-but-the-top")**, reference 000 Appendix A.3. With the
partition function ``Z(c) = sum_v exp(c^T v)``, isotropy is ``min_{|c|=1} Z(c) / max_{|c|=1} Z(c)``
(1 = perfectly isotropic). Two computable versions:

- ``isotropy_mu_exact``: ``c`` ranges over the eigenvectors of ``V^T V`` and their negatives
  (both signs, so the value does not depend on the eigen-solver's sign convention);
  ``Z`` is evaluated in log space (log-sum-exp), so large norms do not overflow.
- ``isotropy_mu`` (the paper's ``I_A``): the second-order expansion
  ``Z(c) ~ |V| + 1^T V c + c^T V^T V c / 2`` bounded over unit ``c``::

      I_A = (|V| - ||1^T V|| + s_min^2 / 2) / (|V| + ||1^T V|| + s_max^2 / 2)

  with ``|V| = N`` and ``s_min``, ``s_max`` the smallest and largest singular values of ``V``
  (``s_min = 0`` when ``N < d``: ``V^T V`` is then singular).

**I_B = IsoScore (Rudman et al. 2022)**: with ``lambda`` the eigenvalues of the sample covariance
of ``V`` (``ddof = 1``, i.e. of the data in its PCA basis) and ``n = d``::

    lambda_hat = sqrt(n) * lambda / ||lambda||
    delta = ||lambda_hat - 1|| / sqrt(2 (n - sqrt(n)))
    I_B = ((n - delta^2 (n - sqrt(n)))^2 - n) / (n (n - 1))

in [0, 1]. This equals ``IsoScore.IsoScore(points)`` of the ``IsoScore`` package (points as
rows), computed here in float64 NumPy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from adaptlab.analysis._rows import metric_row
from adaptlab.errors import ConfigError

__all__ = ["IsotropyResult", "isoscore", "isotropy", "isotropy_mu", "isotropy_mu_exact"]


def _matrix(points: object, *, min_rows: int = 1) -> np.ndarray:
    v = np.asarray(points, dtype=np.float64)
    if v.ndim != 2:
        raise ConfigError(f"embeddings must be a 2-D [n_points, dim] array, got shape {v.shape}")
    if v.shape[0] < min_rows or v.shape[1] < 2:
        raise ConfigError(f"need at least {min_rows} points of dimension >= 2, got shape {v.shape}")
    if not np.isfinite(v).all():
        raise ConfigError("embeddings contain NaN or infinite values")
    return v


def isoscore(points: object) -> float:
    """IsoScore (``I_B``) of ``points`` [N, d], N >= 2."""
    v = _matrix(points, min_rows=2)
    n = float(v.shape[1])
    cov = np.cov(v, rowvar=False, ddof=1)
    lam = np.abs(np.linalg.eigvalsh(cov))
    norm = np.linalg.norm(lam)
    if norm == 0.0:
        raise ConfigError("IsoScore is undefined for identical points (zero covariance)")
    lam_hat = lam * np.sqrt(n) / norm
    delta = np.linalg.norm(lam_hat - 1.0) / np.sqrt(2.0 * (n - np.sqrt(n)))
    return float(((n - delta**2 * (n - np.sqrt(n))) ** 2 - n) / (n * (n - 1.0)))


def _gram_eig(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (ascending, clipped at 0) and eigenvectors of ``V^T V``."""
    w, u = np.linalg.eigh(v.T @ v)
    return np.clip(w, 0.0, None), u


def _mu_approx(v: np.ndarray, w: np.ndarray) -> float:
    n = float(v.shape[0])
    s_min2 = 0.0 if v.shape[0] < v.shape[1] else float(w[0])
    s_max2 = float(w[-1])
    m = float(np.linalg.norm(v.sum(axis=0)))
    return (n - m + 0.5 * s_min2) / (n + m + 0.5 * s_max2)


def _mu_exact(v: np.ndarray, u: np.ndarray) -> float:
    proj = v @ u  # [N, d]: c^T v for every eigenvector c
    logz = np.concatenate([_logsumexp(proj), _logsumexp(-proj)])
    return float(np.exp(logz.min() - logz.max()))


def isotropy_mu(points: object) -> float:
    """The paper's ``I_A``: Mu et al.'s second-order approximation of ``min Z / max Z``."""
    v = _matrix(points)
    return _mu_approx(v, _gram_eig(v)[0])


def isotropy_mu_exact(points: object) -> float:
    """``min Z(c) / max Z(c)`` over ``c`` in the (signed) eigenvectors of ``V^T V``."""
    v = _matrix(points)
    return _mu_exact(v, _gram_eig(v)[1])


def _logsumexp(x: np.ndarray) -> np.ndarray:
    mx = x.max(axis=0)
    return mx + np.log(np.exp(x - mx).sum(axis=0))


@dataclass(frozen=True)
class IsotropyResult:
    """Isotropy of one embedding space (``space`` names it: "corpus", "corpus+whiten", ...)."""

    system: str
    dataset: str
    space: str
    isoscore: float
    isotropy_mu: float
    isotropy_mu_exact: float
    n_points: int
    dim: int

    def to_metric_rows(self) -> list[dict[str, Any]]:
        """Rows ``isoscore``, ``isotropy_mu`` and ``isotropy_mu_exact`` (point values; extra:
        space, n_points, dim)."""
        extra = {"space": self.space, "n_points": self.n_points, "dim": self.dim}
        return [
            metric_row(self.system, self.dataset, m, getattr(self, m), extra=extra)
            for m in ("isoscore", "isotropy_mu", "isotropy_mu_exact")
        ]


def isotropy(points: object, *, system: str = "", dataset: str = "", space: str = "corpus") -> IsotropyResult:
    """All three isotropy measures of ``points`` [N, d]."""
    v = _matrix(points, min_rows=2)
    w, u = _gram_eig(v)
    return IsotropyResult(
        system, dataset, space, isoscore(v), _mu_approx(v, w), _mu_exact(v, u), int(v.shape[0]), int(v.shape[1])
    )
