"""Run a study: load -> embed (Ray) -> exact search -> per-query records -> measures -> store.

Each dataset is evaluated with every model on the same queries, so systems are compared with a
paired bootstrap. The stages are pure functions of their inputs; document embeddings are cached
by content hash (model revision + texts + options) under ``<store>/.cache`` so a re-run resumes.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from adaptlab.errors import ConfigError
from adaptlab.study.schema import DatasetSection, ModelSection, Study

__all__ = ["DatasetOutcome", "Embedder", "StudyOutcome", "export_runs", "load_dataset_section", "run_study"]


@dataclass
class DatasetOutcome:
    """The evaluation of every model on one dataset."""

    dataset: str
    summary: Any  # adaptlab.evaluation.EvaluationSummary
    records: dict[str, Any] = field(default_factory=dict)  # system -> PerQueryRecords
    run_ids: dict[str, str] = field(default_factory=dict)


@dataclass
class StudyOutcome:
    study: str
    store: Path | None
    datasets: list[DatasetOutcome]


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _texts_hash(texts: list[str]) -> str:
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


class Embedder:
    """Embeds texts with one model, through Ray or in-process, with an on-disk cache."""

    def __init__(self, model: ModelSection, study: Study, cache_dir: Path | None) -> None:
        from adaptlab.models import resolve_model

        self.model = model
        self.study = study
        self.cache_dir = cache_dir
        self.ref = resolve_model(model.ref)
        self.options = {
            "backend": model.backend, "query_instruction": model.query_instruction,
            "document_instruction": model.document_instruction, "max_seq_length": model.max_seq_length,
            "trust_remote_code": model.trust_remote_code, **model.options,
        }
        self._revision: str | None = None

    @property
    def revision(self) -> str:
        if self._revision is None:
            from adaptlab.models import model_revision

            self._revision = model_revision(self.ref)
        return self._revision

    def __call__(self, texts: list[str], kind: str) -> np.ndarray:
        key = hashlib.sha256(
            json.dumps([self.revision, kind, _texts_hash(texts), self.options], sort_keys=True, default=str).encode()
        ).hexdigest()[:24]
        path = self.cache_dir / f"{key}.npy" if self.cache_dir is not None else None
        if path is not None and path.exists():
            return np.load(path)
        from adaptlab.embedding import embed_texts

        emb = self.study.embedding
        batch = emb.batch_size or self.model.batch_size
        out = embed_texts(texts, self.ref, kind=kind, batch_size=batch, num_actors=emb.num_actors or None,
                          options=self.options, use_ray=emb.use_ray, progress=True)
        out = np.ascontiguousarray(out, dtype=np.float32)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{np.random.default_rng().integers(1 << 30)}.npy")
            np.save(tmp, out)
            tmp.replace(path)
        return out


def load_dataset_section(ds: DatasetSection, study: Study):
    """Load a ``[[datasets]]`` entry; relative paths resolve against the project root."""
    from adaptlab.data import load_dataset

    spec = ds.spec
    fmt, sep, path = spec.partition(":")
    if sep and fmt != "synthetic" and path and not Path(path).expanduser().is_absolute():
        spec = f"{fmt}:{study.resolve_path(path)}"
    _log(f"[adaptlab] loading dataset {ds.name!r} ({ds.spec}, split {ds.split})")
    return load_dataset(spec, split=ds.split, name=ds.name, **ds.options)


def run_study(
    study: Study,
    *,
    store: str | Path | None = None,
    address: str | None = None,
    export_run: str | Path | None = None,
    on_dataset: Callable[[DatasetOutcome], None] | None = None,
) -> StudyOutcome:
    """Run ``study``; ``store``/``address`` override the study file; returns the summaries."""
    from adaptlab.evaluation import summarise
    from adaptlab.evaluation.persist import commit_summary
    from adaptlab.metrics import evaluate, parse_measures
    from adaptlab.retrieval.build import build_records

    measures = parse_measures(study.evaluation.metrics)
    depth = max([study.evaluation.k, *[m.k for m in measures if m.k is not None]])
    store_root = Path(store) if store is not None else (study.resolve_path(study.study.store) if study.study.store else None)
    cache_dir = store_root / ".cache" / "embeddings" if store_root is not None else None
    if study.embedding.use_ray:
        from adaptlab.runtime import init_ray

        init_ray(address or study.study.address or None)
    b = study.bootstrap
    outcomes: list[DatasetOutcome] = []
    embedders = [Embedder(m, study, cache_dir) for m in study.models]
    for ds_section in study.datasets:
        ds = load_dataset_section(ds_section, study)
        judged = ds.judged_queries()
        if not judged:
            raise ConfigError(f"dataset {ds_section.name!r}: no query has a relevant document")
        doc_ids = list(ds.corpus)
        doc_texts = [ds.corpus[d].full_text() for d in doc_ids]
        query_texts = [ds.queries[q] for q in judged]
        _log(f"[adaptlab] {ds!r}: {len(judged)} judged queries")
        per_query, records, provenance = {}, {}, {}
        analysis_rows: list[dict[str, Any]] = []
        for model, embed in zip(study.models, embedders):
            _log(f"[adaptlab] embedding {len(doc_texts)} documents and {len(query_texts)} queries with {model.name!r}")
            d_emb = embed(doc_texts, "document")
            q_emb = embed(query_texts, "query")
            _log(f"[adaptlab] exact top-{depth} search")
            rec = build_records(judged, q_emb, doc_ids, d_emb, ds.qrels, system=model.name, dataset=ds_section.name,
                                k=min(depth, len(doc_ids)), seed=study.study.seed)
            records[model.name] = rec
            per_query[model.name] = evaluate(ds.qrels, rec.to_run(), measures, query_ids=judged)
            provenance[model.name] = {"model_id": embed.ref.model_id, "model_revision": embed.revision}
            analysis_rows += _analyses(study, rec, d_emb, model.name, ds_section.name)
        summary = summarise(per_query, n_resamples=b.n_resamples, sample_size=b.sample_size or None, seed=b.seed,
                            confidence=b.confidence, baseline=study.evaluation.baseline or None)
        outcome = DatasetOutcome(ds_section.name, summary, records)
        if store_root is not None:
            config = {"study": study.study.name, "source": study.source, "dataset": ds_section.spec,
                      "split": ds_section.split, "metrics": [str(m) for m in measures], "k": depth,
                      "bootstrap": vars(b)}
            outcome.run_ids = commit_summary(store_root, summary, dataset=ds_section.name, config=config,
                                             provenance=provenance, dataset_fingerprint=ds.fingerprint(),
                                             records=list(records.values()), study=study.study.name,
                                             extra_metric_rows=analysis_rows)
        if export_run is not None:
            export_runs(Path(export_run), records, ds_section.name, several=len(study.models) * len(study.datasets) > 1)
        outcomes.append(outcome)
        if on_dataset is not None:
            on_dataset(outcome)
    return StudyOutcome(study.study.name, store_root, outcomes)


def _analyses(study: Study, rec: Any, doc_emb: np.ndarray, system: str, dataset: str) -> list[dict[str, Any]]:
    """The analyses that ``[analysis]`` turns on, as metric rows for the store."""
    a, b = study.analysis, study.bootstrap
    boot = {"n_resamples": b.n_resamples, "sample_size": b.sample_size or None, "seed": b.seed}
    rows: list[dict[str, Any]] = []
    if a.thresholds:
        from adaptlab.analysis import similarity_thresholds

        _log(f"[adaptlab] {system}: bootstrap similarity thresholds (K={a.top_k})")
        rows += similarity_thresholds(rec, k=a.top_k, **boot).to_metric_rows()
    if a.coe_roe:
        from adaptlab.analysis import overlap_metrics

        rows += overlap_metrics(rec, k=a.top_k, psi=a.psi, **boot).to_metric_rows()
    if a.isotropy:
        from adaptlab.analysis import isotropy

        rows += isotropy(doc_emb, system=system, dataset=dataset, space="corpus").to_metric_rows()
    if a.topic_diversity:
        from adaptlab.analysis import topic_diversity

        n = min(len(doc_emb), 2000)
        rows += topic_diversity(doc_emb, seed=b.seed, sample_size=n).to_metric_rows(system=system, dataset=dataset)
    for row in rows:
        row["system"], row["dataset"] = system, dataset
    return rows


def export_runs(path: Path, records: dict[str, Any], dataset: str, *, several: bool) -> None:
    """One TREC run file per system; with several systems or datasets the names get suffixes."""
    from adaptlab.data.trec import write_trec_run

    for name, rec in records.items():
        target = path.with_name(f"{path.stem}.{dataset}.{name}{path.suffix}") if several else path
        write_trec_run(rec.to_run(), target, tag=name)
