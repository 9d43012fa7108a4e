"""The fp32 matrix-product speed of each embedding backend's runtime on this CPU: how much faster
the exact path (``[embedding].backend`` onnx or openvino at fp32) can be than torch at all.

    python -m benchmarks.bench_gemm                   # one thread, 64 x 240 tokens (issue 32)
    python -m benchmarks.bench_gemm --threads 2 --repeat 7 --json

An encoder like all-MiniLM-L6-v2 spends most of its time in the six matrix products of each
transformer layer (Vaswani et al., 2017, section 3; hidden size d = 384, feed-forward size
f = 1536 for MiniLM, Wang et al., 2020): query, key, value and output projections (d x d each),
then the feed-forward pair (d x f, f x d), each with its bias. On T token rows one layer costs

    FLOP = 2 T (4 d^2 + 2 d f)

(a multiply and an add per weight and row). This script runs exactly these products, bias
included, on the same random T x d and T x f inputs through every runtime an embedding backend
uses: torch (``F.linear``, whose fp32 product is the BLAS torch was built with: MKL on x86
wheels), ONNX Runtime (a MatMul + Add graph: MLAS), OpenVINO (the same ONNX graph compiled for
the CPU plugin at f32: oneDNN) and NumPy (its BLAS, as a reference that is none of the three).
Each round runs every runtime in a rotated order; the table gives the median of ``--repeat``
rounds in GFLOP/s per thread, the ratio to torch and the largest error of the layer's outputs
relative to a float64 product (so a runtime that quietly used bf16 would show 1e-3, not 1e-7).

``--profile N`` also embeds N synthetic ~256-token passages with adaptlab's torch encoder
(``load_encoder("minilm")``, batch ``--batch``): timed, giving torch's FLOP rate over the
whole model (products and attention, padded batches as sentence-transformers forms them), and once
under torch's profiler, splitting the operators' time into the linear layers (``aten::linear``:
the products and their bias), attention (``aten::scaled_dot_product_attention``) and the rest
(GELU, LayerNorm, residual adds, pooling). An exact backend that computes the same batches does
the same FLOP; if every one of them ran at the fastest matrix-product speed above,

    gain <= GFLOP/s_best products / GFLOP/s_torch whole model

which is the most any fp32 runtime measured here can gain over torch on this CPU. ``--exact``
(default openvino) also times that embedding backend at fp32 on the same passages, between two
torch embeddings (torch's time is their mean), and prints its gain beside the bound.

Reading it: the products decide how fast an exact backend can be; the rest is what it can save
outside them (fused bias, GELU, LayerNorm, attention). Its embedding speed is measured by
bench_embed.py --backends, which this script does not replace.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from benchmarks.common import make_texts, round_ratios

HIDDEN, FFN = 384, 1536
"""all-MiniLM-L6-v2's hidden and feed-forward sizes (its config.json)."""
SHAPES = ((HIDDEN, HIDDEN, 4), (HIDDEN, FFN, 1), (FFN, HIDDEN, 1))
"""(in, out, count) of one layer's products: Q, K, V, O; feed-forward up; feed-forward down."""
RUNTIMES = ("torch", "onnxruntime", "openvino", "numpy")

Product = Callable[[np.ndarray], np.ndarray]
"""One layer product with its weights bound: x (T x in) -> x W + b (T x out)."""


def layer_flops(tokens: int, hidden: int = HIDDEN, ffn: int = FFN) -> int:
    """FLOP of one layer's six products on ``tokens`` rows: 2 T (4 d^2 + 2 d f)."""
    return 2 * tokens * (4 * hidden * hidden + 2 * hidden * ffn)


def make_weights(seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """(W, b) of each distinct shape of :data:`SHAPES`, float32, scaled like a trained layer."""
    rng = np.random.default_rng(seed)
    return [
        ((rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32), rng.standard_normal(n).astype(np.float32) * 0.1)
        for k, n, _ in SHAPES
    ]


def _torch_products(weights) -> list[Product]:
    import torch
    import torch.nn.functional as F

    def bind(w: np.ndarray, b: np.ndarray) -> Product:
        wt, bt = torch.from_numpy(np.ascontiguousarray(w.T)), torch.from_numpy(b)  # Linear's (out, in)

        def run(x: np.ndarray) -> np.ndarray:
            with torch.inference_mode():
                return F.linear(torch.from_numpy(x), wt, bt).numpy()

        return run

    return [bind(w, b) for w, b in weights]


def _onnx_file(w: np.ndarray, b: np.ndarray, folder: Path) -> Path:
    """A graph y = MatMul(x, W) + b with a dynamic row count, saved under ``folder`` once (ONNX
    Runtime and OpenVINO read the same file)."""
    k, n = w.shape
    path = folder / f"linear_{k}_{n}.onnx"
    if path.exists():
        return path
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["y"])],
        f"linear_{k}_{n}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", n])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def _onnxruntime_products(weights, threads: int, folder: Path) -> list[Product]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1

    def bind(w: np.ndarray, b: np.ndarray) -> Product:
        session = ort.InferenceSession(str(_onnx_file(w, b, folder)), options, providers=["CPUExecutionProvider"])
        return lambda x: session.run(None, {"x": x})[0]

    return [bind(w, b) for w, b in weights]


