"""Adaptation jobs: (variant, scale) training runs, in-process or as Ray tasks.

A job asks for one variant of one base model at one data scale:

- ``pt``     MLM pre-training on the domain chunks                (:func:`.train_pt.train_pt`)
- ``ft``     contrastive fine-tuning on the triplets              (:func:`.train_ft.train_ft`)
- ``pt-ft``  fine-tuning that starts from the PT model
- ``merged`` ``w * adapted + (1 - w) * base`` of the FT (or PT-FT, ``merge_source``) model and
             the base model                                        (:func:`.merge.merge_models`)
- ``colbert-ft`` ColBERT (late interaction) fine-tuning on the triplets through RAGatouille, in a
             child process with a time-out; a plain BERT base becomes an untrained ColBERT first
                                                                   (:func:`.colbert.train_colbert`)

:func:`run_adaptation_jobs` turns a list of jobs into a graph of Ray tasks, one per distinct
stage (a PT shared by a ``pt-ft`` and a ``merged`` job of the same scale runs once), each stage
waiting for the stage it starts from. Training stages ask for one GPU each when the cluster has
GPUs (so several jobs run side by side, one per GPU) and for CPUs otherwise; merging needs no
GPU. A stage whose worker dies (killed, out of memory, node lost) is retried by Ray
(``max_retries``) and resumes from the last checkpoint in its artifact's temp directory. All
results land in the content-addressed artifact store, so re-submitting finished jobs only looks
them up. On a multi-node cluster ``artifact_root`` is a shared filesystem path or a URI
(``s3://bucket/prefix/artifacts``): each stage then trains in its node's local staging folder and
publishes the artifact there, and a stage that starts from another stage's artifact materialises
it on its own node (:mod:`.artifacts`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from adaptlab.adapt.train.artifacts import Artifact, artifact_root_text, chunks_fingerprint, describe_base
from adaptlab.adapt.train.colbert import COLBERT_VARIANT, ColBERTFTConfig, train_colbert
from adaptlab.adapt.train.merge import merge_models
from adaptlab.adapt.train.ft import FTConfig, coerce_triplets, train_ft, triplets_fingerprint
from adaptlab.adapt.train.pt import PTConfig, train_pt
from adaptlab.errors import AdaptlabError, ConfigError
from adaptlab.runtime import init_ray

__all__ = [
    "AdaptJob",
    "VARIANTS",
    "ensure_ray",
    "run_adaptation_jobs",
    "train_variant",
]

VARIANTS: tuple[str, ...] = (COLBERT_VARIANT, "ft", "merged", "pt", "pt-ft")
_MERGE_SOURCES = ("ft", "pt-ft")


@dataclass(frozen=True, eq=False)
class AdaptJob:
    """One adaptation run: ``variant`` of ``base_model`` trained on the data of one ``scale``.

    ``triplets`` (query, positive, negatives) are needed by ft, pt-ft, merged and colbert-ft;
    ``chunks`` (domain text) by pt, pt-ft, and merged when ``merge_source == "pt-ft"``;
    ``colbert_config`` is used by colbert-ft only.
    """

    variant: str
    base_model: str | os.PathLike[str]
    scale: str | int | None = None
    triplets: Any = None
    chunks: Sequence[str] | None = None
    pt_config: PTConfig = field(default_factory=PTConfig)
    ft_config: FTConfig = field(default_factory=FTConfig)
    merge_weight: float = 0.5
    merge_source: str = "ft"
    seed: int = 0
    colbert_config: ColBERTFTConfig = field(default_factory=ColBERTFTConfig)

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ConfigError(f"adaptation variant {self.variant!r}: expected one of {', '.join(VARIANTS)}")
        if self.merge_source not in _MERGE_SOURCES:
            raise ConfigError(
                f"merge_source {self.merge_source!r}: expected one of {', '.join(_MERGE_SOURCES)}"
            )
        needs = self.stages()
        if "pt" in needs and self.chunks is None:
            raise ConfigError(f"job {self.describe()}: variant needs domain chunks (chunks=...) for PT")
        if ("ft" in needs or COLBERT_VARIANT in needs) and self.triplets is None:
            raise ConfigError(f"job {self.describe()}: variant needs triplets (triplets=...) for FT")

    def stages(self) -> tuple[str, ...]:
        """The stages this job runs, in order: a subsequence of ``("pt", "ft", "merge")``, or
        ``("colbert-ft",)``."""
        chain = {"pt": ("pt",), "ft": ("ft",), "pt-ft": ("pt", "ft"), COLBERT_VARIANT: (COLBERT_VARIANT,)}
        if self.variant == "merged":
            return chain[self.merge_source] + ("merge",)
        return chain[self.variant]

    def describe(self) -> str:
        return f"{self.variant}/{os.fspath(self.base_model)}/scale={self.scale}"


def train_variant(
    job: AdaptJob,
    artifact_root: str | os.PathLike[str],
    *,
    device: str | None = None,
    checkpoint_every: int | None = 50,
    on_checkpoint: Callable[[int], None] | None = None,
) -> Artifact:
    """Run ``job`` in this process, stage after stage (each reused when already stored)."""
    current: Any = job.base_model
    for stage in job.stages():
        data = job.chunks if stage == "pt" else job.triplets if stage in ("ft", COLBERT_VARIANT) else None
        current = _run_stage(
            stage, current, data, _params(job), artifact_root_text(artifact_root), device,
            checkpoint_every, on_checkpoint,
        )
    return current


def _params(job: AdaptJob) -> dict[str, Any]:
    """The job without its data (what a Ray task needs besides the data reference)."""
    return {
        "base_model": job.base_model, "scale": job.scale, "seed": job.seed,
        "pt_config": job.pt_config, "ft_config": job.ft_config, "merge_weight": job.merge_weight,
        "colbert_config": job.colbert_config,
    }


def _run_stage(
    stage: str,
    upstream: Any,
    data: Any,
    params: dict[str, Any],
    root: str,
    device: str | None,
    checkpoint_every: int | None,
    on_checkpoint: Callable[[int], None] | None,
) -> Artifact:
    common = {"artifact_root": root, "seed": params["seed"], "scale": params["scale"], "device": device,
              "checkpoint_every": checkpoint_every, "on_checkpoint": on_checkpoint}
    if stage == "pt":
        return train_pt(upstream, data, config=params["pt_config"], **common)
    if stage == "ft":
        return train_ft(upstream, data, config=params["ft_config"], **common)
    if stage == COLBERT_VARIANT:  # own child process and time-out; no step checkpoints (module doc)
        return train_colbert(upstream, data, config=params["colbert_config"], artifact_root=root,
                             seed=params["seed"], scale=params["scale"], device=device,
                             gpu_ids=params.get("gpu_ids"))
    return merge_models(
        upstream, params["base_model"], params["merge_weight"], artifact_root=root, scale=params["scale"]
    )


def ensure_ray(address: str | None = None) -> Any:
    """The ``ray`` module, initialised: joined at ``address`` or started locally when not running
    (through :func:`adaptlab.runtime.init_ray`)."""
    import ray  # deferred: importing adaptlab.adapt does not load ray

    if not ray.is_initialized():
        init_ray(address=address)
    return ray


def _remote_stage(
    stage: str,
    upstream: Any,
    data: Any,
    params: dict[str, Any],
    root: str,
    checkpoint_every: int | None,
    on_checkpoint: Callable[[int], None] | None,
) -> Artifact:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    device = "cpu" if stage == "merge" else None  # training picks the GPU Ray assigned, if any
    if stage == COLBERT_VARIANT:
        import ray

        # this task runs with RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES=1 (see run_adaptation_jobs):
        # hand colbert-ai the physical ids Ray assigned, which it writes into its ranks' environment
        ids = [int(g) for g in ray.get_gpu_ids()]
        params = {**params, "gpu_ids": ids or None}
        device = None if ids else "cpu"
    return _run_stage(stage, upstream, data, params, root, device, checkpoint_every, on_checkpoint)


def run_adaptation_jobs(
    jobs: Sequence[AdaptJob],
    artifact_root: str | os.PathLike[str],
    *,
    gpus_per_job: float | None = None,
    cpus_per_job: float = 1,
    max_retries: int = 3,
    checkpoint_every: int | None = 50,
    on_checkpoint: Callable[[int], None] | None = None,
    address: str | None = None,
) -> list[Artifact]:
    """Run ``jobs`` as Ray tasks and return their artifacts in job order.

    ``gpus_per_job``: GPUs per training stage; ``None`` asks for 1 when the cluster has GPUs
    and 0 otherwise (fractions share a GPU). A stage whose worker dies is retried up to
    ``max_retries`` times, resuming from its last checkpoint (every ``checkpoint_every`` steps;
    ``on_checkpoint(step)`` runs in the worker after each). Ray is started (or joined at
    ``address``) when not running.
    """
    if max_retries < 0:
        raise ConfigError(f"max_retries = {max_retries}: expected >= 0")
    ray = ensure_ray(address)
    if gpus_per_job is None:
        gpus_per_job = 1.0 if ray.cluster_resources().get("GPU", 0) >= 1 else 0.0
    if gpus_per_job < 0 or cpus_per_job <= 0:
        raise ConfigError("gpus_per_job must be >= 0 and cpus_per_job > 0")
    root = artifact_root_text(artifact_root)  # a URI unchanged, a path made absolute
    remote = ray.remote(_remote_stage)
    train_opts = {"num_gpus": gpus_per_job, "num_cpus": cpus_per_job, "max_retries": max_retries,
                  "retry_exceptions": False}
    merge_opts = {"num_gpus": 0, "num_cpus": 1, "max_retries": max_retries, "retry_exceptions": False}

    refs: dict[tuple[Any, ...], Any] = {}
    data_refs: dict[tuple[str, str], Any] = {}
    out = []
    for job in jobs:
        base_key = describe_base(job.base_model).hash
        upstream: Any = job.base_model
        upstream_key: tuple[Any, ...] = ("base", base_key)
        for stage in job.stages():
            if stage == "pt":
                fp, _ = chunks_fingerprint(job.chunks or ())
                data_key = ("chunks", fp)
                if data_key not in data_refs:
                    data_refs[data_key] = ray.put([str(c) for c in job.chunks or ()])
                key = (stage, upstream_key, fp, job.pt_config, job.seed, job.scale)
            elif stage in ("ft", COLBERT_VARIANT):
                rows = coerce_triplets(job.triplets)
                fp = triplets_fingerprint(rows)
                data_key = ("triplets", fp)
                if data_key not in data_refs:
                    data_refs[data_key] = ray.put(rows)
                stage_config = job.ft_config if stage == "ft" else job.colbert_config
                key = (stage, upstream_key, fp, stage_config, job.seed, job.scale)
            else:
                data_key = None
                key = (stage, upstream_key, float(job.merge_weight), base_key, job.scale)
            if key not in refs:
                opts = merge_opts if stage == "merge" else train_opts
                if stage == COLBERT_VARIANT:
                    opts = {**opts, "runtime_env": {"env_vars": {"RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1"}}}
                refs[key] = remote.options(name=f"adapt:{stage}:{job.describe()}", **opts).remote(
                    stage, upstream, data_refs[data_key] if data_key else None, _params(job), root,
                    checkpoint_every, on_checkpoint,
                )
            upstream, upstream_key = refs[key], key
        out.append(upstream)
    return _gather(out)


def _gather(refs: list[Any]) -> list[Any]:
    """``ray.get`` of the jobs; a :class:`TrainingCheckError` or another adaptlab error raised in a
    task surfaces as itself (one line), not wrapped in Ray's task-error traceback."""
    import ray  # deferred: heavy

    try:
        return list(ray.get(refs))
    except ray.exceptions.RayTaskError as e:
        cause = getattr(e, "cause", None)
        if isinstance(cause, AdaptlabError):
            raise cause from None
        raise
