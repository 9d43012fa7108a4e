"""Settings of a scale study: the ``[adapt]`` and ``[tune]`` sections of a study file, typed.

:class:`AdaptSettings` and :class:`TuneSettings` are the sections as a :class:`~adaptlab.study.schema.Study`
carries them (``study.adapt``, ``study.tune``): read once, when the study is loaded, by the
schema's one declarative style (each field a :func:`~adaptlab.study.schema.setting` with its
default, choices or range and a help text; :func:`~adaptlab.study.schema.read_fields` checks a
table against them, and an unknown key or a wrong value is a :class:`~adaptlab.errors.ConfigError`
naming the file, the section and the key, e.g. ``scale_study.toml: [adapt].scales: expected a list
of integers >= 1 (the last may be "all"), got [10, 'x']``). What depends on the rest of the study
is settled there too (the base model is the study's first ``[[models]]`` entry, seeds follow
:mod:`adaptlab.study.seeds`, relative paths resolve against the project root), except the
folders that default to the results store (``artifact_root``, ``data_dir``, ``storage_path``),
which a command-line ``--store`` may still choose: :meth:`AdaptSettings.under_store` and
:meth:`TuneSettings.under_store` fill them in when the study runs. The keys, their defaults and
help texts are listed by :func:`adaptlab.study.keys.sections`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, get_type_hints

from adaptlab.adapt.prep.prepare import PrepSettings
from adaptlab.adapt.train.artifacts import artifact_cache_dir
from adaptlab.adapt.train.colbert import ColBERTFTConfig
from adaptlab.adapt.train.ft import FTConfig
from adaptlab.adapt.train.pt import PTConfig
from adaptlab.adapt.train.space import space_problem
from adaptlab.adapt.train.sweep_config import SweepConfig
from adaptlab.errors import ConfigError
from adaptlab.models.inference import AUTO, DEFAULT_BACKEND, EXACT_PRECISION, Inference, precision_name, require_backend
from adaptlab.models.variants import (
    BASE,
    BI_ENCODER_VARIANTS,
    BM25_REF,
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
from adaptlab.study.schema import (
    ModelSection,
    SectionChecker,
    Study,
    default_name,
    is_store_uri,
    read_fields,
    read_value,
    setting,
    toml_key,
)
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
    "adapt_under_store",
    "check_adapt_sections",
    "parse_adapt_section",
    "parse_tune_section",
    "read_adapt_sections",
    "tune_under_store",
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

    base_url: str = setting(help="the endpoint's base URL (http://127.0.0.1:8000/v1); required")
    model: str = setting(help="the chat model's name at the endpoint; required")
    api_key_env: str = setting("OPENAI_API_KEY", help="the environment variable holding the API key")
    prompt: str = setting("", help='the question prompt, a template containing {chunk} ("": the built-in one)')
    system: str = setting("", help='the system message ("": the built-in one)')
    temperature: float = setting(0.0, lo=0.0, help="sampling temperature")
    max_tokens: int = setting(0, minimum=0, help="the answer's token limit (0: the endpoint's)")
    timeout: float = setting(120.0, lo=0.0, help="seconds per request")
    max_retries: int = setting(5, minimum=0, help="retries of a failed request")
    workers: int = setting(1, minimum=1, help="requests at once")
    cache: str = setting("", help='the answers\' SQLite cache ("": <data_dir>/llm_cache.sqlite)')

    @classmethod
    def read(cls, raw: Mapping[str, Any], source: str) -> LLMSettings:
        """``[adapt.llm]`` checked against the declared fields; ``base_url`` and ``model`` required."""
        check = SectionChecker(source, "adapt.llm")
        check.unknown(raw, [toml_key(f) for f in fields(cls)])
        for key in ("base_url", "model"):
            if key not in raw:
                raise ConfigError(f"{check.where(key)}: required, expected a string")
        settings = cls(**read_fields(cls, raw, check))
        if settings.prompt and "{chunk}" not in settings.prompt:
            raise check.fail("prompt", "a template containing {chunk}", settings.prompt)
        return settings


@dataclass(frozen=True)
class ColBERTSettings:
    """``[adapt.colbert]``: the ColBERT variants' base model, system-name prefix and fine-tuning
    (:class:`~adaptlab.adapt.train.colbert.ColBERTFTConfig` fields, in the same table)."""

    base_model: str = setting(
        "",
        default_text="[adapt]'s base model (its BERT becomes an untrained ColBERT)",
        help="a ColBERT checkpoint or artifact, or a plain BERT",
    )
    label: str = setting(COLBERT_LABEL, key="name", help="the ColBERT systems' name prefix")
    batch_size_eval: int = setting(32, minimum=1, help="texts per encoder call when evaluating")
    section: ModelSection = setting(factory=ModelSection, custom=True, help="how it is embedded (derived)")
    ft: ColBERTFTConfig = setting(factory=ColBERTFTConfig, custom=True, help="its fine-tuning (derived)")

    @classmethod
    def read(cls, study: Study, raw: Mapping[str, Any], base_ref: str, label: str, seed: int) -> ColBERTSettings:
        """``[adapt.colbert]`` (module docstring of adaptlab.models.colbert for what a base model may be)."""
        check = SectionChecker(study.source, "adapt.colbert")
        config_keys = [f.name for f in fields(ColBERTFTConfig)]
        check.unknown(raw, [*(toml_key(f) for f in fields(cls) if not f.metadata.get("custom")), *config_keys])
        kw = read_fields(cls, raw, check)
        ref = study.resolve_model_ref(kw.get("base_model") or base_ref)
        name = check_name(kw.get("label", COLBERT_LABEL), check.where("name"))
        if not name or any(c in name for c in "/\\ ") or name == label:
            raise check.fail("name", f"a system-name prefix without spaces or slashes, other than {label!r}", name)
        table = {k: v for k, v in raw.items() if k in config_keys and not (k == "max_steps" and v == 0)}
        ft = _config_from_table(ColBERTFTConfig, table, study.source, "adapt.colbert")  # max_steps 0 = no limit
        batch = kw.get("batch_size_eval", cls.batch_size_eval)
        section = ModelSection(
            ref=ref,
            name=system_name(name, BASE),
            backend=COLBERT_BACKEND,
            batch_size=batch,
            embedding_backend=DEFAULT_BACKEND,
            precision=EXACT_PRECISION,  # ColBERT: torch fp32
            options={
                "from_bert": True,
                "doc_maxlen": ft.doc_maxlen,
                "query_maxlen": ft.query_maxlen,
                "dim": ft.dim,
                "seed": seed,
            },
        )  # the projection FT starts from
        return cls(base_model=ref, label=name, batch_size_eval=batch, section=section, ft=ft)


MINING_PRECISIONS: tuple[str, ...] = (EXACT_PRECISION, "int8")
"""Values of ``[adapt].mining_precision``."""

_PREP = PrepSettings()
"""The adaptation data's defaults (declared on :class:`PrepSettings`; ``[adapt]`` takes them)."""


