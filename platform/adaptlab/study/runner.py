"""Run a study: one pipeline for studies with and without ``[adapt]``.

::

    Study --(optional [adapt]: adaptation_stage)--> systems + held-out dataset
      --evaluate, for every dataset: every system--> embed (cached) -> exact top-k search
        -> per-query records -> measures -> bootstrap CIs + paired tests -> [analysis] rows
      --store--> runs / metrics / per_query, one atomic commit per dataset

A plain study's systems are its ``[[models]]``; a scale study's are the base model, its other
models and every adapted model (:mod:`adaptlab.study.scale`), evaluated on the held-out
in-domain questions first, then on every ``[[datasets]]`` benchmark. Both go through the same
loop (:func:`evaluate_systems`), so ``[analysis]``, provenance (canonical model id and content
revision; adapted systems' artifacts in ``config.systems``), the run config (with ``split``),
path resolution (relative to the project root) and ``export_run`` behave the same. Every system
is evaluated on the same queries, so comparisons are paired. Seeds: :mod:`adaptlab.study.seeds`.
Document embeddings are cached by content hash under ``<store>/.cache`` so a re-run resumes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from adaptlab.analysis import isotropy, overlap_metrics, similarity_thresholds, topic_diversity
from adaptlab.data.trec import write_trec_run
from adaptlab.embedding import release_pools
from adaptlab.embedding.cache import Embedder
from adaptlab.errors import ConfigError
from adaptlab.evaluation import summarise
from adaptlab.evaluation.persist import commit_summary
from adaptlab.metrics import evaluate, parse_measures
from adaptlab.metrics.measures import Measure
from adaptlab.metrics.ranking import PerQueryMetrics
from adaptlab.retrieval.build import build_records
from adaptlab.retrieval.records import PerQueryRecords
from adaptlab.stats import BootstrapConfig
from adaptlab.study.adapt_config import (
    AdaptSettings,
    TuneSettings,
    parse_adapt_section,
    parse_tune_section,
    tune_param_space,
)
from adaptlab.study.inputs import EvalDataset, load_dataset_section, log, model_embedder
from adaptlab.study.outcome import DatasetOutcome, ScaleStudyOutcome, StudyOutcome, SystemInfo
from adaptlab.study.scale import Adaptation, adaptation_stage
from adaptlab.study.schema import Study
from adaptlab.study.seeds import stage_seed

__all__ = [
    "DatasetOutcome",
    "ScaleStudyOutcome",
    "StudyOutcome",
    "SystemInfo",
    "evaluate_systems",
    "export_runs",
    "load_dataset_section",
    "model_embedder",
    "run_scale_study",
    "run_study",
]


def run_study(
    study: Study,
    *,
    store: str | Path | None = None,
    address: str | None = None,
    export_run: str | Path | None = None,
    on_dataset: Callable[[DatasetOutcome], None] | None = None,
) -> StudyOutcome:
    """Run ``study`` (with or without ``[adapt]``); ``store``/``address`` override the study
    file's, ``export_run`` writes TREC run files, ``on_dataset`` sees each dataset's outcome as
    soon as it is stored. A study with ``[adapt]`` returns a :class:`ScaleStudyOutcome`."""
    start = time.perf_counter()
    store_root = study.store_root(store)
    settings = parse_adapt_section(study, store=store) if study.adapt else None
    tune = parse_tune_section(study, settings, store=store) if settings is not None and study.tune else None
    if tune is not None:
        tune_param_space(tune, study.source)  # fail on a bad space before any work
    ray_start = None
    if study.embedding.use_ray or (settings is not None and (settings.use_ray or tune is not None)):
        from adaptlab.runtime import start_ray  # deferred: imports ray

        ray_start = start_ray(address or study.study.address or None)  # overlaps Ray's start with loading
    try:
        return _run_stages(study, settings, tune, store_root, address, export_run, on_dataset, start, ray_start)
    finally:
        release_pools()


def _run_stages(study: Study, settings: AdaptSettings | None, tune: TuneSettings | None, store_root: Path | None,
                address: str | None, export_run: str | Path | None,
                on_dataset: Callable[[DatasetOutcome], None] | None, start: float,
                ray_start: Future[Any] | None) -> StudyOutcome:
    """The stages of :func:`run_study` after validation; ``ray_start`` is a background Ray
    start whose errors (a bad address) surface before returning even if no stage needed Ray."""
    sections = [EvalDataset.from_section(d, study) for d in study.datasets]
    if settings is None:
        systems = [SystemInfo(m.name, "model", None, m) for m in study.models]
        outcomes = evaluate_systems(study, systems, sections, baseline=study.evaluation.baseline or None,
                                    store_root=store_root, export_run=export_run, on_dataset=on_dataset)
        _wait(ray_start)
        return StudyOutcome(study.study.name, store_root, outcomes)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    adaptation = adaptation_stage(study, settings, tune, store_root, address)
    t0 = time.perf_counter()
    outcomes = evaluate_systems(study, adaptation.systems, [adaptation.heldout, *sections],
                                baseline=adaptation.baseline, store_root=store_root, export_run=export_run,
                                on_dataset=on_dataset, extra_config=_adapt_config(adaptation))
    timings = {**adaptation.timings, "evaluate_s": time.perf_counter() - t0, "total_s": time.perf_counter() - start}
    log("[adaptlab] scale study done in " + ", ".join(f"{k} {v:.0f}" for k, v in timings.items()))
    _wait(ray_start)
    return ScaleStudyOutcome(study.study.name, store_root, outcomes, settings=settings,
                             systems={s.name: s for s in adaptation.systems}, data=adaptation.data,
                             sweep=adaptation.sweep, timings=timings)


def _wait(ray_start: Future[Any] | None) -> None:
    if ray_start is not None:
        ray_start.result()


def run_scale_study(study: Study, **options: Any) -> ScaleStudyOutcome:
    """:func:`run_study` for a study that must have an ``[adapt]`` section."""
    if not study.adapt:
        raise ConfigError(f"{study.source}: no [adapt] section; use adaptlab.run_study")
    outcome = run_study(study, **options)
    if not isinstance(outcome, ScaleStudyOutcome):  # pragma: no cover - run_study's contract
        raise TypeError("run_study returned no ScaleStudyOutcome for a study with [adapt]")
    return outcome


def _adapt_config(adaptation: Adaptation) -> dict[str, Any]:
    """What a scale study adds to every run's config: baseline, [adapt] settings, the systems."""
    return {"baseline": adaptation.baseline, "adapt": adaptation.settings.as_dict(),
            "systems": {s.name: s.as_dict() for s in adaptation.systems}}


