"""Benchmark: FT training steps/s of the platform's own loop on the CPU and on a GPU, same config.

Each device runs ``adaptlab.adapt.train.ft.fine_tune_model`` (the kernel of ``train_ft``: the
seeded AdamW loop with MultipleNegativesRankingLoss) on a fresh copy of the same base model
(default: the packaged ``minilm``) with the same synthetic triplets, batch size, number of
hard negatives and max_seq_length, for ``--steps`` optimiser steps after ``--warmup-steps``
untimed ones (CUDA kernels, allocator). The loop's own clock (``LoopResult.seconds``) gives
steps/s; the loop reads each step's loss (one device sync per step), as in real training.

    python -m benchmarks.bench_train --steps 3                    # smoke: the CPU only (no GPU here)
    python -m benchmarks.bench_train --steps 50 --devices cpu,cuda --json

Prints steps/s and examples/s per device and the ratio cuda / cpu. ``--devices`` names the
devices (default ``cpu,cuda``; ``cuda`` is skipped with a message when torch sees no GPU).

``--against-st`` (issue 32) instead measures training tokens/s per core on the CPU, FT and PT,
against plain loops on the same data in the same run: FT against sentence-transformers'
``SentenceTransformerTrainer`` with ``MultipleNegativesRankingLoss`` on the same triplets, PT
against transformers' ``Trainer`` with ``DataCollatorForLanguageModeling`` on the same chunks
(sentence-transformers has no masked-LM trainer). Tokens are the texts' tokens after truncation
(padding not counted), the same for both sides; per core = tokens per CPU second of the process
(``time.process_time``, all its threads), which a machine shared with other work changes far less
than wall time does. Both sides are timed over the same window: one training run of warm-up +
timed steps, from the end of the last warm-up step to the end of the last step (a trainer
callback on one side, adaptlab's step function wrapped on the other), so neither side's set-up
is counted. adaptlab runs
with its options at their defaults and with each speed option (``fused_attention``, ``precision =
"bf16"`` where the CPU has it), and for each option prints how far the adapted model's scores
(cosine of held-out query-passage pairs) move from the default's. ``length_buckets`` (batches of
similar token length) can only gain where texts differ in length: ``--words 20,200`` gives
passages and chunks of 20-200 words instead of ones that all reach ``max_seq_length``:

    python -m benchmarks.bench_train --against-st --steps 3 --batch-size 16 --max-seq-length 128 --threads 2
    python -m benchmarks.bench_train --against-st --steps 4 --batch-size 16 --max-seq-length 128 --words 20,200
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import time
from pathlib import Path

from benchmarks.common import make_passages
from benchmarks.gpu import devinfo


def make_triplets(
    n: int, negatives: int, *, seed: int = 0, words: tuple[int, int] = (40, 80)
) -> list[tuple[str, str, tuple[str, ...]]]:
    """``n`` synthetic (query, positive, negatives) triplets: 6-12-word queries, passages of
    ``words`` words."""
    queries = make_passages(n, seed=seed + 1, min_words=6, max_words=12)
    docs = make_passages(n * (1 + negatives), seed=seed + 2, min_words=words[0], max_words=words[1])
    return [(queries[i], docs[i], tuple(docs[n + i * negatives : n + (i + 1) * negatives])) for i in range(n)]


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
    ap.add_argument(
        "--against-st",
        action="store_true",
        help="tokens/s per core of FT and PT against plain sentence-transformers / transformers loops",
    )
    ap.add_argument("--threads", type=int, default=None, help="torch threads (--against-st; default torch's)")
    ap.add_argument(
        "--words",
        default=None,
        help="MIN,MAX words of each passage and chunk (--against-st; default max_seq_length,"
        "2 x max_seq_length: every text reaches max_seq_length tokens, so batches pad "
        "only queries); e.g. 20,200 for texts of varied length (length_buckets)",
    )
    a = ap.parse_args(argv)
    if a.against_st:
        return against_st(a)

    import torch

    from adaptlab.adapt.train.ft import FTConfig, fine_tune_model
    from adaptlab.adapt.train.third_party import load_sentence_model
    from adaptlab.models import resolve_model

    ref = resolve_model(a.model)
    if ref.path is None:
        raise SystemExit(f"--model {a.model!r} has no local directory; training loads local weights only")
    total = max(a.steps, a.cpu_steps or 0) + a.warmup_steps
    rows = make_triplets(total * a.batch_size, a.negatives, seed=a.seed)
    res: dict[str, object] = {
        "bench": "train",
        "model": ref.model_id,
        "batch_size": a.batch_size,
        "negatives": a.negatives,
        "max_seq_length": a.max_seq_length,
        "steps": a.steps,
        "warmup_steps": a.warmup_steps,
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "devices": {},
    }
    print(
        f"# FT: {ref.model_id}, batch {a.batch_size} triplets x (1 positive + {a.negatives} negatives), "
        f"max_seq_length {a.max_seq_length}, {a.warmup_steps} warm-up + timed steps; "
        f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads"
    )

    def config(steps: int) -> FTConfig:
        return FTConfig(
            learning_rate=2e-5,
            epochs=1,
            batch_size=a.batch_size,
            num_negatives=a.negatives,
            max_seq_length=a.max_seq_length,
            max_steps=steps,
            min_steps=0,
            min_weight_change=0.0,
            warmup_ratio=0.0,
            query_prefix="",
            passage_prefix="",
        )

    devices = [d.strip() for d in a.devices.split(",") if d.strip()]
    for dev in devices:
        if dev.startswith("cuda") and not torch.cuda.is_available():
            print(f"# {dev}: skipped, torch {torch.__version__} sees no CUDA GPU")
            res["devices"][dev] = {"skipped": "no CUDA GPU visible to torch"}  # type: ignore[index]
            continue
        steps = a.cpu_steps if (dev == "cpu" and a.cpu_steps) else a.steps
        model = load_sentence_model(ref.path, dev)
        if a.warmup_steps:
            fine_tune_model(
                model,
                rows[: a.warmup_steps * a.batch_size],
                config(a.warmup_steps),
                seed=a.seed,
                prefixes=("", ""),
                device=dev,
                label="warm-up",
            )
        devinfo.sync(dev)
        t = time.perf_counter()
        out = fine_tune_model(
            model,
            rows[a.warmup_steps * a.batch_size :][: steps * a.batch_size],
            config(steps),
            seed=a.seed,
            prefixes=("", ""),
            device=dev,
            label="bench",
        )
        devinfo.sync(dev)
        wall = time.perf_counter() - t
        sps = out.steps / out.seconds
        info = {
            "device_name": devinfo.device_name(dev),
            "steps": out.steps,
            "loop_s": out.seconds,
            "wall_s": wall,
            "steps_per_s": sps,
            "examples_per_s": sps * a.batch_size,
            "first_loss": out.losses[0],
            "last_loss": out.losses[-1],
        }
        if dev.startswith("cuda"):
            info["max_memory_gb"] = torch.cuda.max_memory_allocated(torch.device(dev)) / 1e9
        res["devices"][dev] = info  # type: ignore[index]
        print(
            f"{dev} ({info['device_name']}): {out.steps} steps in {out.seconds:.2f} s = {sps:.3f} steps/s "
            f"({sps * a.batch_size:.1f} triplets/s); loss {out.losses[0]:.3f} -> {out.losses[-1]:.3f}"
        )
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


# --------------------------------------------------------------------------- --against-st (issue 32)


def _tokens(tokenizer, texts: list[str], max_len: int) -> int:
    """Tokens of ``texts`` after truncation at ``max_len`` (special tokens included, no padding)."""
    return sum(len(ids) for ids in tokenizer(texts, truncation=True, max_length=max_len)["input_ids"])


def _ft_config(a: argparse.Namespace, steps: int, **options: object):
    from adaptlab.adapt.train.ft import FTConfig

    return FTConfig(
        learning_rate=2e-5,
        epochs=1,
        batch_size=a.batch_size,
        num_negatives=a.negatives,
        max_seq_length=a.max_seq_length,
        max_steps=steps,
        min_steps=0,
        min_weight_change=0.0,
        warmup_ratio=0.0,
        query_prefix="",
        passage_prefix="",
        **options,
    )


@contextlib.contextmanager
def _our_step_clock():
    """The process's CPU time at the end of every step of adaptlab's loop (its ``_train_step``
    wrapped for the duration): the same window as :class:`_StepClock` gives the plain trainers, so
    neither side's set-up (optimizer, data, the loop's checks) is in the timed steps."""
    from adaptlab.adapt.train import loop

    clock, inner = _StepClock(), loop._train_step

    def timed(*args, **kwargs):
        value = inner(*args, **kwargs)
        clock.on_step_end()
        return value

    loop._train_step = timed
    try:
        yield clock
    finally:
        loop._train_step = inner


def _ours_ft(path: str, rows: list, a: argparse.Namespace, options: dict) -> tuple[float, object]:
    """CPU seconds of ``a.steps`` FT steps of adaptlab's loop after ``a.warmup_steps`` untimed ones,
    in one run as the plain trainer's; the model."""
    from adaptlab.adapt.train.ft import fine_tune_model
    from adaptlab.adapt.train.third_party import load_sentence_model

    model = load_sentence_model(path, "cpu")
    n = (a.warmup_steps + a.steps) * a.batch_size
    with _our_step_clock() as clock:
        fine_tune_model(
            model,
            rows[:n],
            _ft_config(a, a.warmup_steps + a.steps, **options),
            seed=a.seed,
            prefixes=("", ""),
            device="cpu",
            label="bench",
        )
    return clock.timed(a.warmup_steps), model


