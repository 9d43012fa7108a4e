"""Settings of a scale study: the ``[adapt]`` and ``[tune]`` sections of a study file, validated.

A study file's ``study.adapt`` and ``study.tune`` are raw TOML tables; :func:`parse_adapt_section`
and :func:`parse_tune_section` check every key with the schema's machinery
(:class:`~adaptlab.study.schema.SectionChecker`: an unknown key or a wrong type is a
:class:`~adaptlab.errors.ConfigError` naming the file, the section and the key, e.g.
``scale_study.toml: [adapt].scales: expected a list of integers >= 1 (the last may be "all"),
got [10, 'x']``), fill in the defaults (the base model is the study's first ``[[models]]`` entry,
paths default to the results store, seeds follow :mod:`adaptlab.study.seeds`) and resolve
relative paths against the project root. :func:`check_adapt_sections` runs both when a study is
loaded, so a bad key fails before any work, and nothing is re-checked later: ``[tune]`` is
validated into a :class:`~adaptlab.adapt.train.sweep_config.SweepConfig` (its search space checked
entry by entry by :func:`adaptlab.adapt.train.space.space_problem`, without Ray), which the sweep
takes whole. The keys and their defaults are listed in docs/adaptation.md.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from adaptlab.adapt.train.artifacts import artifact_cache_dir
from adaptlab.adapt.train.colbert import ColBERTFTConfig
from adaptlab.adapt.train.ft import FTConfig
from adaptlab.adapt.train.memory import AUTO
from adaptlab.adapt.train.pt import PTConfig
from adaptlab.adapt.train.space import space_problem
from adaptlab.adapt.train.sweep_config import SweepConfig
from adaptlab.errors import ConfigError
from adaptlab.models.inference import DEFAULT_BACKEND, EXACT_PRECISION, precision_name
from adaptlab.models.variants import (
    BM25_REF,
    BASE,
    BI_ENCODER_VARIANTS,
    COLBERT_BACKEND,
    COLBERT_LABEL,
    COLBERT_VARIANTS,
    FT,
    MERGE_SOURCES,
    is_colbert,
    system_name,
)
from adaptlab.stats import BootstrapConfig
from adaptlab.storage.names import check_name
from adaptlab.study.schema import ModelSection, SectionChecker, Study, default_name, is_store_uri
from adaptlab.study.seeds import stage_seed

__all__ = [
    "ALL_VARIANTS",
    "COLBERT_VARIANTS",
    "AdaptSettings",
    "ColBERTSettings",
    "LLMSettings",
    "QUESTION_GENERATORS",
    "TUNE_KEYS",
    "TuneSettings",
    "check_adapt_sections",
    "parse_adapt_section",
    "parse_tune_section",
]

ALL_VARIANTS: tuple[str, ...] = BI_ENCODER_VARIANTS
"""Bi-encoder variants a scale study evaluates by default, in report order (``base`` = the
unadapted model; the vocabulary is :mod:`adaptlab.models.variants`)."""

# COLBERT_VARIANTS (imported above, re-exported): ``colbert-base`` is the ColBERT of
# ``[adapt.colbert].base_model`` as is (an untrained one, said loudly, when that is a plain BERT),
# ``colbert-ft`` its fine-tuning on the same triplets at every scale. System names:
# ``<colbert name>-base``, ``<colbert name>-ft-s<n>``.

QUESTION_GENERATORS: tuple[str, ...] = ("inverse-cloze", "llm", "template")
"""Values of ``[adapt].questions``."""


@dataclass(frozen=True)
class LLMSettings:
    """``[adapt.llm]``: the OpenAI-compatible chat endpoint of ``questions = "llm"``."""

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    prompt: str = ""
    system: str = ""
    temperature: float = 0.0
    max_tokens: int = 0
    timeout: float = 120.0
    max_retries: int = 5
    workers: int = 1
    cache: str = ""


@dataclass(frozen=True)
class ColBERTSettings:
    """``[adapt.colbert]``: the ColBERT variants' base model, system-name prefix and fine-tuning
    (:class:`~adaptlab.adapt.train.colbert.ColBERTFTConfig` fields)."""

    base_model: str  # a ColBERT checkpoint / artifact, or a plain BERT (-> untrained ColBERT)
    label: str = COLBERT_LABEL
    section: ModelSection = field(default_factory=ModelSection)  # how it is embedded (backend colbert)
    ft: ColBERTFTConfig = field(default_factory=ColBERTFTConfig)


@dataclass(frozen=True)
class AdaptSettings:
    """The validated ``[adapt]`` section, with paths and defaults resolved."""

    corpus: str
    base_model: str  # a reference for adaptlab.adapt (alias, or absolute model directory)
    label: str  # the system-name prefix (the base model's [[models]] name)
    base_section: ModelSection  # how the base model is embedded for evaluation and mining
    scales: tuple[int | str, ...] = (10, 100, 700)
    fraction: float = 0.3
    test_fraction: float = 0.1
    validation_fraction: float = 0.1
    max_tokens: int = 256
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    clean: bool = True
    variants: tuple[str, ...] = ALL_VARIANTS
    merge_weight: float = 0.5
    merge_source: str = FT
    questions: str = "template"
    questions_per_chunk: int = 1
    n_negatives: int = 10
    duplicate_threshold: float | None = 0.95
    margin: float | None = 0.05
    eval_corpus: str = "documents"
    unit: str = "documents"
    heldout_name: str = "heldout"
    seed: int = 0
    artifact_root: Path | str | None = None  # a str: a URI (s3://...), see adapt.train.artifacts
    data_dir: Path | None = None
    use_ray: bool = True
    gpus_per_job: float | None = None
    cpus_per_job: float = 1.0
    lone_stage_all_cpus: bool = True
    max_retries: int = 3
    checkpoint_every: int = 50
    pt: PTConfig = field(default_factory=PTConfig)
    ft: FTConfig = field(default_factory=FTConfig)
    llm: LLMSettings | None = None
    colbert: ColBERTSettings | None = None

    def data_key(self) -> str:
        """16 hex digits of SHA-256 over everything that decides the adaptation data."""
        keys = ("corpus", "base_model", "scales", "fraction", "test_fraction", "validation_fraction",
                "max_tokens", "include", "exclude", "clean", "questions", "questions_per_chunk",
                "n_negatives", "duplicate_threshold", "margin", "eval_corpus", "seed")
        data = {k: getattr(self, k) for k in keys}
        if self.unit != "documents":  # keys of studies written before units existed stay the same
            data["unit"] = self.unit
        if self.llm is not None:
            data["llm"] = {k: v for k, v in asdict(self.llm).items() if k not in ("workers", "cache", "timeout")}
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (for the runs table's ``config``)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)
               if f.name not in ("pt", "ft", "llm", "base_section", "colbert")}
        out["colbert"] = None if self.colbert is None else asdict(self.colbert)
        out["pt"], out["ft"] = asdict(self.pt), asdict(self.ft)
        out["llm"] = None if self.llm is None else {k: v for k, v in asdict(self.llm).items()}
        out["base_section"] = asdict(self.base_section)
        return json.loads(json.dumps(out, default=str))


@dataclass(frozen=True)
class TuneSettings:
    """The validated ``[tune]`` section: the sweep's settings, passed whole to
    :func:`adaptlab.adapt.train.tune.tune_adaptation`, and what the study decides around it:
    which scale's data it sweeps (None: the largest), the experiment's name ("": derived from the
    study) and storage path (a str: a URI), and whether the best trial trains the variants."""

    sweep: SweepConfig
    storage_path: Path | str
    scale: int | str | None = None
    name: str = ""
    apply_best: bool = False


_BOOTSTRAP_KEYS: dict[str, str] = {"n_resamples": "n_resamples", "sample_size": "sample_size", "ci_seed": "seed"}
"""``[tune]`` keys of the objective's bootstrap -> :class:`~adaptlab.stats.BootstrapConfig` fields."""

