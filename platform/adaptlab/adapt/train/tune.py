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
(``1 - confirm_fraction``, default half) and a confirmation part
(:data:`~adaptlab.adapt.train.sweep_config.CONFIRM_FRACTION`).
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

import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from adaptlab.adapt.train.addressing import sanitize_name
from adaptlab.adapt.train.artifacts import is_artifact_uri, local_model_path
from adaptlab.adapt.train.base_model import describe_base
from adaptlab.adapt.train.ft import (
    FTConfig,
    TripletRows,
    coerce_triplets,
    fine_tune_model,
    resolve_prefixes,
    saved_prompts,
)
from adaptlab.adapt.train.jobs import AdaptJob, JobSettings, ensure_ray, run_adaptation_jobs
from adaptlab.adapt.train.knobs import pick_device
from adaptlab.adapt.train.loop import Checkpointing
from adaptlab.adapt.train.memory import EncoderShape, declared_memory, estimate_stage_memory, largest_node_memory
from adaptlab.adapt.train.merge import merge_state_dicts
from adaptlab.adapt.train.space import build_param_space, largest_value
from adaptlab.adapt.train.sweep_config import CONFIRM_FRACTION, SweepConfig, check_confirm_fraction
from adaptlab.adapt.train.third_party import load_sentence_model
from adaptlab.data.dataset import Dataset
from adaptlab.errors import ConfigError
from adaptlab.metrics import Measure, evaluate
from adaptlab.models.variants import FT, PT, PT_FT
from adaptlab.retrieval import PerQueryRecords, build_records
from adaptlab.runtime import make_room
from adaptlab.stats import BootstrapConfig, bootstrap_ci, derive_seed

