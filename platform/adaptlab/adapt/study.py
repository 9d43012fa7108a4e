"""The scale study: a study file with an ``[adapt]`` section, from raw corpus to stored results.

::

    corpus --prepare--> chunks, held-out test documents, nested scales, questions, triplets
      --train--> for every scale n and variant v (pt, ft, pt-ft, merged): one adapted model
      --(optional [tune])--> Ray Tune sweep on the validation questions of one scale
      --evaluate--> base + every adapted model on the held-out in-domain questions and on every
                    [[datasets]] benchmark: exact search, per-query metrics, bootstrap CIs,
                    paired tests of every variant against the base model
      --store--> runs / metrics / per_query (one atomic commit per dataset)

System names say the variant and the data scale (number of training-scale documents):
``minilm-base``, ``minilm-pt-s10``, ``minilm-ft-s100``, ``minilm-pt-ft-s10``,
``minilm-merged-s100`` (:func:`system_name`). Every adapted system of every scale is evaluated
on the same queries as the base model, so all comparisons are paired (Roychowdhury et al.,
"Towards Understanding Domain Adapted Sentence Embeddings for Document Retrieval", section 2.1;
the scales follow "Evaluating the Robustness of Dense Retrievers in Interdisciplinary Domains",
sections 3.1-3.2). The ``[adapt]`` and ``[tune]`` keys are documented in
docs/sections/scale-study.md and in :func:`parse_adapt_section` / :func:`parse_tune_section`.

Entry point: :func:`run_scale_study` (``adaptlab run STUDY`` calls it when the study has an
``[adapt]`` section).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from adaptlab.adapt.study_config import (
    ALL_VARIANTS,
    AdaptSettings,
    TuneSettings,
    parse_adapt_section,
    parse_tune_section,
    store_root,
    tune_param_space,
)
from adaptlab.adapt.train_ft import FTConfig
from adaptlab.errors import ConfigError
from adaptlab.study.runner import DatasetOutcome, StudyOutcome
from adaptlab.study.schema import ModelSection, Study

__all__ = [
    "ALL_VARIANTS",
    "AdaptSettings",
    "ScaleStudyOutcome",
    "SystemInfo",
    "TUNE_MEASURE",
    "TuneSettings",
    "load_corpus",
    "parse_adapt_section",
    "parse_tune_section",
    "question_generator",
    "run_scale_study",
    "system_name",
]

TUNE_MEASURE = "tune_objective"
"""The ``measure`` of a sweep trial's row in the store's ``metrics`` table."""


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def system_name(label: str, variant: str, n_documents: int | None = None) -> str:
    """The store's system name: ``f"{label}-base"`` or ``f"{label}-{variant}-s{n_documents}"``."""
    if variant == "base":
        return f"{label}-base"
    if n_documents is None:
        raise ConfigError(f"system_name: variant {variant!r} needs the data scale (number of documents)")
    return f"{label}-{variant}-s{int(n_documents)}"


# =========================================================================== corpus and data


def _synthetic_options(rest: str, corpus: str) -> dict[str, Any]:
    allowed = {"n_documents": int, "seed": int, "full_name_rate": float, "sentences_per_document": str}
    out: dict[str, Any] = {}
    for item in filter(None, (x.strip() for x in rest.split(","))):
        key, eq, value = (x.strip() for x in item.partition("="))
        if not eq or key not in allowed:
            raise ConfigError(
                f"[adapt].corpus = {corpus!r}: {item!r} is not one of "
                f"{', '.join(k + '=...' for k in allowed)} (for example synthetic:n_documents=120,seed=0)"
            )
        try:
            if key == "sentences_per_document":
                lo, _, hi = value.partition("-")
                out[key] = (int(lo), int(hi or lo))
            else:
                out[key] = allowed[key](value)
        except ValueError as e:
            raise ConfigError(f"[adapt].corpus = {corpus!r}: {key}={value!r} is not a valid {key}") from e
    return out


