"""The training loop shared by PT and FT: seeded data order, AdamW with linear warm-up and
decay, gradient clipping, and checkpoints that make a killed run resumable.

Determinism: the examples of epoch ``e`` are visited in the order
``numpy.random.default_rng([seed, e]).permutation(n)`` (with ``length_buckets``, that order
grouped by length: :func:`epoch_order`), and step ``s`` runs its forward and
backward pass under ``torch.random.fork_rng`` seeded with ``SeedSequence([seed, s])`` (dropout,
MLM masking). Every random draw is therefore a function of ``(seed, step)`` and the global torch
RNG is left untouched; a run resumed from a checkpoint at step ``s`` continues exactly as the
uninterrupted run would (on the same device and thread count).

Learning rate at step ``s`` (0-based) of ``T`` with ``W = min(ceil(warmup_ratio * T), floor(T / 2))``
warm-up steps (the ``get_linear_schedule_with_warmup`` schedule of transformers, with the warm-up
capped at half the run so that it never swallows it: a 1-step run has no warm-up and trains at
the full rate): ``lr_s = lr * s / W`` for ``s < W``, else ``lr * max(0, (T - s) / (T - W))``.

Training that cannot mislead (:class:`TrainingCheckError`, a one-line error naming the run, its
steps and its schedule; with ``warn_only`` a loud warning instead):

- **enough steps**: when ``epochs`` epochs give fewer than ``min_steps`` optimizer steps (a
  small data scale: 31 triplets at batch 32 is one step), the epochs are raised to
  ``ceil(min_steps / steps_per_epoch)`` (logged; the result records both). A run capped below
  ``min_steps`` by an explicit ``max_steps`` is the user's choice and only warns.
- **a learning rate**: a run whose every step has learning rate 0 is an error before training.
- **weights that move**: after training, the relative change ``||w - w0|| / ||w0||`` over the
  trained parameters must exceed ``min_weight_change``; otherwise the adapted model is the base
  model and the error stops the run before an artifact is written.

The result (:meth:`LoopResult.summary`, saved in the artifact manifest's ``training``) records
steps, epochs asked and run, the schedule, first and last loss, and the relative weight change.

Progress: a line on stderr (``[adaptlab] ...``, like the embedding progress lines; off with
``adaptlab --quiet`` or ``ADAPTLAB_PROGRESS=0``) when training starts, at least every
:data:`PROGRESS_INTERVAL` seconds (``ADAPTLAB_PROGRESS_INTERVAL``) with step/steps, the loss and
the time left, and when it ends. One optimizer step that runs longer than that is not silent
either: a :class:`~adaptlab.runtime.progress.Heartbeat` around it prints ``training LABEL: step
12/40 running (15 s), last loss 0.4312`` at the interval (a thread that only prints; the step's
numbers are those of a run without it). :func:`quiet_third_party` turns transformers' and
sentence-transformers' load messages ("Some weights of ... were not initialized") and their
progress bars off while a model loads and trains; errors still show.

Speed options that change the numbers (off by default; measured in benchmarks/bench_train.py):
``precision = "bf16"`` runs the forward pass under ``torch.autocast(dtype=torch.bfloat16)``
(matrix products in bfloat16; weights, gradients, AdamW and the loss's backward stay fp32; only
on a device that computes bfloat16 natively: :func:`check_precision`), and ``fused_attention``
trains without attention-probability dropout (:func:`set_attention_dropout`), so PyTorch's fused
scaled-dot-product attention kernel runs, which with dropout falls back to an unfused path that
draws and stores a ``batch x heads x s x s`` dropout mask per layer. ``length_buckets`` batches
examples of similar token length together (:func:`epoch_order`), so a batch pads to less; it
changes which examples share a batch (for FT: the in-batch negatives). All three enter artifact
keys when set.

Checkpoints (``checkpoint_dir/step-<s>/``, written every ``checkpoint_every`` steps and at the end
of each epoch when asked, and resumed from) are :mod:`.checkpoints`: their layout, the latest
pointer, writing, resuming and sharing across nodes live there.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from adaptlab.adapt.train.checkpoints import resume_checkpoint, write_checkpoint
from adaptlab.errors import AdaptlabError
from adaptlab.runtime.hardware import bf16_support
from adaptlab.runtime.progress import PROGRESS_INTERVAL, Heartbeat, note_line, progress_enabled, progress_interval

__all__ = [
    "LoopResult",
    "OptimConfig",
    "PRECISIONS",
    "PROGRESS_INTERVAL",
    "TrainingCheckError",
    "autocast",
    "check_precision",
    "linear_warmup_decay",
    "load_sentence_model",
    "pick_device",
    "plan_run",
    "quiet_third_party",
    "run_label",
    "run_loop",
    "StepProgress",
    "seeded",
    "set_attention_dropout",
    "set_gradient_checkpointing",
    "step_seed",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OptimConfig:
    """Optimiser and schedule settings common to PT and FT."""

    learning_rate: float
    epochs: int
    batch_size: int
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    max_steps: int | None = None
    min_steps: int = 0
    min_weight_change: float = 0.0
    warn_only: bool = False
    gradient_checkpointing: bool = False
    precision: str = "fp32"
    fused_attention: bool = False
    length_buckets: bool = False


BUCKET_BATCHES = 16
"""Batches per window that :func:`epoch_order` sorts by length (``length_buckets``)."""


def epoch_order(n: int, seed: int, epoch: int, batch_size: int, lengths: np.ndarray | None = None) -> np.ndarray:
    """The examples of epoch ``epoch`` in the order the loop visits them, batch after batch.

    ``rng = numpy.random.default_rng([seed, epoch])``; the order is ``rng.permutation(n)``. With
    ``lengths`` (``length_buckets``; one token count per example) that permutation is cut into
    windows of :data:`BUCKET_BATCHES` x ``batch_size`` examples, each window is sorted by length
    (longest first, ties in permutation order) and cut into batches, and the full batches are
    shuffled with the same generator (``rng.permutation``); the epoch's short last batch (``n mod
    batch_size`` examples) stays last. Each batch then holds neighbours in length, so it pads to
    less, while which window an example falls in stays random (the "sortish" sampling of
    fairseq and of transformers' ``group_by_length``, Ott et al., 2019, section 3)."""
    rng = np.random.default_rng([int(seed), int(epoch)])
    order = rng.permutation(n)
    if lengths is None or n <= batch_size:
        return order
    lengths = np.asarray(lengths)
    window = BUCKET_BATCHES * batch_size
    order = np.concatenate([w[np.argsort(-lengths[w], kind="stable")]
                            for w in np.split(order, range(window, n, window))])
    full = n // batch_size
    batches = order[: full * batch_size].reshape(full, batch_size)[rng.permutation(full)]
    return np.concatenate([batches.ravel(), order[full * batch_size:]])


PRECISIONS = ("fp32", "bf16")
"""Training precisions: fp32, or the forward pass under bfloat16 autocast (module docstring)."""


class TrainingCheckError(AdaptlabError):
    """A training run that would mislead: too few steps, no learning rate, unchanged weights."""


@dataclass
class LoopResult:
    """What the loop did: steps run, per-step losses, where it resumed from, wall time, the
    schedule, the relative weight change and the warnings of the checks."""

    steps: int
    epochs_completed: int
    losses: list[float] = field(default_factory=list)
    resumed_from_step: int = 0
    seconds: float = 0.0
    epochs_requested: int = 0
    schedule: dict[str, Any] = field(default_factory=dict)
    relative_weight_change: float | None = None
    warnings: list[str] = field(default_factory=list)
    torch_threads: int = 0  # intra-op threads the steps ran on (a Ray stage: from its declared CPUs)
    optimizer: str = ""  # "adamw-fused" or "adamw-foreach" (make_adamw)

    def summary(self) -> dict[str, Any]:
        tail = self.losses[-10:]
        return {
            "steps": self.steps,
            "epochs_completed": self.epochs_completed,
            "epochs_requested": self.epochs_requested,
            "first_loss": self.losses[0] if self.losses else None,
            "last_loss": self.losses[-1] if self.losses else None,
            "final_loss_mean10": float(np.mean(tail)) if tail else None,
            "schedule": dict(self.schedule),
            "relative_weight_change": self.relative_weight_change,
            "check_warnings": list(self.warnings),
            "resumed_from_step": self.resumed_from_step,
            "seconds": round(self.seconds, 3),
            "torch_threads": self.torch_threads,
            "optimizer": self.optimizer,
        }


def run_label(variant: str, base: str, scale: str | int | None, count: int, what: str) -> str:
    """``"variant 'ft' of minilm at scale docs10 (31 triplets)"``: the run in check messages."""
    where = f" at scale {scale}" if scale is not None else ""
    return f"variant {variant!r} of {base}{where} ({count} {what})"


def warmup_steps(total: int, warmup_ratio: float) -> int:
    """``min(ceil(warmup_ratio * total), total // 2)``: the warm-up never takes more than half."""
    return min(math.ceil(warmup_ratio * total), total // 2)


def describe_schedule(schedule: dict[str, Any]) -> str:
    """One phrase for messages: steps, epochs, warm-up and peak learning rate."""
    return (
        f"{schedule['total_steps']} optimizer step(s) = {schedule['epochs']} epoch(s) x "
        f"{schedule['steps_per_epoch']} step(s) of batch {schedule['batch_size']} over "
        f"{schedule['n_examples']} example(s)"
        + (f" capped by max_steps={schedule['max_steps']}" if schedule.get("capped") else "")
        + f"; schedule linear warm-up {schedule['warmup_steps']} step(s) then linear decay, peak "
        f"learning rate {schedule['learning_rate']:g}, {schedule['nonzero_lr_steps']} step(s) "
        "with a non-zero rate"
    )


def _check_failed(label: str, problem: str, schedule: dict[str, Any], fix: str, warn_only: bool,
                  result: LoopResult | None = None) -> None:
    import logging

    message = f"{label}: {problem} ({describe_schedule(schedule)}); {fix}"
    if not warn_only:
        raise TrainingCheckError(message + "; or set warn_only = true to train anyway")
    logging.getLogger(__name__).warning("TRAINING CHECK FAILED: %s", message)
    if result is not None:
        result.warnings.append(message)


def _snapshot(params: list[Any]) -> list[Any]:
    return [p.detach().to("cpu", copy=True).float() for p in params]


def _relative_change(params: list[Any], before: list[Any]) -> float:
    import torch

    num = 0.0
    den = 0.0
    with torch.no_grad():
        for p, p0 in zip(params, before):
            now = p.detach().to("cpu").float()
            num += float(torch.sum((now - p0) ** 2))
            den += float(torch.sum(p0 ** 2))
    return math.sqrt(num) / math.sqrt(den) if den > 0 else math.sqrt(num)


def step_seed(seed: int, step: int) -> int:
    """A 63-bit torch seed derived from ``(seed, step)`` by ``numpy.random.SeedSequence``."""
    return int(np.random.SeedSequence([int(seed), int(step)]).generate_state(2, np.uint64)[0] >> 1)


def linear_warmup_decay(step: int, total: int, warmup: int) -> float:
    """The learning-rate factor at ``step`` (see the module docstring)."""
    if step < warmup:
        return step / max(1, warmup)
    return max(0.0, (total - step) / max(1, total - warmup))


def _param_groups(model: Any, weight_decay: float) -> list[dict[str, Any]]:
    decay: list[Any] = []
    no_decay: list[Any] = []
    seen: set[int] = set()
    for name, p in model.named_parameters():
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        low = name.lower()
        (no_decay if ("bias" in low or "norm" in low) else decay).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


@contextlib.contextmanager
def seeded(seed: int, device: Any) -> Iterator[None]:
    """Run the block under ``torch.manual_seed(seed)`` and restore the global RNG afterwards."""
    import torch

    devices = [device.index or 0] if getattr(device, "type", "cpu") == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


def plan_run(n_examples: int, optim: OptimConfig, label: str) -> LoopResult:
    """The run's schedule (epochs raised to reach ``min_steps``, warm-up capped) and the checks
    that can fail before training (module docstring), as an empty :class:`LoopResult`."""
    import logging

    if n_examples < 1:
        raise ValueError("run_loop needs at least one training example")
    steps_per_epoch = math.ceil(n_examples / optim.batch_size)
    epochs = int(optim.epochs)
    target = optim.min_steps if optim.max_steps is None else min(optim.min_steps, optim.max_steps)
    if target and epochs * steps_per_epoch < target:
        epochs = math.ceil(target / steps_per_epoch)
        logging.getLogger(__name__).info(
            "%s: %d example(s) give %d step(s) per epoch; epochs raised from %d to %d to reach "
            "min_steps=%d", label, n_examples, steps_per_epoch, optim.epochs, epochs, target,
        )
    total = epochs * steps_per_epoch
    if optim.max_steps is not None:
        total = min(total, optim.max_steps)
    capped = optim.max_steps is not None and optim.max_steps < optim.min_steps
    warmup = warmup_steps(total, optim.warmup_ratio)
    nonzero = sum(1 for s in range(total) if optim.learning_rate * linear_warmup_decay(s, total, warmup) > 0)
    schedule = {
        "kind": "linear-warmup-linear-decay", "learning_rate": float(optim.learning_rate),
        "warmup_steps": warmup, "total_steps": total, "steps_per_epoch": steps_per_epoch,
        "epochs": epochs, "batch_size": int(optim.batch_size), "n_examples": int(n_examples),
        "max_steps": optim.max_steps, "capped": capped, "nonzero_lr_steps": nonzero,
    }
    result = LoopResult(steps=0, epochs_completed=0, epochs_requested=int(optim.epochs), schedule=schedule)
    if nonzero == 0:
        _check_failed(label, "every optimizer step has learning rate 0, so the weights cannot change",
                      schedule, "use a positive learning rate and more steps", optim.warn_only, result)
    if optim.min_steps and total < optim.min_steps:
        _check_failed(
            label, f"{total} optimizer step(s), fewer than min_steps={optim.min_steps}", schedule,
            "raise max_steps (or lower min_steps)", optim.warn_only or capped, result,
        )
    return result


def _check_weights(params: list[Any], before: list[Any] | None, optim: OptimConfig, label: str,
                   result: LoopResult) -> None:
    """Record the relative weight change; too small a change fails the check."""
    if before is None:
        return
    change = _relative_change(params, before)
    result.relative_weight_change = change
    if not change > optim.min_weight_change:
        _check_failed(
            label, f"the weights moved by a relative {change:.3g} (||w - w0|| / ||w0||), not "
            f"more than min_weight_change={optim.min_weight_change:g}: the adapted model is "
            "the base model", result.schedule, "train longer or with a larger learning rate",
            optim.warn_only, result,
        )


def _resume(model: Any, optimizer: Any, checkpoint_dir: Path | None, device: Any, result: LoopResult) -> int:
    """Load the latest checkpoint (model, optimizer, losses) when there is one; its step."""
    found = resume_checkpoint(model, optimizer, checkpoint_dir, device)
    if found is None:
        return 0
    result.resumed_from_step, result.losses = found
    return result.resumed_from_step


def _eta(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


class StepProgress:
    """Progress lines of one run (module docstring): ``[adaptlab] label: step 12/40, loss 1.2345,
    0.8 s/step, about 22 s left`` on stderr, the channel of the embedding progress lines
    (:class:`adaptlab.runtime.progress.Progress`, whose clock they share): shown by default, off
    with ``adaptlab --quiet`` or ``ADAPTLAB_PROGRESS=0`` (then logged at DEBUG only).
    :meth:`running` gives the heartbeat of one step."""

    def __init__(self, label: str, total: int, start: int, interval: float | None = None) -> None:
        self.label, self.total, self.start = label, int(total), int(start)
        self.interval = progress_interval(interval)
        self.enabled = progress_enabled()
        self.t0 = self.last = time.perf_counter()
        resumed = f", resumed from step {start}" if start else ""
        self._emit(f"{label}: training {total} step(s){resumed}")

    def _emit(self, text: str) -> None:
        """One line on stderr (looked up now) when progress is on, else at DEBUG."""
        if not self.enabled:
            log.debug("%s", text)
            return
        try:
            print(f"[adaptlab] {text}", file=sys.stderr, flush=True)
        except (OSError, ValueError):  # a closed stream must not break training
            self.enabled = False
        note_line()  # the next heartbeat line is due one interval after this one

    def running(self, step: int, losses: list[float]) -> Heartbeat:
        """The heartbeat of step ``step`` (0-based) while it runs: ``[adaptlab] training LABEL:
        step 12/40 running (15 s), last loss 0.4312`` every interval once the step outlasts it
        (no closing line: :meth:`update` reports the step). Its thread only prints."""
        last = f", last loss {losses[-1]:.4f}" if losses else ""
        return Heartbeat(f"training {self.label}: step {step + 1}/{self.total} running", detail=last,
                         interval=self.interval, enabled=self.enabled, done_line=False)

    def update(self, done: int, loss: float) -> None:
        """A line when ``interval`` seconds have passed since the last one."""
        now = time.perf_counter()
        if now - self.last < self.interval or done >= self.total:
            return
        self.last = now
        per_step = (now - self.t0) / max(1, done - self.start)
        self._emit(f"{self.label}: step {done}/{self.total}, loss {loss:.4f}, {per_step:.2f} s/step, "
                   f"about {_eta(per_step * (self.total - done))} left")

    def close(self, loss: float | None) -> None:
        """The closing line: steps, time taken and the last loss."""
        elapsed = time.perf_counter() - self.t0
        last = f", last loss {loss:.4f}" if loss is not None else ""
        self._emit(f"{self.label}: {self.total}/{self.total} step(s) done in {_eta(elapsed)}{last}")


@contextlib.contextmanager
def quiet_third_party() -> Iterator[None]:
    """transformers at verbosity ``error`` without progress bars, and sentence-transformers'
    logger at ERROR, for the block (restored afterwards): a healthy load or training run prints
    nothing of theirs."""
    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    st_logger = logging.getLogger("sentence_transformers")
    st_level = st_logger.level
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    st_logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
        st_logger.setLevel(st_level)


def _train_step(model: Any, optimizer: Any, params: list[Any], idx: np.ndarray, lr: float, seed: int,
                device: Any, compute_loss: Callable[[np.ndarray], Any], max_grad_norm: float,
                precision: str = "fp32") -> float:
    """One optimizer step at learning rate ``lr`` under the step's seed; its loss."""
    import torch

    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.zero_grad(set_to_none=True)
    with seeded(seed, device):
        with autocast(precision, device):
            loss = compute_loss(idx)
        loss.backward()
    if max_grad_norm and max_grad_norm > 0:
        torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
    optimizer.step()
    value = float(loss.detach())
    del loss  # the graph is freed before the next step's forward pass
    return value


def run_loop(
    model: Any,
    *,
    n_examples: int,
    optim: OptimConfig,
    seed: int,
    compute_loss: Callable[[np.ndarray], Any],
    device: Any,
    checkpoint_dir: Path | None = None,
    checkpoint_every: int | None = None,
    checkpoint_each_epoch: bool = False,
    on_checkpoint: Callable[[int], None] | None = None,
    on_epoch_end: Callable[[int, Path | None], None] | None = None,
    label: str = "training",
    lengths: np.ndarray | None = None,
) -> LoopResult:
    """Train ``model`` (its trainable parameters) for ``optim.epochs`` epochs over
    ``n_examples`` examples; ``compute_loss(indices)`` returns the scalar loss of one batch.
    ``lengths`` (a token count per example) groups batches by length when
    ``optim.length_buckets`` is on (:func:`epoch_order`).

    Resumes from ``checkpoint_dir`` when it holds a checkpoint. ``on_checkpoint(step)`` runs
    after each checkpoint is complete; ``on_epoch_end(epoch, checkpoint)`` after each epoch
    (0-based, with that epoch's checkpoint when ``checkpoint_each_epoch``; the last epoch's is
    written only for ``on_epoch_end``: without it the trained model follows at once). ``label``
    names the run (variant and data scale) in the checks' messages (module docstring).
    """
    import torch

    result = plan_run(n_examples, optim, label)
    result.torch_threads = torch.get_num_threads()
    steps_per_epoch = result.schedule["steps_per_epoch"]
    total, warmup = result.schedule["total_steps"], result.schedule["warmup_steps"]

    optimizer, dropout = _start_training(model, optim, device, label)
    params = [p for group in optimizer.param_groups for p in group["params"]]
    result.optimizer = "adamw-fused" if optimizer.defaults.get("fused") else "adamw-foreach"
    before = _snapshot(params) if optim.min_weight_change > 0 else None
    start = _resume(model, optimizer, checkpoint_dir, device, result)
    t0 = time.perf_counter()
    progress = StepProgress(label, total, start)
    order, order_epoch = np.arange(0), -1
    for step in range(start, total):
        epoch, b = divmod(step, steps_per_epoch)
        if epoch != order_epoch:
            order = epoch_order(n_examples, seed, epoch, optim.batch_size,
                                lengths if optim.length_buckets else None)
            order_epoch = epoch
        idx = order[b * optim.batch_size : (b + 1) * optim.batch_size]
        lr = optim.learning_rate * linear_warmup_decay(step, total, warmup)
        with progress.running(step, result.losses):
            loss = _train_step(model, optimizer, params, idx, lr, step_seed(seed, step), device, compute_loss,
                               optim.max_grad_norm, optim.precision)
        result.losses.append(loss)
        done = step + 1
        progress.update(done, result.losses[-1])
        end_of_epoch = done % steps_per_epoch == 0 or done == total
        target = None
        periodic = bool(checkpoint_every) and done % int(checkpoint_every or 1) == 0 and done < total
        # the last step's state is the trained model: checkpointed only for an epoch hook that reads it
        epochly = checkpoint_each_epoch and end_of_epoch and (done < total or on_epoch_end is not None)
        if checkpoint_dir is not None and (periodic or epochly):
            target = write_checkpoint(model, optimizer, checkpoint_dir, done, result.losses)
            if on_checkpoint is not None:
                on_checkpoint(done)
        if end_of_epoch:
            result.epochs_completed = math.ceil(done / steps_per_epoch)
            if on_epoch_end is not None:
                model.eval()
                with torch.no_grad():
                    on_epoch_end(result.epochs_completed - 1, target)
                model.train()
    result.steps = total
    result.epochs_completed = math.ceil(total / steps_per_epoch)
    result.seconds = time.perf_counter() - t0
    progress.close(result.losses[-1] if result.losses else None)
    _end_training(model, optim, dropout, label)
    _check_weights(params, before, optim, label, result)
    return result


def _start_training(model: Any, optim: OptimConfig, device: Any, label: str) -> tuple[Any, float | None]:
    """Put ``model`` on ``device`` in training mode with the run's options switched on; its AdamW
    optimizer and the attention dropout to restore afterwards (None: unchanged)."""
    model.to(device)
    model.train()
    if optim.gradient_checkpointing:
        set_gradient_checkpointing(model, True, label)
    check_precision(optim.precision, device, label)
    dropout = set_attention_dropout(model, 0.0, label) if optim.fused_attention else None
    return make_adamw(_param_groups(model, optim.weight_decay), optim.learning_rate), dropout


def adamw_kind(params: list[Any]) -> str:
    """``"fused"`` when every parameter is a floating-point tensor on the CPU or a CUDA device (where
    PyTorch has a fused AdamW kernel), ``"foreach"`` otherwise."""
    return "fused" if params and all(p.is_floating_point() and p.device.type in ("cpu", "cuda")
                                     for p in params) else "foreach"


def make_adamw(groups: list[dict[str, Any]], lr: float) -> Any:
    """AdamW (Loshchilov & Hutter 2019, Algorithm 2; betas 0.9 / 0.999, eps 1e-8, decoupled weight
    decay per group) in PyTorch's fused kernel where :func:`adamw_kind` allows, else its multi-tensor
    (``foreach``) form: the same update in one pass over all parameters instead of one small kernel
    per tensor and moment (measured on MiniLM's shapes, one thread: 5.7x faster than the
    per-tensor loop). ``foreach`` is bit-identical to that loop; the fused kernel agrees with it to
    float rounding (7.5e-9 at most after 6 steps), the difference a thread count also makes.
    transformers' Trainer and so sentence-transformers' train with the fused one by default."""
    import torch

    kind = adamw_kind([p for g in groups for p in g["params"]])
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.999), eps=1e-8, **{kind: True})


def _end_training(model: Any, optim: OptimConfig, dropout: float | None, label: str) -> None:
    """``model`` in evaluation mode with the options of :func:`_start_training` switched off."""
    model.eval()
    if optim.gradient_checkpointing:
        set_gradient_checkpointing(model, False, label)
    if dropout is not None:
        set_attention_dropout(model, dropout, label)


def set_gradient_checkpointing(model: Any, on: bool, label: str = "training") -> int:
    """Turn transformers' gradient checkpointing on (or off) in every Hugging Face model inside
    ``model`` (a SentenceTransformer's transformer, PT's masked-LM model); how many were switched.

    Non-reentrant checkpoints, which restore the RNG state before recomputing a layer: dropout
    draws the same masks, so the loss and the weights are those of a run without it (to float
    rounding); only memory and time change. A model with nothing to switch on is an error."""
    switched = 0
    for module in model.modules():
        if not getattr(module, "supports_gradient_checkpointing", False):
            continue
        if on:
            module.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        else:
            module.gradient_checkpointing_disable()
        switched += 1
    if on and not switched:
        raise TrainingCheckError(f"{label}: gradient_checkpointing = true, but the model has no transformers "
                                 "module that supports it; set gradient_checkpointing = false")
    return switched


def set_attention_dropout(model: Any, p: float, label: str = "training") -> float:
    """Set the attention-probability dropout of every transformers self-attention module inside
    ``model`` to ``p``; the value it had (the first module's).

    With ``p = 0`` the SDPA attention of BERT-like models calls PyTorch's fused
    scaled-dot-product kernel in training too (with dropout it takes the unfused path, which
    draws and stores a ``batch x heads x s x s`` mask a layer): option ``fused_attention``. The
    model's saved config is untouched. A model with no such module is an error."""
    before = None
    for module in model.modules():
        if not isinstance(getattr(module, "dropout_prob", None), float) or not hasattr(module, "dropout"):
            continue
        before = module.dropout_prob if before is None else before
        module.dropout_prob = float(p)  # the SDPA path's dropout_p
        module.dropout.p = float(p)  # the eager path's nn.Dropout
    if before is None:
        raise TrainingCheckError(f"{label}: fused_attention = true, but the model has no transformers "
                                 "self-attention module with attention dropout; set fused_attention = false")
    return before


def check_precision(precision: str, device: Any, label: str = "training") -> None:
    """Raise :class:`TrainingCheckError` unless ``precision`` is fp32 or the device computes bf16
    natively (a CUDA GPU that supports it; a CPU with AVX512-BF16 or AMX)."""
    if precision not in PRECISIONS:
        raise TrainingCheckError(f"{label}: precision = {precision!r}: expected one of {', '.join(PRECISIONS)}")
    if precision == "fp32":
        return
    support = bf16_support(device)
    if not support.native:
        raise TrainingCheckError(f"{label}: precision = 'bf16' needs a device that computes bfloat16 natively "
                                 f"(a CPU with AVX512-BF16 or AMX, or a recent GPU): {support.reason}; set "
                                 "precision = 'fp32'")


def autocast(precision: str, device: Any) -> Any:
    """The forward pass's autocast context: bfloat16 for ``"bf16"``, none for ``"fp32"``."""
    if precision == "fp32":
        return contextlib.nullcontext()
    import torch

    kind = getattr(device, "type", str(device)).split(":")[0]
    return torch.autocast(device_type=kind, dtype=torch.bfloat16)


def pick_device(device: str | None) -> str:
    """``device`` or, when ``None``, ``"cuda"`` if a GPU is visible else ``"cpu"``."""
    if device is not None:
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_sentence_model(path: str | os.PathLike[str], device: str) -> Any:
    """Load a local sentence-transformers directory (never from a hub), without third-party load
    messages (:func:`quiet_third_party`)."""
    from sentence_transformers import SentenceTransformer

    with quiet_third_party():
        return SentenceTransformer(str(path), device=device, local_files_only=True)

