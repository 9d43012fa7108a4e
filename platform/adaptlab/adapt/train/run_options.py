"""How one training call runs, apart from its hyperparameters: :class:`TrainRun` (seed, data scale,
device, step checkpoints), passed whole from the trainers (:func:`~adaptlab.adapt.train.pt.train_pt`,
:func:`~adaptlab.adapt.train.ft.train_ft`, :func:`~adaptlab.adapt.train.colbert.train_colbert`) to
what they call.

The trainers keep their keyword call style (``train_ft(base, triplets, artifact_root=...,
seed=3, checkpoint_every=1)``): the keywords are :class:`TrainRunOptions`, collected by
:func:`train_run` into one :class:`TrainRun`, the one place that declares each default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, TypedDict

from adaptlab.options import reject_unknown

__all__ = ["ColBERTRunOptions", "TrainRun", "TrainRunOptions", "train_run"]


@dataclass(frozen=True)
class TrainRun:
    """One training call's run settings: ``seed`` (data order, dropout, masking), ``scale`` (the
    data scale named in the artifact; None: unnamed), ``device`` (None: the best available),
    ``checkpoint_every`` (steps between checkpoints, which are also written after every epoch;
    None: none) and ``on_checkpoint(step)`` (called after each checkpoint is complete)."""

    seed: int = 0
    scale: str | int | None = None
    device: str | None = None
    checkpoint_every: int | None = 50
    on_checkpoint: Callable[[int], None] | None = None


class ColBERTRunOptions(TypedDict, total=False):
    """The fields of :class:`TrainRun` that ColBERT fine-tuning uses, as keyword arguments."""

    seed: int
    scale: str | int | None
    device: str | None


class TrainRunOptions(ColBERTRunOptions, total=False):
    """The fields of :class:`TrainRun` as keyword arguments of a trainer."""

    checkpoint_every: int | None
    on_checkpoint: Callable[[int], None] | None


_FIELDS = tuple(f.name for f in fields(TrainRun))


def train_run(
    where: str, run: TrainRun | None, options: Mapping[str, Any], allowed: tuple[str, ...] = _FIELDS
) -> TrainRun:
    """``run`` (default :class:`TrainRun`) with the keyword ``options`` of the call ``where`` set on
    it; an option outside ``allowed`` is a :class:`TypeError` naming it and the valid ones."""
    reject_unknown(where, options, allowed)
    return replace(run or TrainRun(), **options)
