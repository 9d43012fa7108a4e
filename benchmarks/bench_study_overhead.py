"""What the embedded Ray costs a small study: the quickstart on Ray vs in-process, in one run.

    python -m benchmarks.bench_study_overhead                 # jobs/quickstart.toml, once each
    python -m benchmarks.bench_study_overhead --repeat 3      # median of 3 pairs
    python -m benchmarks.bench_study_overhead --study jobs/scifact.toml

Each side runs the whole study (``load_study`` + ``run_study``: Ray start where the study uses
Ray, dataset loading, embedding, search, bootstrap, the commit to a temporary results store) in
a fresh Python process, so both pay the same cold imports and model load and neither inherits the
other's warm caches; the wall time is measured inside that process around ``load_study`` +
``run_study`` (interpreter start-up and ``import adaptlab`` excluded, the same for both). One side
runs the study as written with ``[embedding] use_ray = true`` (the embedded local Ray); the other
with ``use_ray = false`` (the CLI's ``--no-ray``). Pairs alternate which side goes first.

Prints both wall times and the ratio ray / in-process (goal: <= 1.3). The machine may be shared:
repeat and read the median.
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
_GOAL = 1.3

_CHILD = r"""
import json, sys, time
try:
    from adaptlab.study import load_study, run_study
except ImportError:  # older layout
    from adaptlab.study.runner import run_study
    from adaptlab.study.schema import load_study

path, store, use_ray = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
t0 = time.perf_counter()
study = load_study(path)
if hasattr(study, "with_overrides"):
    study = study.with_overrides(use_ray=use_ray)
else:
    study.embedding.use_ray = use_ray
outcome = run_study(study, store=store)
seconds = time.perf_counter() - t0
values = {f"{d.dataset}/{s}/{m}": r.value for d in outcome.datasets for s, per in d.summary.systems.items()
          for m, r in per.items()}
print("RESULT " + json.dumps({"seconds": seconds, "values": values}))
"""


def _run_side(study: Path, use_ray: bool) -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("RAY_ADDRESS", None)  # always the embedded local Ray
    with tempfile.TemporaryDirectory(prefix="bench_study_") as tmp:
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, str(study), str(Path(tmp) / "store"), "1" if use_ray else "0"],
            capture_output=True,
            text=True,
            env=env,
            cwd=_ROOT,
        )
    if out.returncode != 0:
        sys.exit(f"the {'Ray' if use_ray else 'in-process'} run failed:\n{out.stderr[-3000:]}")
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT ") :])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--study", type=Path, default=_ROOT / "jobs" / "quickstart.toml")
    parser.add_argument("--repeat", type=int, default=1, help="pairs to measure (median reported)")
    args = parser.parse_args(argv)
    ratios, rays, locals_ = [], [], []
    for i in range(args.repeat):
        order = (True, False) if i % 2 == 0 else (False, True)
        res = {use_ray: _run_side(args.study, use_ray) for use_ray in order}
        ray_s, local_s = res[True]["seconds"], res[False]["seconds"]
        same = res[True]["values"].keys() == res[False]["values"].keys() and all(
            abs(res[True]["values"][k] - res[False]["values"][k]) <= 1e-9 for k in res[True]["values"]
        )
        rays.append(ray_s)
        locals_.append(local_s)
        ratios.append(ray_s / local_s)
        print(
            f"pair {i + 1} ({'ray' if order[0] else 'in-process'} first): ray {ray_s:.1f} s, "
            f"in-process {local_s:.1f} s, ratio {ray_s / local_s:.2f}, same figures: {same}",
            flush=True,
        )
    ratio = statistics.median(ratios)
    print(
        f"{args.study.name}: embedded Ray {statistics.median(rays):.1f} s, in-process (--no-ray) "
        f"{statistics.median(locals_):.1f} s, ratio {ratio:.2f} (goal <= {_GOAL}; median of {len(ratios)})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
