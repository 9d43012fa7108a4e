"""Ray Tune sweeps of adaptation hyperparameters, scored by a bootstrap lower confidence bound.

Objective of a trial (maximised): after each epoch the trained model (merged with the base as
``w * theta_ft + (1 - w) * theta_base`` when the trial has a ``merge_weight``) encodes the
validation queries and the validation corpus, and the house's one measuring path scores it:

    records  = adaptlab.retrieval.build_records  (exact inner-product search of the L2-normalised
                                                  embeddings; ties: higher document id first)
    values   = adaptlab.metrics.evaluate         (the chosen measure per query, e.g. acc@5 = 1 if
                                                  a relevant document is in the top 5)
    objective = lower end of the bootstrapped 95% percentile CI of the mean of the values
                (adaptlab.stats.bootstrap_ci with one BootstrapConfig)

(Roychowdhury et al. 2024, section 2.1, bootstrap the accuracy the same way). Ranking models by
the lower bound prefers a configuration that is reliably good over one whose mean is lifted by a
lucky validation sample.

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
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from adaptlab.adapt.train.artifacts import describe_base, is_artifact_uri, local_model_path, sanitize_name
from adaptlab.adapt.train.jobs import AdaptJob, ensure_ray, run_adaptation_jobs
from adaptlab.adapt.train.merge import merge_state_dicts
from adaptlab.adapt.train.ft import (
    FTConfig,
    coerce_triplets,
    fine_tune_model,
    resolve_prefixes,
    saved_prompts,
)
from adaptlab.adapt.train.loop import load_sentence_model, pick_device
from adaptlab.adapt.train.memory import EncoderShape, declared_memory, estimate_stage_memory, largest_node_memory
from adaptlab.data.dataset import Dataset
from adaptlab.errors import ConfigError
from adaptlab.metrics import Measure, evaluate
from adaptlab.retrieval import PerQueryRecords, build_records
from adaptlab.stats import BootstrapConfig, bootstrap_ci

__all__ = [
    "SweepResult",
    "TUNABLE",
    "default_param_space",
    "per_query_values",
    "trial_config",
    "trial_objective",
    "tune_adaptation",
    "validation_records",
]

TUNABLE: tuple[str, ...] = (
    "batch_size", "epochs", "learning_rate", "merge_weight", "num_negatives", "scale",
    "temperature", "warmup_ratio", "weight_decay",
)
"""Names a ``param_space`` may use (FTConfig fields, ``temperature`` = 1/scale, merge weight)."""


def default_param_space() -> dict[str, Any]:
    """A modest default space: lr log-uniform in [1e-5, 1e-4], 1-3 epochs, 1/3/7 hard negatives,
    batch 16/32, scale 20 or 50 (temperature 0.05 or 0.02)."""
    from ray import tune  # deferred: importing adaptlab.adapt does not load ray

    return {
        "learning_rate": tune.loguniform(1e-5, 1e-4),
        "epochs": tune.choice([1, 2, 3]),
        "num_negatives": tune.choice([1, 3, 7]),
        "batch_size": tune.choice([16, 32]),
        "scale": tune.choice([20.0, 50.0]),
    }


@dataclass
class SweepResult:
    """One row per trial (``config/<name>`` columns plus results), the best row by objective,
    where the experiment lives, and whether it was restored from an earlier run."""

    rows: list[dict[str, Any]]
    best: dict[str, Any] | None
    experiment_path: str
    restored: bool = False
    measure: str = ""

    def to_arrow(self) -> Any:
        import pyarrow as pa  # deferred: pyarrow loads on use

        return pa.Table.from_pylist(self.rows)


# --------------------------------------------------------------------------- the objective


def validation_records(
    model: Any,
    validation: Dataset,
    measure: str | Measure,
    *,
    query_prefix: str = "",
    passage_prefix: str = "",
    batch_size: int = 64,
) -> PerQueryRecords:
    """The per-query records of ``model`` on ``validation``, deep enough for ``measure``.

    The judged queries (``validation.judged_queries()``) and the whole corpus, each text with
    its prefix, are encoded and L2-normalised; :func:`adaptlab.retrieval.build_records` ranks
    the corpus exactly by inner product (score descending, then document id descending, as
    trec_eval) down to the measure's cutoff ``k`` (the whole corpus when it has none).
    """
    m = Measure.parse(measure)
    qids = validation.judged_queries()
    if not qids:
        raise ConfigError(f"validation set {validation.name!r} has no query with a relevant document")
    doc_ids = list(validation.corpus)
    docs = model.encode(
        [passage_prefix + validation.corpus[d].full_text() for d in doc_ids], batch_size=batch_size,
        normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False,
    ).astype(np.float32)
    queries = model.encode(
        [query_prefix + validation.queries[q] for q in qids], batch_size=batch_size,
        normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False,
    ).astype(np.float32)
    depth = len(doc_ids) if m.k is None else min(m.k, len(doc_ids))
    return build_records(qids, queries, doc_ids, docs, validation.qrels, system="tune-trial",
                         dataset=validation.name, k=depth)


def per_query_values(
    model: Any,
    validation: Dataset,
    measure: str | Measure,
    *,
    query_prefix: str = "",
    passage_prefix: str = "",
    batch_size: int = 64,
) -> np.ndarray:
    """Per-query values of ``measure`` for ``model`` on ``validation``: the records of
    :func:`validation_records` scored by :func:`adaptlab.metrics.evaluate` against the graded
    ``validation.qrels`` (relevance > 0 counts as relevant). Queries without relevant documents
    are left out. Order: ``validation.judged_queries()``."""
    m = Measure.parse(measure)
    records = validation_records(model, validation, m, query_prefix=query_prefix,
                                 passage_prefix=passage_prefix, batch_size=batch_size)
    return evaluate(validation.qrels, records.to_run(), [m], query_ids=records.query_ids).values[str(m)]


def trial_objective(values: np.ndarray, bootstrap: BootstrapConfig) -> dict[str, float]:
    """The trial's report for one epoch from the per-query values ``x_1..x_Q``:

        objective = ci_low = (1 - c)/2 quantile of the bootstrapped means (c = confidence)

    (:func:`adaptlab.stats.bootstrap_ci` with ``bootstrap``; Roychowdhury et al. 2024, section
    2.1), ``ci_high`` the upper end, ``mean`` = ``point`` = ``sum_q x_q / Q``."""
    res = bootstrap_ci(values, **bootstrap.kwargs())
    low, high = float(res.ci_low[0]), float(res.ci_high[0])
    mean = float(values.mean())
    return {"objective": low, "ci_low": low, "ci_high": high, "mean": mean, "point": mean,
            "n_queries": int(values.size)}


# --------------------------------------------------------------------------- the trial


def trial_config(base: FTConfig, config: Mapping[str, Any]) -> FTConfig:
    """``base`` with a trial's ``config`` values (names in :data:`TUNABLE`) applied;
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


