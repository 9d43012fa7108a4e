"""Ray Tune sweeps of adaptation hyperparameters, scored by a bootstrap lower confidence bound.

Objective of a trial (maximised): after each epoch the trained model (merged with the base as
``w * theta_ft + (1 - w) * theta_base`` when the trial has a ``merge_weight``) encodes the
validation queries and the validation corpus, every query's documents are ranked exactly by
inner product of the L2-normalised embeddings (ties: higher document id first), the chosen
measure is computed per query (e.g. acc@5 = 1 if a relevant document is in the top 5), and

    objective = lower end of the bootstrapped 95% percentile CI of the mean of those values

(``adaptlab.stats.bootstrap_ci``; Roychowdhury et al. section 2.1 bootstrap the accuracy the same
way). Ranking models by the lower bound prefers a configuration that is reliably good over one
whose mean is lifted by a lucky validation sample.

Search: random sampling of ``param_space`` (seeded), or Optuna's TPE when ``search="optuna"``
and optuna is installed; ASHA (asynchronous successive halving) stops weak trials early, one
rung per epoch. A sweep interrupted mid-way resumes from its storage path
(``Tuner.can_restore`` / ``Tuner.restore``): finished trials are kept, unfinished ones continue
from their last per-epoch checkpoint.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from adaptlab.adapt.artifacts import describe_base, sanitize_name
from adaptlab.adapt.jobs import AdaptJob, ensure_ray, run_adaptation_jobs
from adaptlab.adapt.merge import merge_state_dicts
from adaptlab.adapt.train_ft import (
    FTConfig,
    coerce_triplets,
    fine_tune_model,
    resolve_prefixes,
    saved_prompts,
)
from adaptlab.adapt.trainloop import load_sentence_model, pick_device
from adaptlab.data.dataset import Dataset
from adaptlab.errors import ConfigError
from adaptlab.metrics.measures import Measure

__all__ = [
    "SweepResult",
    "TUNABLE",
    "default_param_space",
    "per_query_values",
    "tune_adaptation",
]

TUNABLE: tuple[str, ...] = (
    "batch_size", "epochs", "learning_rate", "merge_weight", "num_negatives", "scale",
    "temperature", "warmup_ratio", "weight_decay",
)
"""Names a ``param_space`` may use (FTConfig fields, ``temperature`` = 1/scale, merge weight)."""


def default_param_space() -> dict[str, Any]:
    """A modest default space: lr log-uniform in [1e-5, 1e-4], 1-3 epochs, 1/3/7 hard negatives,
    batch 16/32, scale 20 or 50 (temperature 0.05 or 0.02)."""
    from ray import tune

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
        import pyarrow as pa

        return pa.Table.from_pylist(self.rows)


# --------------------------------------------------------------------------- evaluation kernel


def _relevant_ranks(scores: np.ndarray, id_rank: np.ndarray, q_idx: np.ndarray, d_idx: np.ndarray) -> np.ndarray:
    """1-based rank of document ``d_idx[i]`` for query ``q_idx[i]`` under score-descending,
    id-descending order: ``1 + #{s > s_d} + #{s == s_d and id > id_d}``."""
    out = np.empty(len(q_idx), dtype=np.int64)
    step = max(1, 2_000_000 // max(1, scores.shape[1]))
    for start in range(0, len(q_idx), step):
        q, d = q_idx[start : start + step], d_idx[start : start + step]
        rows = scores[q]
        s_d = rows[np.arange(len(q)), d][:, None]
        above = (rows > s_d).sum(axis=1)
        tied_higher_id = ((rows == s_d) & (id_rank[None, :] > id_rank[d][:, None])).sum(axis=1)
        out[start : start + step] = 1 + above + tied_higher_id
    return out


def _per_query_kernel(
    scores: np.ndarray, id_rank: np.ndarray, rel: Sequence[Mapping[int, int]], measure: Measure
) -> np.ndarray:
    q_idx = np.array([q for q, r in enumerate(rel) for _ in r], dtype=np.int64)
    d_idx = np.array([d for r in rel for d in r], dtype=np.int64)
    gains = np.array([g for r in rel for g in r.values()], dtype=np.float64)
    ranks = _relevant_ranks(scores, id_rank, q_idx, d_idx)
    k = measure.k if measure.k is not None else scores.shape[1]
    values = np.zeros(len(rel), dtype=np.float64)
    pos = 0
    for q, r in enumerate(rel):
        n = len(r)
        rk, g = ranks[pos : pos + n], gains[pos : pos + n]
        pos += n
        hit = rk <= k
        if measure.name == "acc":
            values[q] = float(hit.any())
        elif measure.name == "mrr":
            values[q] = 1.0 / rk.min() if rk.min() <= k else 0.0
        elif measure.name == "recall":
            values[q] = hit.sum() / n
        elif measure.name == "precision":
            values[q] = hit.sum() / k
        elif measure.name == "map":
            srt = np.sort(rk[hit])
            values[q] = float(np.sum(np.arange(1, len(srt) + 1) / srt) / n)
        else:  # ndcg: gain = relevance, discount 1 / log2(rank + 1), ideal from all judged
            dcg = np.sum(g[hit] / np.log2(rk[hit] + 1.0))
            ideal = np.sort(g)[::-1][:k]
            idcg = np.sum(ideal / np.log2(np.arange(2, len(ideal) + 2)))
            values[q] = dcg / idcg if idcg > 0 else 0.0
    return values


def per_query_values(
    model: Any,
    validation: Dataset,
    measure: str | Measure,
    *,
    query_prefix: str = "",
    passage_prefix: str = "",
    batch_size: int = 64,
) -> np.ndarray:
    """Per-query values of ``measure`` for ``model`` on ``validation``: queries and the whole
    corpus (each with its prefix) are encoded and L2-normalised, every document is
    ranked by inner product (ties: higher document id first), relevance > 0 counts as relevant.
    Queries without relevant documents are left out. Order: ``validation.judged_queries()``."""
    m = Measure.parse(measure)
    qids = validation.judged_queries()
    if not qids:
        raise ConfigError(f"validation set {validation.name!r} has no query with a relevant document")
    doc_ids = list(validation.corpus)
    col = {d: i for i, d in enumerate(doc_ids)}
    id_rank = np.empty(len(doc_ids), dtype=np.int64)
    id_rank[np.argsort(np.array(doc_ids, dtype=object), kind="stable")] = np.arange(len(doc_ids))
    rel = [{col[d]: int(g) for d, g in validation.qrels[q].items() if g > 0} for q in qids]
    docs = model.encode(
        [passage_prefix + validation.corpus[d].full_text() for d in doc_ids], batch_size=batch_size,
        normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False,
    ).astype(np.float32)
    queries = model.encode(
        [query_prefix + validation.queries[q] for q in qids], batch_size=batch_size,
        normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False,
    ).astype(np.float32)
    return _per_query_kernel(queries @ docs.T, id_rank, rel, m)


def _default_ci_fn() -> Callable[..., Any]:
    try:
        from adaptlab.stats.bootstrap import bootstrap_ci  # type: ignore[import-not-found]
    except ImportError as e:
        raise ConfigError(
            "tune_adaptation needs adaptlab.stats.bootstrap.bootstrap_ci (not available); "
            "pass ci_fn=... or install a complete adaptlab"
        ) from e
    return bootstrap_ci


def _summarise_ci(res: Any, values: np.ndarray) -> tuple[float, float, float]:
    """(mean, ci_low, ci_high) from a bootstrap result given as an object with attributes, a
    mapping, or a (low, high) pair."""

    def get(name: str) -> float | None:
        v = res.get(name) if isinstance(res, Mapping) else getattr(res, name, None)
        return None if v is None else float(np.asarray(v, dtype=np.float64).ravel()[0])

    low, high = get("ci_low"), get("ci_high")
    if low is None and isinstance(res, (tuple, list)) and len(res) >= 2:
        low, high = float(np.ravel(res[0])[0]), float(np.ravel(res[1])[0])
    if low is None or high is None:
        raise ConfigError(f"bootstrap result {type(res).__name__} has no ci_low/ci_high")
    mean = get("mean")
    if mean is None:
        mean = get("estimate")
    return (float(values.mean()) if mean is None else mean), low, high


# --------------------------------------------------------------------------- the trial


def _trial_config(base: FTConfig, config: Mapping[str, Any]) -> FTConfig:
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
    from ray import tune

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    cfg = _trial_config(payload["ft_config"], config)
    device = pick_device(payload.get("device"))
    model = load_sentence_model(payload["start_path"], device)
    q_prefix, p_prefix = payload["prefixes"]
    weight = config.get("merge_weight")
    base_sd = None
    if weight is not None:
        reference = load_sentence_model(payload["merge_base_path"], "cpu")
        base_sd = {k: v.detach().clone() for k, v in reference.state_dict().items()}
        del reference
    validation: Dataset = payload["validation"]
    ci_fn = payload["ci_fn"] or _default_ci_fn()
    work = Path(tempfile.mkdtemp(prefix="adaptlab-trial-"))
    ckpt_dir = work / "checkpoints"
    restored = tune.get_checkpoint()
    if restored is not None:
        restored.to_directory(str(ckpt_dir))

    def on_epoch_end(epoch: int, checkpoint: Path | None) -> None:
        if base_sd is not None:
            own = {k: v.detach().clone() for k, v in model.state_dict().items()}
            model.load_state_dict(merge_state_dicts(own, base_sd, float(weight)))
            values = per_query_values(model, validation, payload["measure"], query_prefix=q_prefix,
                                      passage_prefix=p_prefix)
            model.load_state_dict(own)
        else:
            values = per_query_values(model, validation, payload["measure"], query_prefix=q_prefix,
                                      passage_prefix=p_prefix)
        res = ci_fn(values, n_resamples=payload["n_resamples"], sample_size=payload["sample_size"],
                    seed=payload["ci_seed"])
        mean, low, high = _summarise_ci(res, values)
        metrics = {"objective": low, "ci_low": low, "ci_high": high, "mean": mean,
                   "point": float(values.mean()), "n_queries": int(values.size), "epoch": epoch + 1}
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
    ci_fn: Callable[..., Any] | None = None,
) -> SweepResult:
    """Sweep fine-tuning hyperparameters of ``base_model`` with Ray Tune and ASHA.

    Each trial fine-tunes (``variant="ft"``) the base model, or (``"pt-ft"``) the PT artifact
    trained first on ``chunks`` (stored under ``artifact_root``), on ``triplets`` with
    ``ft_config`` overridden by the trial's ``param_space`` values (names in :data:`TUNABLE`;
    ``merge_weight`` evaluates the merged model), reporting after every epoch the lower bound of
    the bootstrapped 95% CI of ``measure`` on ``validation`` (``n_resamples`` resamples of
    ``sample_size`` queries, seeded by ``ci_seed``). Trials ask for ``cpus_per_trial`` CPUs and
    ``gpus_per_trial`` GPUs (``None``: 1 when the cluster has GPUs; 0.5 puts two trials on one
    GPU). With ``resume`` an experiment already at ``storage_path/name`` is restored: finished
    trials are kept and unfinished ones continue. ``ci_fn`` replaces
    ``adaptlab.stats.bootstrap.bootstrap_ci`` (same keyword signature).
    """
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler


    m = Measure.parse(measure)
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
    search_alg = _search_alg(search, seed, max_concurrent_trials)
    ft_config = ft_config or FTConfig()
    rows = coerce_triplets(triplets)
    ray = ensure_ray(None)

    base = describe_base(base_model)
    start_path = base.path
    if variant == "pt-ft":
        if chunks is None or artifact_root is None:
            raise ConfigError("sweep variant 'pt-ft' needs chunks=... and artifact_root=... for the PT model")
        job_kwargs = {"pt_config": pt_config} if pt_config is not None else {}
        pt = run_adaptation_jobs(
            [AdaptJob("pt", os.fspath(base_model), chunks=list(chunks), seed=seed, **job_kwargs)],
            artifact_root, gpus_per_job=gpus_per_trial,
        )[0]
        start_path = pt.model_path
    prefixes = resolve_prefixes(
        ft_config.query_prefix, ft_config.passage_prefix, saved_prompts(start_path),
        str(base.root.get("id", base.label)),
    )
    payload = {
        "ft_config": ft_config, "start_path": str(start_path), "merge_base_path": str(base.path),
        "rows": rows, "validation": validation, "measure": str(m), "n_resamples": int(n_resamples),
        "sample_size": sample_size, "ci_seed": int(ci_seed), "seed": int(seed),
        "prefixes": prefixes, "ci_fn": ci_fn, "device": None,
    }
    if gpus_per_trial is None:
        gpus_per_trial = 1.0 if ray.cluster_resources().get("GPU", 0) >= 1 else 0.0
    resources = {"cpu": float(cpus_per_trial), "gpu": float(gpus_per_trial)}
    trainable = tune.with_resources(tune.with_parameters(_trial, payload=payload), resources)

    storage = os.path.abspath(os.fspath(storage_path))
    name = sanitize_name(name)
    experiment = os.path.join(storage, name)
    restored = bool(resume and tune.Tuner.can_restore(experiment))
    if restored:
        tuner = tune.Tuner.restore(
            experiment, trainable=trainable, resume_unfinished=True, resume_errored=True,
            param_space=space,
        )
    else:
        top = max_epochs or _max_epochs(space, ft_config.epochs)
        scheduler = ASHAScheduler(
            time_attr="training_iteration", max_t=max(1, top),
            grace_period=max(1, min(grace_period, top)), reduction_factor=reduction_factor,
        )
        tuner = tune.Tuner(
            trainable,
            param_space=space,
            tune_config=tune.TuneConfig(
                metric="objective", mode="max", scheduler=scheduler, num_samples=num_samples,
                search_alg=search_alg,
            ),
            run_config=tune.RunConfig(
                name=name, storage_path=storage, verbose=0,
                checkpoint_config=tune.CheckpointConfig(num_to_keep=2),
                callbacks=list(callbacks or []),
            ),
        )
    grid = tuner.fit()
    out = _rows(grid, str(m))
    scored = [r for r in out if r["best_objective"] is not None]
    best = max(scored, key=lambda r: r["best_objective"]) if scored else None
    return SweepResult(out, best, experiment, restored, str(m))


def _search_alg(search: str, seed: int, max_concurrent: int | None) -> Any:
    if search == "optuna":
        try:
            import optuna  # noqa: F401
            from ray.tune.search import ConcurrencyLimiter
            from ray.tune.search.optuna import OptunaSearch
        except ImportError as e:
            raise ConfigError("search='optuna' needs the optuna package: pip install optuna") from e
        alg = OptunaSearch(seed=seed)
        return ConcurrencyLimiter(alg, max_concurrent) if max_concurrent else alg
    from ray.tune.search.basic_variant import BasicVariantGenerator

    return BasicVariantGenerator(random_state=seed, max_concurrent=max_concurrent or 0)