TUNE_KEYS: tuple[str, ...] = tuple(sorted(
    [f.name for f in fields(TuneSettings) if f.name != "sweep"]
    + [f.name for f in fields(SweepConfig) if f.name != "bootstrap"] + list(_BOOTSTRAP_KEYS)
))
"""The keys of ``[tune]``: :class:`TuneSettings`' own, :class:`SweepConfig`'s fields and the bootstrap's."""


def _config_from_table(cls: type, raw: Mapping[str, Any], source: str, section: str) -> Any:
    """A PTConfig / FTConfig from a TOML table: known fields only, numbers and strings checked."""
    check = SectionChecker(source, section)
    names = [f.name for f in fields(cls)]
    check.unknown(raw, names)
    defaults = cls()
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        default = getattr(defaults, key)
        if key == "max_steps":
            kwargs[key] = None if value == 0 else check.integer(key, value, 1)
        elif key == "max_seq_length" and cls is FTConfig:
            kwargs[key] = None if value == 0 else check.integer(key, value, 1)
        elif key == "gradient_checkpointing":
            kwargs[key] = _auto_boolean(check, key, value)
        elif key in ("query_prefix", "passage_prefix") or isinstance(default, str):
            kwargs[key] = check.string(key, value)
        elif isinstance(default, bool):
            kwargs[key] = check.boolean(key, value)
        elif isinstance(default, int):
            kwargs[key] = check.integer(key, value)
        else:
            kwargs[key] = check.number(key, value)
    try:
        return cls(**kwargs)
    except ConfigError as e:
        raise ConfigError(f"{source}: [{section}]: {e}") from e


