"""The paired sign-flip randomization test, exact where the differences allow and otherwise with
as many random sign vectors as the family of tests needs.

Under the null hypothesis that two systems are exchangeable on each query, each per-query
difference ``d_q`` is as likely to be ``-d_q`` (Fisher 1935, "The Design of Experiments",
section 21; Pitman 1937; for IR evaluation Smucker, Allan & Carterette 2007, CIKM). With ``T =
|sum_q d_q|`` and ``T(e) = |sum_q e_q d_q|`` for a sign vector ``e`` (``e_q = +-1``):

* **exact** (:func:`exact_sign_flip_p`): ``p = #{e : T(e) >= T} / 2**n`` over all ``2**n`` sign
  patterns of the ``n`` non-zero differences (zeros change no sum). Computed, when

  - the differences are integer multiples ``a_i u`` of one unit ``u`` (0/1 measures such as
    accuracy@k; MRR@k, whose values are ``1/r``), as the distribution of ``sum_i a_i e_i`` by
    convolving one scaled binomial per distinct ``a`` (a subset-sum count: the support has at
    most ``2 sum a_i + 1`` points), while that costs at most :data:`LATTICE_COST` operations;
  - else, for up to :data:`EXACT_MAX_N` differences, by meeting in the middle: the ``2**(n/2)``
    sums of each half, sorted, and for each sum of one half the number of sums of the other
    with ``|x + y| >= T`` by binary search (Horowitz & Sahni 1974, "Computing partitions with
    applications to the knapsack problem", JACM 21).
* **Monte Carlo** otherwise (:func:`family_sign_flip`): ``p = (1 + #{j : T(e_j) >= T}) / (N +
  1)`` over ``N`` random sign vectors, valid for any ``N`` (P(p <= alpha) <= alpha). Its
  smallest value is ``1/(N+1)``, so Holm's smallest adjusted p in a family of ``K`` tests is
  ``K/(N+1)``: with ``N`` fixed at 1,000 no difference can be found once ``K >= 51`` (issue 29).
  ``N`` is therefore :func:`flip_count`: at least the configured number and at least
  ``RESOLUTION * K / alpha`` (:data:`RESOLUTION` = 20, :data:`FAMILY_ALPHA` = 0.05), so the
  smallest adjusted p is at most ``alpha / 20``. The vectors come in blocks of
  :data:`FLIP_BLOCK` from one seeded generator shared by every pair of the family, and the
  flipped sums of all pairs come from those of the systems (``T_ab(e) = |e.x_a - e.x_b|``), so
  the cost grows with the number of systems, not of pairs.

A flipped sum within ``tol * sum|d|`` of the observed one counts as reaching it (floating-point
rounding of exact ties; counting a near-tie is conservative).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

__all__ = [
    "EXACT_MAX_N",
    "FAMILY_ALPHA",
    "FLIP_BLOCK",
    "LATTICE_COST",
    "RESOLUTION",
    "FlipResult",
    "exact_sign_flip_p",
    "family_sign_flip",
    "flip_count",
    "sign_flip_p_values",
]

FAMILY_ALPHA: float = 0.05
"""The level the Monte Carlo resolution is sized for (the letters' and Holm's usual 0.05)."""

RESOLUTION: int = 20
"""Sign vectors per (test / alpha): the smallest adjusted p is at most ``alpha / RESOLUTION``."""

EXACT_MAX_N: int = 20
"""Up to this many non-zero differences the exact p-value is counted by meeting in the middle."""

LATTICE_COST: int = 30_000_000
"""Largest number of operations of the exact count over integer-scaled differences."""

FLIP_BLOCK: int = 2048
"""Sign vectors per block (memory: FLIP_BLOCK x Q floats)."""

_MAX_DENOMINATOR = 10_000  # rational forms of the differences' magnitudes (1/r: lcm(1..10) = 2520)


def flip_count(n_resamples: int, family_size: int, alpha: float = FAMILY_ALPHA) -> int:
    """``max(n_resamples, ceil(RESOLUTION * family_size / alpha))``: the Monte Carlo sign vectors
    of a family of ``family_size`` tests (module doc).

    >>> flip_count(1000, 66)
    26400
    """
    return max(int(n_resamples), math.ceil(RESOLUTION * int(family_size) / float(alpha)))


def sign_flip_p_values(d: np.ndarray, n_resamples: int, rng: np.random.Generator, tol: float = 1e-10) -> np.ndarray:
    """Monte Carlo sign-flip p-values of each row of ``d`` [P, Q] (per-query paired differences),
    all rows with the same ``n_resamples`` sign vectors drawn from ``rng`` (module doc). Rows of
    zeros get p = 1."""
    d = np.atleast_2d(np.asarray(d, dtype=np.float64))
    obs = np.abs(d.sum(axis=1))
    slack = tol * np.maximum(np.abs(d).sum(axis=1), 1.0)
    hits = np.zeros(d.shape[0], dtype=np.int64)
    for signs in _sign_blocks(int(n_resamples), d.shape[1], rng):
        hits += np.count_nonzero(np.abs(signs @ d.T) >= obs - slack, axis=0)
    return (1.0 + hits) / (int(n_resamples) + 1.0)


def _sign_blocks(n: int, q: int, rng: np.random.Generator):  # noqa: ANN202 (a generator of arrays)
    """``n`` random sign vectors of length ``q`` in blocks of :data:`FLIP_BLOCK` rows (float64),
    each sign one uniform random bit."""
    for start in range(0, n, FLIP_BLOCK):
        rows = min(FLIP_BLOCK, n - start)
        raw = rng.integers(0, 256, size=(rows, -(-q // 8)), dtype=np.uint8)
        yield np.unpackbits(raw, axis=1, count=q).astype(np.float64) * 2.0 - 1.0


# ----------------------------------------------------------------------------- exact
def _lattice(mags: np.ndarray) -> np.ndarray | None:
    """Integers ``a_i`` with ``mags_i = a_i u`` for one unit ``u`` (gcd 1), or None."""
    distinct = np.unique(mags)
    if distinct[-1] - distinct[0] <= 1e-12 * distinct[-1]:  # one magnitude (0/1 measures): a_i = 1
        return np.ones(mags.size, dtype=np.int64)
    fracs = []
    for x in distinct:
        f = Fraction(float(x)).limit_denominator(_MAX_DENOMINATOR)
        if f == 0 or abs(float(f) - x) > 1e-11 * x:
            return None
        fracs.append(f)
    lcm = math.lcm(*(f.denominator for f in fracs))
    if lcm > _MAX_DENOMINATOR:
        return None
    ints = {float(x): f.numerator * (lcm // f.denominator) for x, f in zip(distinct, fracs)}
    g = math.gcd(*ints.values())
    return np.array([ints[float(x)] // g for x in mags], dtype=np.int64)


def _lattice_p(a: np.ndarray, observed: int) -> float | None:
    """``P(|sum_i e_i a_i| >= |observed|)`` over uniform signs, by convolving one scaled binomial
    per distinct ``a``; None when that would cost more than :data:`LATTICE_COST`."""
    from scipy.special import bdtrc, gammaln

    t = abs(int(observed))
    if t == 0:
        return 1.0
    if np.all(a == 1):  # sum = 2B - n, B ~ Binomial(n, 1/2): the exact sign test
        n = int(a.size)
        return float(min(1.0, 2.0 * bdtrc((n + t) // 2 - 1, n, 0.5)))
    values, counts = np.unique(a, return_counts=True)
    span = int(a.sum())
    if int(((counts + 1) * (2 * span + 1)).sum()) > LATTICE_COST:
        return None
    pmf = np.zeros(2 * span + 1)
    pmf[span] = 1.0  # offset: index span is the sum 0
    for v, c in zip(values.tolist(), counts.tolist()):
        n_pos = np.arange(c + 1)  # n_pos positive signs: v (2 n_pos - c), Binomial(c, 1/2) weights
        weights = np.exp(gammaln(c + 1) - gammaln(n_pos + 1) - gammaln(c - n_pos + 1) - c * np.log(2.0))
        out = np.zeros_like(pmf)
        for b, w in enumerate(weights):
            shift = v * (2 * b - c)
            if shift >= 0:
                out[shift:] += w * pmf[: pmf.size - shift]
            else:
                out[:shift] += w * pmf[-shift:]
        pmf = out
    return float(min(1.0, pmf[: span - t + 1].sum() + pmf[span + t :].sum()))


def _half_sums(d: np.ndarray) -> np.ndarray:
    """All ``2**len(d)`` signed sums ``sum_i e_i d_i``."""
    sums = np.zeros(1)
    for x in d.tolist():
        sums = np.concatenate([sums + x, sums - x])
    return sums


def _middle_p(d: np.ndarray, slack: float) -> float:
    """``#{e : |sum e_i d_i| >= |sum d_i| - slack} / 2**n`` by meeting in the middle."""
    t = abs(float(d.sum())) - slack
    if t <= 0:
        return 1.0
    x, y = _half_sums(d[: d.size // 2]), np.sort(_half_sums(d[d.size // 2 :]))
    hits = (y.size - np.searchsorted(y, t - x, side="left")) + np.searchsorted(y, -t - x, side="right")
    return float(int(hits.sum()) / 2.0**d.size)


def exact_sign_flip_p(d: Sequence[float] | np.ndarray, tol: float = 1e-10) -> float | None:
    """The exact two-sided sign-flip p-value of the paired differences ``d`` (module doc), or
    None when neither exact count applies (more than :data:`EXACT_MAX_N` non-zero differences
    that are not integer multiples of one unit within :data:`LATTICE_COST`).

    >>> exact_sign_flip_p([1.0, 1.0, 1.0, 0.0])  # 2 of the 8 sign patterns reach |sum| = 3
    0.25
    """
    d = np.asarray(d, dtype=np.float64).ravel()
    scale = float(np.abs(d).max()) if d.size else 0.0
    nz = d[np.abs(d) > tol * max(scale, 1.0)]
    if nz.size == 0:
        return 1.0
    a = _lattice(np.abs(nz))
    if a is not None:
        p = _lattice_p(a, int(np.sign(nz) @ a))
        if p is not None:
            return p
    if nz.size <= EXACT_MAX_N:
        return _middle_p(nz, tol * float(np.abs(nz).sum()))
    return None


# ----------------------------------------------------------------------------- a family
class FlipResult:
    """The p-values of a family and how each was obtained: ``exact[i]`` True for an exact
    p-value, else from ``n_vectors`` random sign vectors."""

    def __init__(self, p: np.ndarray, exact: np.ndarray, n_vectors: int) -> None:
        self.p, self.exact, self.n_vectors = p, exact, int(n_vectors)


def family_sign_flip(
    values: np.ndarray,
    pairs: Sequence[tuple[int, int]],
    n_resamples: int,
    rng: np.random.Generator,
    tol: float = 1e-10,
    alpha: float = FAMILY_ALPHA,
    family_size: int | None = None,
) -> FlipResult:
    """Two-sided sign-flip p-values of the differences ``values[a] - values[b]`` of each pair of
    one family (``values`` [S, Q]): exact where :func:`exact_sign_flip_p` can count, else with
    :func:`flip_count` ``(n_resamples, family_size, alpha)`` sign vectors from ``rng``, the same
    for every pair (module doc); ``family_size`` defaults to the number of pairs."""
    values = np.asarray(values, dtype=np.float64)
    p = np.empty(len(pairs))
    exact = np.zeros(len(pairs), dtype=bool)
    for i, (a, b) in enumerate(pairs):
        e = exact_sign_flip_p(values[a] - values[b], tol)
        if e is not None:
            p[i], exact[i] = e, True
    n = flip_count(n_resamples, len(pairs) if family_size is None else family_size, alpha)
    rest = [pr for pr, ex in zip(pairs, exact) if not ex]
    if rest:
        p[~exact] = _monte_carlo(values, rest, n, rng, tol)
    return FlipResult(p, exact, n if rest else 0)


def _monte_carlo(
    values: np.ndarray, pairs: list[tuple[int, int]], n: int, rng: np.random.Generator, tol: float
) -> np.ndarray:
    """Monte Carlo p-values of ``pairs`` from ``n`` sign vectors, through the systems' flipped
    sums (each system centred on the per-query mean of the systems used, which changes no
    difference and keeps the sums small)."""
    used = sorted({s for pr in pairs for s in pr})
    col = {s: i for i, s in enumerate(used)}
    x = values[used] - values[used].mean(axis=0)
    ia, ib = np.array([col[a] for a, _ in pairs]), np.array([col[b] for _, b in pairs])
    d = x[ia] - x[ib]
    obs = np.abs(d.sum(axis=1))
    slack = tol * np.maximum(np.abs(d).sum(axis=1), 1.0) + 1e-12 * np.abs(x).sum(axis=1).max()
    hits = np.zeros(len(pairs), dtype=np.int64)
    reach = (obs - slack)[:, None]
    for signs in _sign_blocks(n, values.shape[1], rng):
        sums = x @ signs.T  # [systems, block]
        hits += np.count_nonzero(np.abs(sums[ia] - sums[ib]) >= reach, axis=1)
    return (1.0 + hits) / (n + 1.0)