def _is_synthetic(corpus: str) -> bool:
    return corpus.lower().startswith("synthetic:") or corpus.lower() == "synthetic"


@dataclass(frozen=True)
class AdaptSettings:
    """The ``[adapt]`` section, typed: every key a field with its default, range or choices and a
    help text (:func:`~adaptlab.study.schema.setting`); the base model and paths resolved."""

    corpus: str = setting(
        help='the corpus to adapt on: "synthetic:n_documents=120,seed=0", a dataset spec '
        "FORMAT:PATH whose corpus is used, or a folder of .txt/.md/.jsonl/.pdf files; required",
        custom=True,
    )
    base_model: str = setting(
        "",
        default_text="the first [[models]] entry",
        custom=True,
        help="the model to adapt: a [[models]] name or ref, an alias or a model folder",
    )
    label: str = setting(
        "",
        key="name",
        default_text="the base model's [[models]] name",
        custom=True,
        help="the adapted systems' name prefix",
    )
    base_section: ModelSection = setting(
        factory=ModelSection, custom=True, help="how the base model is embedded (derived)"
    )
    scales: tuple[int | str, ...] = setting(
        _PREP.sizes, custom=True, help='strictly increasing training-scale sizes ("all" only last)'
    )
    fraction: float = setting(_PREP.fraction, lo=0.0, hi=1.0, lo_open=True, help="share of each unit's chunks sampled")
    test_fraction: float = setting(
        _PREP.test_fraction,
        lo=0.0,
        hi=1.0,
        lo_open=True,
        hi_open=True,
        help="share of the units held out for the evaluation",
    )
    validation_fraction: float = setting(
        _PREP.validation_fraction, lo=0.0, hi=0.9, help="share of each scale's units kept for validation questions"
    )
    max_tokens: int = setting(_PREP.max_tokens, minimum=8, help="tokens per chunk (whole sentences)")
    include: tuple[str, ...] = setting((), help="filename globs of the corpus folder to read")
    exclude: tuple[str, ...] = setting((), help="filename globs of the corpus folder to skip")
    clean: bool = setting(True, help="normalise the documents' text (whitespace, hyphenation)")
    variants: tuple[str, ...] = setting(
        ALL_VARIANTS,
        custom=True,
        choices=(*ALL_VARIANTS, *COLBERT_VARIANTS),
        help="the variants to build and evaluate, in any order",
    )
    merge_weight: float = setting(0.5, lo=0.0, hi=1.0, help="the merged model's weight of the adapted model")
    merge_source: str = setting(FT, choices=MERGE_SOURCES, help="the variant the merged model mixes in")
    questions: str = setting(
        "",
        choices=QUESTION_GENERATORS,
        default_text='"template" for a synthetic corpus, else "inverse-cloze"',
        help="how training and held-out questions are made",
    )
    questions_per_chunk: int = setting(1, minimum=1, help="questions made per sampled chunk")
    n_negatives: int = setting(_PREP.n_negatives, minimum=1, help="hard negatives mined per question")
    duplicate_threshold: float | None = setting(
        _PREP.duplicate_threshold,
        lo=-1.0,
        hi=1.0,
        off=False,
        help="drop negatives this similar to the positive (false: keep all)",
    )
    margin: float | None = setting(
        _PREP.margin, lo=0.0, off=False, help="drop negatives within this margin of the positive's score (false: keep)"
    )
    mining_precision: str = setting(
        EXACT_PRECISION,
        choices=MINING_PRECISIONS,
        help='the hard-negative miner\'s encoder: "fp32" (exact), or "int8" (the same model '
        "quantized, on the fastest installed int8 backend: faster, other negatives; "
        "training and evaluation stay fp32)",
    )
    eval_corpus: str = setting(
        _PREP.eval_corpus,
        choices=("all", "documents"),
        help="the held-out set's corpus: its documents' chunks, or all chunks",
    )
    unit: str = setting(
        _PREP.unit,
        choices=("documents", "pages", "chunks"),
        help="what scales and splits count: documents, PDF pages or chunks",
    )
    heldout_name: str = setting("heldout", help="the held-out dataset's name (no [[datasets]] entry's)")
    seed: int = setting(0, minimum=0, default_text="[study].seed", help="the adaptation's seed (data and training)")
    artifact_root: Path | str | None = setting(
        None, default_text="<store>/artifacts", custom=True, help="where trained models are kept: a folder or a URI"
    )
    data_dir: Path | None = setting(
        None, default_text="<store>/adaptation", custom=True, help="where the adaptation data are kept: a local folder"
    )
    use_ray: bool = setting(True, default_text="[embedding].use_ray", help="train as Ray tasks (false: in-process)")
    gpus_per_job: float | None = setting(
        None, lo=0.0, off="auto", help='GPUs per training job ("auto": 1 when the cluster has GPUs)'
    )
    cpus_per_job: float = setting(1.0, lo=0.0, lo_open=True, help="CPUs per training job")
    lone_stage_all_cpus: bool = setting(True, help="a CPU stage that runs alone takes a whole node's CPUs")
    max_retries: int = setting(3, minimum=0, help="retries of a failed training job")
    checkpoint_every: int = setting(50, minimum=1, help="training steps between checkpoints")
    pt: PTConfig = setting(factory=PTConfig, custom=True, help="[adapt.pt]: pre-training (PTConfig fields)")
    ft: FTConfig = setting(
        factory=FTConfig, custom=True, help="[adapt.ft]: fine-tuning (FTConfig fields; max_steps = 0: no limit)"
    )
    llm: LLMSettings | None = setting(None, custom=True, help='[adapt.llm]: the endpoint of questions = "llm"')
    colbert: ColBERTSettings | None = setting(None, custom=True, help="[adapt.colbert]: the ColBERT variants")

    def __post_init__(self) -> None:
        if not self.questions:  # the default depends on the corpus
            object.__setattr__(self, "questions", "template" if _is_synthetic(self.corpus) else "inverse-cloze")

    @classmethod
    def read(cls, study: Study, raw: Mapping[str, Any]) -> AdaptSettings:
        """``[adapt]`` as written, checked whole (see the module docstring)."""
        check = SectionChecker(study.source, "adapt")
        check.unknown(raw, ADAPT_KEYS)
        if "corpus" not in raw:
            raise ConfigError(
                f'{check.where("corpus")}: required; expected "synthetic:n_documents=120,seed=0", a dataset '
                "spec FORMAT:PATH or a folder of .txt/.md/.jsonl/.pdf documents"
            )
        corpus = check.string("corpus", raw["corpus"]).strip()
        if not corpus:
            raise check.fail("corpus", "a non-empty corpus reference", raw["corpus"])
        base_ref, label, base_section = _base_model(study, raw, check)
        kw: dict[str, Any] = {
            "corpus": corpus,
            "base_model": base_ref,
            "label": label,
            "base_section": base_section,
            "use_ray": study.embedding.use_ray,
            **read_fields(cls, raw, check),
        }
        if kw.get("questions") == "template" and not _is_synthetic(corpus):
            raise check.fail(
                "questions", '"inverse-cloze" or "llm" ("template" needs a synthetic: corpus)', kw["questions"]
            )
        if "scales" in raw:
            kw["scales"] = _scales(raw["scales"], check)
        if "variants" in raw:
            kw["variants"] = _variants(raw["variants"], check)
        kw["heldout_name"] = _heldout_name(study, kw.get("heldout_name", cls.heldout_name), check)
        kw["seed"] = stage_seed(study.study.seed, "adapt", kw.get("seed"))
        kw.update(_training(raw, check, kw.get("n_negatives", cls.n_negatives)))
        if "llm" in raw:
            kw["llm"] = LLMSettings.read(check.table("llm", raw["llm"]), study.source)
        if kw.get("questions") == "llm" and kw.get("llm") is None:
            raise ConfigError(f'{study.source}: [adapt.llm]: required when questions = "llm" (base_url, model, ...)')
        kw.update(_given_roots(study, raw, check))
        _check_mining(kw.get("mining_precision", EXACT_PRECISION), check)
        variants = kw.get("variants", cls.variants)
        if "colbert" in raw or any(is_colbert(v) for v in variants):
            kw["colbert"] = ColBERTSettings.read(
                study, check.table("colbert", raw.get("colbert", {})), base_ref, label, kw["seed"]
            )
        return cls(**kw)

    def prep(self) -> PrepSettings:
        """The settings of the adaptation data (:func:`~adaptlab.adapt.prep.prepare.prepare_adaptation_data`)."""
        return PrepSettings(
            sizes=self.scales,
            fraction=self.fraction,
            seed=self.seed,
            test_fraction=self.test_fraction,
            validation_fraction=self.validation_fraction,
            max_tokens=self.max_tokens,
            n_negatives=self.n_negatives,
            duplicate_threshold=self.duplicate_threshold,
            margin=self.margin,
            eval_corpus=self.eval_corpus,  # type: ignore[arg-type]
            unit=self.unit,  # type: ignore[arg-type]
        )

    def under_store(self, root: Path | str | None, source: str = "") -> AdaptSettings:
        """These settings with ``artifact_root`` and ``data_dir`` not given in the file placed under
        the results store ``root`` (with a store on a URI: the artifacts there, the data in the
        node-local ``$ADAPTLAB_CACHE/adaptation``); no store and no folder given is an error."""
        kw: dict[str, Any] = {}
        for key, sub in (("artifact_root", "artifacts"), ("data_dir", "adaptation")):
            if getattr(self, key) is not None:
                continue
            if root is not None and is_store_uri(root):
                kw[key] = (
                    str(root).rstrip("/") + "/" + sub if key == "artifact_root" else artifact_cache_dir().parent / sub
                )
            elif root is not None:
                kw[key] = (Path(root) / sub).resolve()
            else:
                raise ConfigError(
                    f"{source + ': ' if source else ''}[adapt].{key}: required when the study has no results store"
                )
        return replace(self, **kw) if kw else self

    def data_key(self) -> str:
        """16 hex digits of SHA-256 over everything that decides the adaptation data."""
        keys = (
            "corpus",
            "base_model",
            "scales",
            "fraction",
            "test_fraction",
            "validation_fraction",
            "max_tokens",
            "include",
            "exclude",
            "clean",
            "questions",
            "questions_per_chunk",
            "n_negatives",
            "duplicate_threshold",
            "margin",
            "eval_corpus",
            "seed",
        )
        data = {k: getattr(self, k) for k in keys}
        if self.unit != "documents":  # keys of studies written before units existed stay the same
            data["unit"] = self.unit
        if self.mining_precision != EXACT_PRECISION:  # and of studies that mine at fp32
            mining = self.mining_inference()
            data["mining"] = f"{mining.backend} {mining.precision}"
        if self.llm is not None:
            data["llm"] = {k: v for k, v in asdict(self.llm).items() if k not in ("workers", "cache", "timeout")}
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def mining_inference(self) -> Inference:
        """The encoder of the hard-negative mining: torch fp32 (the exact path), or with
        ``mining_precision = "int8"`` the fastest installed int8 backend
        (:func:`~adaptlab.models.inference.resolve_backend`: OpenVINO's static int8, else ONNX
        Runtime's dynamic int8). Only the choice of negatives depends on it: questions, positives,
        training and every evaluation are computed as without it."""
        if self.mining_precision == EXACT_PRECISION:
            return Inference()
        return Inference(AUTO, self.mining_precision)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (for the runs table's ``config``; ``mining_precision`` only when it is not
        fp32, so the configuration of a study mining at fp32 is what it was before the key existed)."""
        skip = {"pt", "ft", "llm", "base_section", "colbert"}
        if self.mining_precision == EXACT_PRECISION:
            skip.add("mining_precision")
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip}
        out["colbert"] = None if self.colbert is None else _colbert_dict(self.colbert)
        out["pt"], out["ft"] = asdict(self.pt), asdict(self.ft)
        out["llm"] = None if self.llm is None else {k: v for k, v in asdict(self.llm).items()}
        out["base_section"] = asdict(self.base_section)
        return json.loads(json.dumps(out, default=str))


def _check_mining(precision: str, check: SectionChecker) -> None:
    """A reduced mining precision needs the fast extra: one line naming the key, before any work."""
    if precision == EXACT_PRECISION:
        return
    try:
        require_backend(Inference(AUTO, precision).backend)
    except ConfigError as e:
        raise type(e)(f"{check.where('mining_precision')}: {e}") from e


def _colbert_dict(colbert: ColBERTSettings) -> dict[str, Any]:
    """``[adapt.colbert]`` for the runs table, as it was recorded before ``batch_size_eval`` was a
    field of its own (it is in ``section.batch_size``)."""
    out = asdict(colbert)
    out.pop("batch_size_eval", None)
    return out


_SHARED_TRAINING_KEYS = ("fused_attention", "gradient_checkpointing", "length_buckets", "precision")
"""Loop settings PT and FT share: set in [adapt] for both, or in [adapt.pt] / [adapt.ft] alone."""

ADAPT_KEYS: tuple[str, ...] = tuple(
    sorted([toml_key(f) for f in fields(AdaptSettings) if f.name != "base_section"] + list(_SHARED_TRAINING_KEYS))
)
"""The keys of ``[adapt]``: :class:`AdaptSettings`' and the training keys PT and FT share."""