__all__ = [
    "SweepResult",
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

TUNE_MEASURE = "tune_objective"
"""The ``measure`` of a sweep's rows in the store's ``metrics`` table (:meth:`SweepResult.to_metric_rows`)."""

_REPORTED = (
    "objective",
    "ci_low",
    "ci_high",
    "mean",
    "point",
    "n_queries",
    "epoch",
    "confirm_ci_low",
    "confirm_ci_high",
    "confirm_mean",
    "confirm_n_queries",
)
"""Per-epoch report fields a row takes from its best epoch."""


@dataclass
class SweepResult:
    """One row per trial (``config/<name>`` columns plus the report of its best epoch by the
    selection objective), the best row (:func:`choose_best`: the selection value,
    ``best_objective``, is optimistic; ``confirmed_*`` are the honest value and CI on the
    confirmation queries), where the experiment lives, whether it was restored, and the
    objective's measure and bootstrap."""

    rows: list[dict[str, Any]]
    best: dict[str, Any] | None
    experiment_path: str
    restored: bool = False
    measure: str = ""
    bootstrap: BootstrapConfig = field(default_factory=BootstrapConfig)

    def to_arrow(self) -> Any:
        import pyarrow as pa  # deferred: pyarrow loads on use

        return pa.Table.from_pylist(self.rows)

    def best_config(self) -> dict[str, Any]:
        """The chosen trial's settings ``{name: value}`` (``epochs`` = the epoch that won); empty
        when no trial was chosen."""
        return _trial_settings(self.best or {})

    def to_metric_rows(self, system: str, dataset: str, confirm_dataset: str) -> list[dict[str, Any]]:
        """Rows for the store's ``metrics`` table (``run_id`` left to the caller), measure
        :data:`TUNE_MEASURE`: one per trial on ``dataset``, value = its best selection objective (a
        lower CI bound on the queries that chose it: optimistic for the chosen trial,
        ``extra.selection = "optimistic"``) with the CI of the same epoch; and one for the chosen
        trial on ``confirm_dataset``: its lower bound on the confirmation queries, which took no
        part in the selection (``extra.selection = "confirmed"``, the honest value).
        ``sample_size`` is the number of queries each resample drew: the bootstrap's, else the
        part's (``n_queries``)."""
        boot = self.bootstrap
        rows = []
        for r in self.rows:
            value = r.get("best_objective")
            rows.append(
                {
                    "system": system,
                    "dataset": dataset,
                    "measure": TUNE_MEASURE,
                    "value": float("nan") if value is None else float(value),
                    "ci_low": r.get("ci_low"),
                    "ci_high": r.get("ci_high"),
                    "boot_mean": r.get("mean"),
                    "n_queries": r.get("n_queries"),
                    "n_resamples": boot.n_resamples,
                    "sample_size": boot.sample_size or r.get("n_queries"),
                    "seed": boot.seed,
                    "extra": {
                        "trial_id": r.get("trial_id"),
                        "status": r.get("status"),
                        "iterations": r.get("iterations"),
                        "measure": r.get("measure"),
                        "epoch_objective": r.get("objective"),
                        "selection": "optimistic",
                        "config": _trial_settings(r),
                        "error": r.get("error"),
                    },
                }
            )
        return rows + self._confirmed_rows(system, confirm_dataset)

    def _confirmed_rows(self, system: str, dataset: str) -> list[dict[str, Any]]:
        """The chosen trial's value on the confirmation queries (none when no trial was chosen)."""
        best = self.best or {}
        value = best.get("confirmed_objective")
        if value is None:
            return []
        return [
            {
                "system": system,
                "dataset": dataset,
                "measure": TUNE_MEASURE,
                "value": float(value),
                "ci_low": best.get("confirmed_ci_low"),
                "ci_high": best.get("confirmed_ci_high"),
                "boot_mean": best.get("confirmed_mean"),
                "n_queries": best.get("confirmed_n_queries"),
                "n_resamples": self.bootstrap.n_resamples,
                "seed": self.bootstrap.seed,
                "sample_size": self.bootstrap.sample_size or best.get("confirmed_n_queries"),
                "extra": {"trial_id": best.get("trial_id"), "selection": "confirmed", "config": _trial_settings(best)},
            }
        ]


def _trial_settings(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row's ``config/<name>`` columns as ``{name: value}``."""
    return {k.split("/", 1)[1]: v for k, v in row.items() if k.startswith("config/")}


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
        [passage_prefix + validation.corpus[d].full_text() for d in doc_ids],
        batch_size=batch_size,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
    ).astype(np.float32)
    queries = model.encode(
        [query_prefix + validation.queries[q] for q in qids],
        batch_size=batch_size,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
    ).astype(np.float32)
    depth = len(doc_ids) if m.k is None else min(m.k, len(doc_ids))
    return build_records(
        qids, queries, doc_ids, docs, validation.qrels, system="tune-trial", dataset=validation.name, k=depth
    )


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
    records = validation_records(
        model, validation, m, query_prefix=query_prefix, passage_prefix=passage_prefix, batch_size=batch_size
    )
    return evaluate(validation.qrels, records.to_run(), [m], query_ids=records.query_ids).values[str(m)]


def trial_objective(values: np.ndarray, bootstrap: BootstrapConfig, measure: str | None = None) -> dict[str, float]:
    """The trial's report for one epoch from the per-query values ``x_1..x_Q``:

        objective = ci_low = (1 - c)/2 quantile of the bootstrapped means (c = confidence)

    (:func:`adaptlab.stats.bootstrap_ci` with ``bootstrap``; Roychowdhury et al. 2024, section
    2.1), ``ci_high`` the upper end, ``mean`` = ``point`` = ``sum_q x_q / Q``; ``measure`` decides
    the interval (Wilson for acc@k, :func:`adaptlab.stats.intervals.measure_interval`)."""
    res = bootstrap_ci(values, measure=measure, **bootstrap.kwargs())
    low, high = float(res.ci_low), float(res.ci_high)
    mean = float(values.mean())
    return {
        "objective": low,
        "ci_low": low,
        "ci_high": high,
        "mean": mean,
        "point": mean,
        "n_queries": int(values.size),
    }


def split_queries(n_queries: int, confirm_fraction: float = CONFIRM_FRACTION, seed: int = 0) -> np.ndarray:
    """A boolean mask over ``n_queries`` (in ``validation.judged_queries()`` order): ``True`` for
    the selection part, ``False`` for the ``round(confirm_fraction * n)`` confirmation queries
    (at least one of each), drawn by a seeded permutation (``derive_seed(seed, "tune-confirmation")``)."""
    check_confirm_fraction(confirm_fraction)
    if n_queries < 2:
        raise ConfigError(
            f"the sweep's validation set has {n_queries} judged query(ies): expected at least 2 "
            "(one part selects the trial, the other confirms it)"
        )
    n_confirm = min(n_queries - 1, max(1, round(float(confirm_fraction) * n_queries)))
    rng = np.random.default_rng(derive_seed(int(seed), "tune-confirmation"))
    mask = np.ones(n_queries, dtype=bool)
    mask[rng.permutation(n_queries)[:n_confirm]] = False
    return mask


def epoch_report(
    values: np.ndarray, selection: np.ndarray, bootstrap: BootstrapConfig, measure: str | None = None
) -> dict[str, float]:
    """One epoch's report: :func:`trial_objective` of the selection part (``objective``, the
    only value the search sees) and the same CI of the confirmation part (``confirm_*``)."""
    values = np.asarray(values, dtype=np.float64)
    confirm = trial_objective(values[~selection], bootstrap, measure)
    return {
        **trial_objective(values[selection], bootstrap, measure),
        **{f"confirm_{k}": confirm[k] for k in ("ci_low", "ci_high", "mean", "n_queries")},
    }


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


# --------------------------------------------------------------------------- the sweep


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


def _start_path(
    base_model: str | os.PathLike[str],
    base_path: Path,
    variant: str,
    chunks: Sequence[str] | None,
    pt_config: Any,
    artifact_root: str | os.PathLike[str] | None,
    seed: int,
    gpus: float | None,
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
        artifact_root,
        JobSettings(gpus_per_job=gpus),
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
    *,
    storage_path: str | os.PathLike[str],
    name: str = "adapt-sweep",
    ft_config: FTConfig | None = None,
    chunks: Sequence[str] | None = None,
    pt_config: Any = None,
    artifact_root: str | os.PathLike[str] | None = None,
    seed: int = 0,
    callbacks: Sequence[Any] | None = None,
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
    selection = split_queries(len(validation.judged_queries()), config.confirm_fraction, seed)
    _check_parts(selection, config.bootstrap)
    search_alg = _search_alg(config.search, seed, config.max_concurrent_trials)
    ft_config = ft_config or FTConfig()
    rows = coerce_triplets(triplets)
    ray = ensure_ray(None)
    make_room()  # idle warm embedding pools would hold the CPUs the trials wait for

    payload, start_path = _trial_payload(
        base_model,
        rows,
        validation,
        config,
        ft_config,
        selection,
        chunks=chunks,
        pt_config=pt_config,
        artifact_root=artifact_root,
        seed=seed,
    )
    trainable = _trainable(payload, config, start_path, ray)
    experiment = _experiment_path(storage_path, name)
    max_epochs = config.max_epochs or largest_value(config.param_space, "epochs", ft_config.epochs)
    tuner, restored = _make_tuner(
        trainable, experiment, config, max_epochs=max_epochs, search_alg=search_alg, callbacks=callbacks
    )
    out = _rows(tuner.fit(), config.measure)
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
    ft_config: FTConfig,
    selection: np.ndarray,
    *,
    chunks: Sequence[str] | None,
    pt_config: Any,
    artifact_root: str | os.PathLike[str] | None,
    seed: int,
) -> tuple[dict[str, Any], Path]:
    """What every trial receives (the ``payload`` of :func:`_trial`): the model it starts from
    (:func:`_start_path`: the base, or its PT artifact, trained here for ``"pt-ft"``), the base it
    merges with, the prefixes (:func:`~adaptlab.adapt.train.ft.resolve_prefixes`), the triplets,
    the validation set and its ``selection`` mask, the measure, the bootstrap and the seed; with
    the local path of the start model."""
    base = describe_base(base_model)
    start_path, start_ref = _start_path(
        base_model, base.path, config.variant, chunks, pt_config, artifact_root, seed, config.gpus_per_trial
    )
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
        "seed": int(seed),
        "prefixes": prefixes,
        "device": None,
        "selection": selection,
    }
    return payload, start_path


