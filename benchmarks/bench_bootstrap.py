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

    python -m benchmarks.bench_bootstrap                         # full size (scipy takes ~7 s+)
    python -m benchmarks.bench_bootstrap --queries 5000 --resamples 1000 --repeat 1   # quick
    python -m benchmarks.bench_bootstrap --backend both --method index --skip-scipy --json  # CuPy vs NumPy

``--backend numpy|cupy|auto|both`` (default auto: CuPy when usable, else NumPy) is passed to
``bootstrap_ci`` / ``paired_bootstrap``; ``both`` times NumPy and CuPy on the same data and seed in
one run (same resamples: the random numbers are drawn on the host) and prints the time ratio
and the largest difference of the CI endpoints. Only the index path's arithmetic runs on the
backend (``adaptlab.stats.backend``), so compare with ``--method index``; with ``auto`` the
engine may choose the multinomial path, which ignores the backend. Without CuPy or a GPU,
``cupy`` stops with the platform's message and ``both`` runs NumPy alone, saying why.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import numpy as np

from benchmarks.common import emit_json

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
    ap.add_argument("--scipy-batch", type=int, default=500, help="scipy resamples per vectorised call (0: all at once)")
    ap.add_argument("--n-jobs", type=int, default=None, help="threads for ours (default: all)")
    ap.add_argument("--method", default="auto", choices=("auto", "index", "multinomial"))
    ap.add_argument("--skip-scipy", action="store_true")
    ap.add_argument(
        "--backend",
        default="auto",
        choices=("auto", "numpy", "cupy", "both"),
        help="array backend of ours; both: NumPy and CuPy in one run",
    )
    ap.add_argument("--json", action="store_true", help="print the result as one JSON line at the end")
    ap.add_argument("--json-out", default=None, help="also write the JSON result to this file")
    args = ap.parse_args(argv)

    import scipy.stats

    from adaptlab.errors import ConfigError
    from adaptlab.stats import bootstrap_ci, paired_bootstrap
    from adaptlab.stats.backend import cupy_available, get_xp

    backends = ["numpy", "cupy"] if args.backend == "both" else [args.backend]
    skipped: dict[str, str] = {}
    if "cupy" in backends and not cupy_available():
        try:
            get_xp("cupy")
            why = "CuPy sees no CUDA device"
        except ConfigError as e:
            why = str(e)
        if args.backend == "cupy":
            raise SystemExit(f"--backend cupy: {why}")
        skipped["cupy"] = why
        backends.remove("cupy")
        print(f"# cupy skipped: {why}")

    values = make_ndcg10(args.queries, args.systems, seed=args.seed, noise=args.noise)
    n_pairs = args.systems * (args.systems - 1) // 2
    print(describe(values))
    print(f"resamples: {args.resamples} of {args.queries} queries (with replacement)")

    def ours(backend: str = "auto"):  # type: ignore[no-untyped-def]
        ci = bootstrap_ci(
            values, n_resamples=args.resamples, seed=args.seed, method=args.method, n_jobs=args.n_jobs, backend=backend
        )
        pd = paired_bootstrap(
            values, n_resamples=args.resamples, seed=args.seed, method=args.method, n_jobs=args.n_jobs, backend=backend
        )
        if backend != "numpy" and get_xp(backend) is not np:
            import cupy

            cupy.cuda.Device().synchronize()
        return ci, pd

    def scipy_one():  # type: ignore[no-untyped-def]
        return scipy.stats.bootstrap(
            (values[0],),
            np.mean,
            n_resamples=args.resamples,
            vectorized=True,
            method="percentile",
            batch=args.scipy_batch or None,
            random_state=np.random.default_rng(args.seed),
        )

    # warm-up (imports, first-call costs, CUDA context) on a tiny problem, not timed
    for b in backends:
        bootstrap_ci(values[:2, :500], n_resamples=50, backend=b, method=args.method)
        paired_bootstrap(values[:2, :500], n_resamples=50, backend=b, method=args.method)

    from benchmarks.gpu.devinfo import device_name

    res: dict = {
        "bench": "bootstrap",
        "queries": args.queries,
        "systems": args.systems,
        "resamples": args.resamples,
        "method": args.method,
        "backend": args.backend,
        "device_name": device_name("cuda" if "cupy" in backends else "cpu"),
        "skipped": skipped,
    }
    results = {}
    for b in backends:
        runs = []
        for _ in range(max(1, args.repeat)):
            (ci, pd), w, c = _timed(lambda b=b: ours(b))
            runs.append((w, c))
            print(
                f"ours [{b}]: {args.systems} CIs ({ci.method}) + {n_pairs} paired CIs "
                f"({pd[0].method}): wall {w:.3f} s, cpu {c:.3f} s"
            )
        results[b] = (ci, pd)
        res[f"ours_wall_{b}"] = min(r[0] for r in runs)
        res[f"ours_cpu_{b}"] = min(r[1] for r in runs)
        res[f"path_{b}"] = f"{ci.method}/{pd[0].method}"
    res["ours_wall"] = res[f"ours_wall_{backends[0]}"]
    res["ours_cpu"] = res[f"ours_cpu_{backends[0]}"]
    if "numpy" in results and "cupy" in results:
        (ci_n, pd_n), (ci_c, pd_c) = results["numpy"], results["cupy"]
        diff = max(
            float(np.max(np.abs(ci_n.ci_low - ci_c.ci_low))),
            float(np.max(np.abs(ci_n.ci_high - ci_c.ci_high))),
            max(abs(p.ci_low - q.ci_low) for p, q in zip(pd_n, pd_c)),
            max(abs(p.ci_high - q.ci_high) for p, q in zip(pd_n, pd_c)),
        )
        res["cupy_over_numpy_wall"] = res["ours_wall_cupy"] / res["ours_wall_numpy"]
        res["max_ci_endpoint_diff"] = diff
        note = "" if ci_n.method == "index" else "  (NOT the index path: the backend was not used; pass --method index)"
        print(
            f"cupy / numpy wall time: {res['cupy_over_numpy_wall']:.3f} (speed-up "
            f"{1 / res['cupy_over_numpy_wall']:.2f}x); largest CI endpoint difference {diff:.2e}{note}"
        )
    if args.skip_scipy:
        emit_json(res, args)
        return res

    sruns = []
    for _ in range(max(1, args.scipy_repeat)):
        sres, w, c = _timed(scipy_one)
        sruns.append((w, c))
        print(f"scipy.stats.bootstrap, 1 system, batch={args.scipy_batch or None}: wall {w:.3f} s, cpu {c:.3f} s")
    res["scipy_wall"] = min(r[0] for r in sruns)
    res["scipy_cpu"] = min(r[1] for r in sruns)
    res["ratio_wall"] = res["ours_wall"] / res["scipy_wall"]
    res["ratio_cpu"] = res["ours_cpu"] / res["scipy_cpu"]

    # the same CI within Monte Carlo error (two independent sets of resamples)
    lo, hi = sres.confidence_interval
    se = float(sres.standard_error)
    print(
        f"system 0 CI: scipy [{lo:.5f}, {hi:.5f}], ours [{ci.ci_low[0]:.5f}, "
        f"{ci.ci_high[0]:.5f}]; bootstrap SE {se:.2e}; endpoint differences "
        f"{abs(lo - ci.ci_low[0]) / se:.2f} and {abs(hi - ci.ci_high[0]) / se:.2f} SE"
    )
    goal = "met" if res["ratio_wall"] <= 0.25 else "NOT met"
    print(
        f"ratio (ours all {args.systems + n_pairs} CIs / scipy one CI): wall "
        f"{res['ratio_wall']:.3f}, cpu {res['ratio_cpu']:.3f}  [goal <= 0.25: {goal}]"
    )
    emit_json(res, args)
    return res


if __name__ == "__main__":
    main(sys.argv[1:])