def _openvino_products(weights, threads: int, folder: Path) -> list[Product]:
    import openvino as ov

    core = ov.Core()
    config = {
        "INFERENCE_NUM_THREADS": threads,
        "INFERENCE_PRECISION_HINT": "f32",
        "NUM_STREAMS": 1,
        "PERFORMANCE_HINT": "LATENCY",
    }

    def bind(w: np.ndarray, b: np.ndarray) -> Product:
        request = core.compile_model(
            core.read_model(str(_onnx_file(w, b, folder))), "CPU", config
        ).create_infer_request()

        def run(x: np.ndarray) -> np.ndarray:
            request.infer({0: x})
            return request.get_output_tensor(0).data

        return run

    return [bind(w, b) for w, b in weights]


def _numpy_products(weights) -> list[Product]:
    return [lambda x, w=w, b=b: x @ w + b for w, b in weights]


@contextmanager
def thread_limits(threads: int) -> Iterator[None]:
    """torch's and NumPy's BLAS thread counts at ``threads`` inside, restored after (ONNX Runtime
    and OpenVINO get theirs per session)."""
    import torch
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads, user_api="blas"):
            yield
    finally:
        torch.set_num_threads(before)


def build(runtime: str, weights, threads: int, folder: Path) -> list[Product]:
    """The products of ``runtime`` for ``weights``; ImportError when it is not installed."""
    if runtime == "torch":
        return _torch_products(weights)
    if runtime == "onnxruntime":
        return _onnxruntime_products(weights, threads, folder)
    if runtime == "openvino":
        return _openvino_products(weights, threads, folder)
    if runtime == "numpy":
        return _numpy_products(weights)
    raise ValueError(f"unknown runtime {runtime!r}: expected one of {', '.join(RUNTIMES)}")


def run_layer(products: list[Product], inputs: dict[int, np.ndarray]) -> None:
    """One layer's products in :data:`SHAPES` order and count (outputs dropped)."""
    for product, (k, _n, count) in zip(products, SHAPES):
        for _ in range(count):
            product(inputs[k])


def layer_outputs(products: list[Product], inputs: dict[int, np.ndarray]) -> list[np.ndarray]:
    """Each distinct shape's output, copied (a runtime may reuse its output buffer)."""
    return [np.array(product(inputs[k]), copy=True) for product, (k, _n, _c) in zip(products, SHAPES)]


def max_relative_error(outs: list[np.ndarray], weights, inputs: dict[int, np.ndarray]) -> float:
    """Largest |y - y64| / max|y64| over the shapes, y64 the float64 product with bias."""
    worst = 0.0
    for y, (w, b), (k, _n, _c) in zip(outs, weights, SHAPES):
        ref = inputs[k].astype(np.float64) @ w.astype(np.float64) + b
        worst = max(worst, float(np.abs(y - ref).max() / np.abs(ref).max()))
    return worst


def timed(products: list[Product], inputs: dict[int, np.ndarray], layers: int) -> float:
    """Seconds for ``layers`` layers' products (after one untimed layer)."""
    run_layer(products, inputs)
    start = time.perf_counter()
    for _ in range(layers):
        run_layer(products, inputs)
    return time.perf_counter() - start


def measure(a: argparse.Namespace) -> dict[str, dict[str, object]]:
    """GFLOP/s per thread of every runtime in every round, and each one's relative error."""
    tokens = a.batch * a.tokens
    rng = np.random.default_rng(a.seed + 1)
    inputs = {k: rng.standard_normal((tokens, k)).astype(np.float32) for k in (HIDDEN, FFN)}
    weights = make_weights(a.seed)
    flop = layer_flops(tokens) * a.layers
    rows: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_gemm-") as folder, thread_limits(a.threads):
        built = {}
        for name in a.runtimes:
            try:
                built[name] = build(name, weights, a.threads, Path(folder))
            except ImportError as e:
                rows[name] = {"missing": str(e)}
                continue
            rows[name] = {
                "rel_error": max_relative_error(layer_outputs(built[name], inputs), weights, inputs),
                "gflops": [],
            }
        names = list(built)
        for r in range(a.repeat):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                seconds = timed(built[name], inputs, a.layers)
                rows[name]["gflops"].append(flop / seconds / 1e9 / a.threads)
    return rows


