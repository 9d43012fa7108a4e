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

(Roychowdhury et al. 2024, section 2.1, bootstrap the accuracy the same way).

Selection and confirmation: the judged validation queries are split once, seeded
(:func:`split_queries`, ``derive_seed(seed, "tune-confirmation")``), into a selection part
(``1 - confirm_fraction``, default half) and a confirmation part (:data:`CONFIRM_FRACTION`).
Trials, ASHA and the choice of the best trial and epoch see only the selection part's
``objective``. The largest of several selection lower bounds is optimistic: with equal true
quality the chosen one exceeds the truth far more often than a 95% bound should (the max over
trials of noisy bounds). So the chosen trial's value at its chosen epoch is re-scored on the
confirmation part, questions that took no part in the selection (``confirmed_*`` in
:attr:`SweepResult.best`): that lower bound exceeds the truth at about the nominal rate. Every
row's value and CI come from one epoch (its best by the selection objective), and the best row's
``config/epochs`` is that epoch, so applying the best configuration trains the epochs that won.

Search: random sampling of ``param_space`` (seeded), or Optuna's TPE when ``search="optuna"``
and optuna is installed; ASHA (asynchronous successive halving) stops weak trials early, one
rung per epoch. A sweep interrupted mid-way resumes from its storage path
(``Tuner.can_restore`` / ``Tuner.restore``): finished trials are kept, unfinished ones continue
from their last per-epoch checkpoint. Each trial declares the memory of its fine-tuning at the
largest batch and number of negatives the space allows (:mod:`.memory`), so Tune runs no more
trials on a node than its memory holds.
"""

from __future__ import annotations

import math
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
from adaptlab.models.variants import FT, PT, PT_FT, TUNABLE_VARIANTS
from adaptlab.retrieval import PerQueryRecords, build_records
from adaptlab.stats import BootstrapConfig, bootstrap_ci, derive_seed
from adaptlab.stats.settings import resolve_bootstrap

__all__ = [
    "CONFIRM_FRACTION",
    "PARAM_DOMAINS",
    "SweepResult",
    "TUNABLE",
    "build_param_space",
    "choose_best",
    "conflicting_params",
    "default_param_space",
    "epoch_report",
    "param_spec_problem",
    "per_query_values",
    "split_queries",
    "summarise_trial",
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

CONFIRM_FRACTION = 0.5
"""Share of the judged validation queries kept out of the selection: the chosen trial is
re-scored on them (module docstring). Half keeps both intervals about sqrt(2) wider than one on
all queries; a larger share confirms more tightly and selects more noisily."""

_REPORTED = ("objective", "ci_low", "ci_high", "mean", "point", "n_queries", "epoch",
             "confirm_ci_low", "confirm_ci_high", "confirm_mean", "confirm_n_queries")
"""Per-epoch report fields a row takes from its best epoch."""


PARAM_DOMAINS: dict[str, str] = {
    "choice": "choice", "grid": "grid_search", "uniform": "uniform", "loguniform": "loguniform",
    "randint": "randint", "quniform": "quniform",
}
"""The kinds a plain ``param_space`` entry (``{kind = [args]}``) may use, and the Ray Tune
function that builds each (:func:`build_param_space`)."""

_RANGE_ARITY = {"uniform": 2, "loguniform": 2, "randint": 2, "quniform": 3}


def param_spec_problem(spec: Any) -> tuple[str, str] | None:
    """What is wrong with one plain ``param_space`` entry, without importing Ray: None when it
    is a non-empty list (a choice), a one-key table ``{kind = [args]}`` with a kind of
    :data:`PARAM_DOMAINS` and arguments Ray Tune accepts, or a fixed number or string; else
    ``(where, expected)`` with ``where`` the key path below the entry (``""``, ``"loguniform"``)."""
    if isinstance(spec, list):
        return None if spec else ("", "a non-empty list of values")
    if isinstance(spec, Mapping):
        if len(spec) != 1 or next(iter(spec)) not in PARAM_DOMAINS:
            return "", "a table with one key of " + ", ".join(sorted(PARAM_DOMAINS))
        kind, args = next(iter(spec.items()))
        if not isinstance(args, list) or not args:
            return kind, "a non-empty list"
        if kind in _RANGE_ARITY:
            want = _RANGE_ARITY[kind]
            if len(args) != want or not all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args):
                return kind, f"a list of {want} numbers"
            problem = _bounds_problem(kind, *args)
            return None if problem is None else (kind, f"valid bounds ({problem})")
        return None
    if isinstance(spec, (int, float, str)) and not isinstance(spec, bool):
        return None
    return "", "a list, a table or a number"


def _bounds_problem(kind: str, low: float, high: float, q: float = 1.0) -> str | None:
    """Why Ray Tune's ``kind`` domain over [low, high) (step ``q``) would be empty or refused."""
    if not math.isfinite(low) or not math.isfinite(high) or not low < high:
        return "finite lower < upper"
    if kind == "loguniform" and low <= 0:
        return "a lower bound > 0"
    if kind == "randint" and not (float(low).is_integer() and float(high).is_integer()):
        return "integer bounds"
    if kind == "quniform":
        if not (math.isfinite(q) and q > 0):
            return "a step q > 0"
        if not all(math.isclose(b / q, round(b / q)) for b in (low, high)):
            return "bounds divisible by q"
    return None