class _StepClock:
    """A transformers TrainerCallback's ``on_step_end``: the process's CPU time at the end of
    every step."""

    def __init__(self) -> None:
        self.ends: list[float] = []

    def __getattr__(self, name: str):  # every other callback event does nothing
        if name.startswith("on_"):
            return lambda *args, **kwargs: None
        raise AttributeError(name)

    def on_step_end(self, *args, **kwargs) -> None:
        self.ends.append(time.process_time())

    def timed(self, warmup: int) -> float:
        """CPU seconds from the end of the last warm-up step (or the first step) to the end of the last."""
        return self.ends[-1] - self.ends[max(0, warmup - 1)]


def _trainer_args(a: argparse.Namespace, out: str, cls):
    return cls(
        output_dir=out,
        per_device_train_batch_size=a.batch_size,
        learning_rate=2e-5,
        max_steps=a.warmup_steps + a.steps,
        warmup_ratio=0.0,
        weight_decay=0.01,
        max_grad_norm=1.0,
        save_strategy="no",
        logging_strategy="no",
        report_to=[],
        use_cpu=True,
        seed=a.seed,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )


def _st_ft(path: str, rows: list, a: argparse.Namespace, out: str) -> float:
    """Seconds of the timed steps of SentenceTransformerTrainer + MultipleNegativesRankingLoss."""
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
    from sentence_transformers import SentenceTransformerTrainingArguments as Args
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    model = SentenceTransformer(path, device="cpu", local_files_only=True)
    model.max_seq_length = a.max_seq_length
    data = {"anchor": [q for q, _, _ in rows], "positive": [p for _, p, _ in rows]}
    for j in range(a.negatives):
        data[f"negative_{j + 1}"] = [negs[j] for _, _, negs in rows]
    clock = _StepClock()
    trainer = SentenceTransformerTrainer(
        model=model,
        args=_trainer_args(a, out, Args),
        train_dataset=Dataset.from_dict(data),
        loss=MultipleNegativesRankingLoss(model, scale=20.0),
        callbacks=[clock],
    )
    with contextlib.redirect_stdout(io.StringIO()):  # its end-of-training metrics line
        trainer.train()
    return clock.timed(a.warmup_steps)


