"""Benchmark: FT training steps/s of the platform's own loop on the CPU and on a GPU, same config.

Each device runs ``adaptlab.adapt.train.ft.fine_tune_model`` (the kernel of ``train_ft``: the
seeded AdamW loop with MultipleNegativesRankingLoss) on a fresh copy of the same base model
(default: the packaged ``minilm``) with the same synthetic triplets, batch size, number of
hard negatives and max_seq_length, for ``--steps`` optimiser steps after ``--warmup-steps``
untimed ones (CUDA kernels, allocator). The loop's own clock (``LoopResult.seconds``) gives
steps/s; the loop reads each step's loss (one device sync per step), as in real training.

    python benchmarks/bench_train.py --steps 3                    # smoke: the CPU only (no GPU here)
    python benchmarks/bench_train.py --steps 50 --devices cpu,cuda --json

Prints steps/s and examples/s per device and the ratio cuda / cpu. ``--devices`` names the
devices (default ``cpu,cuda``; ``cuda`` is skipped with a message when torch sees no GPU).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "gpu"))
import devinfo  # noqa: E402  (benchmarks/gpu/devinfo.py)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_embed import make_passages  # noqa: E402


def make_triplets(n: int, negatives: int, *, seed: int = 0, words: tuple[int, int] = (40, 80)
                  ) -> list[tuple[str, str, tuple[str, ...]]]:
    """``n`` synthetic (query, positive, negatives) triplets: 6-12-word queries, passages of
    ``words`` words."""
    queries = make_passages(n, seed=seed + 1, min_words=6, max_words=12)
    docs = make_passages(n * (1 + negatives), seed=seed + 2, min_words=words[0], max_words=words[1])
    return [(queries[i], docs[i], tuple(docs[n + i * negatives : n + (i + 1) * negatives]))
            for i in range(n)]


def main(argv: list[str] | None = None) -> dict[str, object]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="minilm", help="base model reference (default minilm)")
    ap.add_argument("--steps", type=int, default=50, help="timed optimiser steps per device")
    ap.add_argument("--warmup-steps", type=int, default=2, help="untimed steps before (per device)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--negatives", type=int, default=3, help="hard negatives per triplet")
    ap.add_argument("--max-seq-length", type=int, default=128)
    ap.add_argument("--devices", default="cpu,cuda", help="comma-separated devices (default cpu,cuda)")
    ap.add_argument("--cpu-steps", type=int, default=None, help="timed steps on the CPU (default --steps)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="print the result as one JSON line at the end")
    ap.add_argument("--json-out", default=None, help="also write the JSON result to this file")
    a = ap.parse_args(argv)

    import torch

    from adaptlab.adapt.train.ft import FTConfig, fine_tune_model
    from adaptlab.adapt.train.loop import load_sentence_model
    from adaptlab.models import resolve_model

    ref = resolve_model(a.model)
    if ref.path is None:
        raise SystemExit(f"--model {a.model!r} has no local directory; training loads local weights only")
    total = max(a.steps, a.cpu_steps or 0) + a.warmup_steps
    rows = make_triplets(total * a.batch_size, a.negatives, seed=a.seed)
    res: dict[str, object] = {
        "bench": "train", "model": ref.model_id, "batch_size": a.batch_size, "negatives": a.negatives,
        "max_seq_length": a.max_seq_length, "steps": a.steps, "warmup_steps": a.warmup_steps,
        "torch": torch.__version__, "torch_threads": torch.get_num_threads(), "devices": {},
    }
    print(f"# FT: {ref.model_id}, batch {a.batch_size} triplets x (1 positive + {a.negatives} negatives), "
          f"max_seq_length {a.max_seq_length}, {a.warmup_steps} warm-up + timed steps; "
          f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads")

    def config(steps: int) -> FTConfig:
        return FTConfig(learning_rate=2e-5, epochs=1, batch_size=a.batch_size, num_negatives=a.negatives,
                        max_seq_length=a.max_seq_length, max_steps=steps, min_steps=0,
                        min_weight_change=0.0, warmup_ratio=0.0, query_prefix="", passage_prefix="")

    devices = [d.strip() for d in a.devices.split(",") if d.strip()]
    for dev in devices:
        if dev.startswith("cuda") and not torch.cuda.is_available():
            print(f"# {dev}: skipped, torch {torch.__version__} sees no CUDA GPU")
            res["devices"][dev] = {"skipped": "no CUDA GPU visible to torch"}  # type: ignore[index]
            continue
        steps = a.cpu_steps if (dev == "cpu" and a.cpu_steps) else a.steps
        model = load_sentence_model(ref.path, dev)
        if a.warmup_steps:
            fine_tune_model(model, rows[: a.warmup_steps * a.batch_size], config(a.warmup_steps),
                            seed=a.seed, prefixes=("", ""), device=dev, label="warm-up")
        devinfo.sync(dev)
        t = time.perf_counter()
        out = fine_tune_model(model, rows[a.warmup_steps * a.batch_size :][: steps * a.batch_size],
                              config(steps), seed=a.seed, prefixes=("", ""), device=dev, label="bench")
        devinfo.sync(dev)
        wall = time.perf_counter() - t
        sps = out.steps / out.seconds
        info = {"device_name": devinfo.device_name(dev), "steps": out.steps, "loop_s": out.seconds,
                "wall_s": wall, "steps_per_s": sps, "examples_per_s": sps * a.batch_size,
                "first_loss": out.losses[0], "last_loss": out.losses[-1]}
        if dev.startswith("cuda"):
            info["max_memory_gb"] = torch.cuda.max_memory_allocated(torch.device(dev)) / 1e9
        res["devices"][dev] = info  # type: ignore[index]
        print(f"{dev} ({info['device_name']}): {out.steps} steps in {out.seconds:.2f} s = {sps:.3f} steps/s "
              f"({sps * a.batch_size:.1f} triplets/s); loss {out.losses[0]:.3f} -> {out.losses[-1]:.3f}")
        del model
        if dev.startswith("cuda"):
            torch.cuda.empty_cache()
    devs = res["devices"]  # type: ignore[assignment]
    gpu = next((d for d in devs if d.startswith("cuda") and "steps_per_s" in devs[d]), None)
    if gpu and "steps_per_s" in devs.get("cpu", {}):
        res["ratio_gpu_over_cpu"] = devs[gpu]["steps_per_s"] / devs["cpu"]["steps_per_s"]
        print(f"ratio {gpu} / cpu steps/s: {res['ratio_gpu_over_cpu']:.1f}x")
    else:
        print("ratio cuda / cpu: not measured (needs both devices)")
    line = json.dumps(res)
    if a.json:
        print(line)
    if a.json_out:
        Path(a.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json_out).write_text(line + "\n", encoding="utf-8")
    return res


if __name__ == "__main__":
    main()
