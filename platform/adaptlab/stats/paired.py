"""Paired bootstrap comparisons of systems on the same queries: :func:`paired_bootstrap`.

Each resample draws one set of queries for both systems of a pair, so the resampled mean
differences ``D*`` are paired; the CI of the mean difference comes from them (studentized,
percentile or BCa) and the p-value from the paired sign-flip randomization test
(:mod:`adaptlab.stats.signflip`) or, when asked for, from ``D*`` itself. A pair takes the index or
the exact multinomial path from its own two rows (:mod:`adaptlab.stats.bootstrap`), so ``(b, a)``
gets exactly the negated differences and interval of ``(a, b)``.
"""

from __future__ import annotations

import hashlib
import numbers
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

import numpy as np

from adaptlab.errors import ConfigError
from adaptlab.stats import _kernels as K
from adaptlab.stats._multinomial import multinomial_sums
from adaptlab.stats.backend import get_xp
from adaptlab.stats.intervals import bca_interval, measure_interval, studentized_interval
from adaptlab.stats.options import PairedOptions, Resampling, Unpack, as_values, resampling
from adaptlab.stats.pairs import compared_pairs
from adaptlab.stats.pvalues import p_at_floor
from adaptlab.stats.resample import FLIP_KEY, PAIR_KEY, stream
from adaptlab.stats.settings import BootstrapConfig
from adaptlab.stats.signflip import family_sign_flip

__all__ = ["PairedDifference", "paired_bootstrap"]

_ZERO_TOL = 1e-10  # |D*| <= _ZERO_TOL * max|d| counts as an exact tie in the p-value

Pair = tuple[int, int]
_PairCats = dict[Pair, tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class PairedDifference:
    """Paired bootstrap comparison of system ``a`` against system ``b`` (difference ``a - b``).

    ``p_value`` is the two-sided paired randomization (sign-flip) test at every number of
    queries (:mod:`adaptlab.stats.signflip`; null: the per-query differences are symmetric about
    0), exact over all sign patterns (``test == "sign-flip-exact"``) or from ``p_draws`` random
    sign vectors (``test == "sign-flip"``); only when asked for (``test="bootstrap"`` in
    :func:`paired_bootstrap`) the two-sided bootstrap p-value
    ``min(1, 2 * min(1 + #{D* <= 0}, 1 + #{D* >= 0}) / (m + 1))`` over the ``m`` resampled mean
    differences ``D*`` (``test == "bootstrap"``). ``p_draws``: the Monte Carlo draws behind
    ``p_value`` (sign vectors or resamples; 0 for an exact p-value); ``p_bound``: ``p_value`` is
    at its Monte Carlo floor, a bound (:func:`adaptlab.stats.pvalues.p_at_floor`).
    """

    a: str | int
    b: str | int
    diff: float
    boot_mean: float
    ci_low: float
    ci_high: float
    p_value: float
    method: str = ""
    n_resamples: int = 0
    sample_size: int = 0
    confidence: float = 0.95
    seed: int = 0
    interval: str = "percentile"
    test: str = "bootstrap"
    p_draws: int = 0

    @property
    def p_bound(self) -> bool:
        """``p_value`` is at the floor of its Monte Carlo test: the true p may be smaller."""
        return p_at_floor(self.p_value, self.test, self.p_draws)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "p_bound": self.p_bound}


class _Draws(NamedTuple):
    """Each pair's path and ``m`` resampled mean differences ``D*`` (with the resampled means of
    the squared differences when the interval is studentized, else an empty dict)."""

    paths: dict[Pair, str]
    d_star: dict[Pair, np.ndarray]
    d_sq: dict[Pair, np.ndarray]


class _Tested(NamedTuple):
    """The pairs' two-sided p-values, the test of each and its Monte Carlo draws (0: exact)."""

    p: list[float]
    test: list[str]
    draws: list[int]