def load_corpus(settings: AdaptSettings, study: Study) -> tuple[list[Any], Any]:
    """The raw documents of ``[adapt].corpus``, and the synthetic RawDocuments (or None).

    ``synthetic:k=v,...`` -> :func:`adaptlab.data.synthetic.synthetic_documents`;
    ``FORMAT:PATH`` with a dataset format of :func:`adaptlab.data.load_dataset` -> that
    dataset's corpus (:func:`adaptlab.adapt.corpus.corpus_from_dataset`); anything else is a
    folder (or file) read by :func:`adaptlab.adapt.corpus.load_documents`.
    """
    from adaptlab.adapt.corpus import corpus_from_dataset, load_documents
    from adaptlab.data.loaders import DATASET_FORMATS

    corpus = settings.corpus
    fmt, sep, rest = corpus.partition(":")
    if fmt.lower() == "synthetic":
        from adaptlab.adapt.templates import synthetic_raw_corpus
        from adaptlab.data.synthetic import synthetic_documents

        options = _synthetic_options(rest if sep else "", corpus)
        raw = synthetic_documents(options.pop("n_documents", 120), **options)
        return synthetic_raw_corpus(raw), raw
    if sep and fmt.lower() in DATASET_FORMATS and len(fmt) > 1:
        from adaptlab.data import load_dataset

        path = rest if Path(rest).expanduser().is_absolute() else str(study.resolve_path(rest))
        ds = load_dataset(f"{fmt}:{path}")
        docs = corpus_from_dataset(ds, clean=settings.clean)
        return docs, None
    path = study.resolve_path(corpus)
    if not path.exists():
        raise ConfigError(
            f"{study.source}: [adapt].corpus = {corpus!r}: {path} does not exist; expected a folder of "
            ".txt/.md/.jsonl documents, synthetic:k=v,... or FORMAT:PATH with FORMAT one of "
            + ", ".join(DATASET_FORMATS)
        )
    return load_documents(path, include=settings.include or None, exclude=settings.exclude or None,
                          clean=settings.clean), None


def question_generator(settings: AdaptSettings, synthetic_raw: Any) -> Any:
    """The question generator of ``[adapt].questions`` (seeded with ``[adapt].seed``)."""
    if settings.questions == "template":
        from adaptlab.adapt.templates import SyntheticTemplateGenerator

        return SyntheticTemplateGenerator(synthetic_raw, n_per_chunk=settings.questions_per_chunk, seed=settings.seed)
    if settings.questions == "inverse-cloze":
        from adaptlab.adapt.questions import InverseClozeGenerator

        return InverseClozeGenerator(settings.questions_per_chunk, seed=settings.seed)
    from adaptlab.adapt.llm import ChatClient
    from adaptlab.adapt.questions import DEFAULT_PROMPT, DEFAULT_SYSTEM, LLMQuestionGenerator

    llm = settings.llm
    assert llm is not None  # parse_adapt_section guarantees it
    cache = Path(llm.cache) if llm.cache else (settings.data_dir or Path(".")) / "llm_cache.sqlite"
    cache.parent.mkdir(parents=True, exist_ok=True)
    client = ChatClient(
        base_url=llm.base_url, model=llm.model, api_key_env=llm.api_key_env or None,
        temperature=llm.temperature, max_tokens=llm.max_tokens or None, timeout=llm.timeout,
        max_retries=llm.max_retries, cache=cache,
    )
    return LLMQuestionGenerator(client, settings.questions_per_chunk, prompt=llm.prompt or DEFAULT_PROMPT,
                                system=llm.system or DEFAULT_SYSTEM, workers=llm.workers)


def _tokenizer(model_ref: str) -> Any:
    from transformers import AutoTokenizer

    from adaptlab.adapt.artifacts import resolve_base_model

    _, path = resolve_base_model(model_ref)
    return AutoTokenizer.from_pretrained(str(path), local_files_only=True)


def _embedder(section: ModelSection, study: Study, cache_dir: Path | None) -> Callable[[list[str], str], Any]:
    """``embed(texts, kind)`` for one model, with the study runner's on-disk embedding cache."""
    from adaptlab.study import runner

    cls = runner.Embedder
    return cls(section, study, cache_dir)


# =========================================================================== results


@dataclass(frozen=True)
class SystemInfo:
    """One evaluated system: its name, variant, scale and (for adapted ones) artifact."""

    name: str
    variant: str
    n_documents: int | None
    section: ModelSection
    artifact_key: str = ""
    artifact_path: str = ""
    reused: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"variant": self.variant, "n_documents": self.n_documents, "model_ref": self.section.ref,
                "artifact_key": self.artifact_key, "artifact_path": self.artifact_path, "reused": self.reused}