def _base_model(study: Study, raw: Mapping[str, Any], check: SectionChecker) -> tuple[str, str, ModelSection]:
    """(reference for training, label, ModelSection used for embedding) of the base model."""
    given = raw.get("base_model")
    section: ModelSection | None = None
    if given is None:
        if not study.models:
            raise ConfigError(f"{check.where('base_model')}: required when the study has no [[models]]")
        section = study.models[0]
    else:
        given = check.string("base_model", given)
        section = next((m for m in study.models if given in (m.name, m.ref)), None)
        if section is None:
            section = ModelSection(ref=given, name=default_name(given))
    ref = study.resolve_model_ref(section.ref)  # a model directory: relative to the project root
    if ref.lower() == BM25_REF:
        raise check.fail("base_model", "a bi-encoder to adapt (BM25 has no weights; list it after the base "
                         "model in [[models]] to evaluate it beside the variants)", ref)
    label = precision_name(check.string("name", raw.get("name", section.name)), study.inference(section).precision)
    label = check_name(label, check.where("name"))
    if not label or any(c in label for c in "/\\ "):
        raise check.fail("name", "a non-empty system-name prefix without spaces or slashes", label)
    embed_section = ModelSection(**{**asdict(section), "ref": ref, "name": system_name(label, BASE)})
    return ref, label, embed_section


_ADAPT_KEYS: tuple[str, ...] = (
    "artifact_root", "base_model", "checkpoint_every", "clean", "corpus", "cpus_per_job", "data_dir",
    "duplicate_threshold", "eval_corpus", "exclude", "fraction", "ft", "fused_attention", "gpus_per_job",
    "gradient_checkpointing", "heldout_name",
    "include", "length_buckets", "llm", "lone_stage_all_cpus", "margin", "max_retries", "max_tokens", "merge_source", "merge_weight", "n_negatives",
    "colbert", "name", "precision", "pt", "questions", "questions_per_chunk", "scales", "seed", "test_fraction", "unit",
    "use_ray", "validation_fraction", "variants",
)