@dataclass(frozen=True)
class TuneSettings:
    """The ``[tune]`` section, typed: the sweep's settings (:class:`SweepConfig`, passed whole to
    :func:`adaptlab.adapt.train.tune.tune_adaptation`), and what the study decides around it:
    which scale's data it sweeps (None: the largest), the experiment's name ("": derived from the
    study) and storage path (a str: a URI), and whether the best trial trains the variants."""

    sweep: SweepConfig = setting(factory=SweepConfig, custom=True, help="the sweep (derived)")
    storage_path: Path | str | None = setting(
        None, default_text="<store>/tune", custom=True, help="where Ray Tune keeps the experiment: a folder or a URI"
    )
    scale: int | str | None = setting(
        None,
        default_text="the largest of [adapt].scales",
        custom=True,
        help="the data scale whose validation questions the sweep scores on",
    )
    name: str = setting("", default_text="<study>-<label>-<variant>-s<scale>", help="the experiment's name")
    apply_best: bool = setting(
        False,
        help="train the variants with the best trial's hyperparameters (they replace [adapt.ft] and merge_weight)",
    )

    @classmethod
    def read(cls, study: Study, raw: Mapping[str, Any], adapt: AdaptSettings) -> TuneSettings:
        """``[tune]`` as written, checked whole: its own keys, the sweep's (the fields of
        :class:`SweepConfig`, defaults and bounds there) and the objective's bootstrap."""
        check = SectionChecker(study.source, "tune")
        check.unknown(raw, TUNE_KEYS)
        if adapt.validation_fraction == 0:
            raise ConfigError(f"{study.source}: [tune] needs validation questions; set [adapt].validation_fraction > 0")
        kw: dict[str, Any] = {"sweep": _sweep_config(study, raw, check), **read_fields(cls, raw, check)}
        if "scale" in raw:
            scale = raw["scale"]
            if scale not in adapt.scales or isinstance(scale, bool):
                raise check.fail("scale", "one of [adapt].scales " + str(list(adapt.scales)), scale)
            kw["scale"] = scale
        if kw.get("name"):
            check_name(kw["name"], check.where("name"))
        if "storage_path" in raw:
            text = check.string("storage_path", raw["storage_path"])
            kw["storage_path"] = text.rstrip("/") if is_store_uri(text) else study.resolve_path(text).resolve()
        return cls(**kw)

    def under_store(self, root: Path | str | None, source: str = "") -> TuneSettings:
        """These settings with ``storage_path``, when the file gives none, under the results store."""
        if self.storage_path is not None:
            return self
        if root is None:
            raise ConfigError(
                f"{source + ': ' if source else ''}[tune].storage_path: required when the study has no results store"
            )
        path = str(root).rstrip("/") + "/tune" if is_store_uri(root) else (Path(root) / "tune").resolve()
        return replace(self, storage_path=path)


