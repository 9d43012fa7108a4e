"""One stage of an adaptation job where it runs: in a Ray worker (:func:`remote_stage`: offline,
quiet third-party logs, the driver's progress choice, torch threads fixed by what the stage
declared) or in-process (:func:`run_stage`), calling the stage's trainer with the job's settings.
:mod:`.jobs` plans the stages and schedules them.
"""

from __future__ import annotations

import logging
import math
import os
import sys
from collections.abc import Callable
from typing import Any

from adaptlab.adapt.train.artifacts import Artifact
from adaptlab.adapt.train.colbert import COLBERT_VARIANT, train_colbert
from adaptlab.adapt.train.ft import train_ft
from adaptlab.adapt.train.merge import merge_models
from adaptlab.adapt.train.pt import train_pt
from adaptlab.models.variants import FT, PT
from adaptlab.runtime import available_cores

__all__ = ["quiet_worker", "remote_stage", "run_stage", "stage_threads"]


def run_stage(
    stage: str,
    upstream: Any,
    data: Any,
    params: dict[str, Any],
    root: str,
    device: str | None,
    checkpoint_every: int | None,
    on_checkpoint: Callable[[int], None] | None,
) -> Artifact:
    common = {
        "artifact_root": root,
        "seed": params["seed"],
        "scale": params["scale"],
        "device": device,
        "checkpoint_every": checkpoint_every,
        "on_checkpoint": on_checkpoint,
    }
    if stage == PT:
        return train_pt(upstream, data, config=params["pt_config"], **common)
    if stage == FT:
        return train_ft(upstream, data, config=params["ft_config"], **common)
    if stage == COLBERT_VARIANT:  # own child process and time-out; no step checkpoints (module doc)
        return train_colbert(
            upstream,
            data,
            config=params["colbert_config"],
            artifact_root=root,
            seed=params["seed"],
            scale=params["scale"],
            device=device,
            gpu_ids=params.get("gpu_ids"),
        )
    return merge_models(
        upstream, params["base_model"], params["merge_weight"], artifact_root=root, scale=params["scale"]
    )


def quiet_worker(progress: bool) -> None:
    """In a Ray worker: transformers at verbosity ``error`` without progress bars (also for
    processes it starts), the driver's progress choice (``ADAPTLAB_PROGRESS``, read by the
    training progress lines, :class:`.step_progress.StepProgress`: a worker on another machine does not
    inherit the driver's environment), and this package's INFO lines on stderr (Ray forwards them
    to the driver's log) unless progress is off (``adaptlab --quiet``, ``ADAPTLAB_PROGRESS=0``)."""
    os.environ["ADAPTLAB_PROGRESS"] = "1" if progress else "0"  # a reused worker follows each job
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TQDM_DISABLE", "1")
    logger = logging.getLogger("adaptlab.adapt.train")
    if not progress or any(getattr(h, "adaptlab_progress", False) for h in logger.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("[adaptlab] %(message)s"))
    handler.adaptlab_progress = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # one line each, whatever Ray did to the root logger


def remote_stage(
    stage: str,
    upstream: Any,
    data: Any,
    params: dict[str, Any],
    root: str,
    checkpoint_every: int | None,
    on_checkpoint: Callable[[int], None] | None,
) -> Artifact:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    quiet_worker(bool(params.get("progress", True)))
    _set_threads(float(params.get("cpus", 1)))
    device = "cpu" if stage == "merge" else None  # training picks the GPU Ray assigned, if any
    if stage == COLBERT_VARIANT:
        import ray

        # this task runs with RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES=1 (see run_adaptation_jobs):
        # hand colbert-ai the physical ids Ray assigned, which it writes into its ranks' environment
        ids = [int(g) for g in ray.get_gpu_ids()]
        params = {**params, "gpu_ids": ids or None}
        device = None if ids else "cpu"
    return run_stage(stage, upstream, data, params, root, device, checkpoint_every, on_checkpoint)


def stage_threads(declared_cpus: float, node_cpus: float, cores: int) -> int:
    """The torch threads of a training stage: the share of its node's cores that its declared
    CPUs are of the node's CPUs, ``floor(declared_cpus * cores / node_cpus)``, at least 1 and at
    most ``cores``. Fixed by what the stage declares and the node it runs on, never by what is free
    at the time, so a stage's floats do not depend on the load (a matrix product's sums are split
    by thread). The embedded runtime counts ``2 x cores`` CPUs: ``cpus_per_job = 1`` gives one
    thread; declaring all the node's CPUs gives a stage the node's cores (and the node alone)."""
    if node_cpus <= 0:
        return 1
    return max(1, min(int(cores), math.floor(declared_cpus * cores / node_cpus + 1e-9)))


def _set_threads(declared_cpus: float) -> int:
    """In a Ray worker: set torch's intra-op threads to :func:`stage_threads` of this node."""
    import ray
    import torch

    node_id = ray.get_runtime_context().get_node_id()
    node_cpus = next(
        (
            float(n.get("Resources", {}).get("CPU", 0))
            for n in ray.nodes()
            if n.get("NodeID") == node_id and n.get("Alive", True)
        ),
        0.0,
    )
    threads = stage_threads(declared_cpus, node_cpus, available_cores())
    torch.set_num_threads(threads)
    return threads
