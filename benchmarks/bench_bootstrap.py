"""Benchmark: bootstrap CIs of 16 systems + all 120 paired differences vs scipy for one system.

Measured in one run (one process, same data):
  * scipy.stats.bootstrap(method="percentile", vectorized=True) for ONE system;
  * adaptlab.stats.bootstrap_ci (all systems) + adaptlab.stats.paired_bootstrap (all pairs);
and their ratio (goal: <= 0.25). Defaults: 16 systems x 100,000 queries x 10,000 resamples of
nDCG@10 values with a single gold document.

Data: query difficulty d_q ~ N(0, 1), system skill s_j evenly spaced in [-0.5, 1.0], latent
z = s_j - d_q + noise * e (e ~ N(0, 1)); the gold document's rank is 1 when z > 0.3, then
2..10 as z crosses lower thresholds, and missed (nDCG@10 = 0) below -1.25; nDCG@10 is
1 / log2(rank + 1). With noise 0.8 the systems' mean nDCG@10 runs from ~0.47 to ~0.83 and
neighbouring systems' per-query values correlate at ~0.5 (typical of related retrievers).

Both sides use wall-clock time (perf_counter) and CPU time (process_time). scipy runs with
``batch`` resamples per vectorised call (default 500: its default, all 10,000 at once, needs
~16 GB for 100,000 queries); ours runs with --n-jobs threads (default: all available CPUs).

    python benchmarks/bench_bootstrap.py                         # full size (scipy takes ~7 s+)
    python benchmarks/bench_bootstrap.py --queries 5000 --resamples 1000 --repeat 1   # quick
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import numpy as np

_THRESHOLDS = (0.3, -0.05, -0.3, -0.5, -0.65, -0.8, -0.92, -1.05, -1.15, -1.25)


def make_ndcg10(n_queries: int, n_systems: int, *, seed: int = 0, noise: float = 0.8) -> np.ndarray:
    """Per-query nDCG@10 ``[n_systems, n_queries]`` of correlated systems (single gold doc)."""
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(size=n_queries)
    skill = np.linspace(-0.5, 1.0, n_systems)
    z = skill[:, None] - difficulty[None, :] + noise * rng.normal(size=(n_systems, n_queries))
    rank = np.zeros(z.shape, np.int64)  # 0 = missed
    for r, t in reversed(list(enumerate(_THRESHOLDS, start=1))):
        rank[z > t] = r
    return np.where(rank > 0, 1.0 / np.log2(np.maximum(rank, 1) + 1.0), 0.0)


def _timed(fn):  # type: ignore[no-untyped-def]
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def describe(values: np.ndarray) -> str:
    from adaptlab.stats import _kernels

    means = values.mean(axis=1)
    corr = np.corrcoef(values)
    iu = np.triu_indices(values.shape[0], 1)
    ties = [(values[a] == values[b]).mean() for a, b in zip(*iu)]
    cats = [_kernels.categories(r) for r in values]
    kpair = [_kernels.difference_categories(cats[a], cats[b])[0].size for a, b in zip(*iu)]
    joint = _kernels.joint_categories(cats, values)
    g = joint[1].size if joint is not None else -1
    return (
        f"data: {values.shape[0]} systems x {values.shape[1]} queries of nDCG@10; "
        f"mean nDCG@10 {means.min():.3f}..{means.max():.3f}; pairwise correlation "
        f"{corr[iu].min():.2f}..{corr[iu].max():.2f} (mean {corr[iu].mean():.2f}); "
        f"tied queries per pair {min(ties):.2f}..{max(ties):.2f}; distinct values per system "
        f"{min(c.size for c in cats)}..{max(c.size for c in cats)}; distinct differences per "
        f"pair {min(kpair)}..{max(kpair)}; distinct joint tuples of all systems G = {g}"
    )


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=100_000)
    ap.add_argument("--systems", type=int, default=16)
    ap.add_argument("--resamples", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--noise", type=float, default=0.8)
    ap.add_argument("--repeat", type=int, default=3, help="timed runs of ours (best is used)")
    ap.add_argument("--scipy-repeat", type=int, default=1)
    ap.add_argument("--scipy-batch", type=int, default=500,
                    help="scipy resamples per vectorised call (0: all at once)")
    ap.add_argument("--n-jobs", type=int, default=None, help="threads for ours (default: all)")
    ap.add_argument("--method", default="auto", choices=("auto", "index", "multinomial"))
    ap.add_argument("--skip-scipy", action="store_true")
    args = ap.parse_args(argv)

    import scipy.stats

    from adaptlab.stats import bootstrap_ci, paired_bootstrap

    values = make_ndcg10(args.queries, args.systems, seed=args.seed, noise=args.noise)
    n_pairs = args.systems * (args.systems - 1) // 2
    print(describe(values))
    print(f"resamples: {args.resamples} of {args.queries} queries (with replacement)")

    def ours():  # type: ignore[no-untyped-def]
        ci = bootstrap_ci(values, n_resamples=args.resamples, seed=args.seed,
                          method=args.method, n_jobs=args.n_jobs)
        pd = paired_bootstrap(values, n_resamples=args.resamples, seed=args.seed,
                              method=args.method, n_jobs=args.n_jobs)
        return ci, pd

    def scipy_one():  # type: ignore[no-untyped-def]
        return scipy.stats.bootstrap(
            (values[0],), np.mean, n_resamples=args.resamples, vectorized=True,
            method="percentile", batch=args.scipy_batch or None,
            random_state=np.random.default_rng(args.seed),
        )

    # warm-up (imports, first-call costs) on a tiny problem, not timed
    bootstrap_ci(values[:2, :500], n_resamples=50)
    paired_bootstrap(values[:2, :500], n_resamples=50)

    runs = []
    for _ in range(max(1, args.repeat)):
        (ci, pd), w, c = _timed(ours)
        runs.append((w, c))
        print(f"ours: {args.systems} CIs ({ci.method}) + {n_pairs} paired CIs "
              f"({pd[0].method}): wall {w:.3f} s, cpu {c:.3f} s")
    res: dict[str, float] = {"ours_wall": min(r[0] for r in runs),
                             "ours_cpu": min(r[1] for r in runs)}
    if args.skip_scipy:
        return res

    sruns = []
    for _ in range(max(1, args.scipy_repeat)):
        sres, w, c = _timed(scipy_one)
        sruns.append((w, c))
        print(f"scipy.stats.bootstrap, 1 system, batch={args.scipy_batch or None}: "
              f"wall {w:.3f} s, cpu {c:.3f} s")
    res["scipy_wall"] = min(r[0] for r in sruns)
    res["scipy_cpu"] = min(r[1] for r in sruns)
    res["ratio_wall"] = res["ours_wall"] / res["scipy_wall"]
    res["ratio_cpu"] = res["ours_cpu"] / res["scipy_cpu"]

    # the same CI within Monte Carlo error (two independent sets of resamples)
    lo, hi = sres.confidence_interval
    se = float(sres.standard_error)
    print(f"system 0 CI: scipy [{lo:.5f}, {hi:.5f}], ours [{ci.ci_low[0]:.5f}, "
          f"{ci.ci_high[0]:.5f}]; bootstrap SE {se:.2e}; endpoint differences "
          f"{abs(lo - ci.ci_low[0]) / se:.2f} and {abs(hi - ci.ci_high[0]) / se:.2f} SE")
    goal = "met" if res["ratio_wall"] <= 0.25 else "NOT met"
    print(f"ratio (ours all {args.systems + n_pairs} CIs / scipy one CI): wall "
          f"{res['ratio_wall']:.3f}, cpu {res['ratio_cpu']:.3f}  [goal <= 0.25: {goal}]")
    return res


if __name__ == "__main__":
    main(sys.argv[1:])