@dataclass
class ScaleStudyOutcome(StudyOutcome):
    """:class:`~adaptlab.study.runner.StudyOutcome` plus what the adaptation produced."""

    settings: AdaptSettings | None = None
    systems: dict[str, SystemInfo] = field(default_factory=dict)
    data: Any = None  # adaptlab.adapt.prepare.AdaptationData
    sweep: Any = None  # adaptlab.adapt.tune.SweepResult
    timings: dict[str, float] = field(default_factory=dict)

    def curves(self, measure: str, dataset: str | None = None) -> list[Any]:
        """:func:`adaptlab.adapt.scale_curves.scale_curves` of ``measure`` on ``dataset``
        (default: the held-out questions): each variant against the data scale, with CIs and
        paired gains over the base model."""
        from adaptlab.adapt.scale_curves import scale_curves

        name = dataset or (self.settings.heldout_name if self.settings is not None else "heldout")
        outcome = next((d for d in self.datasets if d.dataset == name), None)
        if outcome is None:
            raise ConfigError(f"no dataset {name!r} in this study; have {', '.join(d.dataset for d in self.datasets)}")
        return scale_curves(outcome.summary, measure)


# =========================================================================== the stages


def _jobs(settings: AdaptSettings, data: Any, ft: FTConfig, merge_weight: float) -> list[tuple[str, int, Any]]:
    """(variant, n_documents, AdaptJob) for every trained variant at every scale."""
    from adaptlab.adapt.jobs import AdaptJob

    trained = [v for v in settings.variants if v != "base"]
    out = []
    for scale_data in data.scales:
        n = scale_data.scale.n_documents
        triplets = _usable_triplets(scale_data.triplets.get("train", []), ft, n)
        sampled = scale_data.splits.select(scale_data.scale.chunks(data.chunks), "train")
        chunks = [c.text for c in sampled]
        for v in trained:
            job = AdaptJob(v, settings.base_model, scale=n, triplets=triplets, chunks=chunks,
                           pt_config=settings.pt, ft_config=ft, merge_weight=merge_weight,
                           merge_source=settings.merge_source, seed=settings.seed)
            out.append((v, n, job))
    return out


def _usable_triplets(triplets: Sequence[Any], ft: FTConfig, n: int) -> list[Any]:
    """The training triplets FT can use: with ``num_negatives > 0`` a triplet needs at least one
    hard negative (the mining filters can leave none in a small pool); those without are dropped
    and counted in the log."""
    usable = [t for t in triplets if t.negatives or ft.num_negatives == 0]
    if not usable:
        raise ConfigError(
            f"[adapt]: the data scale of {n} documents has no usable training question ({len(triplets)} "
            "generated, none with a hard negative); raise the scale, fraction or questions_per_chunk, or relax "
            "margin / duplicate_threshold"
        )
    if len(usable) < len(triplets):
        _log(f"[adaptlab] scale {n}: {len(triplets) - len(usable)} of {len(triplets)} training questions have no "
             "hard negative left after the mining filters; trained without them")
    return usable


def _train(settings: AdaptSettings, jobs: list[tuple[str, int, Any]], address: str | None) -> list[Any]:
    from adaptlab.adapt.jobs import run_adaptation_jobs, train_variant

    if not jobs:
        return []
    root = settings.artifact_root
    assert root is not None
    if settings.use_ray:
        return run_adaptation_jobs(
            [j for _, _, j in jobs], root, gpus_per_job=settings.gpus_per_job, cpus_per_job=settings.cpus_per_job,
            max_retries=settings.max_retries, checkpoint_every=settings.checkpoint_every, address=address,
        )
    return [train_variant(j, root, checkpoint_every=settings.checkpoint_every) for _, _, j in jobs]