_BOOTSTRAP_KEYS: dict[str, str] = {"n_resamples": "n_resamples", "sample_size": "sample_size", "ci_seed": "seed"}
"""``[tune]`` keys of the objective's bootstrap -> :class:`~adaptlab.stats.BootstrapConfig` fields."""

_SWEEP_OFF = {"gpus_per_trial": "auto"}
"""[tune] keys whose TOML spelling of None is not 0 (``gpus_per_trial = "auto"``)."""

TUNE_KEYS: tuple[str, ...] = tuple(
    sorted(
        [toml_key(f) for f in fields(TuneSettings) if f.name != "sweep"]
        + [f.name for f in fields(SweepConfig) if f.name != "bootstrap"]
        + list(_BOOTSTRAP_KEYS)
    )
)
"""The keys of ``[tune]``: :class:`TuneSettings`' own, :class:`SweepConfig`'s fields and the bootstrap's."""


def _config_from_table(cls: type, raw: Mapping[str, Any], source: str, section: str) -> Any:
    """A PTConfig / FTConfig / ColBERTFTConfig from a TOML table: known fields only, each value
    read by its type (:func:`~adaptlab.study.schema.read_value`: ``int | None`` takes 0 as None,
    ``bool | str`` takes "auto"); the config's own checks name the field."""
    check = SectionChecker(source, section)
    check.unknown(raw, [f.name for f in fields(cls)])
    kwargs = read_fields(cls, raw, check)
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
        raise check.fail(
            "base_model",
            "a bi-encoder to adapt (BM25 has no weights; list it after the base "
            "model in [[models]] to evaluate it beside the variants)",
            ref,
        )
    label = precision_name(check.string("name", raw.get("name", section.name)), study.inference(section).precision)
    label = check_name(label, check.where("name"))
    if not label or any(c in label for c in "/\\ "):
        raise check.fail("name", "a non-empty system-name prefix without spaces or slashes", label)
    embed_section = ModelSection(**{**asdict(section), "ref": ref, "name": system_name(label, BASE)})
    return ref, label, embed_section


