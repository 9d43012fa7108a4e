"""Ray Data embedding pipeline vs plain ``SentenceTransformer.encode``, in one run.

    python benchmarks/bench_embed.py                 # 20,000 passages, all-MiniLM-L6-v2
    python benchmarks/bench_embed.py --n 500         # smoke run
    python benchmarks/bench_embed.py --device cuda --dtype fp16 --texts sentences --warmup --json

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

``--backends all`` (or ``"torch:bf16,onnx:int8,..."``) compares instead every embedding backend
and precision of :mod:`adaptlab.models.inference` in one process, on the same texts: the speed
(texts/s over ``--speed-n`` SciFact passages, ``--repeat`` rounds in rotated order, median; the
ratio to torch fp32, and the lowest and highest ratio of a single round) and, on BEIR SciFact's
300 test queries against ``--docs`` documents (every judged one plus seeded others; 0: all
5,183), the largest embedding difference to torch fp32, the
mean cosine, nDCG@10, MRR@10 and Recall@100, and for each system the paired bootstrap of its nDCG@10
difference to torch fp32 (adaptlab.stats.paired_bootstrap: 95% CI and p-value). A system whose
metrics all equal torch fp32's within 1e-4 is marked ``(exact)``; ``auto:fp32`` is timed as the
backend ``[embedding] backend = "auto"`` resolves to here (its row says which). The JSON records the
CPU's instruction sets (kernel flags, torch's and OpenVINO's dispatch). ``--threads`` sets
torch's thread count (ONNX Runtime and OpenVINO follow it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent / "gpu"))
import devinfo  # noqa: E402  (benchmarks/gpu/devinfo.py)

DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}

_WORDS = (
    "the of and to in a is that for was with as on by be are this from at or an were which it has "
    "have not but their its been also more than other these they all can between one two after "
    "cell cells protein proteins gene genes expression patients study studies results model "
    "method methods analysis data effect effects treatment response increased decreased levels "
    "significant activity function role human mouse mice tumor cancer disease clinical risk "
    "associated observed compared reduced induced mechanism pathway signaling receptor binding "
    "structure membrane tissue blood brain liver immune infection virus bacterial drug dose "
    "trial outcome cohort survival mortality therapy inhibitor mutation variant sequence genome "
    "transcription regulation network system network performance training learning retrieval "
    "domain adaptation embedding document query corpus evaluation benchmark accuracy baseline"
).split()


def make_passages(n: int, *, seed: int = 0, min_words: int = 30, max_words: int = 60) -> list[str]:
    """``n`` synthetic passages of ``min_words``..``max_words`` words, sentences of 6-14 words."""
    rng = np.random.default_rng(seed)
    vocab = np.array(_WORDS)
    out = []
    for _ in range(n):
        k = int(rng.integers(min_words, max_words + 1))
        words = vocab[rng.integers(0, len(vocab), size=k)].tolist()
        parts, i = [], 0
        while i < k:
            j = min(k, i + int(rng.integers(6, 15)))
            sentence = " ".join(words[i:j])
            parts.append(sentence[0].upper() + sentence[1:] + ".")
            i = j
        out.append(" ".join(parts))
    return out


def make_texts(kind: str, n: int, *, seed: int = 0) -> list[str]:
    """``passages``: 190-230 words (~256 word pieces with the sentence full stops, the model's
    max_seq_length); ``sentences``: 8-20 words; ``short-passages``: the former 30-60 words."""
    if kind == "passages":
        return make_passages(n, seed=seed, min_words=190, max_words=230)
    if kind == "sentences":
        return make_passages(n, seed=seed, min_words=8, max_words=20)
    if kind == "short-passages":
        return make_passages(n, seed=seed)
    raise SystemExit(f"--texts {kind!r}: expected passages, sentences or short-passages")


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
    ap.add_argument("--texts", default="passages", choices=("passages", "sentences", "short-passages"),
                    help="passages: ~256 tokens; sentences: 8-20 words; short-passages: 30-60 words")
    ap.add_argument("--device", default="auto", help="auto (cuda if available), cpu, cuda, cuda:N")
    ap.add_argument("--dtype", default="fp32", choices=tuple(DTYPES), help="weights' dtype, both sides")
    ap.add_argument("--warmup", action="store_true",
                    help="run both sides once on a few texts first (warm Ray pool, CUDA kernels)")
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
    ap.add_argument("--backends", default="", help='compare embedding backends and precisions instead: "all" or '
                    '"torch:bf16,onnx:int8,..." (torch fp32 is always the baseline)')
    ap.add_argument("--speed-n", type=int, default=256, help="--backends: passages per timed round")
    ap.add_argument("--docs", type=int, default=1000, help="--backends: SciFact documents (judged ones + seeded "
                    "others; 0: all 5,183)")
    ap.add_argument("--scifact", default=str(SCIFACT), help="--backends: the BEIR SciFact folder")
    ap.add_argument("--threads", type=int, default=None, help="--backends: torch threads (ONNX/OpenVINO follow)")
    ap.add_argument("--resamples", type=int, default=2000, help="--backends: paired bootstrap resamples")
    args = ap.parse_args(argv)
    if args.backends:
        return backends_main(args)

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
    model = SentenceTransformer(source, device=device, local_files_only=ref.path is not None,
                                model_kwargs=model_kwargs or None)
    enc = model.tokenizer(texts[:500], truncation=True, max_length=model.max_seq_length)["input_ids"]
    tokens = np.array([len(ids) for ids in enc], dtype=np.float64)
    print(f"# {args.n} {args.texts}, {np.mean([len(t.split()) for t in texts]):.1f} words and "
          f"{float(tokens.mean()):.1f} tokens (after truncation at {model.max_seq_length}) on average; "
          f"model {ref.model_id} ({source}); dtype {args.dtype} "
          f"({next(model.parameters()).dtype}); batch size {args.batch_size}; device {device} ({dev_name}); "
          f"{available_cores()} cores, torch {torch.__version__} with {torch.get_num_threads()} threads")
    result: dict[str, object] = {
        "bench": "embed", "texts": args.texts, "n": args.n, "model": ref.model_id, "dtype": args.dtype,
        "batch_size": args.batch_size, "device": device, "device_name": dev_name,
        "mean_tokens": float(tokens.mean()), "torch": torch.__version__, "warmup": args.warmup,
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
        print(f"plain encode {t_plain:7.2f} s ({args.n / t_plain:8.1f} texts/s, best of {len(times)}); "
              "Ray side skipped (--plain-only)")
        result |= {"plain_s": t_plain, "plain_texts_per_s": args.n / t_plain}
        _emit(result, args)
        return 0

    from adaptlab.embedding import embed_texts_detailed
    from adaptlab.runtime import init_ray

    t0 = time.perf_counter()
    info = init_ray()
    print(f"# ray start-up {time.perf_counter() - t0:.1f} s ({info.num_cpus:g} logical CPUs, "
          f"{info.num_gpus:g} GPUs, auth {info.auth_mode})")
    result["ray_startup_s"] = time.perf_counter() - t0
    ray_options = {"model_kwargs": dtype_kwargs} if dtype_kwargs else None

    def plain() -> tuple[float, np.ndarray]:
        t = time.perf_counter()
        e = model.encode(texts, batch_size=args.batch_size, normalize_embeddings=True, convert_to_numpy=True)
        return time.perf_counter() - t, e

    def on_ray() -> tuple[float, np.ndarray, object]:
        t = time.perf_counter()
        run = embed_texts_detailed(
            texts, args.model, kind="document", batch_size=args.batch_size, num_actors=args.num_actors,
            torch_threads=args.torch_threads, block_size=args.block_size, sort_by_length=not args.no_sort,
            progress=False, options=ray_options, device=device,
        )
        return time.perf_counter() - t, run.embeddings, run

    warm = texts[: max(16, min(256, args.n // 10))]
    if args.warmup:
        t = time.perf_counter()
        model.encode(warm, batch_size=args.batch_size)
        embed_texts_detailed(warm, args.model, kind="document", batch_size=args.batch_size,
                             num_actors=args.num_actors, torch_threads=args.torch_threads,
                             options=ray_options, device=device, progress=False)
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
        runs.append({"plain_s": t_plain, "ray_s": t_ray, "ray_inner_s": run.seconds, "max_abs_diff": diff,
                     "num_actors": run.num_actors, "block_size": run.block_size})
        print(f"run {r + 1}: plain encode {t_plain:7.2f} s ({args.n / t_plain:8.1f} texts/s) | ray pipeline "
              f"{t_ray:7.2f} s ({args.n / t_ray:8.1f} texts/s; {run.num_actors} actors x "
              f"{args.torch_threads or 'auto'} threads, blocks of {run.block_size}) | ratio {ratio:.3f} | "
              f"max |diff| {diff:.2e}")
        sys.stdout.flush()
    med = statistics.median(ratios)
    verdict = "met" if med <= 1.15 else "NOT met"
    print(f"ratio ray / plain: {med:.3f} (median of {len(ratios)}; goal <= 1.15: {verdict})")
    tput = 1.0 / med
    goal_gpu = "met" if tput >= 0.9 else "NOT met"
    print(f"throughput ratio ray / plain (texts/s): {tput:.3f} (goal on a GPU, issue 10: >= 0.9: {goal_gpu}); "
          f"device {dev_name}, dtype {args.dtype}, {args.texts}")
    best = min(runs, key=lambda x: x["plain_s"])
    best_ray = min(runs, key=lambda x: x["ray_s"])
    result |= {
        "runs": runs, "time_ratio_median": med, "throughput_ratio": tput,
        "plain_s": best["plain_s"], "ray_s": best_ray["ray_s"],
        "plain_texts_per_s": args.n / best["plain_s"], "ray_texts_per_s": args.n / best_ray["ray_s"],
        "max_abs_diff": max(x["max_abs_diff"] for x in runs),
        "goal_time_ratio_le_1_15": med <= 1.15, "goal_throughput_ge_0_9": tput >= 0.9,
    }
    _emit(result, args)
    return 0


# ---------------------------------------------------------------------------------------
# --backends: every embedding backend and precision (adaptlab.models.inference), same run
SCIFACT = Path(__file__).resolve().parents[2] / "shared" / "data" / "beir_scifact"


def scifact_subset(root: Path, n_docs: int, seed: int) -> tuple[dict, list[str], list[str], list[str], list[str]]:
    """BEIR SciFact (test): qrels, doc ids and texts (title + " " + text) of every judged document
    plus seeded others up to ``n_docs`` (0: the whole corpus), query ids and texts."""
    from adaptlab.data import load_dataset

    ds = load_dataset(f"beir:{root}", split="test")
    judged = ds.judged_queries()
    gold = sorted({d for q in judged for d, r in ds.qrels[q].items() if r > 0 and d in ds.corpus})
    others = sorted(set(ds.corpus) - set(gold))
    rng = np.random.default_rng(seed)
    extra = max(0, n_docs - len(gold)) if n_docs else len(others)
    doc_ids = gold + [others[i] for i in sorted(rng.choice(len(others), size=min(extra, len(others)), replace=False))]
    return (ds.qrels, doc_ids, [ds.corpus[d].full_text() for d in doc_ids], judged, [ds.queries[q] for q in judged])


def _settings(spec: str) -> list[tuple[str, str]]:
    """``"all"`` or ``"torch:fp32,onnx:int8"`` -> ``[(backend, precision)]``; torch fp32 always first."""
    from adaptlab.models.inference import SUPPORTED

    pairs = ([(b, p) for b, ps in SUPPORTED.items() for p in ps] if spec == "all"
             else [tuple(s.split(":", 1)) for s in spec.split(",")])
    return [("torch", "fp32")] + [p for p in pairs if p != ("torch", "fp32")]


def system_label(backend: str, precision: str) -> str:
    """A row's name: ``"onnx-int8"``; ``"auto"`` with the backend it resolved to here,
    ``"auto(openvino)-fp32"``, so a table never hides which backend was timed."""
    from adaptlab.models.inference import Inference

    if backend == "auto":
        return f"auto({Inference(backend, precision).backend})-{precision}"
    return f"{backend}-{precision}"


EXACT_TOLERANCE = 1e-4
"""An fp32 backend is exact when every retrieval metric equals torch fp32's within this."""