def summarise(rows: dict[str, dict[str, object]], baseline: str = "torch") -> dict[str, dict[str, object]]:
    """Median GFLOP/s per thread, its ratio to ``baseline``'s median and the single rounds' ratio
    range (each round against the baseline's same round)."""
    rates = {name: row["gflops"] for name, row in rows.items() if "gflops" in row}
    base = rates.get(baseline)
    out = {}
    for name, row in rows.items():
        if "missing" in row:
            out[name] = dict(row)
            continue
        g = row["gflops"]
        entry = {"gflops_per_thread": statistics.median(g), "rel_error": row["rel_error"], "rounds": g}
        if base:
            ratios = round_ratios(rates, name, baseline)
            entry |= {
                "ratio": statistics.median(g) / statistics.median(base),
                "ratio_rounds": [min(ratios), max(ratios)],
            }
        out[name] = entry
    return out


def report(summary: dict[str, dict[str, object]], a: argparse.Namespace) -> str:
    """The table: runtime, GFLOP/s per thread, ratio to torch (rounds' range), relative error."""
    lines = [
        f"one MiniLM layer's products on {a.batch} x {a.tokens} tokens, {a.threads} thread(s), "
        f"{a.layers} layers per round, median of {a.repeat} round(s)",
        f"{'runtime':<12} {'GFLOP/s/thread':>14} {'vs torch':>9} {'rounds':>11} {'rel. error':>10}",
    ]
    for name, row in summary.items():
        if "missing" in row:
            lines.append(f"{name:<12} not installed ({row['missing']})")
            continue
        ratio = f"{row['ratio']:.2f}" if "ratio" in row else "-"
        spread = "{:.2f}-{:.2f}".format(*row["ratio_rounds"]) if "ratio_rounds" in row else "-"
        lines.append(f"{name:<12} {row['gflops_per_thread']:>14.1f} {ratio:>9} {spread:>11} {row['rel_error']:>10.1e}")
    return "\n".join(lines)


def model_flops(lengths: list[int], batch: int, layers: int = 6, hidden: int = HIDDEN, ffn: int = FFN) -> float:
    """FLOP of an encoder's layers on texts of ``lengths`` tokens, batched as sentence-transformers
    does (longest first, ``batch`` at a time, each batch padded to its longest): per batch of B
    texts padded to L tokens and per layer, 2 B L (4 d^2 + 2 d f) for the products and 4 B L^2 d
    for attention (Q K^T and the weighted sum of V)."""
    ordered = sorted(lengths, reverse=True)
    total = 0.0
    for start in range(0, len(ordered), batch):
        b, longest = len(ordered[start : start + batch]), ordered[start]
        total += layers * (layer_flops(b * longest, hidden, ffn) + 4 * b * longest * longest * hidden)
    return total


def _timed_encode(encoder, texts: list[str], batch: int) -> float:
    """Wall seconds of one ``encode_documents`` of ``texts`` (after an untimed first batch)."""
    encoder.encode_documents(texts[:batch], batch_size=batch)
    start = time.perf_counter()
    encoder.encode_documents(texts, batch_size=batch)
    return time.perf_counter() - start


def _exact_encoder(backend: str):
    """MiniLM on ``backend`` at fp32, or None with a printed reason when that backend cannot load
    here (its packages missing: adaptlab's ConfigError names them)."""
    from adaptlab.errors import ConfigError
    from adaptlab.models import load_encoder

    try:
        return load_encoder("minilm", device="cpu", embedding_backend=backend, precision="fp32")
    except ConfigError as e:
        print(f"--exact {backend}: not timed: {e}")
        return None


def profile_torch(n_texts: int, batch: int, threads: int, exact: str | None = None) -> dict[str, float]:
    """adaptlab's torch MiniLM encoder on ``n_texts`` synthetic passages: the wall seconds of an
    embedding, its FLOP rate (:func:`model_flops`), the shares of the operators' time in linear
    layers, attention and the rest (a further embedding under torch.profiler), and with ``exact``
    (an embedding backend, e.g. ``"openvino"``) that backend's fp32 seconds on the same passages,
    timed between two torch embeddings whose mean is torch's seconds."""
    from torch.profiler import ProfilerActivity, profile

    from adaptlab.models import load_encoder

    encoder = load_encoder("minilm", device="cpu")
    texts = make_texts("passages", n_texts, seed=3)
    st = encoder.model
    # sentence-transformers orders by character length; passages of one kind order alike by tokens
    lengths = [len(ids) for ids in st.tokenizer(texts, truncation=True, max_length=st.max_seq_length)["input_ids"]]
    out: dict[str, float] = {"texts": n_texts, "mean_tokens": sum(lengths) / len(lengths)}
    with thread_limits(threads):  # the exact backend takes torch's thread count when it loads
        seconds = [_timed_encode(encoder, texts, batch)]
        other = _exact_encoder(exact) if exact else None
        if other is not None:
            out["exact_seconds"] = _timed_encode(other, texts, batch)
            seconds.append(_timed_encode(encoder, texts, batch))
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            encoder.encode_documents(texts, batch_size=batch)
    out["seconds"] = statistics.mean(seconds)
    out["gflops_per_thread"] = model_flops(lengths, batch) / out["seconds"] / 1e9 / threads
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    by_name = {e.key: e.cpu_time_total for e in events}
    out["linear"] = by_name.get("aten::linear", 0.0) / total
    out["attention"] = by_name.get("aten::scaled_dot_product_attention", 0.0) / total
    out["rest"] = max(0.0, 1.0 - out["linear"] - out["attention"])
    if other is not None:
        out["exact_ratio"] = out["seconds"] / out["exact_seconds"]
    return out