def _pair_paths(arr: np.ndarray, pairs: list[Pair], plan: Resampling) -> tuple[dict[Pair, str], _PairCats]:
    """The path of each pair, chosen from that pair's own values (so a pair's resampled
    differences never depend on the other systems): ``"index"`` or ``"multinomial"`` as given,
    or for ``"auto"`` the cheaper of the index path of two systems and the exact multinomial
    draw over the pair's distinct differences (a cheap upper bound on their number skips
    building them when the multinomial path is far costlier); with the difference categories
    of the multinomial pairs."""
    method, m, l = plan.run.method, plan.m, plan.l
    if method == "index":
        return dict.fromkeys(pairs, "index"), {}
    n_q = arr.shape[1]
    cats = {s: K.categories(arr[s]) for s in sorted({x for p in pairs for x in p})}
    paths: dict[Pair, str] = {}
    pair_cats: _PairCats = {}
    idx_cost = K.index_cost(m, l, 2)
    for a, b in pairs:
        bound = min(cats[a].size * cats[b].size, n_q)
        if method == "auto" and K.multinomial_cost_bound(bound, m) >= 20 * idx_cost:
            paths[(a, b)] = "index"
            continue
        dv, dc = K.difference_categories(cats[a], cats[b])
        if method == "multinomial" or K.multinomial_cost(dc, l, m) < idx_cost:
            paths[(a, b)], pair_cats[(a, b)] = "multinomial", (dv, dc)
        else:
            paths[(a, b)] = "index"
    return paths, pair_cats


def _pair_key(x: np.ndarray, y: np.ndarray) -> tuple[bool, tuple[int, ...]]:
    """``(flip, key)`` of the pair of rows ``x - y``: its canonical orientation (``flip`` when
    ``y - x`` is canonical: the row with the smaller SHA-256 digest first) and a stream key from
    both rows' digests in that orientation. The pair's multinomial draw depends only on the two
    rows' values and the seed, and a reversed pair gets exactly the negated draw."""
    hx = hashlib.sha256(np.ascontiguousarray(x, dtype=np.float64).tobytes()).digest()
    hy = hashlib.sha256(np.ascontiguousarray(y, dtype=np.float64).tobytes()).digest()
    flip = hy < hx
    both = hashlib.sha256((hy + hx) if flip else (hx + hy)).digest()
    return flip, tuple(int.from_bytes(both[i : i + 4], "little") for i in range(0, 16, 4))


def _multinomial_pair(
    arr: np.ndarray, p: Pair, cats: tuple[np.ndarray, np.ndarray], plan: Resampling, squares: bool
) -> tuple[np.ndarray, np.ndarray | None]:
    """Resampled mean differences (and mean squared differences) of pair ``p`` drawn exactly over
    its distinct differences, in the pair's canonical orientation (:func:`_pair_key`), from the
    stream ``(seed, PAIR_KEY, key)``."""
    a, b = p
    flip, key = _pair_key(arr[a], arr[b])
    dv, dc = cats
    if flip:  # the canonical pair is b - a: its distinct differences, ascending
        dv, dc = -dv[::-1], dc[::-1]
    weights = dv[:, None] if not squares else np.c_[dv, dv**2]
    sums = multinomial_sums(dc, weights, plan.l, plan.m, stream(plan.seed, PAIR_KEY, *key)) / plan.l
    d = -sums[:, 0] if flip else sums[:, 0]
    return d + 0.0, (sums[:, 1] if squares else None)


def _index_differences(arr: np.ndarray, pairs: list[Pair], plan: Resampling, squares: bool) -> _Draws:
    """``D*`` of the index ``pairs``: each system's sums over the shared ``resample_indices(Q, m,
    l, seed)``, row by row (bit-identical whatever other systems are passed), ``D* = S_a / l -
    S_b / l`` (exactly the negation for ``(b, a)``); with ``squares``, the squared differences'
    means on the same resamples."""
    used = sorted({s for p in pairs for s in p})
    col = {s: i for i, s in enumerate(used)}
    rows = arr[used]
    if squares:
        rows = np.vstack([rows] + [(arr[a] - arr[b])[None, :] ** 2 for a, b in pairs])
    xp = get_xp(plan.run.backend)
    sums = K.index_sums(
        rows, sample_size=plan.l, n_resamples=plan.m, seed=plan.seed, xp=xp, n_jobs=plan.jobs, rowwise=True
    )
    means = sums / plan.l
    d_star = {(a, b): means[:, col[a]] - means[:, col[b]] for a, b in pairs}
    d_sq = {p: means[:, len(used) + i] for i, p in enumerate(pairs)} if squares else {}
    return _Draws(dict.fromkeys(pairs, "index"), d_star, d_sq)


def _draw_differences(arr: np.ndarray, pairs: list[Pair], plan: Resampling, squares: bool = False) -> _Draws:
    """The path of each pair (:func:`_pair_paths`) and its ``m`` resampled mean differences ``D*``
    along it (:func:`_index_differences`, :func:`_multinomial_pair`), with the means of their
    squares when ``squares``."""
    paths, pair_cats = _pair_paths(arr, pairs, plan)
    index_pairs = [p for p in pairs if paths[p] == "index"]
    drawn = _index_differences(arr, index_pairs, plan, squares) if index_pairs else _Draws({}, {}, {})
    d_star, d_sq = drawn.d_star, drawn.d_sq

    def one(p: Pair) -> None:
        d_star[p], sq = _multinomial_pair(arr, p, pair_cats[p], plan, squares)
        if sq is not None:
            d_sq[p] = sq

    K.run_parallel(one, [p for p in pairs if paths[p] == "multinomial"], plan.jobs)
    return _Draws(paths, d_star, d_sq)


