"""The report's "Training" table: per adapted model, how much adaptation really happened
(steps, epochs asked and run, warm-up and total steps, peak learning rate, first and last loss,
relative weight change, the training checks' warnings). Read from ``config.systems`` of the runs,
else from the artifact's manifest through :func:`adaptlab.adapt.train.artifacts.read_manifest`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from adaptlab.adapt.train.artifacts import read_manifest
from adaptlab.analysis.present import format_number, format_scientific, format_setting
from adaptlab.analysis.report.document import Document
from adaptlab.errors import StoreError
from adaptlab.models.variants import UNTRAINED_VARIANTS

__all__ = ["training_flags", "training_section", "training_summaries"]

_UNTRAINED = frozenset(UNTRAINED_VARIANTS)


def _manifest_training(artifact_path: Any) -> dict[str, Any]:
    """The ``training`` summary of an artifact's manifest (empty when it has none or it cannot
    be read: the table then says n/a)."""
    if not artifact_path:
        return {}
    try:
        data = read_manifest(str(artifact_path))
    except StoreError:
        return {}
    training = data.get("training")
    return dict(training) if isinstance(training, dict) else {}


def training_summaries(runs: list[dict[str, Any]], systems: Sequence[str] | None) -> dict[str, dict[str, Any]]:
    """Per adapted system (the latest run's ``config.systems`` entry): variant, scale and the
    training summary stored there, else read from its artifact's manifest."""
    out: dict[str, dict[str, Any]] = {}
    for run in runs:  # oldest first: the latest run's entry wins
        try:
            config = json.loads(run.get("config") or "{}")
        except (TypeError, ValueError):
            continue
        entries = config.get("systems") if isinstance(config, dict) else None
        if not isinstance(entries, dict):
            continue
        for name, info in entries.items():
            if not isinstance(info, dict) or info.get("variant") in _UNTRAINED or (systems and name not in systems):
                continue
            training = info.get("training") or _manifest_training(info.get("artifact_path"))
            out[name] = {**info, "training": dict(training or {})}
    return out


def training_flags(t: dict[str, Any]) -> list[str]:
    """What says that little or no adaptation happened, plus the checks' own warnings."""
    sch = t.get("schedule") or {}
    flags = []
    if t.get("steps") == 0:
        flags.append("no optimizer step")
    if sch and sch.get("nonzero_lr_steps") == 0:
        flags.append("zero learning rate")
    if t.get("relative_weight_change") is not None and float(t["relative_weight_change"]) == 0.0:
        flags.append("weights unchanged")
    asked, done = t.get("epochs_requested"), t.get("epochs_completed")
    if sch.get("capped") and asked is not None and done is not None and float(done) < float(asked):
        flags.append(f"stopped by max_steps = {sch.get('max_steps')} after {format_setting(done)} of {asked} epoch(s)")
    return flags + [str(w) for w in t.get("check_warnings") or []]


def _training_row(name: str, info: dict[str, Any]) -> list[str]:
    t = info["training"]
    sch = t.get("schedule") or {}
    asked, done = t.get("epochs_requested"), t.get("epochs_completed")
    epochs = f"{asked} -> {done}" if asked is not None and done is not None else "n/a"
    warm = f"{sch['warmup_steps']} / {sch['total_steps']}" if "warmup_steps" in sch and "total_steps" in sch else "n/a"
    if "merge_weight" in t and t.get("steps") is None:
        warm = f"merge (weight {format_setting(t['merge_weight'])}), no training"
    flags = training_flags(t)
    return [
        name,
        str(info.get("variant", "")),
        format_number(info.get("n_documents")),
        format_number(t.get("steps")),
        epochs,
        warm,
        format_setting(sch.get("learning_rate")),
        format_number(t.get("first_loss")),
        format_number(t.get("last_loss")),
        format_scientific(t.get("relative_weight_change")),
        f"{len(flags)} (see below)" if flags else "none",
    ]


def training_section(doc: Document, runs: list[dict[str, Any]], systems: Sequence[str] | None) -> None:
    """One row per adapted model: how much adaptation really happened."""
    summaries = training_summaries(runs, systems)
    if not summaries:
        return
    doc.h(2, "Training of the adapted models")
    doc.table(
        [
            "System",
            "Variant",
            "Documents",
            "Steps",
            "Epochs asked -> run",
            "Warm-up / total steps",
            "Peak lr",
            "First loss",
            "Last loss",
            "Relative weight change",
            "Warnings",
        ],
        [_training_row(n, summaries[n]) for n in sorted(summaries)],
    )
    doc.p(
        "From each adapted model's artifact manifest (config.systems of its runs). Schedule: linear warm-up "
        "then linear decay to 0 over the total steps; relative weight change = ||W_adapted - W_base|| / "
        "||W_base|| over the trained parameters (for ColBERT: BERT and projection). First / last loss: of the "
        "first and last optimizer step (ColBERT: recovered from colbert-ai's running-mean log). 'n/a': not "
        "recorded (artifacts trained before these were recorded; a merge trains nothing)."
    )
    notes = [f"{n}: {w}" for n in sorted(summaries) for w in training_flags(summaries[n]["training"])]
    if notes:
        doc.pre("\n".join(notes))