def parse_adapt_section(study: Study, *, store: str | Path | None = None) -> AdaptSettings:
    """Validate ``study.adapt`` (the raw ``[adapt]`` table) into :class:`AdaptSettings`.

    Keys (defaults in brackets; see docs/adaptation.md):
    ``corpus`` (required: ``"synthetic:n_documents=120,seed=0"``, a dataset spec
    ``FORMAT:PATH`` whose corpus is used, or a folder of .txt/.md/.jsonl/.pdf files), ``include``,
    ``exclude`` (filename globs), ``clean`` [true], ``base_model`` [the first [[models]] entry],
    ``name`` [that entry's name], ``scales`` [[10, 100, 700]], ``fraction`` [0.3],
    ``test_fraction`` [0.1], ``validation_fraction`` [0.1], ``max_tokens`` [256], ``variants``
    [all of base, pt, ft, pt-ft, merged; colbert-base and colbert-ft on request], ``merge_weight`` [0.5], ``merge_source`` ["ft"],
    ``questions`` ["template" for a synthetic corpus, else "inverse-cloze"; or "llm"],
    ``questions_per_chunk`` [1], ``n_negatives`` [10], ``duplicate_threshold`` [0.95],
    ``margin`` [0.05] (false turns a rule off), ``eval_corpus`` ["documents"],
    ``unit`` ["documents"] (what scales and splits count: documents, PDF pages or chunks),
    ``heldout_name`` ["heldout"], ``seed`` [the study's seed], ``artifact_root``
    [<store>/artifacts], ``data_dir`` [<store>/adaptation], ``use_ray`` [[embedding].use_ray],
    ``gpus_per_job`` ["auto"], ``cpus_per_job`` [1], ``lone_stage_all_cpus`` [true] (a CPU stage
    that runs alone declares a whole node's CPUs, so it trains on its cores), ``max_retries`` [3],
    ``checkpoint_every`` [50], ``gradient_checkpointing`` [false; true: PT and FT recompute each
    layer in the backward pass: less memory, same numbers; "auto": a stage does so when that lets
    two stages share the largest node where one alone would fill more than half of it, or lets it
    fit at all),
    ``precision`` ["fp32"; "bf16": bfloat16 autocast], ``fused_attention`` [false; true: no
    attention dropout, the fused SDPA kernel] and ``length_buckets`` [false; true: batches of
    similar token length] (they change the numbers and enter artifact keys when set), and the tables ``[adapt.pt]`` (PTConfig fields), ``[adapt.ft]``
    (FTConfig fields; ``max_steps = 0`` means no limit), ``[adapt.llm]`` and ``[adapt.colbert]``
    (``base_model`` [the base model's directory: its BERT becomes an untrained ColBERT], ``name``
    ["colbert"], ``doc_maxlen``/``query_maxlen``/``dim`` and the other ColBERTFTConfig fields).
    """
    raw = study.adapt
    check = SectionChecker(study.source, "adapt")
    check.unknown(raw, _ADAPT_KEYS)
    if "corpus" not in raw:
        raise ConfigError(
            f"{check.where('corpus')}: required; expected \"synthetic:n_documents=120,seed=0\", a dataset "
            "spec FORMAT:PATH or a folder of .txt/.md/.jsonl/.pdf documents"
        )
    corpus = check.string("corpus", raw["corpus"]).strip()
    if not corpus:
        raise check.fail("corpus", "a non-empty corpus reference", raw["corpus"])
    base_ref, label, base_section = _base_model(study, raw, check)
    kw: dict[str, Any] = {"corpus": corpus, "base_model": base_ref, "label": label, "base_section": base_section}
    kw.update(_adapt_data(raw, check, corpus))
    kw.update(_adapt_variants(raw, check))
    kw.update(_adapt_mining(study, raw, check))
    kw.update(_adapt_training(study, raw, check, kw["n_negatives"]))
    if "llm" in raw:
        kw["llm"] = _parse_llm(check.table("llm", raw["llm"]), study.source)
    if kw["questions"] == "llm" and kw.get("llm") is None:
        raise ConfigError(f"{study.source}: [adapt.llm]: required when questions = \"llm\" (base_url, model, ...)")
    kw.update(_adapt_roots(study, raw, check, study.store_root(store)))
    if "colbert" in raw or any(is_colbert(v) for v in kw["variants"]):
        kw["colbert"] = _parse_colbert(study, check.table("colbert", raw.get("colbert", {})), base_ref, label,
                                       kw["seed"])
    return AdaptSettings(**kw)


