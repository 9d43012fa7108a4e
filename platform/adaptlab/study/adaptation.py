"""The adaptation stage of a study with an ``[adapt]`` section: from a raw corpus to the systems
the evaluation compares, plus the held-out in-domain dataset they are compared on.

::

    corpus --prepare--> chunks, held-out test documents, nested scales, questions, triplets
      --(optional [tune])--> Ray Tune sweep on the validation questions of one scale
      --train--> for every scale n and variant v (pt, ft, pt-ft, merged): one adapted model
      => systems (base, the study's other [[models]], every adapted model) + the held-out set

:func:`adaptation_stage` returns them as an :class:`Adaptation`;
:func:`adaptlab.study.runner.run_study` then runs its one evaluation loop (systems x datasets:
the held-out questions first, then every ``[[datasets]]`` benchmark), with paired tests of every
variant against the base model.

System names say the variant and the data scale (number of training-scale documents):
``minilm-base``, ``minilm-pt-s10``, ``minilm-ft-s100``, ``minilm-pt-ft-s10``,
``minilm-merged-s100`` (:func:`system_name`). ColBERT variants (``[adapt].variants`` with
``colbert-base`` / ``colbert-ft``, settings in ``[adapt.colbert]``) are named with their own
prefix: ``colbert-base`` (the ColBERT as is; an untrained one when built from a plain BERT) and
``colbert-ft-s100`` (fine-tuned through RAGatouille on the same triplets as the bi-encoder FT at
that scale); they are evaluated on the same held-out questions, so ColBERT-vs-bi-encoder
comparisons are paired. Every adapted system of every scale is evaluated
on the same queries as the base model, so all comparisons are paired (Roychowdhury et al.,
"Towards Understanding Domain Adapted Sentence Embeddings for Document Retrieval", section 2.1;
the scales follow "Evaluating the Robustness of Dense Retrievers in Interdisciplinary Domains",
sections 3.1-3.2). The ``[adapt]`` and ``[tune]`` keys are documented in docs/adaptation.md and
in :class:`~adaptlab.study.adapt_config.AdaptSettings` /
:class:`~adaptlab.study.adapt_config.TuneSettings` (and :func:`adaptlab.study.keys.sections`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from adaptlab import results
from adaptlab.adapt.prep.evalset import heldout_dataset
from adaptlab.adapt.prep.llm import ChatClient
from adaptlab.adapt.prep.prepare import AdaptationData, prepare_adaptation_data
from adaptlab.adapt.prep.questions import (
    DEFAULT_PROMPT,
    DEFAULT_SYSTEM,
    InverseClozeGenerator,
    LLMQuestionGenerator,
)
from adaptlab.adapt.prep.templates import SyntheticTemplateGenerator, synthetic_raw_corpus
from adaptlab.adapt.prep.triplets import Triplet
from adaptlab.adapt.train.addressing import sanitize_name
from adaptlab.adapt.train.artifacts import Artifact
from adaptlab.adapt.train.base_model import resolve_base_model
from adaptlab.adapt.train.ft import FTConfig
from adaptlab.adapt.train.jobs import AdaptJob, JobSettings, run_adaptation_jobs, train_variant
from adaptlab.adapt.train.tune import TUNE_MEASURE, SweepResult, trial_config, tune_adaptation
from adaptlab.data import load_dataset
from adaptlab.data.dataset import Dataset
from adaptlab.data.documents import Document, corpus_from_dataset, load_documents
from adaptlab.data.loaders import DATASET_FORMATS
from adaptlab.data.synthetic import RawDocument, synthetic_documents
from adaptlab.embedding.cache import EmbeddingCache
from adaptlab.errors import ConfigError
from adaptlab.models.variants import (
    BASE,
    BI_ENCODER_BACKEND,
    COLBERT_BACKEND,
    COLBERT_BASE,
    COLBERT_FT,
    FT,
    PT_FT,
    REFERENCE,
    family_variant,
    is_colbert,
    is_trained,
    system_name,
)
from adaptlab.study.adapt_config import AdaptSettings, TuneSettings
from adaptlab.study.inputs import EvalDataset, embedding_cache, log, model_embedder
from adaptlab.study.outcome import SystemInfo
from adaptlab.study.schema import ModelSection, StoreURI, Study

__all__ = [
    "Adaptation",
    "TUNE_MEASURE",
    "adaptation_stage",
    "load_corpus",
    "question_generator",
    "system_name",
]

# TUNE_MEASURE (the measure of a sweep's rows in the store) and system_name (imported above,
# re-exported) are defined in adaptlab.adapt.train.tune and adaptlab.models.variants.


@dataclass
class Adaptation:
    """What the adaptation stage hands to the evaluation: the systems (base first), the held-out
    in-domain dataset, the baseline of the paired tests, and what it built on the way."""

    settings: AdaptSettings
    systems: list[SystemInfo]
    heldout: EvalDataset
    baseline: str | None
    data: AdaptationData
    sweep: SweepResult | None = None
    timings: dict[str, float] = field(default_factory=dict)
    pairs: tuple[tuple[str, str], ...] | None = None  # per-family comparisons (ColBERT), else baseline


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


def load_corpus(settings: AdaptSettings, study: Study) -> tuple[list[Document], list[RawDocument] | None]:
    """The raw documents of ``[adapt].corpus``, and the synthetic RawDocuments (or None).

    ``synthetic:k=v,...`` -> :func:`adaptlab.data.synthetic.synthetic_documents`;
    ``FORMAT:PATH`` with a dataset format of :func:`adaptlab.data.load_dataset` -> that
    dataset's corpus (:func:`adaptlab.data.documents.corpus_from_dataset`); anything else is a
    folder (or file) read by :func:`adaptlab.data.documents.load_documents`. Relative paths
    resolve against the project root.
    """
    corpus = settings.corpus
    fmt, sep, rest = corpus.partition(":")
    if fmt.lower() == "synthetic":
        options = _synthetic_options(rest if sep else "", corpus)
        raw = synthetic_documents(options.pop("n_documents", 120), **options)
        return synthetic_raw_corpus(raw), raw
    if sep and fmt.lower() in DATASET_FORMATS and len(fmt) > 1:
        path = rest if Path(rest).expanduser().is_absolute() else str(study.resolve_path(rest))
        ds = load_dataset(f"{fmt}:{path}")
        return corpus_from_dataset(ds, clean=settings.clean), None
    local = study.resolve_path(corpus)
    if not local.exists():
        raise ConfigError(
            f"{study.source}: [adapt].corpus = {corpus!r}: {local} does not exist; expected a folder of "
            ".txt/.md/.jsonl/.pdf documents, synthetic:k=v,... or FORMAT:PATH with FORMAT one of "
            + ", ".join(DATASET_FORMATS)
        )
    return load_documents(
        local, include=settings.include or None, exclude=settings.exclude or None, clean=settings.clean
    ), None


def question_generator(
    settings: AdaptSettings, synthetic_raw: list[RawDocument] | None
) -> SyntheticTemplateGenerator | InverseClozeGenerator | LLMQuestionGenerator:
    """The question generator of ``[adapt].questions`` (seeded with ``[adapt].seed``)."""
    if settings.questions == "template":
        if synthetic_raw is None:  # refused when the study is loaded; here for a settings object built by hand
            raise ConfigError('[adapt].questions = "template" needs a synthetic: corpus')
        return SyntheticTemplateGenerator(synthetic_raw, n_per_chunk=settings.questions_per_chunk, seed=settings.seed)
    if settings.questions == "inverse-cloze":
        return InverseClozeGenerator(settings.questions_per_chunk, seed=settings.seed)
    llm = settings.llm
    if llm is None:  # AdaptSettings.read requires [adapt.llm] for questions = "llm"
        raise ConfigError('[adapt.llm]: required when questions = "llm"')
    cache = Path(llm.cache) if llm.cache else (settings.data_dir or Path(".")) / "llm_cache.sqlite"
    cache.parent.mkdir(parents=True, exist_ok=True)
    client = ChatClient(
        base_url=llm.base_url,
        model=llm.model,
        api_key_env=llm.api_key_env or None,
        temperature=llm.temperature,
        max_tokens=llm.max_tokens or None,
        timeout=llm.timeout,
        max_retries=llm.max_retries,
        cache=cache,
    )
    return LLMQuestionGenerator(
        client,
        settings.questions_per_chunk,
        prompt=llm.prompt or DEFAULT_PROMPT,
        system=llm.system or DEFAULT_SYSTEM,
        workers=llm.workers,
    )


def _tokenizer(model_ref: str) -> Any:
    """The base model's tokenizer (chunking counts its tokens)."""
    from transformers import AutoTokenizer  # deferred: heavy

    _, path = resolve_base_model(model_ref)
    return AutoTokenizer.from_pretrained(str(path), local_files_only=True)


