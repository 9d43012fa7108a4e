"""The hyperparameters trainers share, as the dataclass bases of their configurations.

- :class:`TrainConfig`: ``learning_rate``, ``epochs``, ``batch_size`` -- every trainer's (PT, FT,
  ColBERT FT); each subclass declares them again only to give its own defaults.
- :class:`LoopConfig`: adds the schedule and the training checks of the seeded loop
  (:mod:`adaptlab.adapt.train.loop`) that PT and FT run, and :meth:`LoopConfig.optim` for it.

Validation runs in ``__post_init__`` and names the concrete class: ``FTConfig.batch_size = 0:
expected an integer >= 1`` (a :class:`~adaptlab.errors.ConfigError`); a subclass checks its own
fields after calling ``super().__post_init__()``.

Field order. Dataclass inheritance puts these fields before a subclass's own, so the order of
``dataclasses.fields`` / ``asdict`` is not the order the configs declared before they shared
these bases; the configs are keyword-only, so no call can bind a value to the wrong field by
position. Artifact keys hash the hyperparameters as canonical JSON with sorted keys
(:func:`adaptlab.adapt.train.addressing.artifact_key`), so field order never enters a key.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from adaptlab.adapt.train.knobs import TRAINING_PRECISIONS
from adaptlab.adapt.train.optimizer import OptimConfig
from adaptlab.errors import ConfigError

__all__ = [
    "AUTO",
    "KEYED_IF_SET",
    "RUNTIME_FIELDS",
    "LoopConfig",
    "TrainConfig",
    "check_at_least_one",
    "check_positive",
]

AUTO = "auto"
"""A setting adaptlab decides itself: ``gradient_checkpointing = "auto"`` per training stage
(:func:`adaptlab.adapt.train.memory.decide_checkpointing`), a prefix ``"auto"`` from the model
(:func:`adaptlab.adapt.train.ft.resolve_prefixes`)."""

RUNTIME_FIELDS = ("gradient_checkpointing",)
"""Fields of :class:`LoopConfig` that change how training runs, not what it computes."""
KEYED_IF_SET = {"precision": "fp32", "fused_attention": False, "length_buckets": False}
"""Fields that change the numbers but enter artifact keys only when set (their defaults here)."""


def check_positive(owner: str, name: str, value: Any) -> None:
    """Raise :class:`ConfigError` (``"<owner>.<name> = <value>: ..."``) unless ``value`` is a
    finite number > 0."""
    try:
        ok = bool(np.isfinite(value) and value > 0)
    except TypeError:
        ok = False
    if not ok:
        raise ConfigError(f"{owner}.{name} = {value!r}: expected a positive number")


def check_at_least_one(owner: str, name: str, value: Any) -> None:
    """Raise :class:`ConfigError` unless ``int(value) >= 1``."""
    try:
        ok = int(value) >= 1
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ConfigError(f"{owner}.{name} = {value!r}: expected an integer >= 1")


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """``learning_rate`` (a finite number > 0), ``epochs`` and ``batch_size`` (integers >= 1)."""

    learning_rate: float
    epochs: int
    batch_size: int

    def __post_init__(self) -> None:
        owner = type(self).__name__
        check_positive(owner, "learning_rate", self.learning_rate)
        for name in ("epochs", "batch_size"):
            check_at_least_one(owner, name, getattr(self, name))


@dataclass(frozen=True, kw_only=True)
class LoopConfig(TrainConfig):
    """The seeded loop's schedule (linear warm-up over ``warmup_ratio`` of the steps, AdamW
    ``weight_decay``, gradient clipping at ``max_grad_norm``, at most ``max_steps`` steps) and its
    checks (at least ``min_steps`` steps, a relative weight change above ``min_weight_change``;
    ``warn_only`` turns a failed check into a warning), and ``gradient_checkpointing``: keep only
    each encoder layer's input during the forward pass and recompute the layer in the backward
    pass (MiniLM FT at batch 32 x 256 tokens: 3.2 instead of 9.3 GB, for one more forward pass a
    step; the numbers do not change, so it is left out of artifact keys: :meth:`key_dict`).
    ``"auto"``: the stage scheduler decides it per stage from the stage's memory and the node's
    (:func:`adaptlab.adapt.train.memory.decide_checkpointing`); a config that reaches
    :meth:`optim` undecided (training in process, a sweep trial) trains without it. The default
    is off: on 2 cores the PDF study took 868 s with "auto" (FT stages <= 3.15 GB, one thread each,
    side by side) against 684 s without (whole-node stages on 2 threads, up to 9.0 GB).

    Two speed options that change the numbers (off by default; see :mod:`.loop`): ``precision``
    ``"bf16"`` runs the forward pass under bfloat16 autocast (weights, gradients and optimizer
    stay fp32), and ``fused_attention`` trains without attention-probability dropout, so PyTorch's
    fused scaled-dot-product attention kernel runs instead of the unfused path that dropout needs.
    ``length_buckets`` (off by default) batches examples of similar token length together, so
    batches pad to less (:func:`adaptlab.adapt.train.loop.epoch_order`); it changes which examples
    share a batch."""

    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    max_steps: int | None = None
    min_steps: int = 10
    min_weight_change: float = 1e-6
    warn_only: bool = False
    gradient_checkpointing: bool | str = False
    precision: str = "fp32"
    fused_attention: bool = False
    length_buckets: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        owner = type(self).__name__
        if self.precision not in TRAINING_PRECISIONS:
            raise ConfigError(
                f"{owner}.precision = {self.precision!r}: expected one of "
                f"{', '.join(repr(p) for p in TRAINING_PRECISIONS)}"
            )
        if not isinstance(self.fused_attention, bool):
            raise ConfigError(f"{owner}.fused_attention = {self.fused_attention!r}: expected true or false")
        if not isinstance(self.length_buckets, bool):
            raise ConfigError(f"{owner}.length_buckets = {self.length_buckets!r}: expected true or false")
        ckpt = self.gradient_checkpointing
        if not (isinstance(ckpt, bool) or (isinstance(ckpt, str) and ckpt == AUTO)):
            raise ConfigError(f'{owner}.gradient_checkpointing = {ckpt!r}: expected "{AUTO}", true or false')
        if not 0.0 <= self.warmup_ratio < 1.0:
            raise ConfigError(f"{owner}.warmup_ratio = {self.warmup_ratio!r}: expected 0 <= value < 1")
        if self.max_steps is not None and self.max_steps < 1:
            raise ConfigError(f"{owner}.max_steps = {self.max_steps!r}: expected None or >= 1")
        if isinstance(self.min_steps, bool) or int(self.min_steps) < 0:
            raise ConfigError(f"{owner}.min_steps = {self.min_steps!r}: expected an integer >= 0 (0: no minimum)")
        if not (np.isfinite(self.min_weight_change) and self.min_weight_change >= 0):
            raise ConfigError(
                f"{owner}.min_weight_change = {self.min_weight_change!r}: expected a number >= 0 (0: no check)"
            )

    def optim(self) -> OptimConfig:
        """The loop's :class:`~adaptlab.adapt.train.optimizer.OptimConfig` (plain Python numbers)."""
        return OptimConfig(
            learning_rate=float(self.learning_rate),
            epochs=int(self.epochs),
            batch_size=int(self.batch_size),
            warmup_ratio=float(self.warmup_ratio),
            weight_decay=float(self.weight_decay),
            max_grad_norm=float(self.max_grad_norm),
            max_steps=self.max_steps,
            min_steps=int(self.min_steps),
            min_weight_change=float(self.min_weight_change),
            warn_only=bool(self.warn_only),
            gradient_checkpointing=self.gradient_checkpointing is True,  # "auto" undecided: off
            precision=self.precision,
            fused_attention=self.fused_attention,
            length_buckets=self.length_buckets,
        )

    def key_dict(self) -> dict[str, Any]:
        """The fields that decide the trained weights (the artifact key's hyperparameters):
        all but ``gradient_checkpointing``, which changes memory and time, not the numbers;
        ``precision``, ``fused_attention`` and ``length_buckets`` only when not at their defaults, so the keys of
        artifacts trained before they existed stay the same."""
        return {
            k: v
            for k, v in asdict(self).items()
            if k not in RUNTIME_FIELDS and not (k in KEYED_IF_SET and v == KEYED_IF_SET[k])
        }