def _parse_colbert(study: Study, raw: Mapping[str, Any], base_ref: str, label: str, seed: int) -> ColBERTSettings:
    """``[adapt.colbert]`` -> :class:`ColBERTSettings` (module docstring of adaptlab.models.colbert
    for what a base model may be)."""
    check = SectionChecker(study.source, "adapt.colbert")
    config_keys = [f.name for f in fields(ColBERTFTConfig)]
    check.unknown(raw, ["base_model", "name", "batch_size_eval", *config_keys])
    given = check.string("base_model", raw["base_model"]) if "base_model" in raw else base_ref
    ref = study.resolve_model_ref(given)
    name = check_name(check.string("name", raw.get("name", COLBERT_LABEL)), check.where("name"))
    if not name or any(c in name for c in "/\\ ") or name == label:
        raise check.fail("name", f"a system-name prefix without spaces or slashes, other than {label!r}", name)
    table = {k: v for k, v in raw.items() if k in config_keys and not (k == "max_steps" and v == 0)}
    ft = _config_from_table(ColBERTFTConfig, table, study.source, "adapt.colbert")  # max_steps 0 = no limit
    batch = check.integer("batch_size_eval", raw.get("batch_size_eval", 32), 1)
    section = ModelSection(ref=ref, name=system_name(name, BASE), backend=COLBERT_BACKEND, batch_size=batch,
                           embedding_backend=DEFAULT_BACKEND, precision=EXACT_PRECISION,  # ColBERT: torch fp32
                           options={"from_bert": True, "doc_maxlen": ft.doc_maxlen, "query_maxlen": ft.query_maxlen,
                                    "dim": ft.dim, "seed": seed})  # the projection FT starts from
    return ColBERTSettings(base_model=ref, label=name, section=section, ft=ft)


def _adapt_data(raw: Mapping[str, Any], check: SectionChecker, corpus: str) -> dict[str, Any]:
    """Scales, fractions, chunking, file filters and the question generator of ``[adapt]``."""
    scales = raw.get("scales", [10, 100, 700])
    if not isinstance(scales, list) or not scales or not all(
        (isinstance(s, int) and not isinstance(s, bool) and s >= 1) or s == "all" for s in scales
    ):
        raise check.fail("scales", 'a list of integers >= 1 (the last may be "all")', scales)
    ints = [s for s in scales if s != "all"]
    if ints != sorted(set(ints)) or ("all" in scales and scales.index("all") != len(scales) - 1):
        raise check.fail("scales", 'strictly increasing document counts ("all" only last)', scales)
    kw: dict[str, Any] = {"scales": tuple(scales)}
    kw["fraction"] = check.number("fraction", raw.get("fraction", 0.3), 0.0, 1.0, lo_open=True)
    kw["test_fraction"] = check.number("test_fraction", raw.get("test_fraction", 0.1), 0.0, 1.0, lo_open=True)
    if kw["test_fraction"] >= 1.0:
        raise check.fail("test_fraction", "a number in (0, 1)", raw["test_fraction"])
    kw["validation_fraction"] = check.number("validation_fraction", raw.get("validation_fraction", 0.1), 0.0, 0.9)
    kw["max_tokens"] = check.integer("max_tokens", raw.get("max_tokens", 256), 8)
    kw["include"] = check.strings("include", raw.get("include", []))
    kw["exclude"] = check.strings("exclude", raw.get("exclude", []))
    kw["clean"] = check.boolean("clean", raw.get("clean", True))
    synthetic = corpus.lower().startswith("synthetic:") or corpus.lower() == "synthetic"
    kw["questions"] = check.string(
        "questions", raw.get("questions", "template" if synthetic else "inverse-cloze"), QUESTION_GENERATORS
    )
    if kw["questions"] == "template" and not synthetic:
        raise check.fail("questions", '"inverse-cloze" or "llm" ("template" needs a synthetic: corpus)',
                         kw["questions"])
    kw["questions_per_chunk"] = check.integer("questions_per_chunk", raw.get("questions_per_chunk", 1), 1)
    return kw


def _adapt_variants(raw: Mapping[str, Any], check: SectionChecker) -> dict[str, Any]:
    """``variants`` (in report order), ``merge_weight`` and ``merge_source``."""
    variants = raw.get("variants", list(ALL_VARIANTS))
    known = (*ALL_VARIANTS, *COLBERT_VARIANTS)
    if not isinstance(variants, list) or not variants or not all(v in known for v in variants):
        raise check.fail("variants", "a non-empty list of " + ", ".join(repr(v) for v in known), variants)
    if len(set(variants)) != len(variants):
        raise check.fail("variants", "a list without repeats", variants)
    return {
        "variants": tuple(v for v in known if v in variants),
        "merge_weight": check.number("merge_weight", raw.get("merge_weight", 0.5), 0.0, 1.0),
        "merge_source": check.string("merge_source", raw.get("merge_source", FT), MERGE_SOURCES),
    }


