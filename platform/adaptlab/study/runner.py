"""Run a study: one pipeline for studies with and without ``[adapt]``.

::

    Study --(optional [adapt]: adaptation_stage)--> systems + held-out dataset
      --evaluate, for every dataset: every system--> embed (cached) -> exact top-k search
        -> per-query records -> measures -> bootstrap CIs + paired tests -> [analysis] rows
      --store--> runs / metrics / per_query, one atomic commit per dataset

The unit of atomicity is one dataset: all systems' runs, metrics and per-query records of one
dataset land in one store commit, or none of them do. A study is validated whole before any
work (:func:`~adaptlab.study.inputs.check_inputs`: every dataset spec and path, every model),
so a missing dataset or model never fails a study after the first dataset was stored. A later
failure (a malformed file read when its dataset's turn comes, a crash) leaves the datasets
committed before it in the store, and the error names them and their store versions.

A plain study's systems are its ``[[models]]``; a scale study's are the base model, its other
models and every adapted model (:mod:`adaptlab.study.adaptation`), evaluated on the held-out
in-domain questions first, then on every ``[[datasets]]`` benchmark. Both go through the same
loop (:func:`evaluate_systems`), so ``[analysis]``, provenance (canonical model id and content
revision; adapted systems' artifacts in ``config.systems``), the run config (with ``split``),
path resolution (relative to the project root) and ``export_run`` behave the same. Every system
is evaluated on the same queries, so comparisons are paired. Seeds: :mod:`adaptlab.study.seeds`.
Embeddings are cached by content hash in the shared embedding cache (``[embedding].cache``, else
``$ADAPTLAB_EMBEDDING_CACHE``, ``$ADAPTLAB_CACHE`` or the user's cache folder:
:mod:`adaptlab.embedding.cache`), outside any store, so a re-run resumes and a new store or another
study on the same model and texts embeds nothing.

Late interaction (ColBERT). A system whose ``[[models]]`` entry resolves to the ``colbert``
backend (``backend = "colbert"``, or a ColBERT checkpoint with ``backend = "auto"``) goes through
the same loop; only its embed-and-retrieve step differs: token vectors
(:class:`~adaptlab.embedding.tokens.TokenEmbedder`, cached by content hash, in-process or on the
warm actor pool) and exact MaxSim search (:func:`~adaptlab.retrieval.late.build_late_records`), or
a PLAID index beyond the exact search's size (:mod:`adaptlab.retrieval.plaid`, the model's
``search`` option), instead of one vector per text and inner-product search. Both produce the same per-query records, so measures, CIs, paired tests
(ColBERT against bi-encoders on the same queries), thresholds and COE/ROE are unchanged; isotropy
and topic diversity need one vector per document and are skipped for such systems (logged).

BM25. A ``[[models]]`` entry with ``ref = "bm25"`` (options ``k1``, ``b``, ``method``, ``stemmer``,
``stopwords``) embeds nothing: :mod:`adaptlab.retrieval.lexical` scores every document and gives
the same per-query records (BM25 scores in the similarity columns), so it is compared with the
dense systems on the same queries; isotropy and topic diversity are skipped for it too.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from adaptlab.analysis import isotropy, overlap_metrics, similarity_thresholds, topic_diversity
from adaptlab.data.trec import write_trec_run
from adaptlab.embedding import release_pools
from adaptlab.embedding.cache import Embedder, EmbeddingCache
from adaptlab.embedding.tokens import TokenEmbedder
from adaptlab.errors import AdaptlabError, ConfigError
from adaptlab.evaluation import summarise
from adaptlab.evaluation.groups import summarise_groups
from adaptlab.evaluation.persist import commit_summary
from adaptlab.metrics import evaluate, parse_measures
from adaptlab.metrics.measures import Measure
from adaptlab.metrics.ranking import PerQueryMetrics
from adaptlab.models import pick_backend, resolve_model
from adaptlab.models.variants import BM25_REF, COLBERT_BACKEND, MODEL
from adaptlab.options import settings_from
from adaptlab.results import check_store_location
from adaptlab.retrieval.build import build_records
from adaptlab.retrieval.late import build_late_records
from adaptlab.retrieval.lexical import BM25Search, BM25Settings
from adaptlab.retrieval.records import PerQueryRecords
from adaptlab.runtime.progress import Heartbeat
from adaptlab.stats import BootstrapConfig
from adaptlab.storage.files import READABLE, safe_name
from adaptlab.study.adapt_config import AdaptSettings, TuneSettings, adapt_under_store, tune_under_store
from adaptlab.study.adaptation import Adaptation, adaptation_stage
from adaptlab.study.inputs import (
    EvalDataset,
    check_inputs,
    embedding_backends,
    embedding_cache,
    load_dataset_section,
    log,
    model_embedder,
    pool_settings,
)
from adaptlab.study.outcome import DatasetOutcome, ScaleStudyOutcome, StudyOutcome, SystemInfo
from adaptlab.study.schema import ModelSection, StoreURI, Study
from adaptlab.study.seeds import stage_seed

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "DatasetOutcome",
    "ScaleStudyOutcome",
    "StudyOutcome",
    "SystemInfo",
    "EvalOutputs",
    "evaluate_systems",
    "export_runs",
    "load_dataset_section",
    "model_embedder",
    "run_scale_study",
    "run_study",
    "system_embedder",
]


def run_study(
    study: Study,
    *,
    store: str | Path | None = None,
    address: str | None = None,
    export_run: str | Path | None = None,
    on_dataset: Callable[[DatasetOutcome], None] | None = None,
) -> StudyOutcome:
    """Run ``study``: every system on every dataset, with bootstrap CIs and paired tests, each
    dataset stored as one atomic commit; with ``[adapt]`` the adaptation stage first.

    Parameters
    ----------
    study : Study
        From :func:`~adaptlab.study.load.load_study`.
    store : str or path, optional
        Overrides the study file's ``[study].store`` (a folder or an object-store URI).
    address : str, optional
        A Ray cluster to run on (default: the study's, else an embedded local Ray when needed).
    export_run : str or path, optional
        A folder for TREC run files of every (system, dataset).
    on_dataset : callable, optional
        Called with each dataset's :class:`DatasetOutcome` as soon as it is stored.

    Returns
    -------
    StudyOutcome
        ``datasets`` (one :class:`DatasetOutcome` each: ``summary``, ``records``, ``run_ids``)
        and ``store``; a :class:`ScaleStudyOutcome` for a study with ``[adapt]``.

    Examples
    --------
    >>> from adaptlab.study import parse_study, run_study
    >>> study = parse_study(
    ...     {  # what load_study reads from a TOML file
    ...         "study": {"name": "demo", "store": "results/demo"},
    ...         "datasets": [{"name": "synthetic", "spec": "synthetic:n_documents=3,seed=0"}],
    ...         "models": [{"name": "hash", "ref": "hash"}],  # the weight-free hashing encoder
    ...         "evaluation": {"metrics": ["acc@1", "mrr@10"]},
    ...         "bootstrap": {"n_resamples": 200},
    ...         "embedding": {"use_ray": False, "cache": "off"},
    ...     }
    ... )
    >>> out = run_study(study)
    >>> cell = out.datasets[0].summary.systems["hash"]["acc@1"]
    >>> round(cell.value, 3), bool(cell.ci_low <= cell.value <= cell.ci_high)
    (0.158, True)
    >>> from adaptlab import results
    >>> results.open("results/demo").metrics(as_frame=True)["measure"].tolist()
    ['acc@1', 'mrr@10']
    """
    start = time.perf_counter()
    store_root = study.store_root(store)
    if store_root is not None:
        check_store_location(store_root)  # an unusable store fails now, not after the evaluation
    settings = adapt_under_store(study, store) if study.adapt is not None else None  # read when loaded
    tune = tune_under_store(study, store) if settings is not None else None
    check_inputs(study)  # every dataset and model, before Ray starts and before any embedding
    embedding_cache(study)  # a bad cache setting fails before any work
    ray_start = _early_ray_start(study, settings, tune, address)
    try:
        run = _Run(store_root, address, export_run, on_dataset, start, ray_start)
        return _run_stages(study, settings, tune, run)
    finally:
        release_pools()


def _early_ray_start(
    study: Study, settings: AdaptSettings | None, tune: TuneSettings | None, address: str | None
) -> Future[Any] | None:
    """Ray's start, begun in the background alongside the loading, when the study is known to need
    Ray before any data is read: training on Ray (``[adapt].use_ray`` or ``[tune]``), or embedding
    on a cluster (``--address``, ``[study].address`` or ``$RAY_ADDRESS``: the embedding pools join
    the Ray this process has, and connecting early reports a bad address before any work).

    Otherwise (the embedded local Ray of a study without training) nothing is started here: an
    embedding pool starts Ray on the first call that goes to Ray (a cache miss of at least
    ``local_below`` texts, :meth:`~adaptlab.embedding.cache.CachedModel.wants_ray`), so a study
    served by the embedding cache, or whose calls are small enough to embed in-process, never starts
    it, and its bootstrap (``workers="auto"``) runs in-process: the same numbers. A cached quickstart
    waited 12-20 s for a Ray start no step used (load 27 on 2 cores). An uncached study whose
    embedding does go to Ray starts it then, in the foreground, instead of alongside its dataset
    loading and model revision hashing."""
    training = settings is not None and (settings.use_ray or tune is not None)
    target = address or study.study.address or os.environ.get("RAY_ADDRESS") or None
    if not (training or (study.embedding.use_ray and target)):
        return None
    from adaptlab.runtime import start_ray  # deferred: imports ray

    return start_ray(address or study.study.address or None)  # overlaps Ray's start with loading


@dataclass(frozen=True)
class _Run:
    """How one :func:`run_study` call runs its stages: the store, the Ray address, the TREC export,
    the per-dataset callback, its start time, and a background Ray start (or None) whose errors
    (a bad address) surface before returning even if no stage needed Ray."""

    store_root: Path | StoreURI | None
    address: str | None
    export_run: str | Path | None
    on_dataset: Callable[[DatasetOutcome], None] | None
    start: float
    ray_start: Future[Any] | None


def _run_stages(study: Study, settings: AdaptSettings | None, tune: TuneSettings | None, run: _Run) -> StudyOutcome:
    """The stages of :func:`run_study` after validation."""
    store_root, export_run, on_dataset, ray_start = run.store_root, run.export_run, run.on_dataset, run.ray_start
    sections = [EvalDataset.from_section(d, study) for d in study.datasets]
    if settings is None:
        systems = [SystemInfo(m.name, MODEL, None, m) for m in study.models]
        outcomes = evaluate_systems(
            study,
            systems,
            sections,
            baseline=study.evaluation.baseline or None,
            store_root=store_root,
            export_run=export_run,
            on_dataset=on_dataset,
        )
        _wait(ray_start)
        return StudyOutcome(study.study.name, store_root, outcomes)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    adaptation = adaptation_stage(study, settings, tune, store_root, run.address)
    t0 = time.perf_counter()
    outcomes = evaluate_systems(
        study,
        adaptation.systems,
        [adaptation.heldout, *sections],
        baseline=None if adaptation.pairs else adaptation.baseline,
        pairs=adaptation.pairs,
        store_root=store_root,
        export_run=export_run,
        on_dataset=on_dataset,
        extra_config=_adapt_config(adaptation),
    )
    if store_root is not None:
        _record_scaling(study, store_root)
    timings = {**adaptation.timings, "evaluate_s": time.perf_counter() - t0, "total_s": time.perf_counter() - run.start}
    log("[adaptlab] scale study done in " + ", ".join(f"{k} {v:.0f}" for k, v in timings.items()))
    _wait(ray_start)
    return ScaleStudyOutcome(
        study.study.name,
        store_root,
        outcomes,
        settings=settings,
        systems={s.name: s for s in adaptation.systems},
        data=adaptation.data,
        sweep=adaptation.sweep,
        timings=timings,
    )


def _record_scaling(study: Study, store_root: Path | StoreURI) -> None:
    """A scale study's data-scaling fits (every study measure the stored records re-score) as typed
    rows of the store's ``scaling`` table, in one commit after the evaluation's; a study whose
    variants have fewer than 2 scales records none. A failure here is one line and leaves the
    evaluation's commits as they are (``adaptlab scaling`` fits from them)."""
    from adaptlab import results
    from adaptlab.analysis.scaling import record_scaling

    try:
        with Heartbeat("fitting the data-scaling curves"):
            store = results.open(store_root)
            try:
                fits = record_scaling(
                    store, study.evaluation.metrics, boot=study.bootstrap_config(), study=study.study.name
                )
            finally:
                store.close()
    except AdaptlabError as e:
        log(f"[adaptlab] data-scaling fits not stored: {e} (the evaluation is stored; `adaptlab scaling` fits it)")
        return
    if fits:
        log(f"[adaptlab] {len(fits)} data-scaling fit(s) stored; `adaptlab scaling --store {store_root}` prints them")


def _wait(ray_start: Future[Any] | None) -> None:
    """The background Ray start's result (its error, if any), with heartbeat lines while it runs."""
    if ray_start is not None:
        with Heartbeat("finishing Ray's start (begun alongside the loading)"):
            ray_start.result()


def run_scale_study(study: Study, **options: Any) -> ScaleStudyOutcome:
    """:func:`run_study` for a study that must have an ``[adapt]`` section."""
    if study.adapt is None:
        raise ConfigError(f"{study.source}: no [adapt] section; use adaptlab.run_study")
    outcome = run_study(study, **options)
    if not isinstance(outcome, ScaleStudyOutcome):  # pragma: no cover - run_study's contract
        raise TypeError("run_study returned no ScaleStudyOutcome for a study with [adapt]")
    return outcome


def _adapt_config(adaptation: Adaptation) -> dict[str, Any]:
    """What a scale study adds to every run's config: baseline, [adapt] settings, the systems."""
    return {
        "baseline": adaptation.baseline,
        "comparisons": [list(p) for p in adaptation.pairs or ()],
        "adapt": adaptation.settings.as_dict(),
        "systems": {s.name: s.as_dict() for s in adaptation.systems},
    }


@dataclass
class _Evaluation:
    """What every dataset of one study's evaluation shares."""

    study: Study
    systems: list[SystemInfo]
    embedders: dict[str, Embedder | TokenEmbedder | BM25Search]
    measures: list[Measure]
    depth: int
    boot: BootstrapConfig
    baseline: str | None
    store_root: Path | StoreURI | None
    extra_config: dict[str, Any] = field(default_factory=dict)
    pairs: tuple[tuple[str, str], ...] | None = None


@dataclass(frozen=True)
class EvalOutputs:
    """Where :func:`evaluate_systems` puts what it computes: the results store (``store_root``;
    None: none), a TREC run file or folder (``export_run``; None: none) and ``on_dataset(outcome)``,
    called after each dataset is committed."""

    store_root: Path | StoreURI | None = None
    export_run: str | Path | None = None
    on_dataset: Callable[[DatasetOutcome], None] | None = None


class EvalOutputsOptions(TypedDict, total=False):
    """The fields of :class:`EvalOutputs` as keyword arguments of :func:`evaluate_systems`."""

    store_root: Path | StoreURI | None
    export_run: str | Path | None
    on_dataset: Callable[[DatasetOutcome], None] | None


def _outputs(outputs: EvalOutputs | None, options: Mapping[str, Any]) -> EvalOutputs:
    """``outputs`` with the keyword ``options`` set on it; an unknown keyword is a TypeError."""
    return settings_from(EvalOutputs, outputs, options, "evaluate_systems")


def evaluate_systems(
    study: Study,
    systems: Sequence[SystemInfo],
    datasets: Sequence[EvalDataset],
    *,
    baseline: str | None = None,
    pairs: Sequence[tuple[str, str]] | None = None,
    extra_config: dict[str, Any] | None = None,
    outputs: EvalOutputs | None = None,
    **options: Unpack[EvalOutputsOptions],
) -> list[DatasetOutcome]:
    """Every system on every dataset (the same queries for all: paired), CIs, paired tests
    (against ``baseline``, or exactly the ``(system, compared_to)`` ``pairs``, else every pair),
    ``[analysis]`` rows; one store commit per dataset. ``outputs`` (:class:`EvalOutputs`), or its
    fields as keywords (``store_root``, ``export_run``, ``on_dataset``): where the results go."""
    out = _outputs(outputs, options)
    store_root, export_run, on_dataset = out.store_root, out.export_run, out.on_dataset
    measures = parse_measures(study.evaluation.metrics)
    depth = max([study.evaluation.k, *[m.k for m in measures if m.k is not None]])
    cache = embedding_cache(study)  # shared by stores and studies
    ev = _Evaluation(
        study,
        list(systems),
        {s.name: system_embedder(s.section, study, cache) for s in systems},
        measures,
        depth,
        study.bootstrap_config(),
        baseline,
        store_root,
        dict(extra_config or {}),
        tuple(pairs) if pairs is not None else None,
    )
    ev.extra_config.update(embedding_backends(study, ev.embedders))  # the backend that computed, in every run's config
    several = len(systems) * len(datasets) > 1
    outcomes: list[DatasetOutcome] = []
    for plan in datasets:
        try:
            outcome = _evaluate_dataset(ev, plan)
        except AdaptlabError as e:
            raise type(e)(f"{e}{_committed_note(outcomes, store_root)}") from e
        if export_run is not None:
            export_runs(Path(export_run), outcome.records, plan.name, several=several)
        outcomes.append(outcome)
        if on_dataset is not None:
            on_dataset(outcome)
    return outcomes


def _committed_note(outcomes: list[DatasetOutcome], store_root: Path | StoreURI | None) -> str:
    """What a failed study left in the store: the datasets committed before the failure (the
    unit of atomicity is one dataset), or that none was (a Tune sweep's rows, stored before the evaluation, aside)."""
    done = [o for o in outcomes if o.run_ids]
    if store_root is None:
        return ""
    if not done:
        return f" [no evaluation rows of this study were committed to {store_root}]"
    names = ", ".join(f"{o.dataset} (version {getattr(o.run_ids, 'version', '?')})" for o in done)
    return (
        f" [datasets already committed to {store_root} before this error: {names}; each dataset is one "
        "atomic commit, and running the study again adds nothing for them]"
    )


def system_embedder(
    section: ModelSection, study: Study, cache_dir: EmbeddingCache | Path | None
) -> Embedder | TokenEmbedder | BM25Search:
    """The embedder of one system: a :class:`TokenEmbedder` (token vectors) when its model is late
    interaction (the ``colbert`` backend), else the dense :func:`model_embedder`; both cache in
    ``cache_dir`` (the shared :class:`~adaptlab.embedding.cache.EmbeddingCache`). ``ref = "bm25"``
    embeds nothing: a :class:`~adaptlab.retrieval.lexical.BM25Search` with the entry's options."""
    ref = resolve_model(study.resolve_model_ref(section.ref))
    if ref.backend == BM25_REF:
        return BM25Search(ref, BM25Settings.from_options(section.options))
    if pick_backend(ref, section.backend or "auto") != COLBERT_BACKEND:
        return model_embedder(section, study, cache_dir)
    return TokenEmbedder(
        ref,
        options={"backend": COLBERT_BACKEND, **section.options},
        batch_size=min(study.embedding.batch_size or section.batch_size, 64),
        cache_dir=cache_dir,
        **pool_settings(study),
    )


def _retrieve(
    ev: _Evaluation,
    system: SystemInfo,
    plan: EvalDataset,
    judged: list[str],
    query_texts: list[str],
    doc_ids: list[str],
    doc_texts: list[str],
    qrels: Any,
) -> tuple[PerQueryRecords, np.ndarray | None]:
    """The one retrieval step: embed (cached) and top-k, dispatched on the model kind; returns the
    records and the document embeddings (None for token vectors). A ColBERT system's ``search``
    option picks exact MaxSim or a PLAID index (:func:`adaptlab.retrieval.plaid.choose_search`);
    on the PLAID path the corpus is encoded by the indexer straight into the compressed index
    (under ``<store>/.cache/plaid``, reused by a re-run; a temporary folder without a local
    store), never held as token vectors: only queries and the gold / random documents are."""
    embed = ev.embedders[system.name]
    k = min(ev.depth, len(doc_ids))
    seed = stage_seed(ev.study.study.seed, "retrieval")
    if isinstance(embed, BM25Search):
        with Heartbeat(f"{plan.name}: BM25 top {k} of {len(doc_ids)} documents with {system.name!r}"):
            return embed.records(
                judged, query_texts, doc_ids, doc_texts, qrels, system=system.name, dataset=plan.name, k=k, seed=seed
            ), None
    if isinstance(embed, TokenEmbedder):
        from adaptlab.retrieval.plaid import PlaidCorpus, choose_search, plaid_records

        search, nbits = choose_search(embed.options, doc_texts, lambda: embed.encoder)
        if search == "plaid":
            log(
                f"[adaptlab] PLAID index (approximate) of {len(doc_texts)} documents, token-embedding "
                f"{len(query_texts)} queries with {system.name!r} (late interaction)"
            )
            root = ev.store_root / ".cache" / "plaid" if isinstance(ev.store_root, Path) else None
            return plaid_records(
                judged,
                embed(query_texts, "query"),
                doc_ids,
                qrels,
                corpus=PlaidCorpus(
                    doc_texts,
                    embed.encoder,
                    lambda pos: embed([doc_texts[i] for i in pos], "document"),
                    index_root=root,
                ),
                system=system.name,
                dataset=plan.name,
                k=k,
                seed=seed,
                nbits=nbits,
                batch_size=embed.batch_size,
            ), None
        log(
            f"[adaptlab] token-embedding {len(doc_texts)} documents and {len(query_texts)} queries with "
            f"{system.name!r} (late interaction, exact MaxSim)"
        )
        d_tok = embed(doc_texts, "document")
        hits = embed.from_cache
        q_tok = embed(query_texts, "query")
        _log_cache_use(embed, system.name, hits + embed.from_cache, len(doc_texts) + len(query_texts))
        with Heartbeat(f"{plan.name}: exact MaxSim top {k} with {system.name!r}"):
            late = build_late_records(
                judged, q_tok, doc_ids, d_tok, qrels, system=system.name, dataset=plan.name, k=k, seed=seed
            )
        return late, None
    log(f"[adaptlab] embedding {len(doc_texts)} documents and {len(query_texts)} queries with {system.name!r}")
    d_emb = embed(doc_texts, "document")
    hits = embed.from_cache
    q_emb = embed(query_texts, "query")
    _log_cache_use(embed, system.name, hits + embed.from_cache, len(doc_texts) + len(query_texts))
    with Heartbeat(f"{plan.name}: top {k} search with {system.name!r}"):  # the first one imports the backend
        rec = build_records(judged, q_emb, doc_ids, d_emb, qrels, system=system.name, dataset=plan.name, k=k, seed=seed)
    return rec, d_emb


def _log_cache_use(embed: Embedder | TokenEmbedder, system: str, hits: int, n: int) -> None:
    """A progress line when texts came from the embedding cache (the INFO log has every call)."""
    if hits and isinstance(embed.cache_dir, EmbeddingCache):
        log(f"[adaptlab] {system}: {hits} of {n} texts from the embedding cache {embed.cache_dir.where}")


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
        rec, d_emb = _retrieve(ev, system, plan, judged, query_texts, doc_ids, doc_texts, ds.qrels)
        records[system.name] = rec
        per_query[system.name] = evaluate(ds.qrels, rec.to_run(), ev.measures, query_ids=judged)
        provenance[system.name] = {"model_id": embed.ref.model_id, "model_revision": embed.revision}
        analysis_rows += _analyses(study, ev.boot, rec, d_emb, system.name, plan.name)
    with Heartbeat(f"{plan.name}: bootstrapping {len(per_query)} system(s)"):
        summary = summarise(per_query, boot=ev.boot, baseline=ev.baseline, pairs=ev.pairs)
        groups = [
            summarise_groups(per_query, labels, column=c, boot=ev.boot, baseline=ev.baseline, pairs=ev.pairs)
            for c, labels in ds.groups.items()
        ]
    outcome = DatasetOutcome(plan.name, summary, records, groups=groups)
    if ev.store_root is not None:
        b = ev.boot
        config = {
            "study": study.study.name,
            "source": study.source,
            "dataset": plan.spec,
            "split": plan.split,
            "metrics": [str(m) for m in ev.measures],
            "k": ev.depth,
            "baseline": ev.baseline or "",
            "system_order": [s.name for s in ev.systems],
            "bootstrap": {
                "n_resamples": b.n_resamples,
                "sample_size": b.sample_size or 0,
                "seed": b.seed,
                "confidence": b.confidence,
            },
            **ev.extra_config,
        }
        with Heartbeat(f"{plan.name}: committing to the results store"):
            outcome.run_ids = commit_summary(
                ev.store_root,
                summary,
                dataset=plan.name,
                config=config,
                provenance=provenance,
                dataset_fingerprint=ds.fingerprint(),
                records=list(records.values()),
                study=study.study.name,
                extra_metric_rows=analysis_rows,
                groups=groups,
            )
        if not outcome.run_ids.added:
            log(f"[adaptlab] {plan.name}: {outcome.run_ids.already_stored()}")
    return outcome


def _analyses(
    study: Study, boot: BootstrapConfig, rec: PerQueryRecords, doc_emb: np.ndarray | None, system: str, dataset: str
) -> list[dict[str, Any]]:
    """The analyses that ``[analysis]`` turns on, as metric rows for the store (bootstrapped with
    the study's bootstrap seed, so they see the same resamples as the CIs). ``doc_emb`` None (a
    late-interaction or BM25 system): isotropy and topic diversity do not apply and are skipped."""
    a = study.analysis
    rows: list[dict[str, Any]] = []
    if a.thresholds:
        log(f"[adaptlab] {system}: bootstrap similarity thresholds (K={a.top_k}, test {a.threshold_test})")
        rows += similarity_thresholds(
            rec, k=a.top_k, test=a.threshold_test, margin=a.threshold_margin, bootstrap=boot
        ).to_metric_rows()
    if a.coe_roe:
        rows += overlap_metrics(rec, k=a.top_k, psi=a.psi, bootstrap=boot).to_metric_rows()
    if doc_emb is None and (a.isotropy or a.topic_diversity):
        log(f"[adaptlab] {system}: isotropy / topic diversity skipped (no document vector: token vectors or BM25)")
    elif a.isotropy:
        rows += isotropy(doc_emb, system=system, dataset=dataset, space="corpus").to_metric_rows()
    if a.topic_diversity and doc_emb is not None:
        n = min(len(doc_emb), 2000)
        rows += topic_diversity(doc_emb, seed=boot.seed, sample_size=n).to_metric_rows(system=system, dataset=dataset)
    for row in rows:
        row["system"], row["dataset"] = system, dataset
    return rows


def export_runs(path: Path, records: dict[str, PerQueryRecords], dataset: str, *, several: bool) -> None:
    """One TREC run file per system; with several systems or datasets the names get suffixes
    (system and dataset names made safe as one file-name part: ``/``, ``\\``, ``..`` and control
    characters become ``_``, so a name never points into another folder)."""
    if str(path).endswith(("/", os.sep)) or path.is_dir():
        raise ConfigError(f"--export-run {path}: a folder; expected a file name such as {path / 'run.trec'}")
    for name, rec in records.items():
        part = f"{path.stem}.{_safe_part(dataset)}.{_safe_part(name)}{path.suffix}"
        target = path.with_name(part) if several else path
        write_trec_run(rec.to_run(), target, tag=name)


def _safe_part(name: str) -> str:
    """``name`` as one safe file-name part (:data:`adaptlab.storage.files.READABLE`)."""
    return safe_name(name, READABLE)