def conflicting_params(names: Sequence[str] | Mapping[str, Any]) -> str | None:
    """Why these ``param_space`` names cannot be swept together, or None: ``scale`` and
    ``temperature`` (= 1/scale) set the same thing."""
    if "scale" in names and "temperature" in names:
        return "give either scale or temperature (= 1/scale), not both"
    return None


def build_param_space(specs: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Ray Tune's ``param_space`` from plain entries already checked by
    :func:`param_spec_problem` (the study layer checks them when a study is loaded): a list is a
    choice, ``{kind = [args]}`` the :data:`PARAM_DOMAINS` function of ``kind``, anything else a
    fixed value. None (no entries) stays None: :func:`default_param_space`. Imports ray."""
    if specs is None:
        return None
    from ray import tune  # deferred: importing adaptlab.adapt does not load ray

    space: dict[str, Any] = {}
    for name, spec in specs.items():
        if isinstance(spec, list):
            space[name] = tune.choice(spec)
        elif isinstance(spec, Mapping):
            kind, args = next(iter(spec.items()))
            make = getattr(tune, PARAM_DOMAINS[kind])
            space[name] = make(args) if kind in ("choice", "grid") else make(*args)
        else:
            space[name] = spec
    return space


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
    """One row per trial (``config/<name>`` columns plus the report of its best epoch by the
    selection objective), the best row (:func:`choose_best`: the selection value,
    ``best_objective``, is optimistic; ``confirmed_*`` are the honest value and CI on the
    confirmation queries), where the experiment lives, and whether it was restored."""

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
    low, high = float(res.ci_low), float(res.ci_high)
    mean = float(values.mean())
    return {"objective": low, "ci_low": low, "ci_high": high, "mean": mean, "point": mean,
            "n_queries": int(values.size)}


def split_queries(n_queries: int, confirm_fraction: float = CONFIRM_FRACTION, seed: int = 0) -> np.ndarray:
    """A boolean mask over ``n_queries`` (in ``validation.judged_queries()`` order): ``True`` for
    the selection part, ``False`` for the ``round(confirm_fraction * n)`` confirmation queries
    (at least one of each), drawn by a seeded permutation (``derive_seed(seed, "tune-confirmation")``)."""
    if not 0.0 < float(confirm_fraction) < 1.0:
        raise ConfigError(f"confirm_fraction = {confirm_fraction}: expected a share strictly between 0 and 1")
    if n_queries < 2:
        raise ConfigError(f"the sweep's validation set has {n_queries} judged query(ies): expected at least 2 "
                          "(one part selects the trial, the other confirms it)")
    n_confirm = min(n_queries - 1, max(1, round(float(confirm_fraction) * n_queries)))
    rng = np.random.default_rng(derive_seed(int(seed), "tune-confirmation"))
    mask = np.ones(n_queries, dtype=bool)
    mask[rng.permutation(n_queries)[:n_confirm]] = False
    return mask


def epoch_report(values: np.ndarray, selection: np.ndarray, bootstrap: BootstrapConfig) -> dict[str, float]:
    """One epoch's report: :func:`trial_objective` of the selection part (``objective``, the
    only value the search sees) and the same CI of the confirmation part (``confirm_*``)."""
    values = np.asarray(values, dtype=np.float64)
    confirm = trial_objective(values[~selection], bootstrap)
    return {**trial_objective(values[selection], bootstrap),
            **{f"confirm_{k}": confirm[k] for k in ("ci_low", "ci_high", "mean", "n_queries")}}


def summarise_trial(history: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A trial's row fields from its per-epoch reports: all of them from its best epoch by the
    selection ``objective`` (value and CI from one epoch), plus ``best_objective`` = that value;
    empty when no epoch was reported."""
    scored = [h for h in history if h.get("objective") is not None and np.isfinite(h["objective"])]
    if not scored:
        return {key: None for key in (*_REPORTED, "best_objective")}
    top = max(scored, key=lambda h: float(h["objective"]))
    out = {key: _plain(top.get(key)) for key in _REPORTED}
    out["best_objective"] = float(top["objective"])
    return out


def _plain(value: Any) -> Any:
    """A NumPy scalar from Tune's table as the Python number it holds (rows are stored as JSON)."""
    return value.item() if isinstance(value, np.generic) else value