def _adapt_mining(study: Study, raw: Mapping[str, Any], check: SectionChecker) -> dict[str, Any]:
    """Hard-negative mining, the held-out evaluation set and the seed (``[adapt].seed``, else the
    root seed: :mod:`adaptlab.study.seeds`)."""
    kw: dict[str, Any] = {"n_negatives": check.integer("n_negatives", raw.get("n_negatives", 10), 1)}
    kw["duplicate_threshold"] = check.optional_number("duplicate_threshold", raw.get("duplicate_threshold", 0.95),
                                                      -1.0, 1.0)
    kw["margin"] = check.optional_number("margin", raw.get("margin", 0.05), 0.0)
    kw["eval_corpus"] = check.string("eval_corpus", raw.get("eval_corpus", "documents"), ("all", "documents"))
    kw["unit"] = check.string("unit", raw.get("unit", "documents"), ("documents", "pages", "chunks"))
    kw["heldout_name"] = check_name(check.string("heldout_name", raw.get("heldout_name", "heldout")),
                                    check.where("heldout_name"))
    if any(d.name == kw["heldout_name"] for d in study.datasets):
        raise check.fail("heldout_name", "a name no [[datasets]] entry uses", kw["heldout_name"])
    explicit = check.integer("seed", raw["seed"], 0) if "seed" in raw else None
    kw["seed"] = stage_seed(study.study.seed, "adapt", explicit)
    return kw


_SHARED_TRAINING_KEYS = ("fused_attention", "gradient_checkpointing", "length_buckets", "precision")
"""Loop settings PT and FT share: set in [adapt] for both, or in [adapt.pt] / [adapt.ft] alone."""


def _training_table(raw: Mapping[str, Any], check: SectionChecker, name: str) -> dict[str, Any]:
    """``[adapt.<name>]`` plus the :data:`_SHARED_TRAINING_KEYS` of ``[adapt]`` (set in one place:
    [adapt], or [adapt.pt] / [adapt.ft], not both)."""
    table = dict(check.table(name, raw.get(name, {})))
    for key in _SHARED_TRAINING_KEYS:
        if key not in raw:
            continue
        if key in table:
            raise check.fail(key, f"it in [adapt] or in [adapt.{name}], not in both", raw[key])
        table[key] = _shared_training_value(check, key, raw[key])
    return table


def _shared_training_value(check: SectionChecker, key: str, value: Any) -> Any:
    """A :data:`_SHARED_TRAINING_KEYS` value checked: ``precision`` a string, ``gradient_checkpointing``
    ``"auto"``, true or false, the others true or false."""
    if key == "precision":
        return check.string(key, value)
    if key == "gradient_checkpointing":
        return _auto_boolean(check, key, value)
    return check.boolean(key, value)


def _auto_boolean(check: SectionChecker, key: str, value: Any) -> bool | str:
    """``"auto"``, true or false (``gradient_checkpointing``), else a one-line error naming the key."""
    if isinstance(value, bool) or (isinstance(value, str) and value == AUTO):
        return value
    raise check.fail(key, f'"{AUTO}", true or false', value)