@dataclass
class _Evaluation:
    """What every dataset of one study's evaluation shares."""

    study: Study
    systems: list[SystemInfo]
    embedders: dict[str, Embedder]
    measures: list[Measure]
    depth: int
    boot: BootstrapConfig
    baseline: str | None
    store_root: Path | None
    extra_config: dict[str, Any] = field(default_factory=dict)


def evaluate_systems(
    study: Study,
    systems: Sequence[SystemInfo],
    datasets: Sequence[EvalDataset],
    *,
    baseline: str | None = None,
    store_root: Path | None = None,
    export_run: str | Path | None = None,
    on_dataset: Callable[[DatasetOutcome], None] | None = None,
    extra_config: dict[str, Any] | None = None,
) -> list[DatasetOutcome]:
    """Every system on every dataset (the same queries for all: paired), CIs, paired tests
    (against ``baseline``, else every pair), ``[analysis]`` rows; one store commit per dataset."""
    measures = parse_measures(study.evaluation.metrics)
    depth = max([study.evaluation.k, *[m.k for m in measures if m.k is not None]])
    cache_dir = store_root / ".cache" / "embeddings" if store_root is not None else None
    ev = _Evaluation(study, list(systems), {s.name: model_embedder(s.section, study, cache_dir) for s in systems},
                     measures, depth, study.bootstrap_config(), baseline, store_root, dict(extra_config or {}))
    several = len(systems) * len(datasets) > 1
    outcomes = []
    for plan in datasets:
        outcome = _evaluate_dataset(ev, plan)
        if export_run is not None:
            export_runs(Path(export_run), outcome.records, plan.name, several=several)
        outcomes.append(outcome)
        if on_dataset is not None:
            on_dataset(outcome)
    return outcomes