# =========================================================================== the stages


def _jobs(
    settings: AdaptSettings, data: AdaptationData, ft: FTConfig, merge_weight: float
) -> list[tuple[str, int, AdaptJob]]:
    """(variant, n_documents, AdaptJob) for every trained variant at every scale."""
    trained = [v for v in settings.variants if is_trained(v)]
    out = []
    for scale_data in data.scales:
        n = scale_data.scale.n_documents
        all_triplets = scale_data.triplets.get("train", [])
        triplets = _usable_triplets(all_triplets, ft, n)
        sampled = scale_data.splits.select(scale_data.scale.chunks(data.chunks), "train")
        chunks = [c.text for c in sampled]
        for v in trained:
            if v == COLBERT_FT:
                colbert = settings.colbert
                if colbert is None:  # AdaptSettings.read sets it whenever a ColBERT variant is asked for
                    raise ConfigError("[adapt.colbert]: required for the colbert-ft variant")
                if not all_triplets:
                    raise ConfigError(
                        f"[adapt]: the data scale of {n} documents has no training question for "
                        "colbert-ft; raise the scale, fraction or questions_per_chunk"
                    )
                # every question: one without a hard negative gets random_negatives from RAGatouille
                job = AdaptJob(
                    v,
                    colbert.base_model,
                    scale=n,
                    triplets=list(all_triplets),
                    colbert_config=colbert.ft,
                    seed=settings.seed,
                )
            else:
                job = AdaptJob(
                    v,
                    settings.base_model,
                    scale=n,
                    triplets=triplets,
                    chunks=chunks,
                    pt_config=settings.pt,
                    ft_config=ft,
                    merge_weight=merge_weight,
                    merge_source=settings.merge_source,
                    seed=settings.seed,
                )
            out.append((v, n, job))
    return out