def _difference_interval(
    d: np.ndarray, ds: np.ndarray, ds_sq: np.ndarray | None, plan: Resampling, interval: str
) -> tuple[float, float, str]:
    """CI of the mean of the per-query differences ``d`` from their resampled means ``ds`` (and
    of their squares ``ds_sq``) by ``interval`` (already resolved for differences: studentized,
    BCa or percentile); returns ``(low, high, interval used)``."""
    if interval == "bca":
        lo, hi = bca_interval(d, ds, plan.confidence)
        return lo, hi, "bca"
    if interval == "studentized":
        if ds_sq is None:  # the callers draw the squares whenever the interval is studentized
            raise ValueError("a studentized interval needs the resampled means of the squared differences")
        lo, hi = studentized_interval(d, ds, ds_sq, plan.l, plan.confidence)
        return lo, hi, "studentized"
    p_lo, p_hi = K.percentile_interval(ds, plan.confidence)
    return float(p_lo), float(p_hi), "percentile"


def _check_family(family_size: object, pairs: list[Pair]) -> int:
    """The family size the p-values are sized for: ``family_size``, default the number of pairs."""
    if family_size is None:
        return len(pairs)
    if isinstance(family_size, bool) or not isinstance(family_size, numbers.Integral) or int(family_size) < 1:
        raise ConfigError(f"family_size={family_size!r} must be a positive integer or None (the pairs compared)")
    return int(family_size)


def _pair_p_values(
    arr: np.ndarray, pairs: list[Pair], d_star: dict[Pair, np.ndarray], plan: Resampling, family: int
) -> _Tested:
    """Two-sided p-values of the pairs by ``plan.test``, the test of each and its Monte Carlo
    draws (0: exact): the sign-flip randomization test over all Q queries at every Q
    (:func:`~adaptlab.stats.signflip.family_sign_flip`: exact where it can count, else sign
    vectors from stream ``(seed, FLIP_KEY)``, shared by the pairs, as many as a family of
    ``family`` tests needs), or with ``test="bootstrap"`` the bootstrap p-value of each ``D*``."""
    if plan.test == "sign-flip":
        res = family_sign_flip(arr, pairs, plan.m, stream(plan.seed, FLIP_KEY), _ZERO_TOL, family_size=family)
        return _Tested(
            [float(p) for p in res.p],
            ["sign-flip-exact" if e else "sign-flip" for e in res.exact],
            [0 if e else res.n_vectors for e in res.exact],
        )
    out = []
    for a, b in pairs:
        scale = float(np.max(np.abs(arr[a] - arr[b])))
        out.append(float(K.two_sided_p_value(d_star[(a, b)], _ZERO_TOL * scale)))
    return _Tested(out, ["bootstrap"] * len(pairs), [plan.m] * len(pairs))


def _paired_results(
    arr: np.ndarray,
    pairs: list[Pair],
    names: list[str] | None,
    draws: _Draws,
    tested: _Tested,
    plan: Resampling,
    interval: str,
) -> list[PairedDifference]:
    """One :class:`PairedDifference` per pair ``(a, b)``, named by ``names`` when given: the
    observed mean difference, the CI of the resampled differences (:func:`_difference_interval`),
    its p-value, test and draws from ``tested`` (:func:`_pair_p_values`) and the settings."""
    point = arr.mean(axis=1)
    out = []
    for (a, b), p, test, n_draws in zip(pairs, *tested):
        ds = draws.d_star[(a, b)]
        lo, hi, how = _difference_interval(arr[a] - arr[b], ds, draws.d_sq.get((a, b)), plan, interval)
        out.append(
            PairedDifference(
                a=names[a] if names is not None else a,
                b=names[b] if names is not None else b,
                diff=float(point[a] - point[b]),
                boot_mean=float(ds.mean()),
                ci_low=float(lo),
                ci_high=float(hi),
                p_value=float(p),
                method=draws.paths[(a, b)],
                n_resamples=plan.m,
                sample_size=plan.l,
                confidence=plan.confidence,
                seed=plan.seed,
                interval=how,
                test=test,
                p_draws=n_draws,
            )
        )
    return out