def gain_bound(model_gflops: float, gflops: dict[str, float]) -> float:
    """Largest gain over torch of an exact backend that computes the same batches with every FLOP
    at the fastest runtime's matrix-product speed: best GFLOP/s / torch's whole-model GFLOP/s."""
    return max(gflops.values()) / model_gflops


def main(argv: list[str] | None = None) -> dict[str, object]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=64, help="texts per batch (default 64, the embedding default)")
    ap.add_argument("--tokens", type=int, default=240, help="tokens per text (default 240, SciFact's mean)")
    ap.add_argument("--threads", type=int, default=1, help="threads of every runtime (default 1)")
    ap.add_argument("--layers", type=int, default=6, help="layers per round (default 6, MiniLM's depth)")
    ap.add_argument("--repeat", type=int, default=5, help="rounds, in rotated order (default 5)")
    ap.add_argument("--runtimes", default=",".join(RUNTIMES), help=f"comma-separated (default {','.join(RUNTIMES)})")
    ap.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="also profile adaptlab's torch encoder on N synthetic passages (default 0: no)",
    )
    ap.add_argument(
        "--exact",
        default="openvino",
        choices=("openvino", "onnx", "none"),
        help="with --profile, also time this embedding backend at fp32 on the same passages "
        "(default openvino; none: skip)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="print the result as one JSON line at the end")
    a = ap.parse_args(argv)
    a.runtimes = [r.strip() for r in a.runtimes.split(",") if r.strip()]
    unknown = [r for r in a.runtimes if r not in RUNTIMES]
    if unknown or not a.runtimes:
        ap.error(f"--runtimes {','.join(unknown) or '(none)'}: expected some of {', '.join(RUNTIMES)}")
    for value, key in (
        (a.batch, "--batch"),
        (a.tokens, "--tokens"),
        (a.threads, "--threads"),
        (a.layers, "--layers"),
        (a.repeat, "--repeat"),
    ):
        if value < 1:
            ap.error(f"{key} must be at least 1, got {value}")
    summary = summarise(measure(a))
    print(report(summary, a))
    result = {
        "batch": a.batch,
        "tokens": a.tokens,
        "threads": a.threads,
        "layers": a.layers,
        "repeat": a.repeat,
        "runtimes": summary,
    }
    if a.profile > 0:
        prof = profile_torch(a.profile, a.batch, a.threads, None if a.exact == "none" else a.exact)
        speeds = {k: v["gflops_per_thread"] for k, v in summary.items() if "gflops_per_thread" in v}
        prof["gain_bound"] = gain_bound(prof["gflops_per_thread"], speeds)
        result["profile"] = prof
        print(
            f"torch encoder: {a.profile} passages of {prof['mean_tokens']:.0f} tokens in {prof['seconds']:.1f} s, "
            f"{prof['gflops_per_thread']:.1f} GFLOP/s/thread over the whole model; operators' time: linear "
            f"layers {prof['linear']:.1%}, attention {prof['attention']:.1%}, the rest {prof['rest']:.1%}"
        )
        print(
            f"an exact backend computing the same batches is at most {prof['gain_bound']:.2f}x torch here "
            "(every FLOP at the fastest runtime's matrix-product speed)"
        )
        if abs(a.tokens - prof["mean_tokens"]) > 0.1 * prof["mean_tokens"]:
            print(
                f"(the products ran on --tokens {a.tokens} per text, the passages have {prof['mean_tokens']:.0f}: "
                f"the bound compares like with like with --tokens {prof['mean_tokens']:.0f})"
            )
        if "exact_ratio" in prof:
            print(
                f"{a.exact} fp32 (adaptlab's exact path) on the same passages: {prof['exact_seconds']:.1f} s, "
                f"{prof['exact_ratio']:.2f}x torch ({prof['exact_ratio'] / prof['gain_bound']:.0%} of the bound)"
            )
    if a.json:
        print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