def _ours_pt(path: str, chunks: list[str], a: argparse.Namespace, options: dict) -> float:
    from adaptlab.adapt.train.pt import PTConfig, pretrain_model
    from adaptlab.adapt.train.third_party import load_sentence_model

    def config(steps: int) -> PTConfig:
        return PTConfig(
            learning_rate=5e-5,
            epochs=1,
            batch_size=a.batch_size,
            max_seq_length=a.max_seq_length,
            max_steps=steps,
            min_steps=0,
            min_weight_change=0.0,
            warmup_ratio=0.0,
            **options,
        )

    model = load_sentence_model(path, "cpu")
    n = (a.warmup_steps + a.steps) * a.batch_size
    with _our_step_clock() as clock:
        pretrain_model(
            model, Path(path), chunks[:n], config(a.warmup_steps + a.steps), seed=a.seed, device="cpu", label="bench"
        )
    return clock.timed(a.warmup_steps)


def _hf_pt(path: str, chunks: list[str], a: argparse.Namespace, out: str) -> float:
    """Seconds of the timed steps of transformers' Trainer + DataCollatorForLanguageModeling."""
    from transformers import (
        AutoModelForMaskedLM,
        AutoTokenizer,
        DataCollatorForLanguageModeling,
        Trainer,
        TrainingArguments,
    )

    from adaptlab.adapt.train.memory import transformer_dir
    from adaptlab.adapt.train.third_party import quiet_third_party

    tok = AutoTokenizer.from_pretrained(str(transformer_dir(Path(path))), local_files_only=True)
    with quiet_third_party():  # "Some weights of BertForMaskedLM were not initialized": the MLM head, as ours
        model = AutoModelForMaskedLM.from_pretrained(str(transformer_dir(Path(path))), local_files_only=True)
    enc = tok(chunks, truncation=True, max_length=a.max_seq_length, return_special_tokens_mask=True)
    rows = [{k: enc[k][i] for k in enc.keys()} for i in range(len(chunks))]
    clock = _StepClock()
    args = _trainer_args(a, out, TrainingArguments)
    args.remove_unused_columns = False
    collator = DataCollatorForLanguageModeling(tokenizer=tok, mlm=True, mlm_probability=0.15, return_tensors="pt")
    with contextlib.redirect_stdout(io.StringIO()):
        Trainer(model=model, args=args, train_dataset=rows, data_collator=collator, callbacks=[clock]).train()
    return clock.timed(a.warmup_steps)


