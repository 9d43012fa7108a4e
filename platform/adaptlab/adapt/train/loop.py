"""The training loop shared by PT and FT: seeded data order, one optimizer step after another on
the schedule of :mod:`.optimizer`, gradient clipping, and checkpoints that make a killed run
resumable.

Determinism: the examples of epoch ``e`` are visited in the order
``numpy.random.default_rng([seed, e]).permutation(n)`` (with ``length_buckets``, that order
grouped by length: :func:`epoch_order`), and step ``s`` runs its forward and
backward pass under ``torch.random.fork_rng`` seeded with ``SeedSequence([seed, s])`` (dropout,
MLM masking). Every random draw is therefore a function of ``(seed, step)`` and the global torch
RNG is left untouched; a run resumed from a checkpoint at step ``s`` continues exactly as the
uninterrupted run would (on the same device and thread count).

The run's plan and its checks are :mod:`.checks`, its model knobs (device, precision, gradient
checkpointing, fused attention) :mod:`.knobs`, its progress lines :mod:`.step_progress`.

Checkpoints (``checkpoint_dir/step-<s>/``, written every ``checkpoint_every`` steps and at the end
of each epoch when asked, and resumed from) are :mod:`.checkpoints`: their layout, the latest
pointer, writing, resuming and sharing across nodes live there.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from adaptlab.adapt.train.checkpoints import resume_checkpoint, write_checkpoint
from adaptlab.adapt.train.checks import LoopResult, check_weights, plan_run, snapshot
from adaptlab.adapt.train.knobs import autocast, check_precision, set_attention_dropout, set_gradient_checkpointing
from adaptlab.adapt.train.optimizer import OptimConfig, linear_warmup_decay, make_adamw, param_groups
from adaptlab.adapt.train.step_progress import StepProgress

__all__ = ["BUCKET_BATCHES", "Checkpointing", "Examples", "epoch_order", "run_loop", "seeded", "step_seed"]


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
    order = np.concatenate(
        [w[np.argsort(-lengths[w], kind="stable")] for w in np.split(order, range(window, n, window))]
    )
    full = n // batch_size
    batches = order[: full * batch_size].reshape(full, batch_size)[rng.permutation(full)]
    return np.concatenate([batches.ravel(), order[full * batch_size :]])


def step_seed(seed: int, step: int) -> int:
    """A 63-bit torch seed derived from ``(seed, step)`` by ``numpy.random.SeedSequence``."""
    return int(np.random.SeedSequence([int(seed), int(step)]).generate_state(2, np.uint64)[0] >> 1)


@contextlib.contextmanager
def seeded(seed: int, device: Any) -> Iterator[None]:
    """Run the block under ``torch.manual_seed(seed)`` and restore the global RNG afterwards."""
    import torch

    devices = [device.index or 0] if getattr(device, "type", "cpu") == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


@dataclass(frozen=True)
class _Stepper:
    """What every optimizer step of one run uses: the model, its optimizer and trainable
    ``params``, the ``device``, ``compute_loss(indices)``, the clipping norm and the precision."""

    model: Any
    optimizer: Any
    params: list[Any]
    device: Any
    compute_loss: Callable[[np.ndarray], Any]
    max_grad_norm: float
    precision: str = "fp32"


def _train_step(stepper: _Stepper, idx: np.ndarray, lr: float, seed: int) -> float:
    """One optimizer step at learning rate ``lr`` under the step's seed; its loss."""
    import torch

    optimizer = stepper.optimizer
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.zero_grad(set_to_none=True)
    with seeded(seed, stepper.device):
        with autocast(stepper.precision, stepper.device):
            loss = stepper.compute_loss(idx)
        loss.backward()
    if stepper.max_grad_norm and stepper.max_grad_norm > 0:
        torch.nn.utils.clip_grad_norm_(stepper.params, stepper.max_grad_norm)
    optimizer.step()
    value = float(loss.detach())
    del loss  # the graph is freed before the next step's forward pass
    return value


@dataclass(frozen=True)
class Examples:
    """What a run trains on: ``n`` examples, ``compute_loss(indices)`` the scalar loss of one
    batch of them, and ``lengths`` (a token count per example; None: unknown), which group batches
    by length when ``length_buckets`` is on (:func:`epoch_order`)."""

    n: int
    compute_loss: Callable[[np.ndarray], Any]
    lengths: np.ndarray | None = None


@dataclass(frozen=True)
class Checkpointing:
    """Where a run's checkpoints go (``directory``; resumed from when it holds one), when they are
    written (every ``every`` steps; at the end of each epoch with ``each_epoch``), and what runs
    after each checkpoint (``on_checkpoint(step)``) and each epoch (``on_epoch_end(epoch,
    checkpoint)``): :func:`run_loop`'s checkpoint settings, passed whole."""

    directory: Path | None = None
    every: int | None = None
    each_epoch: bool = False
    on_checkpoint: Callable[[int], None] | None = None
    on_epoch_end: Callable[[int, Path | None], None] | None = None