def _adapt_training(study: Study, raw: Mapping[str, Any], check: SectionChecker, n_negatives: int) -> dict[str, Any]:
    """Where and how the variants train (Ray resources, checkpoints) and ``[adapt.pt]``/``[adapt.ft]``."""
    source = study.source
    kw: dict[str, Any] = {"use_ray": check.boolean("use_ray", raw.get("use_ray", study.embedding.use_ray))}
    kw["gpus_per_job"] = check.auto_number("gpus_per_job", raw.get("gpus_per_job", "auto"))
    kw["cpus_per_job"] = check.number("cpus_per_job", raw.get("cpus_per_job", 1), 0.0, lo_open=True)
    kw["lone_stage_all_cpus"] = check.boolean("lone_stage_all_cpus", raw.get("lone_stage_all_cpus", True))
    kw["max_retries"] = check.integer("max_retries", raw.get("max_retries", 3), 0)
    kw["checkpoint_every"] = check.integer("checkpoint_every", raw.get("checkpoint_every", 50), 1)
    kw["pt"] = _config_from_table(PTConfig, _training_table(raw, check, "pt"), source, "adapt.pt")
    kw["ft"] = _config_from_table(FTConfig, _training_table(raw, check, "ft"), source, "adapt.ft")
    if kw["ft"].num_negatives > n_negatives:
        raise ConfigError(
            f"{source}: [adapt.ft].num_negatives = {kw['ft'].num_negatives} is more than the "
            f"{n_negatives} mined ([adapt].n_negatives); raise n_negatives or lower num_negatives"
        )
    return kw


def _adapt_roots(study: Study, raw: Mapping[str, Any], check: SectionChecker, root: Path | str | None) -> dict[str, Any]:
    """``artifact_root`` and ``data_dir``: given (relative to the project root), else under the store.

    ``artifact_root`` may be a URI (``s3://...``). With a store on a URI the artifacts default to
    ``<store>/artifacts`` there, and ``data_dir`` (prepared on the driver, read locally) to the
    node-local ``$ADAPTLAB_CACHE/adaptation`` (default ``~/.cache/adaptlab/adaptation``)."""
    kw: dict[str, Any] = {}
    for key, sub in (("artifact_root", "artifacts"), ("data_dir", "adaptation")):
        given = raw.get(key)
        if given is not None:
            text = check.string(key, given)
            if is_store_uri(text):
                if key == "data_dir":
                    raise check.fail(key, "a local directory (the adaptation data are prepared and read locally)",
                                     text)
                kw[key] = text.rstrip("/")
            else:
                kw[key] = study.resolve_path(text).resolve()
        elif root is not None and is_store_uri(root):
            kw[key] = str(root).rstrip("/") + "/" + sub if key == "artifact_root" else artifact_cache_dir().parent / sub
        elif root is not None:
            kw[key] = (Path(root) / sub).resolve()
        else:
            raise ConfigError(f"{check.where(key)}: required when the study has no results store")
    return kw


def _parse_llm(raw: Mapping[str, Any], source: str) -> LLMSettings:
    check = SectionChecker(source, "adapt.llm")
    check.unknown(raw, [f.name for f in fields(LLMSettings)])
    for key in ("base_url", "model"):
        if key not in raw:
            raise ConfigError(f"{check.where(key)}: required, expected a string")
    kw: dict[str, Any] = {}
    for f in fields(LLMSettings):
        if f.name not in raw:
            continue
        value = raw[f.name]
        if f.name in ("temperature", "timeout"):
            kw[f.name] = check.number(f.name, value, 0.0)
        elif f.name in ("max_tokens", "max_retries"):
            kw[f.name] = check.integer(f.name, value, 0)
        elif f.name == "workers":
            kw[f.name] = check.integer(f.name, value, 1)
        else:
            kw[f.name] = check.string(f.name, value)
    if kw.get("prompt") and "{chunk}" not in kw["prompt"]:
        raise check.fail("prompt", "a template containing {chunk}", kw["prompt"])
    return LLMSettings(**kw)


