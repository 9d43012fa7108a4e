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
stage (a PT shared by a ``pt-ft`` and a ``merged`` job of the same scale runs once); a stage is
submitted when the stage it starts from is done. Training stages ask for one GPU each when the
cluster has GPUs (so several jobs run side by side, one per GPU) and for CPUs otherwise; merging
needs no GPU. Idle warm embedding pools are released first (:func:`adaptlab.runtime.make_room`):
their actors would hold the CPUs the stages wait for. Every stage declares the memory it needs
(:mod:`.memory`: model size, batch, sequence length, negatives), so Ray never places more stages
on a node than its memory holds: stages that do not fit side by side run one after another. A PT
or FT stage with ``gradient_checkpointing = "auto"`` trains with it exactly when that lets two
such stages share the largest node where one would have filled more than half of it
(:func:`.memory.decide_checkpointing`, decided once per stage before any runs); the decided
config is what its Ray task trains with.

Faults (retried by us, not by Ray, at most ``max_retries`` times per stage; each retry resumes
from the stage's last checkpoint, on any node: with a local ``artifact_root`` (a shared
filesystem) the checkpoints are in the artifact's temp directory under the root, and with a URI
root each checkpoint is also published next to the artifacts, in the background while training
goes on, and fetched, hash-checked, by a retry on another node (:mod:`.artifacts`, "Training
checkpoints on a URI root"); a stage that ends waits, bounded, for its upload in flight)):

- killed for memory (``OutOfMemoryError``) or crashed (``WorkerCrashedError``, e.g. the kernel's
  OOM killer): resubmitted once every running stage has ended, and nothing else starts while it
  runs;
- lost with its node (``NodeDiedError``, ``LocalRayletDiedError``; the one classification the
  embedding pool uses too, :func:`adaptlab.runtime.node_loss.lost_with_node`): resubmitted at
  once, to any node that fits it.

When the retries run out the call fails with one line (:class:`TrainingResourceError`) naming
the variant, the scale and the setting to lower; running stages are cancelled. Training logs
step/steps and the loss every few seconds (:mod:`.loop`), forwarded from the workers to the
driver's log; transformers' load messages and progress bars are off in the workers.

All results land in the content-addressed artifact store, so re-submitting finished jobs only
looks them up. On a multi-node cluster ``artifact_root`` is a shared filesystem path or a URI
(``s3://bucket/prefix/artifacts``): each stage then trains in its node's local staging folder and
publishes the artifact there, and a stage that starts from another stage's artifact materialises
it on its own node (:mod:`.artifacts`).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from adaptlab.adapt.train.addressing import chunks_fingerprint
from adaptlab.adapt.train.artifacts import Artifact, artifact_root_text
from adaptlab.adapt.train.base_model import describe_base
from adaptlab.adapt.train.colbert import COLBERT_VARIANT, ColBERTFTConfig
from adaptlab.adapt.train.ft import FTConfig, coerce_triplets, training_rows_fingerprint
from adaptlab.adapt.train.memory import (
    EncoderShape,
    TrainingResourceError,
    decide_checkpointing,
    declared_memory,
    estimate_stage_memory,
    largest_node_memory,
    without_auto,
)
from adaptlab.adapt.train.pt import PTConfig
from adaptlab.adapt.train.stage_worker import remote_stage, run_stage, stage_threads
from adaptlab.errors import AdaptlabError, ConfigError
from adaptlab.models.variants import BASE, FT, MERGE_SOURCES, MERGED, PT, PT_FT
from adaptlab.runtime import init_ray, largest_node_cpus, make_room
from adaptlab.runtime.node_loss import lost_with_node, lost_work_errors
from adaptlab.runtime.ray_output import configure_ray_output

__all__ = [
    "AdaptJob",
    "JobSettings",
    "TrainingResourceError",
    "VARIANTS",
    "ensure_ray",
    "run_adaptation_jobs",
    "stage_threads",
    "train_variant",
]

log = logging.getLogger(__name__)

VARIANTS: tuple[str, ...] = (COLBERT_VARIANT, FT, MERGED, PT, PT_FT)
_MERGE_SOURCES = MERGE_SOURCES


@dataclass(frozen=True)
class JobSettings:
    """How :func:`run_adaptation_jobs` runs the training stages on Ray, passed whole.

    ``gpus_per_job``: GPUs per training stage (``None``: 1 when the cluster has GPUs, else 0;
    fractions share a GPU); ``cpus_per_job``: its CPUs; ``max_retries``: retries of a stage lost
    for memory, a crash or its node; ``checkpoint_every``: steps between checkpoints (None: none);
    ``memory_per_job``: bytes each stage declares (``None``: estimated, :mod:`.memory`; 0: none);
    ``lone_stage_all_cpus``: a CPU stage that runs alone declares all the CPUs of the largest node."""

    gpus_per_job: float | None = None
    cpus_per_job: float = 1
    max_retries: int = 3
    checkpoint_every: int | None = 50
    memory_per_job: int | None = None
    lone_stage_all_cpus: bool = True


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
    merge_source: str = FT
    seed: int = 0
    colbert_config: ColBERTFTConfig = field(default_factory=ColBERTFTConfig)

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ConfigError(f"adaptation variant {self.variant!r}: expected one of {', '.join(VARIANTS)}")
        if self.merge_source not in _MERGE_SOURCES:
            raise ConfigError(f"merge_source {self.merge_source!r}: expected one of {', '.join(_MERGE_SOURCES)}")
        needs = self.stages()
        if PT in needs and self.chunks is None:
            raise ConfigError(f"job {self.describe()}: variant needs domain chunks (chunks=...) for PT")
        if (FT in needs or COLBERT_VARIANT in needs) and self.triplets is None:
            raise ConfigError(f"job {self.describe()}: variant needs triplets (triplets=...) for FT")

    def stages(self) -> tuple[str, ...]:
        """The stages this job runs, in order: a subsequence of ``("pt", "ft", "merge")``, or
        ``("colbert-ft",)``."""
        chain = {PT: (PT,), FT: (FT,), PT_FT: (PT, FT), COLBERT_VARIANT: (COLBERT_VARIANT,)}
        if self.variant == MERGED:
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
        data = job.chunks if stage == PT else job.triplets if stage in (FT, COLBERT_VARIANT) else None
        current = run_stage(
            stage,
            current,
            data,
            _params(job),
            artifact_root_text(artifact_root),
            device,
            checkpoint_every,
            on_checkpoint,
        )
    return current


def _params(job: AdaptJob) -> dict[str, Any]:
    """The job without its data (what a Ray task needs besides the data reference)."""
    return {
        "base_model": job.base_model,
        "scale": job.scale,
        "seed": job.seed,
        "pt_config": job.pt_config,
        "ft_config": job.ft_config,
        "merge_weight": job.merge_weight,
        "colbert_config": job.colbert_config,
    }


def ensure_ray(address: str | None = None) -> Any:
    """The ``ray`` module, initialised: joined at ``address`` or started locally when not running
    (through :func:`adaptlab.runtime.init_ray`)."""
    import ray  # deferred: importing adaptlab.adapt does not load ray

    if not ray.is_initialized():
        init_ray(address=address)
    return ray


@dataclass(eq=False)
class _Stage:
    """One Ray task of the graph: ``stage`` of ``job``, starting from the stage ``upstream`` (None:
    the base model), reading the data ``data_key``, declaring ``memory`` bytes, training with
    ``config`` (the job's config of this stage, gradient checkpointing decided; None: merge)."""

    key: tuple[Any, ...]
    stage: str
    job: AdaptJob
    upstream: tuple[Any, ...] | None
    data_key: tuple[str, str] | None
    memory: int = 0
    attempts: int = 0
    alone: bool = False
    whole_node: bool = False
    config: Any = None

    @property
    def name(self) -> str:
        return f"adapt:{self.stage}:{self.job.describe()}"


def _stage_key(
    stage: str, job: AdaptJob, upstream_key: tuple[Any, ...], base_key: str, data: dict[tuple[str, str], Any]
) -> tuple[tuple[Any, ...], tuple[str, str] | None]:
    """The stage's identity (equal for stages that jobs share) and its data key; the data of a new
    data key is added to ``data``."""
    if stage == PT:
        fp, _ = chunks_fingerprint(job.chunks or ())
        data.setdefault(("chunks", fp), [str(c) for c in job.chunks or ()])
        return (stage, upstream_key, fp, job.pt_config, job.seed, job.scale), ("chunks", fp)
    if stage in (FT, COLBERT_VARIANT):
        rows = coerce_triplets(job.triplets)
        fp = training_rows_fingerprint(rows)
        data.setdefault(("triplets", fp), rows)
        config = job.ft_config if stage == FT else job.colbert_config
        return (stage, upstream_key, fp, config, job.seed, job.scale), ("triplets", fp)
    return (stage, upstream_key, float(job.merge_weight), base_key, job.scale), None


def _plan(jobs: Sequence[AdaptJob]) -> tuple[dict[tuple[Any, ...], _Stage], dict[tuple[str, str], Any], list[Any]]:
    """The distinct stages of ``jobs`` in an order where each follows its upstream, their data,
    and the key of each job's last stage."""
    stages: dict[tuple[Any, ...], _Stage] = {}
    data: dict[tuple[str, str], Any] = {}
    ends = []
    for job in jobs:
        base_key = describe_base(job.base_model).hash
        upstream: tuple[Any, ...] | None = None
        for stage in job.stages():
            key, data_key = _stage_key(stage, job, upstream or (BASE, base_key), base_key, data)
            stages.setdefault(key, _Stage(key, stage, job, upstream, data_key))
            upstream = key
        ends.append(upstream)
    return stages, data, ends


_CONFIG_PARAMS = {PT: "pt_config", FT: "ft_config", COLBERT_VARIANT: "colbert_config"}
"""The :func:`_params` entry of each training stage's config."""


def _stage_config(stage: _Stage) -> Any:
    """The job's config of ``stage`` (None for a merge)."""
    name = _CONFIG_PARAMS.get(stage.stage)
    return getattr(stage.job, name) if name else None


def _task_params(stage: _Stage, **extra: Any) -> dict[str, Any]:
    """What the Ray task of ``stage`` gets besides its data: the job's :func:`_params` with the
    stage's own decided ``config`` (gradient checkpointing a bool), and ``extra``."""
    name = _CONFIG_PARAMS.get(stage.stage)
    own = {name: stage.config} if name and stage.config is not None else {}
    return _params(stage.job) | own | extra


def _declare_memory(stages: Sequence[_Stage], ray: Any, memory_per_job: int | None, gpu: bool = False) -> None:
    """Set each stage's ``memory`` and ``config``: ``memory_per_job`` when given (gradient
    checkpointing "auto" off), else the estimate of :mod:`.memory` (capped at the largest node's
    memory) with gradient checkpointing decided (:func:`.memory.decide_checkpointing`; off for
    ``gpu`` stages, whose training memory is not the node's), else 0 (none declared, with a
    warning; "auto" off)."""
    node = largest_node_memory(ray)
    shapes: dict[str, EncoderShape | None] = {}
    for st in stages:
        st.config = without_auto(_stage_config(st))
        if memory_per_job is not None:
            st.memory = int(memory_per_job)
            continue
        base = describe_base(st.job.base_model)
        if base.hash not in shapes:
            try:
                shapes[base.hash] = EncoderShape.read(base.path)
            except (OSError, ValueError, KeyError) as e:
                log.warning("cannot estimate the training memory of %s (%s); its tasks declare none", base.label, e)
                shapes[base.hash] = None
        shape = shapes[base.hash]
        if shape is not None:
            st.config = decide_checkpointing(st.stage, shape, _stage_config(st), None if gpu else node, st.name)
            estimate = estimate_stage_memory(st.stage, shape, st.config)
            st.memory = declared_memory(estimate, node, st.name)
            log.info("%s declares %.2f GB: %s", st.name, st.memory / 1e9, estimate.describe())


_WAIT_S = 10.0
"""Seconds of one ``ray.wait`` of the stage runner (it loops; each stage ends, fails or is lost)."""
OWN_WORKER_BYTES = 1 << 30
"""A stage that declares at least this much memory runs in a Ray worker of its own that exits with
it (``max_calls=1``). A reused worker keeps what its stage allocated (PyTorch and the C allocator
seldom give freed memory back), while Ray counts a finished task's memory as free and places the
next stage by it: in a PDF study an idle worker holding 2.4 GB after its PT stage was what Ray's
memory monitor killed while an FT stage ran. A fresh worker costs its imports (5-15 s on 2 cores),
small against a stage of gigabytes; smaller stages (tiny models, tests) keep reusing workers."""


def _checkpointing(config: Any) -> str:
    """The give-up line's last suggestion, unless gradient checkpointing is on already."""
    if getattr(config, "gradient_checkpointing", False) is True:
        return ""
    return ", or set [adapt].gradient_checkpointing = true (less memory, one more forward pass a step)"


def _lower_setting(stage: _Stage) -> str:
    """The settings that shrink a stage's memory, with their current values."""
    job, config = stage.job, stage.config or _stage_config(stage)
    if stage.stage == FT:
        seq = job.ft_config.max_seq_length or "the model's"
        return (
            f"lower [adapt.ft].batch_size (now {job.ft_config.batch_size}) or [adapt.ft].max_seq_length "
            f"(now {seq}; passages are as long as the chunks' max_tokens allow){_checkpointing(config)}"
        )
    if stage.stage == PT:
        return (
            f"lower [adapt.pt].batch_size (now {job.pt_config.batch_size}) or [adapt.pt].max_seq_length "
            f"(now {job.pt_config.max_seq_length}){_checkpointing(config)}"
        )
    if stage.stage == COLBERT_VARIANT:
        return (
            f"lower [adapt.colbert].batch_size (now {job.colbert_config.batch_size}) or doc_maxlen "
            f"(now {job.colbert_config.doc_maxlen})"
        )
    return "give the nodes more memory"


def _give_up(stage: _Stage, error: BaseException, memory_kind: bool) -> TrainingResourceError:
    """The one-line error of a stage lost more often than allowed."""
    job = stage.job
    what = f"variant {job.variant!r} at scale {job.scale} (stage {stage.stage} of {os.fspath(job.base_model)})"
    declared = f"declared {stage.memory / 1e9:.2f} GB" if stage.memory else "no memory declared"
    cause = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
    if memory_kind:
        alone = ", the last time with no other training stage running" if stage.alone else ""
        return TrainingResourceError(
            f"{what}: its worker was killed {stage.attempts} time(s) (out of memory or crashed; {declared}"
            f"{alone}; last error {cause}); {_lower_setting(stage)}"
        )
    return TrainingResourceError(
        f"{what}: lost with its node {stage.attempts} time(s) (last error {cause}); check the cluster's nodes "
        "(`ray status`) and re-run: finished stages are reused"
    )


class _StageRunner:
    """Runs the stage graph on Ray (module docstring of :func:`run_adaptation_jobs`): a stage is
    submitted once its upstream is done; a lost stage is resubmitted up to ``max_retries`` times,
    after a memory kill only once nothing else runs and with nothing beside it."""

    def __init__(
        self,
        ray: Any,
        submit: Callable[[_Stage, Any], Any],
        stages: Sequence[_Stage],
        max_retries: int,
        whole_node: bool = False,
        node_memory: float | None = None,
    ) -> None:
        self.ray, self.submit, self.max_retries, self.whole_node = ray, submit, max_retries, whole_node
        self.node_memory = node_memory
        self.waiting = list(stages)
        self.running: dict[Any, _Stage] = {}
        self.retry: list[_Stage] = []
        self.alone: _Stage | None = None
        self.done: dict[tuple[Any, ...], Artifact] = {}
        self.depth = _critical_depth(stages)

    def run(self) -> dict[tuple[Any, ...], Artifact]:
        try:
            while self.waiting or self.running or self.retry:
                self._submit_ready()
                if not self.running:  # cannot happen with stages in plan order; never spin
                    raise RuntimeError("adaptation jobs: no stage can start (an upstream stage is missing)")
                self._collect()
        finally:
            for ref in self.running:
                with contextlib.suppress(Exception):
                    self.ray.cancel(ref, force=True)
        return self.done

    def _start(self, stage: _Stage) -> None:
        upstream = stage.job.base_model if stage.upstream is None else self.done[stage.upstream]
        self.running[self.submit(stage, upstream)] = stage

    def _submit_ready(self) -> None:
        if self.retry or self.alone is not None:
            if self.retry and not self.running:
                self.alone = self.retry.pop(0)
                self.alone.alone = True
                self._start(self.alone)
            return
        # the longest chain first (PT before the FT stages that do not need it), so that a PT-FT
        # is less often the ladder's lone tail; Ray promises no order among queued tasks, so this is
        # a preference it mostly follows, not a guarantee
        ready = [
            st
            for st in sorted(self.waiting, key=lambda st: -self.depth[st.key])
            if st.upstream is None or st.upstream in self.done
        ]
        # nothing runs and nothing else can start before this stage ends (every other waiting
        # stage follows it): it runs alone, so it may declare a whole node
        lone = len(ready) == 1 and not self.running
        for stage in ready:
            self.waiting.remove(stage)
            stage.whole_node = self.whole_node and stage.stage != "merge" and (lone or self._memory_bound(stage))
            self._start(stage)

    def _memory_bound(self, stage: _Stage) -> bool:
        """Whether ``stage`` declares more than half the largest node's memory: no second stage of
        its size fits beside it, so it runs alone on its node whatever else waits (decided by the
        study and the node, not by what happens to run)."""
        return self.node_memory is not None and 0 < self.node_memory < stage.memory * 2

    def _collect(self) -> None:
        ready, _ = self.ray.wait(list(self.running), num_returns=1, timeout=_WAIT_S)
        for ref in ready:
            stage = self.running.pop(ref)
            if stage is self.alone:
                self.alone = None
            try:
                self.done[stage.key] = self.ray.get(ref)
            except self.ray.exceptions.RayTaskError as e:
                cause = getattr(e, "cause", None)
                if isinstance(cause, AdaptlabError):
                    raise cause from None
                raise
            except lost_work_errors() as e:
                self._lost(stage, e)

    def _lost(self, stage: _Stage, error: BaseException) -> None:
        memory_kind = not lost_with_node(error)  # killed for memory or crashed: it may not fit beside others
        stage.attempts += 1
        if stage.attempts > self.max_retries:
            raise _give_up(stage, error, memory_kind) from None
        how = "alone, after the running stages end" if memory_kind else "now"
        log.warning(
            "%s: %s (attempt %d of %d); retrying it %s, from its last checkpoint",
            stage.name,
            type(error).__name__,
            stage.attempts,
            self.max_retries + 1,
            how,
        )
        if memory_kind:
            self.retry.append(stage)
        else:
            self.waiting.insert(0, stage)


def _critical_depth(stages: Sequence[_Stage]) -> dict[tuple[Any, ...], int]:
    """Each stage's critical path: the number of stages on the longest chain from it to the end of
    the graph (itself included), from ``stages`` in plan order (each after its upstream)."""
    depth = {st.key: 1 for st in stages}
    for st in reversed(stages):
        if st.upstream in depth:
            depth[st.upstream] = max(depth[st.upstream], depth[st.key] + 1)
    return depth


def run_adaptation_jobs(
    jobs: Sequence[AdaptJob],
    artifact_root: str | os.PathLike[str],
    settings: JobSettings | None = None,
    *,
    on_checkpoint: Callable[[int], None] | None = None,
    address: str | None = None,
) -> list[Artifact]:
    """Run ``jobs`` as Ray tasks and return their artifacts in job order, as ``settings`` say
    (:class:`JobSettings`; its defaults when None).

    ``gpus_per_job``: GPUs per training stage; ``None`` asks for 1 when the cluster has GPUs
    and 0 otherwise (fractions share a GPU). Each stage declares the memory it needs
    (:mod:`.memory`; ``memory_per_job`` bytes instead when given, 0 for none, and then gradient
    checkpointing "auto" stays off; else "auto" is decided per stage, module docstring). A stage killed
    for memory, crashed or lost with its node is retried up to ``max_retries`` times, resuming
    from its last checkpoint (every ``checkpoint_every`` steps; ``on_checkpoint(step)`` runs in
    the worker after each); after a memory kill or crash it waits until the running stages end and
    runs with nothing beside it. A stage declaring ``OWN_WORKER_BYTES`` or more runs in a worker
    process of its own that exits with it, so no idle worker keeps its memory.
    ``lone_stage_all_cpus``: a CPU training stage submitted when no other stage runs or can start
    before it ends, or one declaring more than half the largest node's memory (no second stage of
    its size fits beside it), declares all the CPUs of the largest node instead of
    ``cpus_per_job``, and so trains on that node's cores (:func:`stage_threads`). When the retries
    run out, :class:`TrainingResourceError` names the variant, the scale and the setting to lower.
    Ray is started (or joined at ``address``) when not running.
    """
    s = settings or JobSettings()
    gpus_per_job, cpus_per_job, max_retries = s.gpus_per_job, s.cpus_per_job, s.max_retries
    checkpoint_every, memory_per_job = s.checkpoint_every, s.memory_per_job
    if max_retries < 0:
        raise ConfigError(f"max_retries = {max_retries}: expected >= 0")
    if memory_per_job is not None and memory_per_job < 0:
        raise ConfigError(f"memory_per_job = {memory_per_job}: expected None (estimate), 0 (none) or bytes > 0")
    ray = ensure_ray(address)
    _make_room()
    if gpus_per_job is None:
        gpus_per_job = 1.0 if ray.cluster_resources().get("GPU", 0) >= 1 else 0.0
    if gpus_per_job < 0 or cpus_per_job <= 0:
        raise ConfigError("gpus_per_job must be >= 0 and cpus_per_job > 0")
    configure_ray_output()  # no colour codes in a log file, also when Ray was started by someone else
    root = artifact_root_text(artifact_root)  # a URI unchanged, a path made absolute
    stages, data, ends = _plan(jobs)
    _declare_memory(list(stages.values()), ray, memory_per_job, gpu=bool(gpus_per_job))
    data_refs = {key: ray.put(value) for key, value in data.items()}
    # by whether the stage gets a worker of its own (OWN_WORKER_BYTES)
    remotes = {True: ray.remote(max_calls=1)(remote_stage), False: ray.remote(remote_stage)}
    from adaptlab.runtime.progress import progress_enabled  # deferred: not needed in-process

    progress = progress_enabled()

    whole_node = s.lone_stage_all_cpus and not gpus_per_job

    def submit(stage: _Stage, upstream: Any) -> Any:
        # the largest node now: after a node loss a lone stage must fit a node that is left
        cpus = max(cpus_per_job, largest_node_cpus(cpus_per_job)) if stage.whole_node else cpus_per_job
        stage.whole_node = cpus > cpus_per_job
        if stage.whole_node:
            log.info(
                "%s runs alone (nothing else can run beside it, or its memory leaves no room for a "
                "second stage): it declares all %g CPUs of a node (its torch threads follow)",
                stage.name,
                cpus,
            )
        opts = _task_options(stage, gpus_per_job, cpus)
        params = _task_params(stage, progress=progress, cpus=cpus)
        data_ref = data_refs[stage.data_key] if stage.data_key else None
        return (
            remotes[stage.memory >= OWN_WORKER_BYTES]
            .options(name=stage.name, **opts)
            .remote(stage.stage, upstream, data_ref, params, root, checkpoint_every, on_checkpoint)
        )

    done = _StageRunner(ray, submit, list(stages.values()), max_retries, whole_node, largest_node_memory(ray)).run()
    return [done[key] for key in ends]


def _make_room() -> None:
    """Release the idle warm embedding pools: their actors would hold the CPUs the stages wait for
    (a three-node study's stage waited for 325 s behind six idle actors holding all six CPUs)."""
    stopped = make_room()
    if stopped:
        log.info("released %d idle actor(s) of warm embedding pools so the training stages can be scheduled", stopped)


def _task_options(stage: _Stage, gpus: float, cpus: float) -> dict[str, Any]:
    """Ray options of a stage: its resources and memory; Ray itself never retries (we do)."""
    train = stage.stage != "merge"
    opts: dict[str, Any] = {
        "num_gpus": gpus if train else 0,
        "num_cpus": cpus if train else 1,
        "max_retries": 0,
        "retry_exceptions": False,
    }
    if stage.memory > 0:
        opts["memory"] = int(stage.memory)
    if stage.stage == COLBERT_VARIANT:
        opts["runtime_env"] = {"env_vars": {"RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1"}}
    return opts