def _rank(q: np.ndarray, d: np.ndarray, qids: list[str], doc_ids: list[str], k: int = 100) -> dict:
    """Exact top-``k`` by inner product -> ``{qid: {doc id: score}}``."""
    scores = q @ d.T
    top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return {qid: {doc_ids[j]: float(scores[i, j]) for j in top[i]} for i, qid in enumerate(qids)}


def backends_main(args: argparse.Namespace) -> int:
    """Speed (texts/s, interleaved rounds) and SciFact retrieval of every backend and precision."""
    import torch

    from adaptlab.metrics import evaluate
    from adaptlab.models import load_encoder
    from adaptlab.stats import paired_bootstrap

    if args.threads:
        torch.set_num_threads(args.threads)
    qrels, doc_ids, docs, qids, queries = scifact_subset(Path(args.scifact), args.docs, args.seed)
    print(f"SciFact test: {len(qids)} queries, {len(docs)} documents ({'all' if not args.docs else 'judged + seeded others'}); "
          f"torch threads {torch.get_num_threads()}, load {os.getloadavg()[0]:.1f}", flush=True)
    names, encoders = [], []
    for backend, precision in _settings(args.backends):
        t0 = time.perf_counter()
        encoders.append(load_encoder(args.model, device="cpu", embedding_backend=backend, precision=precision))
        names.append(system_label(backend, precision))
        print(f"  loaded {names[-1]} in {time.perf_counter() - t0:.1f} s (export included the first time)", flush=True)
    speed_texts = docs[: args.speed_n]
    rates: dict[str, list[float]] = {n: [] for n in names}
    for r in range(args.repeat):  # rotated order: each system sees every position
        order = list(range(len(names)))[r % len(names):] + list(range(len(names)))[: r % len(names)]
        for i in order:
            t0 = time.perf_counter()
            encoders[i].encode_documents(speed_texts, batch_size=args.batch_size)
            rates[names[i]].append(len(speed_texts) / (time.perf_counter() - t0))
        print(f"  round {r + 1}: " + ", ".join(f"{n} {rates[n][-1]:.1f}" for n in names)
              + f" texts/s; load {os.getloadavg()[0]:.1f}", flush=True)
    measures = ["ndcg@10", "mrr@10", "recall@100"]
    per_query, vectors = {}, {}
    for name, enc in zip(names, encoders):
        d = enc.encode_documents(docs, batch_size=args.batch_size)
        q = enc.encode_queries(queries, batch_size=args.batch_size)
        vectors[name] = d
        per_query[name] = evaluate(qrels, _rank(q, d, qids, doc_ids), measures, query_ids=qids)
        print(f"  embedded SciFact with {name}; load {os.getloadavg()[0]:.1f}", flush=True)
    base = names[0]
    ndcg = np.stack([per_query[n].values["ndcg@10"] for n in names])
    diffs = {p.a: p for p in paired_bootstrap(ndcg, names=names, baseline=base, n_resamples=args.resamples,
                                               seed=args.seed)}
    return _report_backends(args, names, rates, per_query, vectors, diffs, measures)