def _scales(scales: Any, check: SectionChecker) -> tuple[int | str, ...]:
    """``[adapt].scales``: strictly increasing counts >= 1, ``"all"`` only last."""
    if (
        not isinstance(scales, list)
        or not scales
        or not all((isinstance(s, int) and not isinstance(s, bool) and s >= 1) or s == "all" for s in scales)
    ):
        raise check.fail("scales", 'a list of integers >= 1 (the last may be "all")', scales)
    ints = [s for s in scales if s != "all"]
    if ints != sorted(set(ints)) or ("all" in scales and scales.index("all") != len(scales) - 1):
        raise check.fail("scales", 'strictly increasing document counts ("all" only last)', scales)
    return tuple(scales)


def _variants(variants: Any, check: SectionChecker) -> tuple[str, ...]:
    """``[adapt].variants`` in report order, without repeats."""
    known = (*ALL_VARIANTS, *COLBERT_VARIANTS)
    if not isinstance(variants, list) or not variants or not all(v in known for v in variants):
        raise check.fail("variants", "a non-empty list of " + ", ".join(repr(v) for v in known), variants)
    if len(set(variants)) != len(variants):
        raise check.fail("variants", "a list without repeats", variants)
    return tuple(v for v in known if v in variants)


def _heldout_name(study: Study, name: str, check: SectionChecker) -> str:
    """The held-out dataset's name: a valid name no ``[[datasets]]`` entry uses."""
    name = check_name(name, check.where("heldout_name"))
    if any(d.name == name for d in study.datasets):
        raise check.fail("heldout_name", "a name no [[datasets]] entry uses", name)
    return name