def paired_bootstrap(
    values: Any,
    *,
    names: Sequence[str] | None = None,
    baseline: int | str | None = None,
    pairs: Sequence[tuple[int | str, int | str]] | None = None,
    config: BootstrapConfig | None = None,
    measure: object = None,
    family_size: int | None = None,
    **options: Unpack[PairedOptions],
) -> list[PairedDifference]:
    """Paired bootstrap of mean differences between systems evaluated on the same queries.

    Each resample draws one set of queries for both systems of a pair, so the difference is
    paired. ``diff`` is the observed mean difference, ``ci_low``/``ci_high`` the interval of the
    resampled differences ``D*`` (``"auto"``: studentized). The two-sided p-value of "no
    difference" is, at every number of queries, the paired sign-flip randomization test over all
    queries (Fisher 1935; Smucker, Allan and Carterette 2007; its null: the per-query differences
    are symmetric about 0): exact where the differences allow, else with sign vectors sized to the
    family (:class:`PairedDifference`, :mod:`adaptlab.stats.signflip`). With ``test="bootstrap"``
    it is the Monte Carlo bootstrap p-value (Davison and Hinkley 1997, chapter 4)

        p_value = min(1, 2 * min(1 + #{D* <= 0}, 1 + #{D* >= 0}) / (n_resamples + 1))

    which over-rejects at small Q. Resampled differences within 1e-10 * max|d| of 0 count as ties
    on both sides.

    Parameters
    ----------
    values : array-like
        ``[n_systems, n_queries]`` finite per-query values, the same query order in every row.
    names : sequence of str, optional
        System names, one per row (pairs then name systems by name).
    baseline : int or str, optional
        Compare every other system against it (``system - baseline``).
    pairs : sequence of (a, b), optional
        Exactly these pairs (names or indices; ``a - b``), e.g. a ColBERT against its own base.
        Without ``baseline`` or ``pairs``: every pair ``(i, j)``, ``i < j`` (``i - j``).
    config : BootstrapConfig, optional
        The settings as one value (``config.test`` included); or its fields as keyword options,
        not both, as in :func:`bootstrap_ci`.
    measure : str or Measure, optional
        The measure compared (recorded nowhere; differences get the same interval whatever it is).
    family_size : int, optional
        The number of tests the p-values' Monte Carlo resolution is sized for (default: this
        call's pairs); :func:`adaptlab.plan_sample_size` passes 1 (one test per simulated experiment).
    n_resamples, sample_size, seed, confidence, allow_oversampling, method, backend, n_jobs
        Keyword options as in :func:`bootstrap_ci`; ``method="multinomial"`` draws each pair's
        distinct per-query differences exactly (``PairedDifference.method`` is each pair's path).
    interval : str
        ``"auto"`` (studentized; percentile when ``sample_size`` < Q), ``"studentized"``,
        ``"percentile"`` or ``"bca"`` (p-values unchanged); ``"wilson"`` and ``"jeffreys"`` do
        not apply to differences, which get the ``"auto"`` interval
        (:func:`adaptlab.stats.intervals.measure_interval` with ``difference=True``).
    test : str
        ``"sign-flip"`` (default: the same test at every Q) or ``"bootstrap"`` (the bootstrap
        p-value, liberal at small Q; only when asked for).

    Returns
    -------
    list of PairedDifference
        One per pair: ``a``, ``b``, ``diff``, ``ci_low``, ``ci_high``, ``p_value`` and the settings.

    Examples
    --------
    >>> d = paired_bootstrap(
    ...     [[1, 1, 1, 0], [0, 1, 0, 0]], names=["ft", "base"], baseline="base", n_resamples=500, seed=0
    ... )
    >>> d[0].a, d[0].b, d[0].diff, bool(d[0].ci_low <= 0.5 <= d[0].ci_high), 0 < d[0].p_value <= 1
    ('ft', 'base', 0.5, True, True)
    """
    arr = as_values(values)
    names, compared = compared_pairs(arr, names, baseline, pairs)
    plan = resampling("paired_bootstrap", arr.shape[1], config, options, PairedOptions)
    family = _check_family(family_size, compared)
    used = measure_interval(plan.interval, measure, n_queries=arr.shape[1], sample_size=plan.l, difference=True)
    draws = _draw_differences(arr, compared, plan, squares=used == "studentized")
    tested = _pair_p_values(arr, compared, draws.d_star, plan, family)
    return _paired_results(arr, compared, names, draws, tested, plan, used)