def _evaluate_dataset(ev: _Evaluation, plan: EvalDataset) -> DatasetOutcome:
    """One dataset: embed, search, measure every system; summarise; commit to the store."""
    study = ev.study
    ds = plan.load()
    judged = ds.judged_queries()
    if not judged:
        raise ConfigError(f"dataset {plan.name!r}: no query has a relevant document")
    doc_ids = list(ds.corpus)
    doc_texts = [ds.corpus[d].full_text() for d in doc_ids]
    query_texts = [ds.queries[q] for q in judged]
    log(f"[adaptlab] {plan.name}: {len(judged)} judged queries, {len(doc_ids)} documents, {len(ev.systems)} systems")
    per_query: dict[str, PerQueryMetrics] = {}
    records: dict[str, PerQueryRecords] = {}
    provenance: dict[str, dict[str, str]] = {}
    analysis_rows: list[dict[str, Any]] = []
    for system in ev.systems:
        embed = ev.embedders[system.name]
        log(f"[adaptlab] embedding {len(doc_texts)} documents and {len(query_texts)} queries with {system.name!r}")
        d_emb = embed(doc_texts, "document")
        q_emb = embed(query_texts, "query")
        rec = build_records(judged, q_emb, doc_ids, d_emb, ds.qrels, system=system.name, dataset=plan.name,
                            k=min(ev.depth, len(doc_ids)), seed=stage_seed(study.study.seed, "retrieval"))
        records[system.name] = rec
        per_query[system.name] = evaluate(ds.qrels, rec.to_run(), ev.measures, query_ids=judged)
        provenance[system.name] = {"model_id": embed.ref.model_id, "model_revision": embed.revision}
        analysis_rows += _analyses(study, ev.boot, rec, d_emb, system.name, plan.name)
    summary = summarise(per_query, boot=ev.boot, baseline=ev.baseline)
    outcome = DatasetOutcome(plan.name, summary, records)
    if ev.store_root is not None:
        b = ev.boot
        config = {"study": study.study.name, "source": study.source, "dataset": plan.spec, "split": plan.split,
                  "metrics": [str(m) for m in ev.measures], "k": ev.depth,
                  "bootstrap": {"n_resamples": b.n_resamples, "sample_size": b.sample_size or 0, "seed": b.seed,
                                "confidence": b.confidence},
                  **ev.extra_config}
        outcome.run_ids = commit_summary(ev.store_root, summary, dataset=plan.name, config=config,
                                         provenance=provenance, dataset_fingerprint=ds.fingerprint(),
                                         records=list(records.values()), study=study.study.name,
                                         extra_metric_rows=analysis_rows)
    return outcome


def _analyses(study: Study, boot: BootstrapConfig, rec: PerQueryRecords, doc_emb: np.ndarray, system: str,
              dataset: str) -> list[dict[str, Any]]:
    """The analyses that ``[analysis]`` turns on, as metric rows for the store (bootstrapped with
    the study's bootstrap seed, so they see the same resamples as the CIs)."""
    a = study.analysis
    resampling = {"n_resamples": boot.n_resamples, "sample_size": boot.sample_size, "seed": boot.seed}
    rows: list[dict[str, Any]] = []
    if a.thresholds:
        log(f"[adaptlab] {system}: bootstrap similarity thresholds (K={a.top_k})")
        rows += similarity_thresholds(rec, k=a.top_k, **resampling).to_metric_rows()
    if a.coe_roe:
        rows += overlap_metrics(rec, k=a.top_k, psi=a.psi, **resampling).to_metric_rows()
    if a.isotropy:
        rows += isotropy(doc_emb, system=system, dataset=dataset, space="corpus").to_metric_rows()
    if a.topic_diversity:
        n = min(len(doc_emb), 2000)
        rows += topic_diversity(doc_emb, seed=boot.seed, sample_size=n).to_metric_rows(system=system, dataset=dataset)
    for row in rows:
        row["system"], row["dataset"] = system, dataset
    return rows


def export_runs(path: Path, records: dict[str, PerQueryRecords], dataset: str, *, several: bool) -> None:
    """One TREC run file per system; with several systems or datasets the names get suffixes."""
    for name, rec in records.items():
        target = path.with_name(f"{path.stem}.{dataset}.{name}{path.suffix}") if several else path
        write_trec_run(rec.to_run(), target, tag=name)
