"""Ray Tune sweeps of adaptation hyperparameters, scored by a bootstrap lower confidence bound:
the driver (:func:`tune_adaptation`).

The objective of a trial and the split of the validation queries into a selection and a
confirmation part are :mod:`.objective`; one trial (its settings, its training with a report
after every epoch, its resources) is :mod:`.trial`; the rows a sweep returns and the choice of
the best trial are :mod:`.sweep_result`; the parameter-space language is :mod:`.space`, the
sweep's settings :mod:`.sweep_config`. The names of those modules that users import from here
stay importable from here.

Search: random sampling of ``param_space`` (seeded), or Optuna's TPE when ``search="optuna"``
and optuna is installed; ASHA (asynchronous successive halving) stops weak trials early, one
rung per epoch. A sweep interrupted mid-way resumes from its storage path
(``Tuner.can_restore`` / ``Tuner.restore``): finished trials are kept, unfinished ones continue
from their last per-epoch checkpoint. Each trial declares the memory of its fine-tuning at the
largest batch and number of negatives the space allows (:mod:`.memory`), so Tune runs no more
trials on a node than its memory holds.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from adaptlab.adapt.train.addressing import sanitize_name
from adaptlab.adapt.train.artifacts import is_artifact_uri
from adaptlab.adapt.train.base_model import describe_base
from adaptlab.adapt.train.ft import FTConfig, TripletRows, coerce_triplets, resolve_prefixes, saved_prompts
from adaptlab.adapt.train.jobs import AdaptJob, JobSettings, ensure_ray, run_adaptation_jobs
from adaptlab.adapt.train.objective import (
    epoch_report,
    per_query_values,
    split_queries,
    trial_objective,
    validation_records,
)
from adaptlab.adapt.train.space import build_param_space, largest_value
from adaptlab.adapt.train.sweep_config import SweepConfig
from adaptlab.adapt.train.sweep_result import TUNE_MEASURE, SweepResult, choose_best, summarise_trial, trial_rows
from adaptlab.adapt.train.trial import trainable, trial_config
from adaptlab.data.dataset import Dataset
from adaptlab.errors import ConfigError
from adaptlab.models.variants import PT, PT_FT
from adaptlab.options import reject_unknown
from adaptlab.runtime import make_room
from adaptlab.stats import BootstrapConfig

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "SweepResult",
    "SweepRun",
    "SweepRunOptions",
    "TUNE_MEASURE",
    "choose_best",
    "epoch_report",
    "per_query_values",
    "split_queries",
    "summarise_trial",
    "trial_config",
    "trial_objective",
    "tune_adaptation",
    "validation_records",
]


@dataclass(frozen=True)
class SweepRun:
    """What one sweep call needs besides its :class:`SweepConfig`: where the experiment lives
    (``storage_path/name``, a local path or ``s3://...``), the fine-tuning every trial starts from
    (``ft_config``, default ``FTConfig()``), the PT step of ``variant="pt-ft"`` (its ``chunks``,
    ``pt_config`` and ``artifact_root``), the ``seed`` (the query split, the search, the
    training) and Ray Tune ``callbacks``."""

    storage_path: str | os.PathLike[str]
    name: str = "adapt-sweep"
    ft_config: FTConfig | None = None
    chunks: Sequence[str] | None = None
    pt_config: Any = None
    artifact_root: str | os.PathLike[str] | None = None
    seed: int = 0
    callbacks: Sequence[Any] | None = None


class SweepRunOptions(TypedDict, total=False):
    """The fields of :class:`SweepRun` as keyword arguments of :func:`tune_adaptation`."""

    storage_path: str | os.PathLike[str]
    name: str
    ft_config: FTConfig | None
    chunks: Sequence[str] | None
    pt_config: Any
    artifact_root: str | os.PathLike[str] | None
    seed: int
    callbacks: Sequence[Any] | None


_RUN_FIELDS = tuple(f.name for f in fields(SweepRun))


def _sweep_run(run: SweepRun | None, options: Mapping[str, Any]) -> SweepRun:
    """``run`` with the keyword ``options`` set on it, or a :class:`SweepRun` of them; an unknown
    keyword, or no ``storage_path`` at all, is a :class:`TypeError` naming it."""
    reject_unknown("tune_adaptation", options, _RUN_FIELDS)
    if run is not None:
        return replace(run, **options)
    if "storage_path" not in options:
        raise TypeError("tune_adaptation() needs storage_path=... (or run=SweepRun(storage_path=...))")
    return SweepRun(**options)


def _start_path(
    base_model: str | os.PathLike[str], base_path: Path, config: SweepConfig, run: SweepRun
) -> tuple[Path, str]:
    """The model every trial starts from, as ``(local path, reference for the trials)``: the base
    model, or (``pt-ft``) its PT artifact (referred to by its URI when it is published on one, so
    a trial on another node materialises it there)."""
    if config.variant != PT_FT:
        return base_path, str(base_path)
    if run.chunks is None or run.artifact_root is None:
        raise ConfigError("sweep variant 'pt-ft' needs chunks=... and artifact_root=... for the PT model")
    job_kwargs = {"pt_config": run.pt_config} if run.pt_config is not None else {}
    pt = run_adaptation_jobs(
        [AdaptJob(PT, os.fspath(base_model), chunks=list(run.chunks), seed=run.seed, **job_kwargs)],
        run.artifact_root,
        JobSettings(gpus_per_job=config.gpus_per_trial),
    )[0]
    local = Path(pt.model_path)
    return local, (f"{pt.uri}/model" if pt.uri else str(local))


def _make_tuner(
    trainable: Any,
    experiment: str,
    config: SweepConfig,
    *,
    max_epochs: int,
    search_alg: Any,
    callbacks: Sequence[Any] | None,
) -> tuple[Any, bool]:
    """A Tuner restored from ``experiment`` (with ``config.resume``, when one is there) or a new
    one with ASHA stopping at one rung per epoch; and whether it was restored."""
    from ray import tune  # deferred: importing adaptlab.adapt does not load ray
    from ray.tune.schedulers import ASHAScheduler

    space = build_param_space(config.param_space)
    if config.resume and tune.Tuner.can_restore(experiment):
        tuner = tune.Tuner.restore(
            experiment,
            trainable=trainable,
            resume_unfinished=True,
            resume_errored=True,
            param_space=space,
        )
        return tuner, True
    scheduler = ASHAScheduler(
        time_attr="training_iteration",
        max_t=max(1, max_epochs),
        grace_period=max(1, min(config.grace_period, max_epochs)),
        reduction_factor=config.reduction_factor,
    )
    storage, name = os.path.split(experiment)
    tuner = tune.Tuner(
        trainable,
        param_space=space,
        tune_config=tune.TuneConfig(
            metric="objective",
            mode="max",
            scheduler=scheduler,
            num_samples=config.num_samples,
            search_alg=search_alg,
        ),
        run_config=tune.RunConfig(
            name=name,
            storage_path=storage,
            verbose=0,
            checkpoint_config=tune.CheckpointConfig(num_to_keep=2),
            callbacks=list(callbacks or []),
        ),
    )
    return tuner, False


def tune_adaptation(
    base_model: str | os.PathLike[str],
    triplets: Any,
    validation: Dataset,
    config: SweepConfig | None = None,
    run: SweepRun | None = None,
    **options: Unpack[SweepRunOptions],
) -> SweepResult:
    """Sweep fine-tuning hyperparameters of ``base_model`` with Ray Tune and ASHA.

    Each trial fine-tunes the base model (``config.variant="ft"``), or the PT artifact trained
    first on ``chunks`` and stored under ``artifact_root`` (``"pt-ft"``), on ``triplets`` with
    ``ft_config`` overridden by the trial's values from ``config.param_space``
    (:func:`trial_config`; ``merge_weight`` evaluates the merged model). After every epoch it
    reports :func:`epoch_report`: the lower bound of the bootstrapped CI of ``config.measure`` on
    the selection part of ``validation``. ``config.confirm_fraction`` of the queries
    (:func:`split_queries`, seeded by ``seed``) re-score the chosen trial (:func:`choose_best`).

    Parameters
    ----------
    base_model : str or path
        An alias, a model directory or an artifact URI.
    triplets : rows or path
        Training triplets (query, positive, negatives), as :func:`~adaptlab.adapt.train.ft.train_ft` takes.
    validation : Dataset
        Judged validation queries and their corpus (at least 2 judged queries).
    config : SweepConfig
        The sweep's settings, passed whole (default ``SweepConfig()``).
    run : SweepRun
        Where the experiment lives and what it starts from, or its fields as keywords:
    storage_path, name : str or path, str
        The experiment lives at ``storage_path/name`` (a local path or ``s3://...``); with
        ``config.resume`` an experiment already there is restored.
    ft_config : FTConfig
        The fine-tuning every trial starts from (default ``FTConfig()``).
    chunks, pt_config, artifact_root
        The PT step of ``variant="pt-ft"``: its texts, settings and artifact root.
    seed : int
        Splits the queries and seeds the search and the training.
    callbacks : list
        Ray Tune callbacks.

    Returns
    -------
    SweepResult
        One row per trial and the best one.
    """
    config = _sweep_config(config)
    run = _sweep_run(run, options)
    selection = split_queries(len(validation.judged_queries()), config.confirm_fraction, run.seed)
    _check_parts(selection, config.bootstrap)
    search_alg = _search_alg(config.search, run.seed, config.max_concurrent_trials)
    rows = coerce_triplets(triplets)
    ray = ensure_ray(None)
    make_room()  # idle warm embedding pools would hold the CPUs the trials wait for
    payload, start_path = _trial_payload(base_model, rows, validation, config, run, selection)
    return _fit(trainable(payload, config, start_path, ray), config, run, search_alg)


def _fit(trial: Any, config: SweepConfig, run: SweepRun, search_alg: Any) -> SweepResult:
    """Run (or resume) the experiment of ``trial`` at ``run.storage_path/run.name``: its rows and
    the best one."""
    experiment = _experiment_path(run.storage_path, run.name)
    ft_config = run.ft_config or FTConfig()
    max_epochs = config.max_epochs or largest_value(config.param_space, "epochs", ft_config.epochs)
    tuner, restored = _make_tuner(
        trial, experiment, config, max_epochs=max_epochs, search_alg=search_alg, callbacks=run.callbacks
    )
    out = trial_rows(tuner.fit(), config.measure)
    return SweepResult(out, choose_best(out), experiment, restored, config.measure, config.bootstrap)


def _sweep_config(config: SweepConfig | None) -> SweepConfig:
    """``config``, or the defaults; anything else is refused by name."""
    if config is None:
        return SweepConfig()
    if not isinstance(config, SweepConfig):
        raise ConfigError(
            f"tune_adaptation: config must be an adaptlab.adapt.train.sweep_config.SweepConfig, "
            f"got {type(config).__name__}"
        )
    return config


def _check_parts(selection: np.ndarray, bootstrap: BootstrapConfig) -> None:
    """A bootstrap ``sample_size`` larger than the smaller part fails now, not inside every trial."""
    smaller = int(min(selection.sum(), (~selection).sum()))
    size = bootstrap.sample_size
    if size is not None and size > smaller and not bootstrap.allow_oversampling:
        raise ConfigError(
            f"sample_size = {size}: the sweep scores selection and confirmation queries apart and "
            f"the smaller part has {smaller}; use sample_size <= {smaller} or none (all of a part)"
        )


def _trial_payload(
    base_model: str | os.PathLike[str],
    rows: TripletRows,
    validation: Dataset,
    config: SweepConfig,
    run: SweepRun,
    selection: np.ndarray,
) -> tuple[dict[str, Any], Path]:
    """What every trial receives (the ``payload`` of :func:`~adaptlab.adapt.train.trial.run_trial`): the model it starts from
    (:func:`_start_path`: the base, or its PT artifact, trained here for ``"pt-ft"``), the base it
    merges with, the prefixes (:func:`~adaptlab.adapt.train.ft.resolve_prefixes`), the triplets,
    the validation set and its ``selection`` mask, the measure, the bootstrap and the seed; with
    the local path of the start model."""
    base = describe_base(base_model)
    start_path, start_ref = _start_path(base_model, base.path, config, run)
    ft_config = run.ft_config or FTConfig()
    prefixes = resolve_prefixes(
        ft_config.query_prefix,
        ft_config.passage_prefix,
        saved_prompts(start_path),
        str(base.root.get("id", base.label)),
    )
    payload = {
        "ft_config": ft_config,
        "start_path": start_ref,
        "merge_base_path": _worker_ref(base_model, base.path),
        "rows": rows,
        "validation": validation,
        "measure": config.measure,
        "bootstrap": config.bootstrap,
        "seed": int(run.seed),
        "prefixes": prefixes,
        "device": None,
        "selection": selection,
    }
    return payload, start_path


def _worker_ref(model: str | os.PathLike[str], local: Path) -> str:
    """How a trial on any node refers to ``model``: its artifact URI, else the local path."""
    text = os.fspath(model)
    return text if is_artifact_uri(text) else str(local)


def _experiment_path(storage_path: str | os.PathLike[str], name: str) -> str:
    """``storage_path/name``: a URI (``s3://...``, which Ray Tune writes through pyarrow) kept as
    text, a local path made absolute."""
    text = os.fspath(storage_path)
    if is_artifact_uri(text):
        return f"{text.rstrip('/')}/{sanitize_name(name)}"
    return os.path.join(os.path.abspath(text), sanitize_name(name))


def _search_alg(search: str, seed: int, max_concurrent: int | None) -> Any:
    if search == "optuna":
        try:  # deferred: optional packages, and ray loads only when a sweep runs
            import optuna  # noqa: F401
            from ray.tune.search import ConcurrencyLimiter
            from ray.tune.search.optuna import OptunaSearch
        except ImportError as e:
            raise ConfigError("search='optuna' needs the optuna package: pip install optuna") from e
        alg = OptunaSearch(seed=seed)
        return ConcurrencyLimiter(alg, max_concurrent) if max_concurrent else alg
    from ray.tune.search.basic_variant import BasicVariantGenerator  # deferred: ray

    return BasicVariantGenerator(random_state=seed, max_concurrent=max_concurrent or 0)