def _scores(model, pairs: list[tuple[str, str]]):
    """Cosine of each held-out (query, passage) pair under ``model``."""
    q = model.encode([p[0] for p in pairs], normalize_embeddings=True, convert_to_numpy=True)
    d = model.encode([p[1] for p in pairs], normalize_embeddings=True, convert_to_numpy=True)
    return (q * d).sum(axis=1)


def _options() -> dict[str, dict]:
    import torch

    out: dict[str, dict] = {
        "default": {},
        "fused_attention": {"fused_attention": True},
        "length_buckets": {"length_buckets": True},
    }
    if torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported():
        out["bf16"] = {"precision": "bf16"}
        out["bf16+fused_attention"] = {"precision": "bf16", "fused_attention": True}
    return out


def _line(what: str, tokens: int, cpu_seconds: float, base: float | None) -> str:
    per_core = tokens / cpu_seconds
    ratio = "" if base is None else f"  {per_core / base:.2f}x"
    return f"{what:<34} {cpu_seconds:8.2f} CPU s  {per_core:7.0f} tokens/s per core{ratio}"


def against_st(a: argparse.Namespace) -> dict[str, object]:
    """``--against-st``: FT and PT tokens/s per core, adaptlab (each option) against the plain loops."""
    import os
    import tempfile

    import numpy as np
    import torch

    from adaptlab.models import resolve_model

    if a.threads:
        torch.set_num_threads(a.threads)
    threads = torch.get_num_threads()
    path = str(resolve_model(a.model).path)
    total = (a.warmup_steps + a.steps) * a.batch_size
    lo, hi = (int(w) for w in a.words.split(",")) if a.words else (a.max_seq_length, 2 * a.max_seq_length)
    rows = make_triplets(total, a.negatives, seed=a.seed, words=(lo, hi))
    chunks = make_passages(total, seed=a.seed + 3, min_words=lo, max_words=hi)
    heldout = [(q, p) for q, p, _ in make_triplets(64, 0, seed=a.seed + 9)]
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    timed = rows[a.warmup_steps * a.batch_size :]
    ft_tokens = sum(
        _tokens(tok, [r[i] if i < 2 else r[2][i - 2] for r in timed], a.max_seq_length) for i in range(2 + a.negatives)
    )
    pt_tokens = _tokens(tok, chunks[a.warmup_steps * a.batch_size :], a.max_seq_length)
    print(
        f"# FT and PT on the CPU, {threads} torch thread(s), load {os.getloadavg()[0]:.1f} on {os.cpu_count()} "
        f"CPUs (other work shares the machine); {a.model}, batch {a.batch_size}, {a.negatives} negative(s), "
        f"max_seq_length {a.max_seq_length}, passages of {lo}-{hi} words, {a.warmup_steps} warm-up + "
        f"{a.steps} timed steps; "
        f"attention {torch.__version__} SDPA"
    )
    res: dict[str, object] = {
        "bench": "train-against-st",
        "threads": threads,
        "load": os.getloadavg()[0],
        "ft": {},
        "pt": {},
    }
    with tempfile.TemporaryDirectory(prefix="bench-train-") as out:
        base = _st_ft(path, rows, a, out)
        per_core = ft_tokens / base
        print(_line("FT sentence-transformers trainer", ft_tokens, base, None))
        res["ft"]["sentence-transformers"] = per_core  # type: ignore[index]
        ref_scores = None
        for name, options in _options().items():
            seconds, model = _ours_ft(path, rows, a, options)
            scores = _scores(model, heldout)
            ref_scores = scores if ref_scores is None else ref_scores
            shift = float(np.max(np.abs(scores - ref_scores)))
            print(_line(f"FT adaptlab {name}", ft_tokens, seconds, per_core) + f"  max |score - default's| {shift:.2e}")
            res["ft"][name] = {
                "per_core": ft_tokens / seconds,
                "ratio": base / seconds,  # type: ignore[index]
                "max_score_shift": shift,
            }
        base = _hf_pt(path, chunks, a, out)
        per_core = pt_tokens / base
        print(_line("PT transformers Trainer (MLM)", pt_tokens, base, None))
        for name, options in _options().items():
            seconds = _ours_pt(path, chunks, a, options)
            print(_line(f"PT adaptlab {name}", pt_tokens, seconds, per_core))
            res["pt"][name] = {"per_core": pt_tokens / seconds, "ratio": base / seconds}  # type: ignore[index]
    print(json.dumps(res))
    return res


if __name__ == "__main__":
    main()