def run_loop(
    model: Any,
    *,
    examples: Examples,
    optim: OptimConfig,
    seed: int,
    device: Any,
    checkpoints: Checkpointing | None = None,
    label: str = "training",
) -> LoopResult:
    """Train ``model`` (its trainable parameters) for ``optim.epochs`` epochs over the
    ``examples`` (:class:`Examples`).

    ``checkpoints`` (:class:`Checkpointing`; none when None): resumes from its ``directory`` when
    that holds a checkpoint. ``on_checkpoint(step)`` runs after each checkpoint is complete;
    ``on_epoch_end(epoch, checkpoint)`` after each epoch (0-based, with that epoch's checkpoint
    when ``each_epoch``; the last epoch's is written only for ``on_epoch_end``: without it the
    trained model follows at once). ``label``
    names the run (variant and data scale) in the checks' messages (module docstring).
    """
    import torch

    ck = checkpoints or Checkpointing()
    result = plan_run(examples.n, optim, label)
    result.torch_threads = torch.get_num_threads()
    optimizer, dropout = _start_training(model, optim, device, label)
    params = [p for group in optimizer.param_groups for p in group["params"]]
    stepper = _Stepper(model, optimizer, params, device, examples.compute_loss, optim.max_grad_norm, optim.precision)
    result.optimizer = "adamw-fused" if optimizer.defaults.get("fused") else "adamw-foreach"
    before = snapshot(params) if optim.min_weight_change > 0 else None
    start = _resume(model, optimizer, ck.directory, device, result)
    t0 = time.perf_counter()
    progress = StepProgress(label, result.schedule["total_steps"], start)
    _run_steps(stepper, examples, _Schedule(optim, seed, start), ck, result, progress)
    result.steps = result.schedule["total_steps"]
    result.epochs_completed = math.ceil(result.steps / result.schedule["steps_per_epoch"])
    result.seconds = time.perf_counter() - t0
    progress.close(result.losses[-1] if result.losses else None)
    _end_training(model, optim, dropout, label)
    check_weights(params, before, optim, label, result)
    return result


@dataclass(frozen=True)
class _Schedule:
    """The run's optimizer settings, its seed and the step it starts (or resumes) at."""

    optim: OptimConfig
    seed: int
    start: int


def _run_steps(
    stepper: _Stepper,
    examples: Examples,
    schedule: _Schedule,
    ck: Checkpointing,
    result: LoopResult,
    progress: StepProgress,
) -> None:
    """The steps from ``schedule.start`` to the end: each on its batch of the epoch's order
    (:func:`epoch_order`) at the learning rate of the schedule, then its checkpoint and epoch
    hooks (:func:`_after_step`)."""
    optim, seed = schedule.optim, schedule.seed
    steps_per_epoch = result.schedule["steps_per_epoch"]
    total, warmup = result.schedule["total_steps"], result.schedule["warmup_steps"]
    lengths = examples.lengths if optim.length_buckets else None
    order, order_epoch = np.arange(0), -1
    for step in range(schedule.start, total):
        epoch, b = divmod(step, steps_per_epoch)
        if epoch != order_epoch:
            order = epoch_order(examples.n, seed, epoch, optim.batch_size, lengths)
            order_epoch = epoch
        idx = order[b * optim.batch_size : (b + 1) * optim.batch_size]
        lr = optim.learning_rate * linear_warmup_decay(step, total, warmup)
        with progress.running(step, result.losses):
            loss = _train_step(stepper, idx, lr, step_seed(seed, step))
        result.losses.append(loss)
        progress.update(step + 1, result.losses[-1])
        _after_step(stepper, ck, result, step + 1)


def _after_step(stepper: _Stepper, ck: Checkpointing, result: LoopResult, done: int) -> None:
    """After ``done`` steps: a checkpoint when one is due (every ``ck.every`` steps before the
    last; at the end of an epoch with ``ck.each_epoch``), then ``ck.on_checkpoint(done)``; at the
    end of an epoch, ``ck.on_epoch_end(epoch, checkpoint)`` with the model in evaluation mode."""
    import torch

    steps_per_epoch, total = result.schedule["steps_per_epoch"], result.schedule["total_steps"]
    end_of_epoch = done % steps_per_epoch == 0 or done == total
    target = None
    periodic = bool(ck.every) and done % int(ck.every or 1) == 0 and done < total
    # the last step's state is the trained model: checkpointed only for an epoch hook that reads it
    epochly = ck.each_epoch and end_of_epoch and (done < total or ck.on_epoch_end is not None)
    if ck.directory is not None and (periodic or epochly):
        target = write_checkpoint(stepper.model, stepper.optimizer, ck.directory, done, result.losses)
        if ck.on_checkpoint is not None:
            ck.on_checkpoint(done)
    if end_of_epoch:
        result.epochs_completed = math.ceil(done / steps_per_epoch)
        if ck.on_epoch_end is not None:
            stepper.model.eval()
            with torch.no_grad():
                ck.on_epoch_end(result.epochs_completed - 1, target)
            stepper.model.train()


def _start_training(model: Any, optim: OptimConfig, device: Any, label: str) -> tuple[Any, float | None]:
    """Put ``model`` on ``device`` in training mode with the run's options switched on; its AdamW
    optimizer and the attention dropout to restore afterwards (None: unchanged)."""
    model.to(device)
    model.train()
    if optim.gradient_checkpointing:
        set_gradient_checkpointing(model, True, label)
    check_precision(optim.precision, device, label)
    dropout = set_attention_dropout(model, 0.0, label) if optim.fused_attention else None
    return make_adamw(param_groups(model, optim.weight_decay), optim.learning_rate), dropout


def _end_training(model: Any, optim: OptimConfig, dropout: float | None, label: str) -> None:
    """``model`` in evaluation mode with the options of :func:`_start_training` switched off."""
    model.eval()
    if optim.gradient_checkpointing:
        set_gradient_checkpointing(model, False, label)
    if dropout is not None:
        set_attention_dropout(model, dropout, label)


def _resume(model: Any, optimizer: Any, checkpoint_dir: Path | None, device: Any, result: LoopResult) -> int:
    """Load the latest checkpoint (model, optimizer, losses) when there is one; its step."""
    found = resume_checkpoint(model, optimizer, checkpoint_dir, device)
    if found is None:
        return 0
    result.resumed_from_step, result.losses = found
    return result.resumed_from_step
