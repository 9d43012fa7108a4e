"""Ray Data embedding pipeline vs plain ``SentenceTransformer.encode``, in one run.

    python -m benchmarks.bench_embed                 # 20,000 passages, all-MiniLM-L6-v2
    python -m benchmarks.bench_embed --n 500         # smoke run
    python -m benchmarks.bench_embed --device cuda --dtype fp16 --texts sentences --warmup --json

``--texts passages`` (default) are ~256-token passages (the model's max_seq_length);
``--texts sentences`` are short sentences (8-20 words). ``--dtype fp16|bf16`` loads the weights in
that dtype on both sides the same way (``model_kwargs={"dtype": ...}`` of sentence-transformers;
the Ray actors get it through the ``EncoderSpec`` option ``model_kwargs``). ``--warmup`` runs
both sides once on a few hundred texts before the clock (the Ray pool then is warm: no actor
start-up or model load in the timed call). ``--device`` (auto: cuda when torch sees a GPU)
applies to both sides. The device's name is printed and recorded in the JSON.

Both sides embed the same synthetic passages (30-60 words each, seeded) with the same
model and batch size. The plain side is ``SentenceTransformer.encode`` in this process with
torch's default threads (the model is loaded before the clock starts). The Ray side is one
``adaptlab.embedding.embed_texts`` call on an already started local Ray: it includes the
actors' start-up and model load, the transfer of texts and embeddings through the object
store and the reassembly by row id. Ray's own start-up is reported separately.

Prints the wall times and texts/s of both sides, the time ratio ray / plain (goal: <= 1.15),
the throughput ratio ray / plain (issue 10, on a GPU: >= 0.9) and the largest absolute
difference between the two sets of embeddings. ``--repeat R`` measures R pairs (plain first
in odd, Ray first in even pairs) and reports the median ratio (the machine may be shared).

The comparison of embedding backends and precisions is ``python -m benchmarks.bench_backends``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

from benchmarks.common import emit_json, make_texts
from benchmarks.gpu import devinfo

DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def dtype_model_kwargs(dtype: str) -> dict[str, str]:
    """``model_kwargs`` for transformers' from_pretrained that load the weights in ``dtype``
    (``dtype=`` from transformers 4.56 on, ``torch_dtype=`` before). Empty for fp32."""
    if dtype == "fp32":
        return {}
    import transformers

    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    key = "dtype" if (major, minor) >= (4, 56) else "torch_dtype"
    return {key: DTYPES[dtype]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20_000, help="number of texts (default 20000)")
    ap.add_argument(
        "--texts",
        default="passages",
        choices=("passages", "sentences", "short-passages"),
        help="passages: ~256 tokens; sentences: 8-20 words; short-passages: 30-60 words",
    )
    ap.add_argument("--device", default="auto", help="auto (cuda if available), cpu, cuda, cuda:N")
    ap.add_argument("--dtype", default="fp32", choices=tuple(DTYPES), help="weights' dtype, both sides")
    ap.add_argument(
        "--warmup", action="store_true", help="run both sides once on a few texts first (warm Ray pool, CUDA kernels)"
    )
    ap.add_argument("--plain-only", action="store_true", help="skip the Ray side (e.g. no ray here)")
    ap.add_argument("--json", action="store_true", help="print the result as one JSON line at the end")
    ap.add_argument("--json-out", default=None, help="also write the JSON result to this file")
    ap.add_argument("--model", default="minilm", help="model reference (default: minilm)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--num-actors", type=int, default=None, help="default: cores // torch threads")
    ap.add_argument("--torch-threads", type=int, default=None, help="per actor (default 1)")
    ap.add_argument("--block-size", type=int, default=None, help="rows per actor call (default: planned)")
    ap.add_argument("--no-sort", action="store_true", help="do not order texts by length")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    import torch
    from sentence_transformers import SentenceTransformer

    from adaptlab.models import resolve_model
    from adaptlab.models.sbert import prepare_local_load
    from adaptlab.runtime import available_cores

    device = devinfo.resolve_device(args.device)
    dev_name = devinfo.device_name(device)
    texts = make_texts(args.texts, args.n, seed=args.seed)
    ref = resolve_model(args.model)
    source = str(ref.path) if ref.path is not None else ref.model_id
    dtype_kwargs = dtype_model_kwargs(args.dtype)
    # the same model_kwargs on both sides: what the platform's loader adds for local weights
    # (use_safetensors) plus the dtype
    model_kwargs = {**prepare_local_load(ref), **dtype_kwargs}
    model = SentenceTransformer(
        source, device=device, local_files_only=ref.path is not None, model_kwargs=model_kwargs or None
    )
    enc = model.tokenizer(texts[:500], truncation=True, max_length=model.max_seq_length)["input_ids"]
    tokens = np.array([len(ids) for ids in enc], dtype=np.float64)
    print(
        f"# {args.n} {args.texts}, {np.mean([len(t.split()) for t in texts]):.1f} words and "
        f"{float(tokens.mean()):.1f} tokens (after truncation at {model.max_seq_length}) on average; "
        f"model {ref.model_id} ({source}); dtype {args.dtype} "
        f"({next(model.parameters()).dtype}); batch size {args.batch_size}; device {device} ({dev_name}); "
        f"{available_cores()} cores, torch {torch.__version__} with {torch.get_num_threads()} threads"
    )
    result: dict[str, object] = {
        "bench": "embed",
        "texts": args.texts,
        "n": args.n,
        "model": ref.model_id,
        "dtype": args.dtype,
        "batch_size": args.batch_size,
        "device": device,
        "device_name": dev_name,
        "mean_tokens": float(tokens.mean()),
        "torch": torch.__version__,
        "warmup": args.warmup,
    }

    def plain() -> tuple[float, np.ndarray]:
        devinfo.sync(device)
        t = time.perf_counter()
        e = model.encode(texts, batch_size=args.batch_size, normalize_embeddings=True, convert_to_numpy=True)
        devinfo.sync(device)
        return time.perf_counter() - t, np.asarray(e, dtype=np.float32)

    if args.plain_only:
        if args.warmup:
            model.encode(texts[: max(16, min(256, args.n // 10))], batch_size=args.batch_size)
        times = [plain()[0] for _ in range(max(1, args.repeat))]
        t_plain = min(times)
        print(
            f"plain encode {t_plain:7.2f} s ({args.n / t_plain:8.1f} texts/s, best of {len(times)}); "
            "Ray side skipped (--plain-only)"
        )
        result |= {"plain_s": t_plain, "plain_texts_per_s": args.n / t_plain}
        emit_json(result, args)
        return 0

    from adaptlab.embedding import embed_texts_detailed
    from adaptlab.runtime import init_ray

    t0 = time.perf_counter()
    info = init_ray()
    print(
        f"# ray start-up {time.perf_counter() - t0:.1f} s ({info.num_cpus:g} logical CPUs, "
        f"{info.num_gpus:g} GPUs, auth {info.auth_mode})"
    )
    result["ray_startup_s"] = time.perf_counter() - t0
    ray_options = {"model_kwargs": dtype_kwargs} if dtype_kwargs else None

    def plain() -> tuple[float, np.ndarray]:
        t = time.perf_counter()
        e = model.encode(texts, batch_size=args.batch_size, normalize_embeddings=True, convert_to_numpy=True)
        return time.perf_counter() - t, e

    def on_ray() -> tuple[float, np.ndarray, object]:
        t = time.perf_counter()
        run = embed_texts_detailed(
            texts,
            args.model,
            kind="document",
            batch_size=args.batch_size,
            num_actors=args.num_actors,
            torch_threads=args.torch_threads,
            block_size=args.block_size,
            sort_by_length=not args.no_sort,
            progress=False,
            options=ray_options,
            device=device,
        )
        return time.perf_counter() - t, run.embeddings, run

    warm = texts[: max(16, min(256, args.n // 10))]
    if args.warmup:
        t = time.perf_counter()
        model.encode(warm, batch_size=args.batch_size)
        embed_texts_detailed(
            warm,
            args.model,
            kind="document",
            batch_size=args.batch_size,
            num_actors=args.num_actors,
            torch_threads=args.torch_threads,
            options=ray_options,
            device=device,
            progress=False,
        )
        print(f"# warm-up (both sides, {len(warm)} texts; Ray pool started): {time.perf_counter() - t:.1f} s")

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"# load average before: {load:.1f}")
    ratios, runs = [], []
    for r in range(args.repeat):
        if r % 2 == 1:  # alternate the order: drift in machine load hits both sides
            t_ray, e_ray, run = on_ray()
            t_plain, e_plain = plain()
        else:
            t_plain, e_plain = plain()
            t_ray, e_ray, run = on_ray()
        diff = float(np.abs(e_plain - e_ray).max())
        ratio = t_ray / t_plain
        ratios.append(ratio)
        runs.append(
            {
                "plain_s": t_plain,
                "ray_s": t_ray,
                "ray_inner_s": run.seconds,
                "max_abs_diff": diff,
                "num_actors": run.num_actors,
                "block_size": run.block_size,
            }
        )
        print(
            f"run {r + 1}: plain encode {t_plain:7.2f} s ({args.n / t_plain:8.1f} texts/s) | ray pipeline "
            f"{t_ray:7.2f} s ({args.n / t_ray:8.1f} texts/s; {run.num_actors} actors x "
            f"{args.torch_threads or 'auto'} threads, blocks of {run.block_size}) | ratio {ratio:.3f} | "
            f"max |diff| {diff:.2e}"
        )
        sys.stdout.flush()
    med = statistics.median(ratios)
    verdict = "met" if med <= 1.15 else "NOT met"
    print(f"ratio ray / plain: {med:.3f} (median of {len(ratios)}; goal <= 1.15: {verdict})")
    tput = 1.0 / med
    goal_gpu = "met" if tput >= 0.9 else "NOT met"
    print(
        f"throughput ratio ray / plain (texts/s): {tput:.3f} (goal on a GPU, issue 10: >= 0.9: {goal_gpu}); "
        f"device {dev_name}, dtype {args.dtype}, {args.texts}"
    )
    best = min(runs, key=lambda x: x["plain_s"])
    best_ray = min(runs, key=lambda x: x["ray_s"])
    result |= {
        "runs": runs,
        "time_ratio_median": med,
        "throughput_ratio": tput,
        "plain_s": best["plain_s"],
        "ray_s": best_ray["ray_s"],
        "plain_texts_per_s": args.n / best["plain_s"],
        "ray_texts_per_s": args.n / best_ray["ray_s"],
        "max_abs_diff": max(x["max_abs_diff"] for x in runs),
        "goal_time_ratio_le_1_15": med <= 1.15,
        "goal_throughput_ge_0_9": tput >= 0.9,
    }
    emit_json(result, args)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