def _run_tune(study: Study, settings: AdaptSettings, tune_settings: TuneSettings, data: Any,
              store_dir: Path | None) -> Any:
    """Sweep on the validation questions of one scale; store one metrics row per trial."""
    from adaptlab.adapt.evalset import heldout_dataset
    from adaptlab.adapt.tune import tune_adaptation

    scale_data = data.scales[-1]
    if tune_settings.scale is not None:
        scale_data = data.scales[list(settings.scales).index(tune_settings.scale)]
    n = scale_data.scale.n_documents
    questions = scale_data.questions.get("validation", [])
    triplets = scale_data.triplets.get("train", [])
    if not questions or not triplets:
        raise ConfigError(
            f"[tune]: the data scale of {n} documents has {len(triplets)} training and {len(questions)} "
            "validation questions; both must be > 0 (raise the scale or validation_fraction)"
        )
    validation = heldout_dataset(questions, data.chunks, name=f"validation-s{n}", corpus="documents",
                                 documents=scale_data.splits.validation)
    chunks = None
    if tune_settings.variant == "pt-ft":
        sampled = scale_data.splits.select(scale_data.scale.chunks(data.chunks), "train")
        chunks = [c.text for c in sampled]
    name = tune_settings.name or f"{study.study.name}-{settings.label}-{tune_settings.variant}-s{n}"
    space = tune_param_space(tune_settings, study.source)
    _log(f"[adaptlab] tune: {tune_settings.num_samples} trial(s) of {tune_settings.variant} at scale {n} "
         f"on {validation.n_queries} validation questions")
    sweep = tune_adaptation(
        settings.base_model, triplets, validation, storage_path=tune_settings.storage_path, name=name,
        param_space=space, num_samples=tune_settings.num_samples, measure=tune_settings.measure,
        n_resamples=tune_settings.n_resamples, sample_size=tune_settings.sample_size or None,
        ci_seed=tune_settings.ci_seed, ft_config=settings.ft, variant=tune_settings.variant, chunks=chunks,
        pt_config=settings.pt, artifact_root=settings.artifact_root, seed=settings.seed,
        search=tune_settings.search, grace_period=tune_settings.grace_period,
        reduction_factor=tune_settings.reduction_factor, max_epochs=tune_settings.max_epochs or None,
        cpus_per_trial=tune_settings.cpus_per_trial, gpus_per_trial=tune_settings.gpus_per_trial,
        max_concurrent_trials=tune_settings.max_concurrent_trials or None, resume=tune_settings.resume,
    )
    if store_dir is not None:
        _store_sweep(study, settings, tune_settings, sweep, validation, n, store_dir)
    return sweep


def _store_sweep(study: Study, settings: AdaptSettings, tune_settings: TuneSettings, sweep: Any,
                 validation: Any, n: int, store_dir: Path) -> None:
    """One run for the sweep (system ``<label>-<variant>-s<n>-tune``, dataset ``validation-s<n>``)
    and one ``metrics`` row per trial: measure :data:`TUNE_MEASURE`, value = the trial's best
    objective (lower CI bound), ``extra`` = its config, status and last CI."""
    from adaptlab import results

    system = f"{system_name(settings.label, tune_settings.variant, n)}-tune"
    dataset = f"validation-s{n}"
    config = {"study": study.study.name, "source": study.source, "tune": dict(study.tune),
              "measure": sweep.measure, "experiment_path": sweep.experiment_path, "restored": sweep.restored,
              "best": sweep.best, "adapt": settings.as_dict()}
    run = results.run_record(system, dataset, model_id=settings.base_model, model_revision=None,
                             dataset_fingerprint=validation.fingerprint(), seed=settings.seed,
                             config=config, study=study.study.name)
    sample = tune_settings.sample_size or validation.n_queries
    rows = []
    for r in sweep.rows:
        value = r.get("best_objective")
        rows.append({
            "run_id": run["run_id"], "system": system, "dataset": dataset, "measure": TUNE_MEASURE,
            "value": float("nan") if value is None else float(value),
            "ci_low": r.get("ci_low"), "ci_high": r.get("ci_high"), "boot_mean": r.get("mean"),
            "n_queries": r.get("n_queries"), "n_resamples": tune_settings.n_resamples,
            "sample_size": sample, "seed": tune_settings.ci_seed,
            "extra": {"trial_id": r.get("trial_id"), "status": r.get("status"), "iterations": r.get("iterations"),
                      "measure": r.get("measure"), "last_objective": r.get("objective"),
                      "config": {k.split("/", 1)[1]: v for k, v in r.items() if k.startswith("config/")},
                      "error": r.get("error")},
        })
    results.open(store_dir, create=True).commit([run], rows)


def _apply_best(settings: AdaptSettings, sweep: Any) -> tuple[FTConfig, float]:
    from adaptlab.adapt.tune import _trial_config

    best = (sweep.best or {}) if sweep is not None else {}
    config = {k.split("/", 1)[1]: v for k, v in best.items() if k.startswith("config/")}
    if not config:
        return settings.ft, settings.merge_weight
    weight = float(config.pop("merge_weight", settings.merge_weight))
    return _trial_config(settings.ft, config), weight