def round_ratios(rates: dict[str, list[float]], name: str, base: str) -> list[float]:
    """Speed of ``name`` over ``base`` in each round (the two were timed back to back in it):
    their spread shows how much of a median ratio is the machine's noise.

    >>> round_ratios({"a": [10.0, 12.0], "b": [13.0, 15.0]}, "b", "a")
    [1.3, 1.25]
    """
    return [round(r / b, 6) for r, b in zip(rates[name], rates[base])]


def _report_backends(args, names, rates, per_query, vectors, diffs, measures) -> int:
    base = names[0]
    ref = statistics.median(rates[base])
    print(f"\n{'system':<20} {'texts/s':>8} {'ratio':>6} {'rounds':>9} {'max|de|':>9} {'cos':>8} "
          + " ".join(f"{m:>10}" for m in measures) + "   nDCG@10 - torch-fp32 [95% CI], p")
    rows = []
    for n in names:
        rate = statistics.median(rates[n])
        means = per_query[n].mean()
        de = float(np.abs(vectors[n] - vectors[base]).max())
        cos = float((vectors[n] * vectors[base]).sum(axis=1).mean())
        spread = round_ratios(rates, n, base)
        line = (f"{n:<20} {rate:8.1f} {rate / ref:6.2f} {min(spread):4.2f}-{max(spread):4.2f} {de:9.2e} {cos:8.6f} "
                + " ".join(f"{means[m]:10.5f}" for m in measures))
        gap = max(abs(means[m] - per_query[base].mean()[m]) for m in measures)
        if n != base:
            p = diffs[n]
            line += f"   {p.diff:+.5f} [{p.ci_low:+.5f}, {p.ci_high:+.5f}], p={p.p_value:.3f}"
            line += f"; max |d metric| {gap:.1e}" + (" (exact)" if gap <= EXACT_TOLERANCE else "")
        print(line)
        rows.append({"system": n, "texts_per_s": rate, "ratio": rate / ref, "ratio_rounds": spread,
                     "max_abs_diff": de, "mean_cos": cos, "max_metric_diff": gap, "exact": gap <= EXACT_TOLERANCE,
                     **{m: means[m] for m in measures},
                     **({"ndcg10_diff": diffs[n].diff, "ci": [diffs[n].ci_low, diffs[n].ci_high],
                         "p": diffs[n].p_value} if n != base else {})})
    _emit({"backends": rows, "load": os.getloadavg(), "cpu": _cpu()}, args)
    return 0


def _cpu() -> dict[str, object]:
    """The instruction sets that decide these ratios: what the kernel reports, and what torch and
    OpenVINO dispatch to (a hypervisor may hide flags the model name suggests)."""
    import torch

    from adaptlab.runtime.hardware import cpu_flags

    out: dict[str, object] = {"flags": sorted(f for f in cpu_flags() if f.startswith(("avx", "amx")) or "vnni" in f),
                              "torch": torch.backends.cpu.get_cpu_capability()}
    try:
        import openvino as ov

        out["openvino"] = ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    except Exception as e:  # noqa: BLE001 (not installed, or no CPU plugin: recorded, not fatal)
        out["openvino"] = f"unavailable: {e}"
    return out


def _emit(result: dict[str, object], args: argparse.Namespace) -> None:
    line = json.dumps(result, default=str)
    if args.json:
        print(line)
    if args.json_out:
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_out).write_text(line + "\n", encoding="utf-8")


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