def _trial(config: dict[str, Any], payload: dict[str, Any]) -> None:
    """One Ray Tune trial: fine-tune with the trial's settings and report :func:`trial_objective`
    after every epoch (of the merged model when the trial has a ``merge_weight``)."""
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
        return per_query_values(model, validation, payload["measure"], query_prefix=q_prefix,
                                passage_prefix=p_prefix)

    def on_epoch_end(epoch: int, checkpoint: Path | None) -> None:
        if base_sd is not None:
            own = {k: v.detach().clone() for k, v in model.state_dict().items()}
            model.load_state_dict(merge_state_dicts(own, base_sd, float(weight)))
            values = evaluate_model()
            model.load_state_dict(own)
        else:
            values = evaluate_model()
        metrics = {**trial_objective(values, bootstrap), "epoch": epoch + 1}
        tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(str(ckpt_dir)) if checkpoint else None)

    try:
        fine_tune_model(
            model, payload["rows"], cfg, seed=payload["seed"], prefixes=(q_prefix, p_prefix), device=device,
            checkpoint_dir=ckpt_dir, checkpoint_each_epoch=True, on_epoch_end=on_epoch_end,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------- the sweep


def _max_epochs(space: Mapping[str, Any], default: int) -> int:
    spec = space.get("epochs")
    if spec is None:
        return default
    if isinstance(spec, (int, np.integer)):
        return int(spec)
    cats = getattr(spec, "categories", None)
    if cats:
        return int(max(cats))
    upper = getattr(spec, "upper", None)
    if upper is not None:
        return int(upper)
    grid = spec.get("grid_search") if isinstance(spec, Mapping) else None
    if grid:
        return int(max(grid))
    return default


def _rows(grid: Any, measure: str) -> list[dict[str, Any]]:
    rows = []
    for r in grid:
        metrics = dict(r.metrics or {})
        df = r.metrics_dataframe
        best = None
        if df is not None and "objective" in getattr(df, "columns", ()):
            best = float(df["objective"].max())
        config = dict(r.config or {})
        iterations = metrics.get("training_iteration")
        epochs = int(config.get("epochs", 0) or 0)
        status = "error" if r.error else ("complete" if epochs and iterations == epochs else "stopped")
        row: dict[str, Any] = {
            "trial_id": metrics.get("trial_id"),
            "status": status,
            "iterations": iterations,
            "measure": measure,
        }
        row.update({f"config/{k}": v for k, v in sorted(config.items())})
        for key in ("objective", "ci_low", "ci_high", "mean", "point", "n_queries", "epoch"):
            row[key] = metrics.get(key)
        row["best_objective"] = best
        row["error"] = None if r.error is None else str(r.error)[:500]
        rows.append(row)
    rows.sort(key=lambda x: str(x["trial_id"]))
    return rows


def _check_sweep(param_space: Mapping[str, Any] | None, num_samples: int, variant: str, search: str) -> dict[str, Any]:
    """The validated search space (the default one when ``param_space`` is None)."""
    if num_samples < 1:
        raise ConfigError(f"num_samples = {num_samples}: expected >= 1")
    if variant not in ("ft", "pt-ft"):
        raise ConfigError(f"sweep variant {variant!r}: expected 'ft' or 'pt-ft'")
    space = dict(param_space) if param_space is not None else default_param_space()
    unknown = sorted(set(space) - set(TUNABLE))
    if unknown:
        raise ConfigError(f"param_space keys {unknown} are not tunable; expected some of {', '.join(TUNABLE)}")
    if "scale" in space and "temperature" in space:
        raise ConfigError("param_space: give either scale or temperature (= 1/scale), not both")
    if search not in ("random", "optuna"):
        raise ConfigError(f"search {search!r}: expected 'random' or 'optuna'")
    return space


def _start_path(
    base_model: str | os.PathLike[str], base_path: Path, variant: str, chunks: Sequence[str] | None,
    pt_config: Any, artifact_root: str | os.PathLike[str] | None, seed: int, gpus: float | None,
) -> tuple[Path, str]:
    """The model every trial starts from, as ``(local path, reference for the trials)``: the base
    model, or (``pt-ft``) its PT artifact (referred to by its URI when it is published on one, so
    a trial on another node materialises it there)."""
    if variant != "pt-ft":
        return base_path, str(base_path)
    if chunks is None or artifact_root is None:
        raise ConfigError("sweep variant 'pt-ft' needs chunks=... and artifact_root=... for the PT model")
    job_kwargs = {"pt_config": pt_config} if pt_config is not None else {}
    pt = run_adaptation_jobs(
        [AdaptJob("pt", os.fspath(base_model), chunks=list(chunks), seed=seed, **job_kwargs)],
        artifact_root, gpus_per_job=gpus,
    )[0]
    local = Path(pt.model_path)
    return local, (f"{pt.uri}/model" if pt.uri else str(local))


def _make_tuner(trainable: Any, space: dict[str, Any], experiment: str, *, resume: bool, max_epochs: int,
                grace_period: int, reduction_factor: int, num_samples: int, search_alg: Any,
                callbacks: Sequence[Any] | None) -> tuple[Any, bool]:
    """A Tuner restored from ``experiment`` (with ``resume``, when one is there) or a new one with
    ASHA stopping at one rung per epoch; and whether it was restored."""
    from ray import tune  # deferred: importing adaptlab.adapt does not load ray
    from ray.tune.schedulers import ASHAScheduler

    if resume and tune.Tuner.can_restore(experiment):
        tuner = tune.Tuner.restore(
            experiment, trainable=trainable, resume_unfinished=True, resume_errored=True, param_space=space,
        )
        return tuner, True
    scheduler = ASHAScheduler(
        time_attr="training_iteration", max_t=max(1, max_epochs),
        grace_period=max(1, min(grace_period, max_epochs)), reduction_factor=reduction_factor,
    )
    storage, name = os.path.split(experiment)
    tuner = tune.Tuner(
        trainable,
        param_space=space,
        tune_config=tune.TuneConfig(
            metric="objective", mode="max", scheduler=scheduler, num_samples=num_samples, search_alg=search_alg,
        ),
        run_config=tune.RunConfig(
            name=name, storage_path=storage, verbose=0, checkpoint_config=tune.CheckpointConfig(num_to_keep=2),
            callbacks=list(callbacks or []),
        ),
    )
    return tuner, False


def tune_adaptation(
    base_model: str | os.PathLike[str],
    triplets: Any,
    validation: Dataset,
    *,
    storage_path: str | os.PathLike[str],
    name: str = "adapt-sweep",
    param_space: Mapping[str, Any] | None = None,
    num_samples: int = 4,
    measure: str = "acc@5",
    n_resamples: int = 1000,
    sample_size: int | None = None,
    ci_seed: int = 0,
    bootstrap: BootstrapConfig | None = None,
    ft_config: FTConfig | None = None,
    variant: str = "ft",
    chunks: Sequence[str] | None = None,
    pt_config: Any = None,
    artifact_root: str | os.PathLike[str] | None = None,
    seed: int = 0,
    search: str = "random",
    grace_period: int = 1,
    reduction_factor: int = 2,
    max_epochs: int | None = None,
    cpus_per_trial: float = 1,
    gpus_per_trial: float | None = None,
    max_concurrent_trials: int | None = None,
    resume: bool = True,
    callbacks: Sequence[Any] | None = None,
) -> SweepResult:
    """Sweep fine-tuning hyperparameters of ``base_model`` with Ray Tune and ASHA.

    Each trial fine-tunes (``variant="ft"``) the base model, or (``"pt-ft"``) the PT artifact
    trained first on ``chunks`` (stored under ``artifact_root``), on ``triplets`` with
    ``ft_config`` overridden by the trial's ``param_space`` values (names in :data:`TUNABLE`;
    ``merge_weight`` evaluates the merged model), reporting after every epoch the lower bound of
    the bootstrapped CI of ``measure`` on ``validation`` (:func:`trial_objective` with
    ``bootstrap``, or else ``n_resamples`` resamples of ``sample_size`` queries seeded by
    ``ci_seed`` at 95%). Trials ask for ``cpus_per_trial`` CPUs and ``gpus_per_trial`` GPUs
    (``None``: 1 when the cluster has GPUs; 0.5 puts two trials on one GPU). With ``resume`` an
    experiment already at ``storage_path/name`` is restored: finished trials are kept and
    unfinished ones continue.
    """
    m = Measure.parse(measure)
    space = _check_sweep(param_space, num_samples, variant, search)
    if bootstrap is None:
        bootstrap = BootstrapConfig(n_resamples=n_resamples, sample_size=sample_size, seed=ci_seed)
    search_alg = _search_alg(search, seed, max_concurrent_trials)
    ft_config = ft_config or FTConfig()
    rows = coerce_triplets(triplets)
    ray = ensure_ray(None)

    base = describe_base(base_model)
    start_path, start_ref = _start_path(base_model, base.path, variant, chunks, pt_config, artifact_root, seed,
                                        gpus_per_trial)
    prefixes = resolve_prefixes(
        ft_config.query_prefix, ft_config.passage_prefix, saved_prompts(start_path),
        str(base.root.get("id", base.label)),
    )
    payload = {
        "ft_config": ft_config, "start_path": start_ref, "merge_base_path": _worker_ref(base_model, base.path),
        "rows": rows, "validation": validation, "measure": str(m), "bootstrap": bootstrap, "seed": int(seed),
        "prefixes": prefixes, "device": None,
    }
    resources = _trial_resources(cpus_per_trial, gpus_per_trial, _trial_memory(ft_config, space, start_path, ray), ray)
    from ray import tune  # deferred: importing adaptlab.adapt does not load ray

    trainable = tune.with_resources(tune.with_parameters(_trial, payload=payload), resources)
    experiment = _experiment_path(storage_path, name)
    tuner, restored = _make_tuner(
        trainable, space, experiment, resume=resume, max_epochs=max_epochs or _max_epochs(space, ft_config.epochs),
        grace_period=grace_period, reduction_factor=reduction_factor, num_samples=num_samples,
        search_alg=search_alg, callbacks=callbacks,
    )
    out = _rows(tuner.fit(), str(m))
    scored = [r for r in out if r["best_objective"] is not None]
    best = max(scored, key=lambda r: r["best_objective"]) if scored else None
    return SweepResult(out, best, experiment, restored, str(m))


def _trial_resources(cpus: float, gpus: float | None, memory: int, ray: Any) -> dict[str, float]:
    """A trial's Tune resources: ``gpus`` None asks for 1 GPU when the cluster has GPUs; ``memory``
    bytes when > 0."""
    if gpus is None:
        gpus = 1.0 if ray.cluster_resources().get("GPU", 0) >= 1 else 0.0
    resources = {"cpu": float(cpus), "gpu": float(gpus)}
    if memory:
        resources["memory"] = float(memory)
    return resources


def _largest_value(space: Mapping[str, Any], name: str, default: int) -> int:
    """The largest value a trial can draw for ``name`` (a choice, a grid, a range or a constant)."""
    value = space.get(name, default)
    if hasattr(value, "categories"):
        return int(max(value.categories))
    if isinstance(value, Mapping) and "grid_search" in value:
        return int(max(value["grid_search"]))
    if hasattr(value, "upper"):
        return int(value.upper)
    return int(value) if isinstance(value, (int, float)) else default


def _trial_memory(ft_config: FTConfig, space: Mapping[str, Any], start_path: Path, ray: Any) -> int:
    """Bytes a trial declares: the FT estimate (:mod:`.memory`) at the largest batch and number of
    negatives the space allows, capped at the largest node; 0 when the model's files do not say."""
    try:
        shape = EncoderShape.read(start_path)
    except (OSError, ValueError, KeyError):
        return 0
    config = replace(
        ft_config, batch_size=_largest_value(space, "batch_size", ft_config.batch_size),
        num_negatives=_largest_value(space, "num_negatives", ft_config.num_negatives),
    )
    estimate = estimate_stage_memory("ft", shape, config)
    return declared_memory(estimate, largest_node_memory(ray), "a sweep trial")


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



_trial_config = trial_config  # transitional alias: remove once study/scale.py imports trial_config