def _systems(study: Study, settings: AdaptSettings, jobs: list[tuple[str, int, Any]],
             artifacts: list[Any]) -> list[SystemInfo]:
    """Base (when asked for), the study's other [[models]], then every (scale, variant)."""
    out: list[SystemInfo] = []
    if "base" in settings.variants:
        out.append(SystemInfo(system_name(settings.label, "base"), "base", None, settings.base_section))
    for m in study.models:
        if m.ref == settings.base_section.ref or m.name == settings.label:
            continue
        out.append(SystemInfo(m.name, "reference", None, m))
    for (variant, n, _), art in zip(jobs, artifacts, strict=True):
        name = system_name(settings.label, variant, n)
        section = ModelSection(**{**asdict(settings.base_section), "ref": str(art.model_path), "name": name,
                                  "backend": "sentence-transformers"})
        out.append(SystemInfo(name, variant, n, section, art.key, str(art.path), bool(art.reused)))
    return out


def _evaluate(study: Study, settings: AdaptSettings, systems: list[SystemInfo], datasets: list[tuple[str, str, Any]],
              store_dir: Path | None, on_dataset: Callable[[DatasetOutcome], None] | None) -> list[DatasetOutcome]:
    """Every system on every dataset (the same queries for all: paired), CIs, tests vs base."""
    from adaptlab.evaluation import summarise
    from adaptlab.evaluation.persist import commit_summary
    from adaptlab.metrics import evaluate, parse_measures
    from adaptlab.retrieval.build import build_records

    measures = parse_measures(study.evaluation.metrics)
    depth = max([study.evaluation.k, *[m.k for m in measures if m.k is not None]])
    cache_dir = store_dir / ".cache" / "embeddings" if store_dir is not None else None
    embedders = {s.name: _embedder(s.section, study, cache_dir) for s in systems}
    names = [s.name for s in systems]
    baseline = system_name(settings.label, "base") if "base" in settings.variants else (
        study.evaluation.baseline or None)
    if baseline is not None and baseline not in names:
        raise ConfigError(f"[evaluation].baseline = {baseline!r} is not among the systems: {', '.join(names)}")
    b = study.bootstrap
    outcomes = []
    for ds_name, spec, ds in datasets:
        judged = ds.judged_queries()
        if not judged:
            raise ConfigError(f"dataset {ds_name!r}: no query has a relevant document")
        doc_ids = list(ds.corpus)
        doc_texts = [ds.corpus[d].full_text() for d in doc_ids]
        query_texts = [ds.queries[q] for q in judged]
        _log(f"[adaptlab] {ds_name}: {len(judged)} judged queries, {len(doc_ids)} documents, {len(systems)} systems")
        per_query, records, provenance = {}, {}, {}
        for s in systems:
            embed = embedders[s.name]
            d_emb = embed(doc_texts, "document")
            q_emb = embed(query_texts, "query")
            rec = build_records(judged, q_emb, doc_ids, d_emb, ds.qrels, system=s.name, dataset=ds_name,
                                k=min(depth, len(doc_ids)), seed=study.study.seed)
            records[s.name] = rec
            per_query[s.name] = evaluate(ds.qrels, rec.to_run(), measures, query_ids=judged)
            provenance[s.name] = {"model_id": s.artifact_path or embed.ref, "model_revision": embed.revision}
        summary = summarise(per_query, n_resamples=b.n_resamples, sample_size=b.sample_size or None, seed=b.seed,
                            confidence=b.confidence, baseline=baseline)
        outcome = DatasetOutcome(ds_name, summary, records)
        if store_dir is not None:
            config = {"study": study.study.name, "source": study.source, "dataset": spec,
                      "metrics": [str(m) for m in measures], "k": depth, "bootstrap": vars(b), "baseline": baseline,
                      "adapt": settings.as_dict(), "systems": {s.name: s.as_dict() for s in systems}}
            outcome.run_ids = commit_summary(store_dir, summary, dataset=ds_name, config=config,
                                             provenance=provenance, dataset_fingerprint=ds.fingerprint(),
                                             records=list(records.values()), study=study.study.name)
        outcomes.append(outcome)
        if on_dataset is not None:
            on_dataset(outcome)
    return outcomes


