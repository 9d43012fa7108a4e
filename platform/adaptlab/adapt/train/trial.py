"""One trial of a sweep, run by Ray Tune inside a worker: the trial's fine-tuning settings
(:func:`trial_config`), the training with an :func:`~adaptlab.adapt.train.objective.epoch_report`
after every epoch (:func:`run_trial`), and the resources the trial asks Tune for (its CPUs, GPUs
and the memory of its fine-tuning at the largest batch the space allows, :mod:`.memory`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from adaptlab.adapt.train.artifacts import local_model_path
from adaptlab.adapt.train.ft import FTConfig, fine_tune_model
from adaptlab.adapt.train.knobs import pick_device
from adaptlab.adapt.train.loop import Checkpointing
from adaptlab.adapt.train.memory import EncoderShape, declared_memory, estimate_stage_memory, largest_node_memory
from adaptlab.adapt.train.merge import merge_state_dicts
from adaptlab.adapt.train.objective import epoch_report, per_query_values
from adaptlab.adapt.train.space import largest_value
from adaptlab.adapt.train.sweep_config import SweepConfig
from adaptlab.adapt.train.third_party import load_sentence_model
from adaptlab.data.dataset import Dataset
from adaptlab.models.variants import FT
from adaptlab.stats import BootstrapConfig

__all__ = ["run_trial", "trainable", "trial_config", "trial_memory", "trial_resources"]


def trial_config(base: FTConfig, config: Mapping[str, Any]) -> FTConfig:
    """``base`` with a trial's ``config`` values (names in :data:`~adaptlab.adapt.train.space.TUNABLE`) applied;
    ``temperature`` sets ``scale = 1 / temperature``; ``merge_weight`` is not an FTConfig field."""
    updates: dict[str, Any] = {}
    for name in ("learning_rate", "scale", "warmup_ratio", "weight_decay"):
        if name in config:
            updates[name] = float(config[name])
    for name in ("epochs", "batch_size", "num_negatives"):
        if name in config:
            updates[name] = int(config[name])
    if "temperature" in config:
        updates["scale"] = 1.0 / float(config["temperature"])
    return replace(base, **updates)


def run_trial(config: dict[str, Any], payload: dict[str, Any]) -> None:
    """One Ray Tune trial: fine-tune with the trial's settings and report :func:`epoch_report`
    (selection objective, confirmation CI) after every epoch (of the merged model when the trial
    has a ``merge_weight``)."""
    from ray import tune  # deferred: runs inside a Ray worker

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    cfg = trial_config(payload["ft_config"], config)
    device = pick_device(payload.get("device"))
    model = load_sentence_model(local_model_path(payload["start_path"]), device)  # a URI: materialised here
    q_prefix, p_prefix = payload["prefixes"]
    weight = config.get("merge_weight")
    base_sd = None
    if weight is not None:
        reference = load_sentence_model(local_model_path(payload["merge_base_path"]), "cpu")
        base_sd = {k: v.detach().clone() for k, v in reference.state_dict().items()}
        del reference
    validation: Dataset = payload["validation"]
    bootstrap: BootstrapConfig = payload["bootstrap"]
    work = Path(tempfile.mkdtemp(prefix="adaptlab-trial-"))
    ckpt_dir = work / "checkpoints"
    restored = tune.get_checkpoint()
    if restored is not None:
        restored.to_directory(str(ckpt_dir))

    def evaluate_model() -> np.ndarray:
        return per_query_values(model, validation, payload["measure"], query_prefix=q_prefix, passage_prefix=p_prefix)

    def on_epoch_end(epoch: int, checkpoint: Path | None) -> None:
        if base_sd is not None and weight is not None:  # set together above
            own = {k: v.detach().clone() for k, v in model.state_dict().items()}
            model.load_state_dict(merge_state_dicts(own, base_sd, float(weight)))
            values = evaluate_model()
            model.load_state_dict(own)
        else:
            values = evaluate_model()
        metrics = {**epoch_report(values, payload["selection"], bootstrap, str(payload["measure"])), "epoch": epoch + 1}
        tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(str(ckpt_dir)) if checkpoint else None)

    try:
        fine_tune_model(
            model,
            payload["rows"],
            cfg,
            seed=payload["seed"],
            prefixes=(q_prefix, p_prefix),
            device=device,
            checkpoints=Checkpointing(ckpt_dir, each_epoch=True, on_epoch_end=on_epoch_end),
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def trainable(payload: dict[str, Any], config: SweepConfig, start_path: Path, ray: Any) -> Any:
    """:func:`run_trial` bound to ``payload`` as a Tune trainable that asks for a trial's resources:
    ``config``'s CPUs and GPUs and the memory of its fine-tuning (:func:`trial_memory`)."""
    memory = trial_memory(payload["ft_config"], config.param_space, start_path, ray)
    resources = trial_resources(config.cpus_per_trial, config.gpus_per_trial, memory, ray)
    from ray import tune  # deferred: importing adaptlab.adapt does not load ray

    return tune.with_resources(tune.with_parameters(run_trial, payload=payload), resources)


def trial_resources(cpus: float, gpus: float | None, memory: int, ray: Any) -> dict[str, float]:
    """A trial's Tune resources: ``gpus`` None asks for 1 GPU when the cluster has GPUs; ``memory``
    bytes when > 0."""
    if gpus is None:
        gpus = 1.0 if ray.cluster_resources().get("GPU", 0) >= 1 else 0.0
    resources = {"cpu": float(cpus), "gpu": float(gpus)}
    if memory:
        resources["memory"] = float(memory)
    return resources


def trial_memory(ft_config: FTConfig, space: Mapping[str, Any], start_path: Path, ray: Any) -> int:
    """Bytes a trial declares: the FT estimate (:mod:`.memory`) at the largest batch and number of
    negatives the space allows, capped at the largest node; 0 when the model's files do not say."""
    try:
        shape = EncoderShape.read(start_path)
    except (OSError, ValueError, KeyError):
        return 0
    config = replace(
        ft_config,
        batch_size=largest_value(space, "batch_size", ft_config.batch_size),
        num_negatives=largest_value(space, "num_negatives", ft_config.num_negatives),
    )
    estimate = estimate_stage_memory(FT, shape, config)
    return declared_memory(estimate, largest_node_memory(ray), "a sweep trial")
