"""What the shared embedding cache saves: the quickstart into a fresh store, cold vs warm cache.

    python -m benchmarks.bench_cache                      # jobs/quickstart.toml as written (Ray)
    python -m benchmarks.bench_cache --no-ray             # in-process embedding
    python -m benchmarks.bench_cache --study jobs/scifact.toml

Both runs use one new, empty cache folder (``ADAPTLAB_EMBEDDING_CACHE`` pointed at a temporary
folder: the user's cache is neither read nor filled) and each writes into its own new temporary
results store. The first run finds the cache empty (cold) and fills it; the second, into another
fresh store, finds every matrix there (warm). Each run is a fresh Python process (the same cold
imports for both); the wall time is measured inside it around ``load_study`` + ``run_study``, and
the time spent embedding (the calls that missed the cache) is measured around the embedding call.

Prints the cold and warm wall times, the texts each run embedded (warm: 0), the embedding
seconds, the ratio warm / cold, and whether the two stores' metric values are equal. The machine
may be shared: repeat and read the median (``--repeat``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import json, sys, time
from adaptlab.embedding import cache as cache_mod
from adaptlab.study import load_study, run_study

path, store, use_ray = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
spent = {"texts": 0, "seconds": 0.0}
real = cache_mod.embed_texts

def counting(texts, *args, **kwargs):
    t0 = time.perf_counter()
    try:
        return real(texts, *args, **kwargs)
    finally:
        spent["texts"] += len(texts)
        spent["seconds"] += time.perf_counter() - t0

cache_mod.embed_texts = counting
t0 = time.perf_counter()
study = load_study(path).with_overrides(use_ray=use_ray)
outcome = run_study(study, store=store)
seconds = time.perf_counter() - t0
values = {f"{d.dataset}/{s}/{m}": r.value for d in outcome.datasets for s, per in d.summary.systems.items()
          for m, r in per.items()}
print("RESULT " + json.dumps({"seconds": seconds, "embedded": spent, "values": values}))
"""


def _run(study: Path, cache: Path, store: Path, use_ray: bool) -> dict:
    """One study run in a fresh process with the embedding cache at ``cache``."""
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "ADAPTLAB_EMBEDDING_CACHE": str(cache),
    }
    env.pop("RAY_ADDRESS", None)  # always the embedded local Ray
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(study), str(store), "1" if use_ray else "0"],
        capture_output=True,
        text=True,
        env=env,
        cwd=_ROOT,
        timeout=3600,
    )
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    if out.returncode != 0 or not lines:
        raise SystemExit(f"study run failed (status {out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT ") :])


def _pair(study: Path, use_ray: bool) -> tuple[dict, dict]:
    """A cold and a warm run sharing one new cache, each into its own new store."""
    with tempfile.TemporaryDirectory(prefix="bench_cache_") as tmp:
        cache = Path(tmp) / "cache"
        cold = _run(study, cache, Path(tmp) / "store-cold", use_ray)
        warm = _run(study, cache, Path(tmp) / "store-warm", use_ray)
    return cold, warm


def main(argv: list[str] | None = None) -> int:
    """Run ``--repeat`` cold/warm pairs and print the times and the ratio."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--study", type=Path, default=_ROOT / "jobs" / "quickstart.toml")
    ap.add_argument("--no-ray", action="store_true", help="embed in-process (the study's use_ray = false)")
    ap.add_argument("--repeat", type=int, default=1, help="cold/warm pairs (the median is printed)")
    args = ap.parse_args(argv)
    pairs = [_pair(args.study, not args.no_ray) for _ in range(max(1, args.repeat))]
    cold = statistics.median(c["seconds"] for c, _ in pairs)
    warm = statistics.median(w["seconds"] for _, w in pairs)
    c0, w0 = pairs[0]
    print(
        f"study: {args.study.name} ({'in-process' if args.no_ray else 'Ray'}), {len(pairs)} pair(s), "
        "each run in a fresh process into a fresh store, one new cache per pair"
    )
    print(f"cold cache: {cold:8.2f} s   embedded {c0['embedded']['texts']} texts in {c0['embedded']['seconds']:.2f} s")
    print(f"warm cache: {warm:8.2f} s   embedded {w0['embedded']['texts']} texts in {w0['embedded']['seconds']:.2f} s")
    print(f"ratio warm / cold: {warm / cold:.2f} (cold / warm {cold / warm:.2f}x)")
    same = all(c["values"] == w["values"] for c, w in pairs)
    print(f"metric values identical in both stores: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