def _usable_triplets(triplets: Sequence[Triplet], ft: FTConfig, n: int) -> list[Triplet]:
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
        log(
            f"[adaptlab] scale {n}: {len(triplets) - len(usable)} of {len(triplets)} training questions have no "
            "hard negative left after the mining filters; trained without them"
        )
    return usable


def _train(settings: AdaptSettings, jobs: list[tuple[str, int, AdaptJob]], address: str | None) -> list[Artifact]:
    """Train every job: as Ray tasks (``[adapt].use_ray``) or one after another in-process."""
    if not jobs:
        return []
    root = settings.artifact_root
    if root is None:
        raise ConfigError("[adapt].artifact_root: required when the study has no results store")
    if settings.use_ray:
        resources = JobSettings(
            gpus_per_job=settings.gpus_per_job,
            cpus_per_job=settings.cpus_per_job,
            max_retries=settings.max_retries,
            checkpoint_every=settings.checkpoint_every,
            lone_stage_all_cpus=settings.lone_stage_all_cpus,
        )
        return run_adaptation_jobs([j for _, _, j in jobs], root, resources, address=address)
    return [train_variant(j, root, checkpoint_every=settings.checkpoint_every) for _, _, j in jobs]


def _run_tune(
    study: Study,
    settings: AdaptSettings,
    tune_settings: TuneSettings,
    data: AdaptationData,
    store_dir: Path | StoreURI | None,
) -> SweepResult:
    """Sweep on the validation questions of one scale; store one metrics row per trial."""
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
    validation = heldout_dataset(
        questions, data.chunks, name=f"validation-s{n}", corpus="documents", documents=scale_data.splits.validation
    )
    sweep_config = tune_settings.sweep
    chunks = None
    if sweep_config.variant == PT_FT:
        sampled = scale_data.splits.select(scale_data.scale.chunks(data.chunks), "train")
        chunks = [c.text for c in sampled]
    name = tune_settings.name or f"{study.study.name}-{system_name(settings.label, sweep_config.variant, n)}"
    log(
        f"[adaptlab] tune: {sweep_config.num_samples} trial(s) of {sweep_config.variant} at scale {n} "
        f"on {validation.n_queries} validation questions"
    )
    storage = tune_settings.storage_path
    if storage is None:  # set under the results store (TuneSettings.under_store) before the study runs
        raise ConfigError(f"{study.source}: [tune].storage_path: required when the study has no results store")
    sweep = tune_adaptation(
        settings.base_model,
        triplets,
        validation,
        sweep_config,
        storage_path=storage,
        name=name,
        ft_config=settings.ft,
        chunks=chunks,
        pt_config=settings.pt,
        artifact_root=settings.artifact_root,
        seed=settings.seed,
    )
    if store_dir is not None:
        _store_sweep(study, settings, sweep_config.variant, sweep, validation, n, store_dir)
    return sweep