def _training_table(raw: Mapping[str, Any], check: SectionChecker, name: str) -> dict[str, Any]:
    """``[adapt.<name>]`` plus the :data:`_SHARED_TRAINING_KEYS` of ``[adapt]`` (set in one place:
    [adapt], or [adapt.pt] / [adapt.ft], not both)."""
    table = dict(check.table(name, raw.get(name, {})))
    hints = get_type_hints(PTConfig)
    shared = {f.name: f for f in fields(PTConfig) if f.name in _SHARED_TRAINING_KEYS}
    for key in _SHARED_TRAINING_KEYS:
        if key not in raw:
            continue
        if key in table:
            raise check.fail(key, f"it in [adapt] or in [adapt.{name}], not in both", raw[key])
        table[key] = read_value(check, shared[key], hints[key], raw[key])
    return table


def _training(raw: Mapping[str, Any], check: SectionChecker, n_negatives: int) -> dict[str, Any]:
    """``[adapt.pt]`` and ``[adapt.ft]`` (with the shared training keys of ``[adapt]``)."""
    source = check.source
    kw = {
        "pt": _config_from_table(PTConfig, _training_table(raw, check, "pt"), source, "adapt.pt"),
        "ft": _config_from_table(FTConfig, _training_table(raw, check, "ft"), source, "adapt.ft"),
    }
    if kw["ft"].num_negatives > n_negatives:
        raise ConfigError(
            f"{source}: [adapt.ft].num_negatives = {kw['ft'].num_negatives} is more than the "
            f"{n_negatives} mined ([adapt].n_negatives); raise n_negatives or lower num_negatives"
        )
    return kw


