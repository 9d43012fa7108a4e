"""Exact multinomial resampling of a mean through Poisson inversion tables (private kernel).

A bootstrap resample of ``l`` queries drawn with replacement from ``Q`` queries whose values
fall into ``K`` categories (distinct values) is, for any statistic that is a sum over the
resample, determined by the category counts ``N ~ Multinomial(l, p)``, ``p_k = n_k / Q``.
This module draws ``N`` exactly and returns ``sum_k N_k w_k`` for given weight columns ``w``.

Algorithm (exact rejection sampling)
------------------------------------
Let ``L`` be the category with the largest ``p``. Propose ``N_k ~ Poisson(l p_k)``
independently for ``k != L`` and set ``N_L = l - sum_{k != L} N_k``. With ``f`` the
multinomial pmf and ``g`` the proposal pmf,

    f(N) / g(N) = (l! e^l / l^l) * Poisson(N_L; l p_L),

a constant times the Poisson pmf of the remainder, so accepting the proposal with probability
``Poisson(N_L; l p_L) / max_n Poisson(n; l p_L)`` (and rejecting ``N_L < 0``) yields draws from
``Multinomial(l, p)`` exactly. The acceptance rate is about ``sqrt(p_L)``.

Every proposal is drawn from a Poisson law with a *fixed* mean, so each category gets a
precomputed inversion table (CDF over ``mean +- 5 sd`` plus exact tail fallbacks) with a guide
table of ``2^m`` buckets: the top bits of a 32-bit uniform select a bucket, and only buckets
that contain a CDF boundary need the full 53-bit uniform and a comparison. Draws are exact up
to floating-point rounding of the CDF, like numpy's own samplers. Cost per resample: about
``K / sqrt(p_L)`` table look-ups (a few ns each), independent of ``l`` and of ``Q``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import gammaln, pdtr, pdtrc

__all__: list[str] = []

_N_SD = 5.0  # table window: mean +- _N_SD sd (exact fallback outside, probability ~6e-7)
_GUIDE = 8  # guide buckets per table entry (rounded up to a power of two, at most 2^16)
_CHUNK_ELEMS = 1 << 18  # proposals x categories per vectorised step
_MAX_BUCKETS = 1 << 22  # guide buckets of one table set (32 MiB); fewer per category beyond
_TWO37 = 2.0**37
_TWO_M53 = 2.0**-53


class _Boundaries(NamedTuple):
    """The CDF boundaries ``F_e < 1`` of all categories and the guide buckets they fall in."""

    entry: np.ndarray  # entry e of each boundary (per category a prefix of its entries)
    cat: np.ndarray  # its category
    bucket: np.ndarray  # floor(F_e * M_k): the bucket holding F_e (relative to the category)
    exact: np.ndarray  # F_e * M_k is an integer: F_e is a bucket edge, not inside a bucket


class _Runs(NamedTuple):
    """Runs of consecutive guide buckets with one answer entry (one np.repeat builds them)."""

    start: np.ndarray  # first global bucket of the run
    entry: np.ndarray  # entry answered in the run
    lengths: np.ndarray  # buckets in the run (0 for empty runs)


def _window(lam: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Table window ``lo..hi`` (``mean +- _N_SD sd``, widened) of each category, its entry
    count ``n_ent`` (the values plus the two tail markers) and the offset ``c_off`` of its first
    entry."""
    sd = np.sqrt(lam)
    lo = np.maximum(0.0, np.floor(lam - _N_SD * sd - 2.0)).astype(np.int64)
    hi = np.ceil(lam + _N_SD * sd + 8.0).astype(np.int64)
    width = hi - lo + 1
    n_ent = width + 2
    c_off = np.zeros(lam.size, np.int64)
    np.cumsum(n_ent[:-1], out=c_off[1:])
    return lo, hi, n_ent, c_off