def _store_sweep(
    study: Study,
    settings: AdaptSettings,
    variant: str,
    sweep: SweepResult,
    validation: Dataset,
    n: int,
    store_dir: Path | StoreURI,
) -> None:
    """One run for the sweep (system ``<label>-<variant>-s<n>-tune``) holding the sweep's rows
    (:meth:`~adaptlab.adapt.train.tune.SweepResult.to_metric_rows`): one per trial on dataset
    ``validation-s<n>``, and the chosen trial's confirmed value on dataset ``confirm-s<n>``."""
    system = f"{system_name(settings.label, variant, n)}-tune"
    config = {
        "study": study.study.name,
        "source": study.source,
        "tune": dict(study.tune_table),
        "measure": sweep.measure,
        "experiment_path": sweep.experiment_path,
        "restored": sweep.restored,
        "best": sweep.best,
        "adapt": settings.as_dict(),
    }
    dataset = f"validation-s{n}"
    run = results.run_record(
        system,
        dataset,
        model_id=settings.base_model,
        model_revision=None,
        dataset_fingerprint=validation.fingerprint(),
        seed=settings.seed,
        config=config,
        study=study.study.name,
    )
    rows = [{"run_id": run["run_id"], **row} for row in sweep.to_metric_rows(system, dataset, f"confirm-s{n}")]
    results.open(store_dir, create=True).commit([run], rows)


def _apply_best(settings: AdaptSettings, sweep: SweepResult | None) -> tuple[FTConfig, float]:
    """FT hyperparameters and merge weight of the sweep's best trial (unchanged without one)."""
    config = sweep.best_config() if sweep is not None else {}
    if not config:
        return settings.ft, settings.merge_weight
    weight = float(config.pop("merge_weight", settings.merge_weight))
    return trial_config(settings.ft, config), weight


def _systems(
    study: Study, settings: AdaptSettings, jobs: list[tuple[str, int, AdaptJob]], artifacts: list[Artifact]
) -> list[SystemInfo]:
    """Base (when asked for), the study's other [[models]], then every (scale, variant)."""
    out: list[SystemInfo] = []
    if BASE in settings.variants:
        out.append(SystemInfo(system_name(settings.label, BASE), BASE, None, settings.base_section))
    colbert = settings.colbert
    if COLBERT_BASE in settings.variants and colbert is not None:
        out.append(
            SystemInfo(system_name(colbert.label, family_variant(COLBERT_BASE)), COLBERT_BASE, None, colbert.section)
        )
    for m in study.models:
        if m.ref == settings.base_section.ref or m.name == settings.label:
            continue
        out.append(SystemInfo(m.name, REFERENCE, None, m))
    for (variant, n, _), art in zip(jobs, artifacts, strict=True):
        if is_colbert(variant) and colbert is not None:
            name = system_name(colbert.label, family_variant(variant), n)
            section = ModelSection(
                ref=str(art.model_path), name=name, backend=COLBERT_BACKEND, batch_size=colbert.section.batch_size
            )
            out.append(
                SystemInfo(
                    name, variant, n, section, art.key, str(art.location), bool(art.reused), _training_summary(art)
                )
            )
            continue
        name = system_name(settings.label, variant, n)
        section = ModelSection(
            **{**asdict(settings.base_section), "ref": str(art.model_path), "name": name, "backend": BI_ENCODER_BACKEND}
        )
        out.append(
            SystemInfo(name, variant, n, section, art.key, str(art.location), bool(art.reused), _training_summary(art))
        )
    return out


def _training_summary(art: Artifact) -> dict[str, Any]:
    """The manifest's ``"training"`` record (what the report's Training table shows)."""
    training = (art.manifest or {}).get("training")
    return dict(training) if training is not None and hasattr(training, "items") else {}


def _baseline(study: Study, settings: AdaptSettings, systems: list[SystemInfo]) -> str | None:
    """The base model when evaluated, else ``[evaluation].baseline`` (or None: every pair)."""
    baseline = system_name(settings.label, BASE) if BASE in settings.variants else (study.evaluation.baseline or None)
    names = [s.name for s in systems]
    if baseline is not None and baseline not in names:
        raise ConfigError(f"[evaluation].baseline = {baseline!r} is not among the systems: {', '.join(names)}")
    return baseline