def _trainable(payload: dict[str, Any], config: SweepConfig, start_path: Path, ray: Any) -> Any:
    """:func:`_trial` bound to ``payload`` as a Tune trainable that asks for a trial's resources:
    ``config``'s CPUs and GPUs and the memory of its fine-tuning (:func:`_trial_memory`)."""
    memory = _trial_memory(payload["ft_config"], config.param_space, start_path, ray)
    resources = _trial_resources(config.cpus_per_trial, config.gpus_per_trial, memory, ray)
    from ray import tune  # deferred: importing adaptlab.adapt does not load ray

    return tune.with_resources(tune.with_parameters(_trial, payload=payload), resources)


def _trial_resources(cpus: float, gpus: float | None, memory: int, ray: Any) -> dict[str, float]:
    """A trial's Tune resources: ``gpus`` None asks for 1 GPU when the cluster has GPUs; ``memory``
    bytes when > 0."""
    if gpus is None:
        gpus = 1.0 if ray.cluster_resources().get("GPU", 0) >= 1 else 0.0
    resources = {"cpu": float(cpus), "gpu": float(gpus)}
    if memory:
        resources["memory"] = float(memory)
    return resources


def _trial_memory(ft_config: FTConfig, space: Mapping[str, Any], start_path: Path, ray: Any) -> int:
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
