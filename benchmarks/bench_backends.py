"""Every embedding backend and precision of :mod:`adaptlab.models.inference`, in one process.

    python -m benchmarks.bench_backends --backends torch:fp32,openvino:fp32,openvino:bf16,openvino:int8 --docs 0

``--backends all`` (or ``"torch:bf16,onnx:int8,..."``) compares every embedding backend
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
import os
import statistics
import time
from pathlib import Path

import numpy as np

from benchmarks.common import emit_json, round_ratios

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

    pairs = (
        [(b, p) for b, ps in SUPPORTED.items() for p in ps]
        if spec == "all"
        else [tuple(s.split(":", 1)) for s in spec.split(",")]
    )
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
    print(
        f"SciFact test: {len(qids)} queries, {len(docs)} documents ({'all' if not args.docs else 'judged + seeded others'}); "
        f"torch threads {torch.get_num_threads()}, load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    names, encoders = [], []
    for backend, precision in _settings(args.backends):
        t0 = time.perf_counter()
        encoders.append(load_encoder(args.model, device="cpu", embedding_backend=backend, precision=precision))
        names.append(system_label(backend, precision))
        print(f"  loaded {names[-1]} in {time.perf_counter() - t0:.1f} s (export included the first time)", flush=True)
    speed_texts = docs[: args.speed_n]
    rates: dict[str, list[float]] = {n: [] for n in names}
    for r in range(args.repeat):  # rotated order: each system sees every position
        order = list(range(len(names)))[r % len(names) :] + list(range(len(names)))[: r % len(names)]
        for i in order:
            t0 = time.perf_counter()
            encoders[i].encode_documents(speed_texts, batch_size=args.batch_size)
            rates[names[i]].append(len(speed_texts) / (time.perf_counter() - t0))
        print(
            f"  round {r + 1}: "
            + ", ".join(f"{n} {rates[n][-1]:.1f}" for n in names)
            + f" texts/s; load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
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
    diffs = {
        p.a: p for p in paired_bootstrap(ndcg, names=names, baseline=base, n_resamples=args.resamples, seed=args.seed)
    }
    return _report_backends(args, names, rates, per_query, vectors, diffs, measures)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--backends",
        default="all",
        help='"all" (default) or "torch:bf16,onnx:int8,..." (torch fp32 is always the baseline)',
    )
    ap.add_argument("--model", default="minilm", help="model reference (default: minilm)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=1, help="timed rounds (rotated order; the median is reported)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--speed-n", type=int, default=256, help="passages per timed round")
    ap.add_argument(
        "--docs", type=int, default=1000, help="SciFact documents (judged ones + seeded others; 0: all 5,183)"
    )
    ap.add_argument("--scifact", default=str(SCIFACT), help="the BEIR SciFact folder")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (ONNX/OpenVINO follow)")
    ap.add_argument("--resamples", type=int, default=2000, help="paired bootstrap resamples")
    ap.add_argument("--json", action="store_true", help="print the result as one JSON line at the end")
    ap.add_argument("--json-out", default=None, help="also write the JSON result to this file")
    return backends_main(ap.parse_args(argv))


def _report_backends(args, names, rates, per_query, vectors, diffs, measures) -> int:
    base = names[0]
    ref = statistics.median(rates[base])
    print(
        f"\n{'system':<20} {'texts/s':>8} {'ratio':>6} {'rounds':>9} {'max|de|':>9} {'cos':>8} "
        + " ".join(f"{m:>10}" for m in measures)
        + "   nDCG@10 - torch-fp32 [95% CI], p"
    )
    rows = []
    for n in names:
        rate = statistics.median(rates[n])
        means = per_query[n].mean()
        de = float(np.abs(vectors[n] - vectors[base]).max())
        cos = float((vectors[n] * vectors[base]).sum(axis=1).mean())
        spread = round_ratios(rates, n, base)
        line = (
            f"{n:<20} {rate:8.1f} {rate / ref:6.2f} {min(spread):4.2f}-{max(spread):4.2f} {de:9.2e} {cos:8.6f} "
            + " ".join(f"{means[m]:10.5f}" for m in measures)
        )
        gap = max(abs(means[m] - per_query[base].mean()[m]) for m in measures)
        if n != base:
            p = diffs[n]
            line += f"   {p.diff:+.5f} [{p.ci_low:+.5f}, {p.ci_high:+.5f}], p={p.p_value:.3f}"
            line += f"; max |d metric| {gap:.1e}" + (" (exact)" if gap <= EXACT_TOLERANCE else "")
        print(line)
        rows.append(
            {
                "system": n,
                "texts_per_s": rate,
                "ratio": rate / ref,
                "ratio_rounds": spread,
                "max_abs_diff": de,
                "mean_cos": cos,
                "max_metric_diff": gap,
                "exact": gap <= EXACT_TOLERANCE,
                **{m: means[m] for m in measures},
                **(
                    {"ndcg10_diff": diffs[n].diff, "ci": [diffs[n].ci_low, diffs[n].ci_high], "p": diffs[n].p_value}
                    if n != base
                    else {}
                ),
            }
        )
    emit_json({"backends": rows, "load": os.getloadavg(), "cpu": _cpu()}, args)
    return 0


def _cpu() -> dict[str, object]:
    """The instruction sets that decide these ratios: what the kernel reports, and what torch and
    OpenVINO dispatch to (a hypervisor may hide flags the model name suggests)."""
    import torch

    from adaptlab.runtime.hardware import cpu_flags

    out: dict[str, object] = {
        "flags": sorted(f for f in cpu_flags() if f.startswith(("avx", "amx")) or "vnni" in f),
        "torch": torch.backends.cpu.get_cpu_capability(),
    }
    try:
        import openvino as ov

        out["openvino"] = ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    except Exception as e:  # noqa: BLE001 (not installed, or no CPU plugin: recorded, not fatal)
        out["openvino"] = f"unavailable: {e}"
    return out


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
