"""Benchmark: the paired sign-flip test at the shipped resolution (issue 29).

Two parts, in one run:

* **level**: families of 5 exchangeable systems (10 pairs; the null data of
  tests/stats/test_simulation_pvalues.py: a per-query difficulty shared by all systems, each
  system's outcome drawn independently given it), tested with the shipped
  ``adaptlab.stats.signflip.family_sign_flip`` at its default resolution (4,000 sign vectors for
  a family of 10, where the tests use 200 for time). Prints the single-test rejection rate of
  pair (0, 1) and Holm's family-wise error at alpha = 0.05 with the bound 0.05 + 3 Monte Carlo
  SE, for accuracy and nDCG-like values at Q = 30, 100, 500 and 1,000 (the same test at every
  query count: earlier versions switched to the bootstrap p-value at 1,000 queries).
* **null**: the test's null is the symmetry of the per-query differences, not equal means: two
  systems with equal means whose differences are skewed (0.9 on 10% of the queries, -0.1 on the
  rest) are rejected more often than alpha; printed at Q = 30 and 100.
* **cost**: ``paired_bootstrap`` on 12, 22 and 30 clearly different nDCG@10-like systems (all
  pairs), its time against the fixed 1,000-vector Monte Carlo of every pair's differences
  (``sign_flip_p_values``, the old test, timed on the same data in the same run), and how
  many pairs Holm finds significant with each.

    python -m benchmarks.bench_signflip                  # reps 2000 (several minutes on 2 cores)
    python -m benchmarks.bench_signflip --reps 300       # quick
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from adaptlab.stats import adjust_pvalues, paired_bootstrap, sign_flip_p_values
from adaptlab.stats.signflip import family_sign_flip

ALPHA = 0.05
SYSTEMS = 5
PAIRS = [(i, j) for i in range(SYSTEMS) for j in range(i + 1, SYSTEMS)]


def null_values(kind: str, q: int, rng: np.random.Generator) -> np.ndarray:
    """[SYSTEMS, q] per-query values of exchangeable systems."""
    p_q = rng.beta(4.0, 1.5, size=q)
    if kind == "accuracy":
        return (rng.random((SYSTEMS, q)) < p_q).astype(np.float64)
    rank = rng.geometric(p_q, size=(SYSTEMS, q))
    return np.where(rank <= 10, 1.0 / np.log2(rank + 1.0), 0.0)


def level(kind: str, q: int, reps: int, seed: int) -> tuple[float, float, float]:
    """(single-test rejection rate, Holm FWER, seconds) over ``reps`` null families."""
    rng = np.random.default_rng(seed)
    single = fwer = 0
    t0 = time.perf_counter()
    for _ in range(reps):
        p = family_sign_flip(null_values(kind, q, rng), PAIRS, 1000, rng).p
        single += p[0] <= ALPHA
        fwer += bool((adjust_pvalues(p, "holm") <= ALPHA).any())
    return single / reps, fwer / reps, time.perf_counter() - t0


def skewed_null(q: int, reps: int, seed: int) -> float:
    """Rejection rate at ``ALPHA`` of one pair with equal means and skewed differences
    (``d = 0.9`` with probability 0.1, else ``-0.1``)."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(reps):
        b = np.full(q, 0.1)
        a = (rng.random(q) < 0.1).astype(np.float64)
        hits += family_sign_flip(np.stack([a, b]), [(0, 1)], 1000, rng).p[0] <= ALPHA
    return hits / reps


def clearly_different(n_systems: int, q: int, seed: int) -> np.ndarray:
    """nDCG@10 of one gold document at a rank drawn from one uniform per query (common random
    numbers: better systems are never worse on a query)."""
    u = np.random.default_rng(seed).random(q)
    p = np.linspace(0.1, 0.9, n_systems)[:, None]
    rank = np.maximum(1.0, np.ceil(np.log(u[None, :]) / np.log1p(-p)))
    return np.where(rank <= 10, 1.0 / np.log2(rank + 1.0), 0.0)


def cost(n_systems: int, q: int) -> None:
    v = clearly_different(n_systems, q, seed=n_systems)
    t0 = time.perf_counter()
    out = paired_bootstrap(v, n_resamples=1000, seed=0)
    t_new = time.perf_counter() - t0
    pairs = [(i, j) for i in range(n_systems) for j in range(i + 1, n_systems)]
    t0 = time.perf_counter()
    old = sign_flip_p_values(np.stack([v[a] - v[b] for a, b in pairs]), 1000, np.random.default_rng(0))
    t_old = time.perf_counter() - t0
    sig_new = int((adjust_pvalues([d.p_value for d in out]) < ALPHA).sum())
    sig_old = int((adjust_pvalues(old) < ALPHA).sum())
    draws = max(d.p_draws for d in out)
    print(
        f"{n_systems} systems, Q = {q}, {len(pairs)} pairs: significant {sig_new} (shipped, {draws} vectors, "
        f"paired_bootstrap {t_new:.1f} s) vs {sig_old} (1,000 vectors, sign flips alone {t_old:.1f} s); "
        f"ratio {t_new / max(t_old, 1e-9):.1f}x"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000)
    args = ap.parse_args()
    bound = ALPHA + 3.0 * np.sqrt(ALPHA * (1 - ALPHA) / args.reps)
    for kind in ("accuracy", "ndcg"):
        for q in (30, 100, 500, 1000):
            single, fwer, secs = level(kind, q, args.reps, seed=100 + q)
            print(
                f"level {kind} Q = {q}: type I {single:.3f}, Holm FWER {fwer:.3f} (bound {bound:.3f}; "
                f"{'ok' if max(single, fwer) <= bound else 'ABOVE'}), {secs:.1f} s for {args.reps} families"
            )
    for q in (30, 100):
        print(
            f"null is symmetry: equal means, skewed differences, Q = {q}: rejected "
            f"{skewed_null(q, args.reps, seed=q):.3f} at alpha {ALPHA}"
        )
    for n_systems, q in ((12, 500), (22, 400), (30, 400)):
        cost(n_systems, q)


if __name__ == "__main__":
    main()