def _given_roots(study: Study, raw: Mapping[str, Any], check: SectionChecker) -> dict[str, Any]:
    """``artifact_root`` and ``data_dir`` when the file gives them: relative to the project root;
    ``artifact_root`` may be a URI (``s3://...``), ``data_dir`` is local (the data are prepared on
    the driver and read locally). Not given: placed under the store by :meth:`AdaptSettings.under_store`."""
    kw: dict[str, Any] = {}
    for key in ("artifact_root", "data_dir"):
        if raw.get(key) is None:
            continue
        text = check.string(key, raw[key])
        if is_store_uri(text):
            if key == "data_dir":
                raise check.fail(key, "a local directory (the adaptation data are prepared and read locally)", text)
            kw[key] = text.rstrip("/")
        else:
            kw[key] = study.resolve_path(text).resolve()
    return kw


def _sweep_config(study: Study, raw: Mapping[str, Any], check: SectionChecker) -> SweepConfig:
    """The :class:`SweepConfig` of ``[tune]``: TOML types checked here by the fields' types, each
    value by the config (its errors name the field); keys not given keep the config's defaults."""
    kw: dict[str, Any] = {}
    if "param_space" in raw:
        space = check.table("param_space", raw["param_space"])
        problem = space_problem(space)
        if problem is not None:
            path, message = problem
            raise ConfigError(f"{check.where('param_space' + ('.' + path if path else ''))}: {message}")
        kw["param_space"] = dict(space)
    hints = get_type_hints(SweepConfig)
    for f in fields(SweepConfig):
        if f.name in raw and f.name not in ("param_space", "bootstrap"):
            off = _SWEEP_OFF.get(f.name)
            kw[f.name] = (
                check.auto_number(f.name, raw[f.name]) if off else read_value(check, f, hints[f.name], raw[f.name])
            )
    boot: dict[str, Any] = {
        field_name: check.integer(key, raw[key])
        for key, field_name in _BOOTSTRAP_KEYS.items()
        if key in raw and key != "ci_seed"
    }
    explicit_seed = check.integer("ci_seed", raw["ci_seed"], 0) if "ci_seed" in raw else None
    try:
        kw["bootstrap"] = BootstrapConfig(**boot, seed=stage_seed(study.study.seed, "tune", explicit_seed))
        return SweepConfig(**kw)
    except ConfigError as e:
        raise ConfigError(f"{check.where()}: {e}") from e