def comparison_pairs(systems: Sequence[SystemInfo], baseline: str | None) -> tuple[tuple[str, str], ...] | None:
    """The paired comparisons ``(system, compared_to)`` when the study has ColBERT variants, else
    None (every system against ``baseline``). Each family is compared with its own base: a
    bi-encoder variant or reference model with ``baseline``, ``colbert-ft-sN`` with
    ``colbert-base`` (its untrained self) and with the bi-encoder FT at the same scale, and
    ``colbert-base`` with ``baseline``: ColBERT-vs-bi-encoder gains on the same queries."""
    by_variant = {(s.variant, s.n_documents): s.name for s in systems}
    if baseline is None or not any(is_colbert(v) for v, _ in by_variant):
        return None
    colbert_base = by_variant.get((COLBERT_BASE, None))
    out: list[tuple[str, str]] = []
    for s in systems:
        if s.name == baseline:
            continue
        if s.variant != COLBERT_FT:
            out.append((s.name, baseline))
            continue
        out.append((s.name, colbert_base or baseline))
        if (FT, s.n_documents) in by_variant:
            out.append((s.name, by_variant[(FT, s.n_documents)]))
    return tuple(out)


def _prepare(study: Study, settings: AdaptSettings, cache_dir: EmbeddingCache | None) -> tuple[AdaptationData, Path]:
    """Chunks, held-out set, nested scales, questions and triplets (cached under ``data_dir``)."""
    documents, synthetic_raw = load_corpus(settings, study)
    generator = question_generator(settings, synthetic_raw)
    mining = settings.mining_inference()  # torch fp32 unless [adapt].mining_precision says otherwise
    mining_embed = model_embedder(settings.base_section, study, cache_dir, inference=mining)
    miner = settings.label if mining.is_default else f"{settings.label} ({mining.backend} {mining.precision})"
    if settings.data_dir is None:
        raise ConfigError("[adapt].data_dir: required when the study has no results store")
    data_dir = settings.data_dir / f"{sanitize_name(study.study.name)}-{settings.data_key()}"
    log(f"[adaptlab] adaptation data: {len(documents)} documents -> {data_dir}")
    data = prepare_adaptation_data(
        documents,
        _tokenizer(settings.base_model),
        generator,
        mining_embed,
        settings.prep(),
        out_dir=data_dir,
        base_model=miner,
    )
    summary = data.summary()
    log(
        f"[adaptlab] held-out: {summary['test_questions']} questions over {summary['heldout_corpus']} chunks; "
        + ", ".join(f"{k}: {v.get('train_questions', 0)} train questions" for k, v in summary["scales"].items())
    )
    return data, data_dir


def adaptation_stage(
    study: Study,
    settings: AdaptSettings,
    tune_settings: TuneSettings | None,
    store_dir: Path | StoreURI | None,
    address: str | None,
) -> Adaptation:
    """Prepare the adaptation data, sweep (optional ``[tune]``), train every (scale, variant);
    returns the systems to evaluate and the held-out dataset. Ray, when used, is started by the
    caller. Adapted models are content-addressed artifacts, so a rerun trains nothing."""
    timings: dict[str, float] = {}
    cache_dir = embedding_cache(study)  # the shared embedding cache
    t0 = time.perf_counter()
    data, data_dir = _prepare(study, settings, cache_dir)
    timings["prepare_s"] = time.perf_counter() - t0
    sweep = None
    ft, merge_weight = settings.ft, settings.merge_weight
    if tune_settings is not None:
        t0 = time.perf_counter()
        sweep = _run_tune(study, settings, tune_settings, data, store_dir)
        timings["tune_s"] = time.perf_counter() - t0
        if tune_settings.apply_best:
            ft, merge_weight = _apply_best(settings, sweep)
    t0 = time.perf_counter()
    jobs = _jobs(settings, data, ft, merge_weight)
    log(
        f"[adaptlab] training {len(jobs)} adapted model(s) "
        f"({'Ray tasks' if settings.use_ray else 'in-process'}) into {settings.artifact_root}"
    )
    artifacts = _train(settings, jobs, address)
    timings["train_s"] = time.perf_counter() - t0
    systems = _systems(study, settings, jobs, artifacts)
    heldout = EvalDataset.loaded(settings.heldout_name, f"beir:{data_dir / 'heldout'}", data.heldout)
    baseline = _baseline(study, settings, systems)
    return Adaptation(settings, systems, heldout, baseline, data, sweep, timings, comparison_pairs(systems, baseline))