def _entry_cdf(
    lam: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    n_ent: np.ndarray,
    c_off: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """``(cdf, evalue)`` of every entry: ``cdf[e] = P(X <= value_e)`` within the category (2.0,
    a sentinel, at the upper marker) and the entry's value as float (-1.0 at both markers)."""
    k_n = lam.size
    total = int(n_ent.sum())
    value = np.arange(total, dtype=np.int64) + np.repeat(lo - 1 - c_off, n_ent)
    upper_marker = c_off + n_ent - 1
    first_val = c_off + 1

    # log pmf(x) - log pmf(lo) = sum_{i=lo+1}^{x} log(lam / i); one running sum over all
    # categories (its magnitude stays small: each segment adds log pmf(hi) - log pmf(lo))
    step = np.repeat(np.log(lam), n_ent) - np.log(np.maximum(value, 1).astype(np.float64))
    step[c_off] = 0.0
    step[upper_marker] = 0.0
    step[first_val] = 0.0
    cs = np.cumsum(step)
    logp = cs - np.repeat(cs[first_val], n_ent)
    logp[c_off] = -np.inf
    logp[upper_marker] = -np.inf
    peak = np.maximum.reduceat(logp, first_val)
    pm = np.exp(logp - np.repeat(peak, n_ent))
    # renormalise: P(X < lo) + window + P(X > hi) = 1 (the anchor pmf(lo) is never needed)
    head = np.where(lo > 0, pdtr(np.maximum(lo - 1, 0), lam), 0.0)  # P(X < lo)
    tail_hi = pdtrc(hi, lam)  # P(X > hi)
    mass = np.add.reduceat(pm, first_val)
    pm *= np.repeat((1.0 - head - tail_hi) / mass, n_ent)
    pm[c_off] = head
    cs = np.cumsum(pm)  # running total <= K: absolute CDF error ~ K * 1e-16
    seg_start = np.zeros(k_n)
    seg_start[1:] = cs[c_off[1:] - 1]
    cdf = cs - np.repeat(seg_start, n_ent)
    cdf[upper_marker] = 2.0  # sentinel: u < 2 always
    evalue = value.astype(np.float64)
    evalue[c_off] = -1.0  # tail markers
    evalue[upper_marker] = -1.0
    return cdf, evalue


def _guide_bits(n_ent: np.ndarray) -> np.ndarray:
    """``m_k``: about ``_GUIDE`` buckets per entry, ``2^1..2^16``, coarser for all categories
    alike when their total would pass ``_MAX_BUCKETS``."""
    m_bits = np.clip(np.ceil(np.log2(_GUIDE * n_ent)).astype(np.int64), 1, 16)
    excess = int(np.sum(np.int64(1) << m_bits)) / _MAX_BUCKETS
    if excess > 1:  # many categories: coarser guides (more draws take the exact slow path)
        m_bits = np.maximum(m_bits - int(np.ceil(np.log2(excess))), 1)
    return m_bits


def _boundaries(cdf: np.ndarray, n_ent: np.ndarray, n_buck: np.ndarray) -> _Boundaries:
    """Every boundary ``F_e < 1`` with the bucket ``floor(F_e M_k)`` it lies in."""
    # boundaries F_e < 1 of each category form a prefix e = 0..n_b-1 (cdf is monotone)
    bnd = np.flatnonzero(cdf < 1.0)
    bcat = np.repeat(np.arange(n_ent.size), n_ent)[bnd]
    scaled = cdf[bnd] * n_buck[bcat]  # exact: power-of-two scaling
    b_idx = np.floor(scaled).astype(np.int64)
    return _Boundaries(bnd, bcat, b_idx, scaled == b_idx)


def _guide_runs(
    c_off: np.ndarray,
    g_off: np.ndarray,
    n_buck: np.ndarray,
    b: _Boundaries,
) -> _Runs:
    """Runs of buckets with a constant count of boundaries below them: per category one run
    answering its lower marker, then after each boundary ``F_e`` a run answering entry ``e + 1``
    from the first bucket whose lower edge is ``>= F_e``."""
    k_n = c_off.size
    g_total = int(n_buck.sum())
    first = np.minimum(b.bucket + (~b.exact), n_buck[b.cat])  # first bucket with edge >= F_e
    n_b = np.bincount(b.cat, minlength=k_n)
    r_off = np.zeros(k_n, np.int64)
    np.cumsum(n_b[:-1] + 1, out=r_off[1:])
    n_runs = int(n_b.sum()) + k_n
    run_start = np.empty(n_runs, np.int64)
    run_entry = np.empty(n_runs, np.int64)
    run_start[r_off] = g_off
    run_entry[r_off] = c_off
    slot = r_off[b.cat] + 1 + (b.entry - c_off[b.cat])
    run_start[slot] = g_off[b.cat] + first
    run_entry[slot] = b.entry + 1
    lengths = np.diff(run_start, append=g_total)
    return _Runs(run_start, run_entry, lengths)


def _flagged_buckets(
    evalue: np.ndarray,
    g_off: np.ndarray,
    b: _Boundaries,
    runs: _Runs,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(fb, n_in, e0)``, sorted by global bucket ``fb``: the buckets that need the 53-bit
    uniform, their count of boundaries strictly inside, and the entry answered below the first."""
    # flagged buckets: a boundary strictly inside (ins_b is sorted: group by bucket), or a
    # tail marker as the answer (rare: a marker's mass, <~1e-6, is below a bucket's 1/M)
    ins = np.flatnonzero(~b.exact)
    ins_b = g_off[b.cat[ins]] + b.bucket[ins]
    starts = np.flatnonzero(np.diff(ins_b, prepend=-1))
    fb = ins_b[starts]
    n_in = np.diff(starts, append=ins.size)
    e0 = b.entry[ins[starts]]  # entry answered below the first inside boundary
    mrun = np.flatnonzero((evalue[runs.entry] < 0) & (runs.lengths > 0))
    if mrun.size:
        m_len = runs.lengths[mrun]
        m_b = np.repeat(runs.start[mrun] - np.cumsum(m_len) + m_len, m_len)
        m_b += np.arange(m_b.size)
        m_e = np.repeat(runs.entry[mrun], m_len)
        at = np.minimum(np.searchsorted(fb, m_b), max(fb.size - 1, 0))
        new = (fb[at] != m_b) if fb.size else np.ones(m_b.size, bool)
        if new.any():  # marker buckets without an inside boundary (not seen in practice)
            fb = np.concatenate((fb, m_b[new]))
            n_in = np.concatenate((n_in, np.zeros(int(new.sum()), np.int64)))
            e0 = np.concatenate((e0, m_e[new]))
            order = np.argsort(fb, kind="stable")
            fb, n_in, e0 = fb[order], n_in[order], e0[order]
    return fb, n_in, e0


class PoissonTables:
    """Inversion tables for independent ``Poisson(lam_k)`` variables, ``k = 0..K-1``.

    Entries per category ``k``: ``[X < lo_k]``, the values ``lo_k..hi_k``, ``[X > hi_k]``, with
    ``cdf[e] = P(X <= value_e)``; a uniform ``u`` maps to the entry ``e`` with
    ``cdf[e-1] <= u < cdf[e]``. The top 16 bits of ``u`` pick one of ``M_k = 2^m_k`` guide
    buckets. A bucket without a CDF boundary inside gives the answer directly; a bucket with one
    boundary ``F`` gives ``value + (u >= F)`` after 37 more random bits complete ``u`` to 53
    bits; buckets with several boundaries or a tail marker take an exact slow path.
    """

    def __init__(self, lam: np.ndarray) -> None:
        lam = np.asarray(lam, dtype=np.float64)
        if lam.ndim != 1 or lam.size == 0 or not np.all(lam > 0) or not np.all(np.isfinite(lam)):
            raise ValueError("PoissonTables needs a non-empty 1-D array of positive finite means")
        lo, hi, n_ent, c_off = _window(lam)
        cdf, evalue = _entry_cdf(lam, lo, hi, n_ent, c_off)
        total = cdf.size

        # guide buckets: bucket j of category k covers u in [j/M_k, (j+1)/M_k)
        m_bits = _guide_bits(n_ent)
        n_buck = np.int64(1) << m_bits
        g_off = np.zeros(lam.size, np.int64)
        np.cumsum(n_buck[:-1], out=g_off[1:])
        g_total = int(n_buck.sum())
        bnd = _boundaries(cdf, n_ent, n_buck)
        runs = _guide_runs(c_off, g_off, n_buck, bnd)
        gval = np.repeat(evalue[runs.entry], runs.lengths)
        fb, n_in, e0 = _flagged_buckets(evalue, g_off, bnd, runs)
        low_val = evalue[e0]
        high_val = evalue[np.minimum(e0 + 1, total - 1)]
        single = (n_in == 1) & (low_val >= 0) & (high_val >= 0)
        gval[fb] = -1.0 - np.arange(fb.size, dtype=np.float64)

        self.lam = lam
        self.lo = lo
        self.hi = hi
        self.size = lam.size
        self.n_entries = total
        self.n_buckets = g_total
        self._cdf = cdf
        self._evalue = evalue
        self._c_off = c_off
        self._g_off = g_off.reshape(-1, 1)
        self._shift = (16 - m_bits).astype(np.uint16).reshape(-1, 1)
        self._gval = gval
        self._f_low = np.where(single, low_val, -1.0)  # answer when u < F (single buckets)
        self._f_cdf = np.where(single, cdf[np.minimum(e0, total - 1)], 2.0)  # that boundary F
        self._f_single = single
        self._f_e0 = e0
        self._f_nin = n_in
        self._f_cat = np.searchsorted(g_off, fb, "right") - 1
        self._n_buck = n_buck

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Draw ``[K, n]`` float64 counts; column ``b`` holds independent Poisson(lam) draws."""
        k_n = self.size
        raw = rng.bit_generator.random_raw((k_n * n + 3) // 4)
        r16 = raw.view(np.uint16)[: k_n * n].reshape(k_n, n)
        j = np.add(r16 >> self._shift, self._g_off, dtype=np.intp)
        out = np.take(self._gval, j)
        flat = out.reshape(-1)
        amb = np.flatnonzero(flat < 0)
        if amb.size:
            flat[amb] = self._resolve(rng, flat[amb], r16.reshape(-1)[amb])
        return out

    def _resolve(self, rng: np.random.Generator, code: np.ndarray, r16: np.ndarray) -> np.ndarray:
        """Exact answers for draws in flagged buckets (``code = -1 - flagged index``)."""
        fi = (-1.0 - code).astype(np.intp)
        fresh = rng.bit_generator.random_raw(fi.size) >> np.uint64(27)  # 37 fresh bits
        u = (r16 * _TWO37 + fresh) * _TWO_M53  # 53-bit uniform with the bucket's top bits
        val = np.take(self._f_low, fi) + (np.take(self._f_cdf, fi) <= u)
        slow = np.flatnonzero(~np.take(self._f_single, fi))
        if slow.size:  # several boundaries in the bucket, or a tail marker: bisection
            fs, us = fi[slow], u[slow]
            e0 = self._f_e0[fs]
            lo = np.zeros(slow.size, np.int64)  # count of inside boundaries <= u
            hi = self._f_nin[fs].astype(np.int64)
            cdf = self._cdf
            act = np.flatnonzero(lo < hi)
            while act.size:
                mid = (lo[act] + hi[act]) // 2
                le = cdf[e0[act] + mid] <= us[act]
                lo[act] = np.where(le, mid + 1, lo[act])
                hi[act] = np.where(le, hi[act], mid)
                act = act[lo[act] < hi[act]]
            vs = self._evalue[e0 + lo]
            for t in np.flatnonzero(vs < 0):  # outside the table window (probability ~6e-7)
                vs[t] = self._invert(int(self._f_cat[fs[t]]), float(us[t]))
            val[slow] = vs
        return val

    def _invert(self, k: int, u: float) -> float:
        """Exact inversion of ``u`` for category ``k`` by binary search (slow path)."""
        a = int(self._c_off[k])
        b = a + int(self.hi[k] - self.lo[k]) + 2  # the sentinel entry
        e = a + int(np.searchsorted(self._cdf[a : b + 1], u, side="right"))
        if e == a:
            return _poisson_tail(u, float(self.lam[k]), int(self.lo[k]), int(self.hi[k]), upper=False)
        if e == b:
            return _poisson_tail(u, float(self.lam[k]), int(self.lo[k]), int(self.hi[k]), upper=True)
        return float(self._evalue[e])


def _poisson_tail(u: float, lam: float, lo: int, hi: int, *, upper: bool) -> float:
    """Smallest x with u < P(X <= x) outside the table window (rare; exact, scalar)."""
    if upper:  # u >= F(hi): walk up using the survival function for accuracy
        x = hi + 1
        while pdtrc(x, lam) >= 1.0 - u and x < hi + 10_000_000:
            x += 1
        return float(x)
    x = lo - 1  # u < F(lo - 1): walk down
    while x > 0 and u < pdtr(x - 1, lam):
        x -= 1
    return float(x)


def multinomial_sums(
    counts: np.ndarray,
    weights: np.ndarray,
    sample_size: int,
    n_resamples: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """``[n_resamples, m]`` sums ``sum_k N_k weights[k]`` with ``N ~ Multinomial(l, counts/Q)``.

    ``counts``: ``[K]`` positive category sizes (queries per distinct value);
    ``weights``: ``[K, m]`` float64 contributions of one draw of category ``k``.
    """
    counts = np.asarray(counts, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    l = int(sample_size)
    m = weights.shape[1]
    p = counts / counts.sum()
    big = int(np.argmax(p))
    if p.size == 1:
        return np.broadcast_to(l * weights[0], (n_resamples, m)).copy()
    small = np.flatnonzero(np.arange(p.size) != big)
    tables = PoissonTables(l * p[small])
    # one GEMM gives the weighted sums and (last row) the proposal totals, exactly for integers
    w2 = np.ascontiguousarray(np.vstack([weights[small].T, np.ones((1, small.size))]))
    w_big = weights[big]
    lam_l = l * p[big]
    mode = np.floor(lam_l)
    log_lam = np.log(lam_l)
    g_mode = gammaln(mode + 1.0)
    out = np.empty((n_resamples, m), np.float64)
    done = 0
    acc_rate = max(np.sqrt(p[big]), 0.05)
    per_step = max(64, _CHUNK_ELEMS // small.size)
    while done < n_resamples:
        want = n_resamples - done
        n_prop = int(min(per_step, np.ceil(want / acc_rate * 1.05) + 8))
        sw = w2 @ tables.sample(rng, n_prop)  # [m + 1, n_prop]
        rest = l - sw[m]  # remainder count N_L of each proposal
        ok = rest >= 0
        log_ratio = np.full(n_prop, -np.inf)
        r_ok = rest[ok]
        log_ratio[ok] = (r_ok - mode) * log_lam - gammaln(r_ok + 1.0) + g_mode
        accept = np.flatnonzero(np.log(rng.random(n_prop)) < log_ratio)[:want]
        if accept.size:
            sums = sw[:m, accept].T
            sums += rest[accept, None] * w_big[None, :]
            out[done : done + accept.size] = sums
            done += accept.size
    return out