def run_scale_study(
    study: Study,
    *,
    store: str | Path | None = None,
    address: str | None = None,
    on_dataset: Callable[[DatasetOutcome], None] | None = None,
    export_run: str | Path | None = None,
) -> ScaleStudyOutcome:
    """Run a study with an ``[adapt]`` section (see the module docstring).

    ``store`` / ``address`` override the study file's and ``export_run`` writes TREC run files
    (one per dataset and system), as in :func:`adaptlab.study.runner.run_study`. Adaptation
    data go to ``[adapt].data_dir`` / ``<study>-<data key>`` (a hash of the data settings),
    adapted models to the content-addressed
    ``[adapt].artifact_root``, so a rerun with the same settings trains nothing. Returns the
    per-dataset summaries (``datasets``: held-out in-domain questions first, then every
    ``[[datasets]]`` benchmark) plus the systems, the adaptation data and the sweep.
    """
    if not study.adapt:
        raise ConfigError(f"{study.source}: no [adapt] section; use adaptlab.study.runner.run_study")
    settings = parse_adapt_section(study, store=store)
    tune_settings = parse_tune_section(study, settings, store=store) if study.tune else None
    if tune_settings is not None:
        tune_param_space(tune_settings, study.source)  # fail on a bad space before any work
    store_dir = store_root(study, store)
    timings: dict[str, float] = {}
    start = time.perf_counter()
    if study.embedding.use_ray or settings.use_ray or tune_settings is not None:
        from adaptlab.runtime import init_ray

        init_ray(address or study.study.address or None)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    # 1. adaptation data
    from adaptlab.adapt.prepare import prepare_adaptation_data

    t0 = time.perf_counter()
    documents, synthetic_raw = load_corpus(settings, study)
    generator = question_generator(settings, synthetic_raw)
    cache_dir = store_dir / ".cache" / "embeddings" if store_dir is not None else None
    mining_embed = _embedder(settings.base_section, study, cache_dir)
    assert settings.data_dir is not None
    from adaptlab.adapt.artifacts import sanitize_name

    data_dir = settings.data_dir / f"{sanitize_name(study.study.name)}-{settings.data_key()}"
    _log(f"[adaptlab] adaptation data: {len(documents)} documents -> {data_dir}")
    data = prepare_adaptation_data(
        documents, _tokenizer(settings.base_model), generator, mining_embed, out_dir=data_dir,
        sizes=settings.scales, fraction=settings.fraction, seed=settings.seed,
        test_fraction=settings.test_fraction, validation_fraction=settings.validation_fraction,
        max_tokens=settings.max_tokens, n_negatives=settings.n_negatives,
        duplicate_threshold=settings.duplicate_threshold, margin=settings.margin,
        base_model=settings.label, eval_corpus=settings.eval_corpus,  # type: ignore[arg-type]
    )
    timings["prepare_s"] = time.perf_counter() - t0
    summary = data.summary()
    _log(f"[adaptlab] held-out: {summary['test_questions']} questions over {summary['heldout_corpus']} chunks; "
         + ", ".join(f"{k}: {v.get('train_questions', 0)} train questions" for k, v in summary["scales"].items()))

    # 2. optional sweep
    sweep = None
    ft, merge_weight = settings.ft, settings.merge_weight
    if tune_settings is not None:
        t0 = time.perf_counter()
        sweep = _run_tune(study, settings, tune_settings, data, store_dir)
        timings["tune_s"] = time.perf_counter() - t0
        if tune_settings.apply_best:
            ft, merge_weight = _apply_best(settings, sweep)

    # 3. training
    t0 = time.perf_counter()
    jobs = _jobs(settings, data, ft, merge_weight)
    _log(f"[adaptlab] training {len(jobs)} adapted model(s) "
         f"({'Ray tasks' if settings.use_ray else 'in-process'}) into {settings.artifact_root}")
    artifacts = _train(settings, jobs, address)
    timings["train_s"] = time.perf_counter() - t0

    # 4. evaluation
    t0 = time.perf_counter()
    systems = _systems(study, settings, jobs, artifacts)
    from adaptlab.study import runner

    load = runner.load_dataset_section
    datasets: list[tuple[str, str, Any]] = [(settings.heldout_name, f"beir:{data_dir / 'heldout'}",
                                             data.heldout)]
    datasets += [(d.name, d.spec, load(d, study)) for d in study.datasets]
    outcomes = _evaluate(study, settings, systems, datasets, store_dir, on_dataset)
    if export_run is not None:
        for outcome in outcomes:
            runner.export_runs(Path(export_run), outcome.records, outcome.dataset, several=True)
    timings["evaluate_s"] = time.perf_counter() - t0
    timings["total_s"] = time.perf_counter() - start
    _log("[adaptlab] scale study done in " + ", ".join(f"{k} {v:.0f}" for k, v in timings.items()))
    return ScaleStudyOutcome(study.study.name, store_dir, outcomes, settings=settings,
                             systems={s.name: s for s in systems}, data=data, sweep=sweep, timings=timings)