def read_adapt_sections(study: Study) -> None:
    """Read ``[adapt]`` and ``[tune]`` (``study.adapt_table`` / ``tune_table``, the tables as
    written) into ``study.adapt`` and ``study.tune``, once, when the study is loaded: every key and
    value, without touching the disk or importing Ray. The folders under the results store are
    placed when the study runs (:func:`adapt_under_store`): a command-line ``--store`` may choose it."""
    adapt, tune = study.adapt_table, study.tune_table
    study.adapt = study.tune = None
    if not adapt:
        if tune:
            raise ConfigError(f"{study.source}: [tune]: needs an [adapt] section (it sweeps the adaptation)")
        return
    study.adapt = AdaptSettings.read(study, adapt)
    study.tune = TuneSettings.read(study, tune, study.adapt) if tune else None


def adapt_under_store(study: Study, store: str | Path | None = None) -> AdaptSettings:
    """``study.adapt`` with its folders under the results store (``store``, else the study's)."""
    if study.adapt is None:
        raise ConfigError(f"{study.source}: no [adapt] section")
    return study.adapt.under_store(study.store_root(store), study.source)


def tune_under_store(study: Study, store: str | Path | None = None) -> TuneSettings | None:
    """``study.tune`` (or None) with its storage path under the results store."""
    return None if study.tune is None else study.tune.under_store(study.store_root(store), study.source)


def parse_adapt_section(study: Study, *, store: str | Path | None = None) -> AdaptSettings:
    """The study's :class:`AdaptSettings` with its folders under the results store (the name of
    :func:`adapt_under_store` in earlier releases; nothing is parsed again)."""
    return adapt_under_store(study, store)


def parse_tune_section(
    study: Study, adapt: AdaptSettings | None = None, *, store: str | Path | None = None
) -> TuneSettings:
    """The study's :class:`TuneSettings` with its storage path under the results store (the name
    of :func:`tune_under_store` in earlier releases; ``adapt`` is no longer needed). An empty
    ``[tune]`` table, which runs no sweep, gives the defaults."""
    tune = study.tune or TuneSettings.read(study, study.tune_table, adapt or adapt_under_store(study, store))
    return tune.under_store(study.store_root(store), study.source)


def check_adapt_sections(study: Study) -> None:
    """Check that ``[adapt]`` / ``[tune]`` can be placed under the study's store (the sections
    themselves were checked whole when the study was read: :func:`read_adapt_sections`)."""
    if study.adapt is not None and study.store_root() is not None:
        adapt_under_store(study)
        tune_under_store(study)
