"""A training run's plan, the checks that keep it from misleading, and its record.

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
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from adaptlab.adapt.train.optimizer import OptimConfig, linear_warmup_decay, warmup_steps
from adaptlab.errors import AdaptlabError

__all__ = [
    "LoopResult",
    "TrainingCheckError",
    "check_weights",
    "describe_schedule",
    "plan_run",
    "run_label",
    "snapshot",
]


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


def _check_failed(
    label: str, problem: str, schedule: dict[str, Any], fix: str, warn_only: bool, result: LoopResult | None = None
) -> None:
    message = f"{label}: {problem} ({describe_schedule(schedule)}); {fix}"
    if not warn_only:
        raise TrainingCheckError(message + "; or set warn_only = true to train anyway")
    logging.getLogger(__name__).warning("TRAINING CHECK FAILED: %s", message)
    if result is not None:
        result.warnings.append(message)


def snapshot(params: list[Any]) -> list[Any]:
    """A float32 copy of ``params`` on the CPU: the weights before training (:func:`check_weights`)."""
    return [p.detach().to("cpu", copy=True).float() for p in params]


def _relative_change(params: list[Any], before: list[Any]) -> float:
    import torch

    num = 0.0
    den = 0.0
    with torch.no_grad():
        for p, p0 in zip(params, before):
            now = p.detach().to("cpu").float()
            num += float(torch.sum((now - p0) ** 2))
            den += float(torch.sum(p0**2))
    return math.sqrt(num) / math.sqrt(den) if den > 0 else math.sqrt(num)


def plan_run(n_examples: int, optim: OptimConfig, label: str) -> LoopResult:
    """The run's schedule (epochs raised to reach ``min_steps``, warm-up capped) and the checks
    that can fail before training (module docstring), as an empty :class:`LoopResult`."""
    if n_examples < 1:
        raise ValueError("run_loop needs at least one training example")
    steps_per_epoch = math.ceil(n_examples / optim.batch_size)
    epochs = int(optim.epochs)
    target = optim.min_steps if optim.max_steps is None else min(optim.min_steps, optim.max_steps)
    if target and epochs * steps_per_epoch < target:
        epochs = math.ceil(target / steps_per_epoch)
        logging.getLogger(__name__).info(
            "%s: %d example(s) give %d step(s) per epoch; epochs raised from %d to %d to reach min_steps=%d",
            label,
            n_examples,
            steps_per_epoch,
            optim.epochs,
            epochs,
            target,
        )
    total = epochs * steps_per_epoch
    if optim.max_steps is not None:
        total = min(total, optim.max_steps)
    capped = optim.max_steps is not None and optim.max_steps < optim.min_steps
    warmup = warmup_steps(total, optim.warmup_ratio)
    nonzero = sum(1 for s in range(total) if optim.learning_rate * linear_warmup_decay(s, total, warmup) > 0)
    schedule = {
        "kind": "linear-warmup-linear-decay",
        "learning_rate": float(optim.learning_rate),
        "warmup_steps": warmup,
        "total_steps": total,
        "steps_per_epoch": steps_per_epoch,
        "epochs": epochs,
        "batch_size": int(optim.batch_size),
        "n_examples": int(n_examples),
        "max_steps": optim.max_steps,
        "capped": capped,
        "nonzero_lr_steps": nonzero,
    }
    result = LoopResult(steps=0, epochs_completed=0, epochs_requested=int(optim.epochs), schedule=schedule)
    if nonzero == 0:
        _check_failed(
            label,
            "every optimizer step has learning rate 0, so the weights cannot change",
            schedule,
            "use a positive learning rate and more steps",
            optim.warn_only,
            result,
        )
    if optim.min_steps and total < optim.min_steps:
        _check_failed(
            label,
            f"{total} optimizer step(s), fewer than min_steps={optim.min_steps}",
            schedule,
            "raise max_steps (or lower min_steps)",
            optim.warn_only or capped,
            result,
        )
    return result


def check_weights(
    params: list[Any], before: list[Any] | None, optim: OptimConfig, label: str, result: LoopResult
) -> None:
    """Record the relative weight change; too small a change fails the check."""
    if before is None:
        return
    change = _relative_change(params, before)
    result.relative_weight_change = change
    if not change > optim.min_weight_change:
        _check_failed(
            label,
            f"the weights moved by a relative {change:.3g} (||w - w0|| / ||w0||), not "
            f"more than min_weight_change={optim.min_weight_change:g}: the adapted model is "
            "the base model",
            result.schedule,
            "train longer or with a larger learning rate",
            optim.warn_only,
            result,
        )