def choose_best(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The row with the largest selection ``best_objective`` (ties: the first), with
    ``config/epochs`` set to the epoch that won (``trial_epochs`` keeps the trial's own) and the
    honest value on the confirmation queries: ``confirmed_objective`` = ``confirmed_ci_low``,
    ``confirmed_ci_high``, ``confirmed_mean``, ``confirmed_n_queries``. ``best_objective`` stays
    the optimistic selection value, labelled so by ``selection_value``."""
    scored = [r for r in rows if r.get("best_objective") is not None]
    if not scored:
        return None
    best = dict(max(scored, key=lambda r: float(r["best_objective"])))
    if best.get("epoch") is not None:
        best["trial_epochs"] = best.get("config/epochs")
        best["config/epochs"] = int(best["epoch"])
    best["confirmed_objective"] = best["confirmed_ci_low"] = best.get("confirm_ci_low")
    best["confirmed_ci_high"] = best.get("confirm_ci_high")
    best["confirmed_mean"] = best.get("confirm_mean")
    best["confirmed_n_queries"] = best.get("confirm_n_queries")
    best["selection_value"] = "optimistic: the largest of the trials' selection lower bounds"
    return best


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
        metrics = {**epoch_report(values, payload["selection"], bootstrap), "epoch": epoch + 1}
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


def _history(result: Any) -> list[dict[str, Any]]:
    """A Tune result's per-epoch reports (its last one when Tune kept no table)."""
    df = result.metrics_dataframe
    if df is not None and "objective" in getattr(df, "columns", ()):
        return df.to_dict("records")
    return [dict(result.metrics or {})] if result.metrics else []


def _rows(grid: Any, measure: str) -> list[dict[str, Any]]:
    """One row per trial: status, config and :func:`summarise_trial` of its reports."""
    rows = []
    for r in grid:
        metrics = dict(r.metrics or {})
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
        row.update(summarise_trial(_history(r)))
        row["error"] = None if r.error is None else str(r.error)[:500]
        rows.append(row)
    rows.sort(key=lambda x: str(x["trial_id"]))
    return rows


def _check_sweep(param_space: Mapping[str, Any] | None, num_samples: int, variant: str, search: str) -> dict[str, Any]:
    """The validated search space (the default one when ``param_space`` is None)."""
    if num_samples < 1:
        raise ConfigError(f"num_samples = {num_samples}: expected >= 1")
    if variant not in TUNABLE_VARIANTS:
        raise ConfigError(f"sweep variant {variant!r}: expected " + " or ".join(map(repr, TUNABLE_VARIANTS)))
    space = dict(param_space) if param_space is not None else default_param_space()
    unknown = sorted(set(space) - set(TUNABLE))
    if unknown:
        raise ConfigError(f"param_space keys {unknown} are not tunable; expected some of {', '.join(TUNABLE)}")
    conflict = conflicting_params(space)
    if conflict is not None:
        raise ConfigError(f"param_space: {conflict}")
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
    if variant != PT_FT:
        return base_path, str(base_path)
    if chunks is None or artifact_root is None:
        raise ConfigError("sweep variant 'pt-ft' needs chunks=... and artifact_root=... for the PT model")
    job_kwargs = {"pt_config": pt_config} if pt_config is not None else {}
    pt = run_adaptation_jobs(
        [AdaptJob(PT, os.fspath(base_model), chunks=list(chunks), seed=seed, **job_kwargs)],
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
    n_resamples: int | None = None,
    sample_size: int | None = None,
    ci_seed: int | None = None,
    bootstrap: BootstrapConfig | None = None,
    ft_config: FTConfig | None = None,
    variant: str = FT,
    chunks: Sequence[str] | None = None,
    pt_config: Any = None,
    artifact_root: str | os.PathLike[str] | None = None,
    seed: int = 0,
    confirm_fraction: float = CONFIRM_FRACTION,
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
    the bootstrapped CI of ``measure`` on the selection part of ``validation`` (:func:`epoch_report`
    with ``bootstrap``, or else, not both, ``n_resamples`` (1000) resamples of ``sample_size``
    queries seeded by ``ci_seed`` (0) at 95%); ``confirm_fraction`` of the queries
    (:func:`split_queries`, seeded by ``seed``) re-score the chosen trial (:func:`choose_best`). Trials ask for ``cpus_per_trial`` CPUs and ``gpus_per_trial`` GPUs
    (``None``: 1 when the cluster has GPUs; 0.5 puts two trials on one GPU). With ``resume`` an
    experiment already at ``storage_path/name`` is restored: finished trials are kept and
    unfinished ones continue.
    """
    bootstrap = resolve_bootstrap("tune_adaptation", bootstrap, aliases={"ci_seed": "seed"},
                                  n_resamples=n_resamples, sample_size=sample_size, ci_seed=ci_seed)
    m = Measure.parse(measure)
    space = _check_sweep(param_space, num_samples, variant, search)
    selection = split_queries(len(validation.judged_queries()), confirm_fraction, seed)
    _check_parts(selection, bootstrap)
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
        "prefixes": prefixes, "device": None, "selection": selection,
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
    return SweepResult(out, choose_best(out), experiment, restored, str(m))


def _check_parts(selection: np.ndarray, bootstrap: BootstrapConfig) -> None:
    """A bootstrap ``sample_size`` larger than the smaller part fails now, not inside every trial."""
    smaller = int(min(selection.sum(), (~selection).sum()))
    size = bootstrap.sample_size
    if size is not None and size > smaller and not bootstrap.allow_oversampling:
        raise ConfigError(f"sample_size = {size}: the sweep scores selection and confirmation queries apart and "
                          f"the smaller part has {smaller}; use sample_size <= {smaller} or none (all of a part)")


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
    estimate = estimate_stage_memory(FT, shape, config)
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