def parse_tune_section(study: Study, adapt: AdaptSettings, *, store: str | Path | None = None) -> TuneSettings:
    """Validate ``study.tune`` (the raw ``[tune]`` table) into :class:`TuneSettings`.

    The sweep's keys are the fields of :class:`~adaptlab.adapt.train.sweep_config.SweepConfig`
    (defaults and bounds there, one place): ``param_space`` (the language of
    :mod:`adaptlab.adapt.train.space`), ``variant``, ``measure``, ``num_samples``, ``search``,
    ``confirm_fraction``, ``grace_period``, ``reduction_factor``, ``max_epochs`` [0 = from the
    space], ``cpus_per_trial``, ``gpus_per_trial`` ["auto"], ``max_concurrent_trials`` [0 = no
    limit], ``resume``; the objective's bootstrap ``n_resamples``, ``sample_size`` [0 = all
    queries] and ``ci_seed`` [derived from ``[study].seed``, stage "tune":
    :mod:`adaptlab.study.seeds`]. The study's own: ``scale`` (one of ``[adapt].scales``; default
    the largest), ``name`` [derived], ``storage_path`` [<store>/tune], ``apply_best`` [false:
    when true the best trial's hyperparameters replace [adapt.ft] (and merge_weight) for the
    trained variants]. See docs/adaptation.md.
    """
    raw = study.tune
    check = SectionChecker(study.source, "tune")
    check.unknown(raw, TUNE_KEYS)
    if adapt.validation_fraction == 0:
        raise ConfigError(f"{study.source}: [tune] needs validation questions; set [adapt].validation_fraction > 0")
    kw: dict[str, Any] = {"sweep": _sweep_config(study, raw, check)}
    if "scale" in raw:
        scale = raw["scale"]
        if scale not in adapt.scales or isinstance(scale, bool):
            raise check.fail("scale", "one of [adapt].scales " + str(list(adapt.scales)), scale)
        kw["scale"] = scale
    if "name" in raw:
        kw["name"] = check.string("name", raw["name"])
        if kw["name"]:
            check_name(kw["name"], check.where("name"))
    if "apply_best" in raw:
        kw["apply_best"] = check.boolean("apply_best", raw["apply_best"])
    if "storage_path" in raw:
        text = check.string("storage_path", raw["storage_path"])
        kw["storage_path"] = text.rstrip("/") if is_store_uri(text) else study.resolve_path(text).resolve()
    else:
        root = study.store_root(store)
        if root is None:
            raise ConfigError(f"{check.where('storage_path')}: required when the study has no results store")
        kw["storage_path"] = str(root).rstrip("/") + "/tune" if is_store_uri(root) else (Path(root) / "tune").resolve()
    return TuneSettings(**kw)


def _sweep_config(study: Study, raw: Mapping[str, Any], check: SectionChecker) -> SweepConfig:
    """The :class:`SweepConfig` of ``[tune]``: TOML types checked here, each value by the config
    (its errors name the field); keys not given keep the config's defaults."""
    kw: dict[str, Any] = {}
    if "param_space" in raw:
        space = check.table("param_space", raw["param_space"])
        problem = space_problem(space)
        if problem is not None:
            path, message = problem
            raise ConfigError(f"{check.where('param_space' + ('.' + path if path else ''))}: {message}")
        kw["param_space"] = dict(space)
    checks = {"variant": check.string, "measure": check.string, "search": check.string, "resume": check.boolean,
              "num_samples": check.integer, "grace_period": check.integer, "reduction_factor": check.integer,
              "cpus_per_trial": check.number, "confirm_fraction": check.number, "gpus_per_trial": check.auto_number}
    kw.update({key: take(key, raw[key]) for key, take in checks.items() if key in raw})
    for key in ("max_epochs", "max_concurrent_trials"):  # 0 = none
        if key in raw:
            kw[key] = check.integer(key, raw[key], 0) or None
    boot = {field_name: check.integer(key, raw[key]) for key, field_name in _BOOTSTRAP_KEYS.items()
            if key in raw and key != "ci_seed"}
    explicit_seed = check.integer("ci_seed", raw["ci_seed"], 0) if "ci_seed" in raw else None
    try:
        kw["bootstrap"] = BootstrapConfig(**boot, seed=stage_seed(study.study.seed, "tune", explicit_seed))
        return SweepConfig(**kw)
    except ConfigError as e:
        raise ConfigError(f"{check.where()}: {e}") from e


def check_adapt_sections(study: Study) -> None:
    """Validate ``[adapt]`` and ``[tune]`` whole, as :func:`adaptlab.study.load.load_study` does:
    every key and value, without touching the disk or importing Ray. The results-store roots are
    checked when the study runs (a command-line ``--store`` may supply them)."""
    if not study.adapt:
        if study.tune:
            raise ConfigError(f"{study.source}: [tune]: needs an [adapt] section (it sweeps the adaptation)")
        return
    placeholder = study.store_root() or Path("<store>")
    settings = parse_adapt_section(study, store=placeholder)
    if study.tune:
        parse_tune_section(study, settings, store=placeholder)
