"""Study files: a TOML description of datasets, models, measures, bootstrap, store and cluster.

Validated strictly: an unknown key or a wrong type is a :class:`ConfigError` that names the file
and the dotted key (``study.toml: models[1].batch_size: expected an integer, got 'big'``). The
same machinery (:func:`build_section`, :class:`SectionChecker`) checks the ``[adapt]`` and
``[tune]`` sections (:mod:`adaptlab.study.adapt_config`); :mod:`adaptlab.study.load` reads a file
and validates every section before any work starts.

Relative paths in a study file (dataset specs, model directories, ``[adapt]`` paths, the store)
resolve against the project root: the nearest folder above the study file holding
pyproject.toml (:func:`project_root`), so a study means the same files locally and in a Ray job.

Example (jobs/quickstart.toml)::

    [study]
    name = "quickstart"
    store = "results/quickstart"

    [[datasets]]
    name = "synthetic"
    spec = "synthetic:n_documents=40,seed=0"

    [[models]]
    name = "minilm"
    ref = "minilm"

    [evaluation]
    metrics = ["acc@1", "acc@5", "ndcg@10", "mrr@10"]

    [bootstrap]
    n_resamples = 1000
"""

from __future__ import annotations

import copy
import functools
import math
import re
import types
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints

from adaptlab.analysis.thresholds import TESTS as THRESHOLD_TESTS
from adaptlab.embedding.cache import LOCAL_BELOW
from adaptlab.errors import ConfigError, is_uri
from adaptlab.metrics import parse_measures
from adaptlab.models.base import canonical_backend
from adaptlab.models.inference import (
    AUTO,
    BACKEND_SETTINGS,
    DEFAULT_BACKEND,
    EXACT_PRECISION,
    PRECISIONS,
    Inference,
    precision_name,
)
from adaptlab.models.resolve import MODEL_ALIASES
from adaptlab.models.variants import BI_ENCODER_BACKEND, BM25_REF
from adaptlab.stats import BootstrapConfig
from adaptlab.stats.intervals import INTERVALS
from adaptlab.stats.pvalues import ADJUSTMENTS, PAIRED_TESTS
from adaptlab.storage.names import check_name
from adaptlab.study.seeds import stage_seed

__all__ = [
    "AnalysisSection",
    "Overrides",
    "BootstrapSection",
    "DatasetSection",
    "EmbeddingSection",
    "EvaluationSection",
    "ModelSection",
    "SectionChecker",
    "StoreURI",
    "Study",
    "StudySection",
    "build_section",
    "check_sections",
    "read_fields",
    "setting",
    "default_name",
    "is_store_uri",
    "project_root",
]


def is_store_uri(store: str | Path) -> bool:
    """Whether a ``store`` value is a URI (``s3://...``, ``file:///...``) rather than a path."""
    return is_uri(store)


_COLLAPSED_URI_RE = re.compile(r"^(s3|s3a|gs|gcs|az|abfs|abfss|azure|file):/(?!/)")


def _store_location(store: str | Path) -> Path | StoreURI:
    """A command-line store: a URI kept as text, else a path. ``Path("s3://b/p")`` (an option
    parsed with ``type=Path``) collapses to ``s3:/b/p``: that form is read back as the URI."""
    text = str(store)
    if isinstance(store, Path) and _COLLAPSED_URI_RE.match(text):
        scheme, rest = text.split(":/", 1)
        text = f"{scheme}://{'/' if scheme == 'file' else ''}{rest}"
    return StoreURI(text) if is_store_uri(text) else Path(store)


class StoreURI(str):
    """A results store on object storage (``s3://bucket/prefix``), kept as text: ``Path`` would
    turn ``s3://b`` into ``s3:/b``. ``uri / "name"`` joins with ``/`` as a path would."""

    def __truediv__(self, name: str) -> StoreURI:
        return StoreURI(self.rstrip("/") + "/" + str(name).strip("/"))


# a dataclass-field factory: each keyword is one piece of a field's metadata, named at ~110 declarations
def setting(  # noqa: PLR0913
    default: Any = MISSING,
    *,
    help: str,
    factory: Any = None,
    choices: Sequence[Any] | None = None,
    minimum: int | None = None,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
    off: Any = None,
    key: str = "",
    default_text: str = "",
    custom: bool = False,
) -> Any:
    """A dataclass field of a study-file section, declared with what the file may hold: a one-line
    ``help`` text, ``choices``, an integer ``minimum`` or a number range ``lo``..``hi`` (open ends
    with ``lo_open`` / ``hi_open``), ``off`` (the TOML value that means None: ``False`` or
    ``"auto"``), the TOML ``key`` when it differs from the field name, ``default_text`` when the
    default depends on the rest of the study, and ``custom`` for a key its reader checks itself.
    :func:`read_fields` checks a table against these; :func:`adaptlab.study.keys.sections` lists them."""
    meta = {
        "help": help,
        "choices": tuple(choices) if choices is not None else None,
        "minimum": minimum,
        "range": (lo, hi, lo_open, hi_open) if lo is not None or hi is not None else None,
        "off": off,
        "key": key,
        "default_text": default_text,
        "custom": custom,
    }
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def toml_key(f: Any) -> str:
    """The study-file key of a dataclass field (its ``setting(key=...)``, else its name)."""
    return f.metadata.get("key") or f.name


@dataclass
class StudySection:
    """``[study]``: the name (used in the store and job ids), seed, store directory, Ray address."""

    name: str = setting("study", help="the study's name: in the store, in job ids and in printed tables")
    seed: int = setting(0, minimum=0, help="the root seed every random choice derives from (adaptlab.study.seeds)")
    store: str | None = setting(
        None,
        default_text="results/<[study].name>",
        help='the results store: a folder (relative to the project root) or a URI (s3://...); "" keeps nothing',
    )
    address: str = setting("", help='the Ray cluster to run on ("": an embedded local Ray when one is needed)')
    description: str = setting("", help="free text kept with the study")


@dataclass
class DatasetSection:
    """``[[datasets]]``: a dataset spec ``FORMAT:PATH`` (see ``adaptlab.data.load_dataset``)."""

    spec: str = setting(
        "", help="FORMAT:PATH of the dataset (beir:DIR, pairs:FILE.csv, synthetic:..., trec:...); required"
    )
    name: str = setting(
        "", help="the dataset's name in the store (default: the file or folder name without its extension)"
    )
    split: str = setting("test", help="the qrels split to evaluate (BEIR formats)")
    options: dict[str, Any] = setting(
        factory=dict,
        help='the format\'s options, e.g. {question_col = "q", context_col = "c"} '
        "for a pairs: CSV/TSV/JSONL file (also query_id_col, doc_id_col, "
        "title_col, file_format); on the command line --dataset-option KEY=VALUE",
    )
    group_by: list[str] = setting(
        factory=list,
        help="query grouping columns (a pairs file's columns; a BEIR "
        "query's keys or its metadata's): every measure also per group, paired p "
        "adjusted within each measure across the groups; on the command line "
        "--dataset-option group_by=COL",
    )

    def reader_options(self) -> dict[str, Any]:
        """The options the format's reader gets: ``options``, and ``group_by`` when set."""
        if not self.group_by:
            return dict(self.options)
        if "group_by" in self.options:
            raise ConfigError(
                f"[[datasets]] {self.name or self.spec!r}: group_by is given both as a key and in options; keep one"
            )
        return {**self.options, "group_by": list(self.group_by)}


@dataclass
class ModelSection:
    """``[[models]]``: a model reference (alias, local path or hub id) and encoder options.
    ``embedding_backend`` and ``precision`` (``""``: ``[embedding]``'s) set how this system's
    sentence-transformers model runs (:mod:`adaptlab.models.inference`)."""

    ref: str = setting(
        "", help='the model: an alias (minilm), a local folder, a hub id, "bm25" or "hash:DIM"; required'
    )
    name: str = setting("", help="the system's name (default: the last part of ref)")
    backend: str = setting(
        "auto", help='the model kind: "auto" (from the checkpoint), "sentence-transformers", "flagembedding", "colbert"'
    )
    embedding_backend: str = setting(
        "", choices=("", *BACKEND_SETTINGS), help='how a sentence-transformers model runs ("": [embedding].backend)'
    )
    precision: str = setting(
        "",
        choices=("", *PRECISIONS),
        help='the encoder\'s precision ("": [embedding].precision); a reduced one is shown in the name',
    )
    batch_size: int = setting(64, minimum=1, help="texts per encoder call")
    query_instruction: str = setting("", help="text put before every query")
    document_instruction: str = setting("", help="text put before every document")
    max_seq_length: int = setting(0, minimum=0, help="tokens kept per text (0: the model's)")
    trust_remote_code: bool = setting(False, help="must stay false: adaptlab never runs a model's own code")
    options: dict[str, Any] = setting(
        factory=dict, help="the backend's own options (BM25: k1, b, method, stemmer, stopwords; ColBERT: search, ...)"
    )


@dataclass
class EvaluationSection:
    """``[evaluation]``: measures and retrieval depth; ``baseline`` for paired tests."""

    metrics: list[str] = setting(
        factory=lambda: ["acc@1", "acc@5", "ndcg@10", "mrr@10", "recall@100"],
        help="the measures (acc@k, ndcg@k, mrr@k, recall@k, map@k, ...)",
    )
    k: int = setting(100, minimum=1, help="documents retrieved per query")
    baseline: str = setting("", help='the system every other is compared with ("": every pair)')


@dataclass
class BootstrapSection:
    """``[bootstrap]``: m resamples of l queries (l = 0: all queries), seed, CI level.

    ``seed`` left out: derived from ``[study].seed`` (see :mod:`adaptlab.study.seeds`)."""

    n_resamples: int = setting(1000, minimum=1, help="bootstrap resamples m (at most 10,000,000)")
    sample_size: int = setting(0, minimum=0, help="queries per resample l (0: all queries; at most 10^8)")
    seed: int | None = setting(None, minimum=0, default_text="derived from [study].seed", help="the resamples' seed")
    confidence: float = setting(
        0.95, lo=0.0, hi=1.0, lo_open=True, hi_open=True, help="the level of every confidence interval"
    )
    interval: str = setting("auto", choices=INTERVALS, help="the interval method (auto: by measure and sample)")
    adjustment: str = setting("holm", choices=ADJUSTMENTS, help="the multiple-comparison adjustment of p values")
    test: str = setting(
        "sign-flip",
        choices=PAIRED_TESTS,
        help="the paired test at every number of queries (sign-flip; bootstrap: the paired "
        "bootstrap p, liberal at small query counts)",
    )
    allow_oversampling: bool = setting(False, help="allow sample_size above the number of queries")


@dataclass
class EmbeddingSection:
    """``[embedding]``: Ray actor pool settings (``use_ray = false``: embed in-process) and the
    shared embedding cache (``cache``: a folder, a URI or ``"off"``; ``""``:
    ``$ADAPTLAB_EMBEDDING_CACHE``, else ``$ADAPTLAB_CACHE`` or the user's cache folder;
    ``cache_max_gib``: its size bound, 0 for the default; see :mod:`adaptlab.embedding.cache`).
    ``placement_timeout``: seconds (> 0) the actor pool may go without a ready actor before the
    study fails with one line (left out: ``$ADAPTLAB_POOL_PLACEMENT_TIMEOUT``, else 180; see
    :func:`adaptlab.embedding.pool.placement_timeout`). ``local_below``: with ``use_ray``, calls
    of fewer texts embed in-process until the model's pool has been used (default 512, below which
    an actor cannot win back its start on 2 cores; 0: every call on the Ray pool). ``backend``
    (``"torch"``, ``"onnx"``, ``"openvino"``, or ``"auto"``: the fastest one installed,
    :func:`~adaptlab.models.inference.resolve_backend`) and ``precision`` (``"fp32"``, the exact path;
    ``"bf16"``, ``"int8"``, reduced): how sentence-transformers models run, for every
    ``[[models]]`` entry that does not set its own ``embedding_backend`` / ``precision``
    (:mod:`adaptlab.models.inference`). A system at reduced precision is named with it
    (``minilm`` -> ``minilm-bf16``, :func:`~adaptlab.models.inference.precision_name`)."""

    backend: str = setting(
        DEFAULT_BACKEND,
        choices=BACKEND_SETTINGS,
        help="how sentence-transformers models run (torch, onnx, openvino; auto: the "
        "fastest installed one, OpenVINO with the fast extra)",
    )
    precision: str = setting(
        EXACT_PRECISION, choices=PRECISIONS, help="fp32 (exact) or a reduced precision (bf16, int8)"
    )
    use_ray: bool = setting(True, help="embed on a pool of Ray actors (false: in-process)")
    num_actors: int = setting(0, minimum=0, help="actors per model (0: as many as fit)")
    batch_size: int = setting(0, minimum=0, help="texts per actor call (0: the model's batch_size)")
    cache: str = setting(
        "",
        help='the embedding cache: a folder, a URI or "off" ("": $ADAPTLAB_EMBEDDING_CACHE, '
        "else $ADAPTLAB_CACHE or the user's cache folder)",
    )
    cache_max_gib: float = setting(0.0, lo=0.0, help="the cache's size bound in GiB (0: the default)")
    placement_timeout: float | None = setting(
        None,
        default_text="$ADAPTLAB_POOL_PLACEMENT_TIMEOUT, else 180",
        help="seconds (> 0) the pool may go without a ready actor",
    )
    local_below: int = setting(
        LOCAL_BELOW,
        minimum=0,
        help="calls of fewer texts embed in-process until the model's pool was used (0: every call on Ray)",
    )


@dataclass
class AnalysisSection:
    """``[analysis]``: which analyses of the reference studies to run on every system."""

    thresholds: bool = setting(False, help="bootstrap similarity thresholds")
    coe_roe: bool = setting(False, help="COE/ROE overlap measures")
    isotropy: bool = setting(False, help="isotropy of the corpus embeddings")
    topic_diversity: bool = setting(False, help="topic diversity of the corpus embeddings")
    top_k: int = setting(5, minimum=1, help="K of the thresholds and COE/ROE")
    psi: float = setting(5.0, lo=0.0, hi=100.0, lo_open=True, help="the COE/ROE percentage psi, in (0, 100]")
    threshold_test: str = setting("exact", choices=THRESHOLD_TESTS, help="the thresholds' test")
    threshold_margin: float = setting(
        0.01, lo=0.0, hi=1.0, lo_open=True, hi_open=True, help="the thresholds' margin, in (0, 1)"
    )


@dataclass(frozen=True)
class Overrides:
    """Command-line overrides of a study file (:meth:`Study.with_overrides`): ``models`` and
    ``datasets`` (references) replace the file's entries (``dataset_options``: the format options of
    each ``--dataset``, e.g. ``{"question_col": "q"}``, else of every ``[[datasets]]`` entry);
    ``bootstrap`` maps BootstrapSection fields to values (None entries are ignored); ``store = ""``
    turns the results store off; None (or empty) leaves the file's value."""

    models: Sequence[str] = ()
    datasets: Sequence[str] = ()
    dataset_options: Mapping[str, Any] | None = None
    split: str | None = None
    metrics: str | Sequence[str] | None = None
    k: int | None = None
    bootstrap: Mapping[str, Any] | None = None
    use_ray: bool | None = None
    store: str | None = None


@dataclass
class Study:
    """A validated study file."""

    study: StudySection
    datasets: list[DatasetSection]
    models: list[ModelSection]
    evaluation: EvaluationSection = field(default_factory=EvaluationSection)
    bootstrap: BootstrapSection = field(default_factory=BootstrapSection)
    embedding: EmbeddingSection = field(default_factory=EmbeddingSection)
    analysis: AnalysisSection = field(default_factory=AnalysisSection)
    # the [adapt] / [tune] sections, read by adaptlab.study.adapt_config (which imports this module,
    # so the names are not imported here, not even for the type checker (tests/architecture refuses
    # the cycle): the annotations are text, and Any to mypy)
    adapt: AdaptSettings | None = None  # type: ignore[name-defined]  # noqa: F821
    tune: TuneSettings | None = None  # type: ignore[name-defined]  # noqa: F821
    adapt_table: dict[str, Any] = field(default_factory=dict)  # [adapt] as written (provenance, uploads)
    tune_table: dict[str, Any] = field(default_factory=dict)  # [tune] as written
    source: str = "<memory>"
    base_dir: Path = field(default_factory=Path.cwd)

    def resolve_path(self, p: str) -> Path:
        """A path from the study file: absolute, or relative to the project root (see load_study)."""
        path = Path(p).expanduser()
        return path if path.is_absolute() else (self.base_dir / path)

    def resolve_model_ref(self, ref: str) -> str:
        """A ``[[models]]`` reference with a model directory relative to the project root made
        absolute (as dataset paths are); aliases, ``hash:`` models and hub ids are kept as given."""
        if ref.lower() in MODEL_ALIASES or ref.lower().startswith("hash") or ref.lower() == BM25_REF:
            return ref
        path = self.resolve_path(ref)
        if path.is_dir():
            return str(path.resolve())
        return ref

    def inference(self, model: ModelSection, kind: str = BI_ENCODER_BACKEND) -> Inference:
        """How ``model`` runs: its own ``embedding_backend`` / ``precision``, else ``[embedding]``'s;
        an entry that is not a sentence-transformers model as far as the file says (BM25, ``hash:``,
        another explicit ``backend``) takes only its own keys, so ``[embedding]`` never renames it.
        ``"auto"`` is resolved (:func:`~adaptlab.models.inference.resolve_backend`); at fp32 it is
        torch for a model whose ``kind`` (:func:`~adaptlab.models.load.pick_backend`, when known)
        is not a sentence-transformers one, which runs only on torch."""
        if not (model.embedding_backend or model.precision) and not _takes_inference(model):
            return Inference()
        backend = model.embedding_backend or self.embedding.backend
        precision = model.precision or self.embedding.precision
        if backend == AUTO and kind != BI_ENCODER_BACKEND and precision == EXACT_PRECISION:
            return Inference()
        return Inference(backend, precision)

    def name_precisions(self) -> None:
        """Give every ``[[models]]`` entry at reduced precision a name that shows it
        (:func:`~adaptlab.models.inference.precision_name`); a ``[evaluation].baseline`` naming such
        an entry follows it. Call after the sections are checked."""
        renamed = {}
        for m in self.models:
            name = precision_name(m.name, self.inference(m).precision)
            renamed[m.name], m.name = name, name
        self.evaluation.baseline = renamed.get(self.evaluation.baseline, self.evaluation.baseline)

    def reread_adaptation(self) -> None:
        """Read ``[adapt]`` and ``[tune]`` again from the tables as written, after an override
        changed what they depend on (the ``[[models]]``): through the settings' own classes."""
        if self.adapt is not None:
            self.adapt = type(self.adapt).read(self, self.adapt_table)
            if self.tune is not None:
                self.tune = type(self.tune).read(self, self.tune_table, self.adapt)

    def store_root(self, store: str | Path | None = None) -> Path | StoreURI | None:
        """``store`` (a command-line override), else ``[study].store`` resolved (left out:
        ``results/<study name>`` under the project root; ``""``: None, nothing is stored).
        A URI (``s3://bucket/prefix``) is returned as a :class:`StoreURI`, unchanged."""
        if store is not None:
            return _store_location(store)
        if self.study.store is None:
            return self.resolve_path(f"results/{self.study.name}")
        if not self.study.store:
            return None
        return StoreURI(self.study.store) if is_store_uri(self.study.store) else self.resolve_path(self.study.store)

    def bootstrap_config(self) -> BootstrapConfig:
        """``[bootstrap]`` as one frozen :class:`~adaptlab.stats.BootstrapConfig`; its seed is
        ``[bootstrap].seed`` when given, else derived from ``[study].seed`` (stage ``"bootstrap"``)."""
        b = self.bootstrap
        return BootstrapConfig(
            n_resamples=b.n_resamples,
            sample_size=b.sample_size or None,
            seed=stage_seed(self.study.seed, "bootstrap", b.seed),
            confidence=b.confidence,
            interval=b.interval,
            adjustment=b.adjustment,
            test=b.test,
            allow_oversampling=b.allow_oversampling,
        )

    def with_overrides(self, overrides: Overrides | None = None, **changes: Any) -> Study:
        """A copy with command-line overrides applied: ``overrides`` (:class:`Overrides`), or its
        fields given as keywords (``study.with_overrides(models=["minilm"], use_ray=False)``)."""
        o = replace(overrides, **changes) if overrides is not None else Overrides(**changes)
        out = copy.deepcopy(self)
        if o.models:
            out.models = [ModelSection(ref=m, name=_override_name(m, "--model")) for m in o.models]
            out.name_precisions()
            out.reread_adaptation()  # the base model may be the first [[models]] entry
        if o.datasets:
            out.datasets = [
                DatasetSection(
                    spec=d, name=_override_name(d, "--dataset", dataset=True), options=dict(o.dataset_options or {})
                )
                for d in o.datasets
            ]
        elif o.dataset_options:
            for d in out.datasets:
                d.options = {**d.options, **o.dataset_options}
        if o.split:
            for d in out.datasets:
                d.split = o.split
        if o.metrics:
            out.evaluation.metrics = [str(m) for m in parse_measures(o.metrics)]
        if o.k:
            out.evaluation.k = o.k
        given = {key: v for key, v in (o.bootstrap or {}).items() if v is not None}
        if given:
            current = {key: v for key, v in vars(out.bootstrap).items() if v is not None}
            out.bootstrap = build_section(BootstrapSection, {**current, **given}, "command line: [bootstrap]")
        if o.use_ray is not None:
            out.embedding.use_ray = o.use_ray
        if o.store is not None:
            out.study.store = o.store
        check_sections(out)
        return out


def _takes_inference(model: ModelSection) -> bool:
    """Whether an entry may be a sentence-transformers model: not BM25 or ``hash:``, and its
    ``backend`` is ``auto`` or a name of sentence-transformers (an unknown one fails elsewhere)."""
    ref = model.ref.lower()
    if ref == BM25_REF or ref.startswith("hash"):
        return False
    try:
        return model.backend in ("", "auto") or canonical_backend(model.backend) == BI_ENCODER_BACKEND
    except ConfigError:
        return True


def _override_name(ref: str, option: str, *, dataset: bool = False) -> str:
    """The name a command-line reference gives its system or dataset (:func:`default_name`),
    checked by :func:`~adaptlab.storage.names.check_name`; errors name the option and the reference."""
    return check_name(default_name(ref, dataset=dataset), f"command line: {option} {ref!r}: name")


_TYPE_WORDS = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}


class SectionChecker:
    """Value checks whose errors name the file, the section and the key:
    ``study.toml: [adapt].fraction: expected a number in (0.0, 1.0], got 0``."""

    def __init__(self, source: str, section: str) -> None:
        self.source, self.section = source, section
        self._where = ""

    @classmethod
    def at(cls, where: str) -> SectionChecker:
        """A checker whose messages start with ``where`` as given (``study.toml: models[1]``)."""
        check = cls("", "")
        check._where = where
        return check

    def where(self, key: str = "") -> str:
        """``file: [section].key``; an array entry (``models[1]``) is not bracketed twice."""
        section = self.section if self.section.endswith("]") else f"[{self.section}]"
        return (self._where or f"{self.source}: {section}") + (f".{key}" if key else "")

    def fail(self, key: str, expected: str, value: Any) -> ConfigError:
        return ConfigError(f"{self.where(key)}: expected {expected}, got {value!r}")

    def unknown(self, raw: Mapping[str, Any], valid: Sequence[str]) -> None:
        extra = sorted(set(raw) - set(valid))
        if extra:
            raise ConfigError(f"{self.where()}: unknown key {extra[0]!r}; valid keys: {', '.join(sorted(valid))}")

    def string(self, key: str, value: Any, choices: Sequence[str] | None = None) -> str:
        if not isinstance(value, str):
            raise self.fail(key, "a string", value)
        if choices is not None and value not in choices:
            raise self.fail(key, "one of " + ", ".join(repr(c) for c in choices), value)
        return value

    def boolean(self, key: str, value: Any) -> bool:
        if not isinstance(value, bool):
            raise self.fail(key, "true or false", value)
        return value

    def integer(self, key: str, value: Any, minimum: int | None = None) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, "an integer", value)
        if minimum is not None and value < minimum:
            raise self.fail(key, f"an integer >= {minimum}", value)
        return value

    def number(
        self,
        key: str,
        value: Any,
        lo: float | None = None,
        hi: float | None = None,
        lo_open: bool = False,
        hi_open: bool = False,
    ) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.fail(key, "a number", value)
        v = float(value)
        if (lo is not None and (v < lo or (lo_open and v == lo))) or (
            hi is not None and (v > hi or (hi_open and v == hi))
        ):
            raise self.fail(key, "a number in " + interval_text(lo, hi, lo_open, hi_open), value)
        return v

    def strings(self, key: str, value: Any) -> tuple[str, ...]:
        if isinstance(value, str):
            return (value,)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(key, "a list of strings", value)
        return tuple(value)

    def optional_number(self, key: str, value: Any, lo: float, hi: float | None = None) -> float | None:
        """A number, or ``false`` to turn the rule off (None)."""
        if value is False:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(key, "a number, or false to turn it off", value)
        return self.number(key, value, lo, hi)

    def auto_number(self, key: str, value: Any, lo: float = 0.0) -> float | None:
        """A number >= ``lo``, or ``"auto"`` (None)."""
        if value == "auto":
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(key, 'a number or "auto"', value)
        return self.number(key, value, lo)

    def table(self, key: str, value: Any) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(key, "a table", value)
        return value


def _check_value(value: Any, tp: Any, where: str) -> Any:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        (tp,) = [a for a in get_args(tp) if a is not type(None)]
        origin = get_origin(tp)
    if origin is list:
        (item_tp,) = get_args(tp)
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        return [_check_value(v, item_tp, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a table, got {value!r}")
        return dict(value)
    if tp is Any:
        return value
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp in (int, float) and isinstance(value, bool) or not isinstance(value, tp):
        raise ConfigError(f"{where}: expected {_TYPE_WORDS.get(tp, tp.__name__)}, got {value!r}")
    return value


@functools.cache
def type_hints(cls: type) -> dict[str, Any]:
    """``get_type_hints(cls)``, once per class (a study may hold 60,000 ``[[datasets]]`` tables)."""
    return get_type_hints(cls)


def interval_text(lo: float | None, hi: float | None, lo_open: bool = False, hi_open: bool = False) -> str:
    """``(0.0, 1.0]``: a range as the error messages and the study-file reference write it."""
    return (
        f"{'(' if lo_open else '['}{lo if lo is not None else '-inf'}, "
        f"{hi if hi is not None else 'inf'}{')' if hi_open else ']'}"
    )


def _check_declared(check: SectionChecker, f: Any, value: Any) -> Any:
    """``value`` (already of the field's type) against the field's declared choices and range."""
    meta = f.metadata
    if value is None:
        return value
    if meta.get("choices") is not None:
        check.string(toml_key(f), value, meta["choices"])
    if meta.get("minimum") is not None:
        check.integer(toml_key(f), value, meta["minimum"])
    if meta.get("range") is not None:
        lo, hi, lo_open, hi_open = meta["range"]
        check.number(toml_key(f), value, lo, hi, lo_open, hi_open)
    return value


def build_section(cls: type, raw: Any, where: str) -> Any:
    """An instance of the dataclass ``cls`` from a TOML table: unknown keys, wrong types and values
    outside a field's declared choices or range (:func:`setting`) are :class:`ConfigError` naming
    ``where`` and the key; missing keys take the field defaults."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a table, got {raw!r}")
    hints = type_hints(cls)
    declared = {f.name: f for f in fields(cls)}
    unknown = sorted(set(raw) - set(declared))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; valid keys: {', '.join(sorted(declared))}")
    check = SectionChecker.at(where)
    kwargs = {}
    for name, value in raw.items():
        tp = hints[name]
        if isinstance(tp, type) and is_dataclass(tp):
            kwargs[name] = build_section(tp, value, f"{where}.{name}")
            continue
        kwargs[name] = _check_declared(check, declared[name], _check_value(value, tp, f"{where}.{name}"))
    return cls(**kwargs)


def read_fields(
    cls: type, raw: Mapping[str, Any], check: SectionChecker, *, given: Sequence[str] = ()
) -> dict[str, Any]:
    """The keyword arguments of ``cls`` for the keys of ``raw`` that its fields declare (not those
    marked ``custom``, nor keys not in ``given`` when ``given`` is non-empty): each value checked
    against the field's type and declared choices and range, with the error naming the file, the
    section and the key. Reading ``int | None`` takes 0 as None; ``bool | str`` takes ``"auto"``
    too; a field declared with ``off`` takes that TOML value as None. Fields not in ``raw`` are
    left out, so ``cls`` fills in its own defaults (declared once, on the field)."""
    hints = type_hints(cls)
    out: dict[str, Any] = {}
    for f in fields(cls):
        key = toml_key(f)
        if key not in raw or f.metadata.get("custom") or (given and key not in given):
            continue
        out[f.name] = read_value(check, f, hints[f.name], raw[key])
    return out


def read_value(check: SectionChecker, f: Any, tp: Any, value: Any) -> Any:
    """One TOML value for the field ``f`` of type ``tp`` (see :func:`read_fields`)."""
    key, meta = toml_key(f), f.metadata
    args = set(get_args(tp)) if get_origin(tp) in (Union, types.UnionType) else set()
    rng = meta.get("range") or (None, None, False, False)
    if meta.get("off") is not None:
        off = meta["off"]
        if value is off or (isinstance(off, str) and value == off):
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise check.fail(key, 'a number or "auto"' if off == "auto" else "a number, or false to turn it off", value)
        return check.number(key, value, *rng)
    if args == {int, type(None)}:
        return None if value == 0 and not isinstance(value, bool) else check.integer(key, value, 1)
    if args == {bool, str}:
        if isinstance(value, bool) or value == "auto":
            return value
        raise check.fail(key, '"auto", true or false', value)
    base = next(iter(args - {type(None)})) if args else tp
    if base is str:
        return check.string(key, value, meta.get("choices"))
    if base is bool:
        return check.boolean(key, value)
    if base is int:
        return check.integer(key, value, meta.get("minimum"))
    if base is float:
        return check.number(key, value, *rng)
    if get_origin(base) is tuple:
        return check.strings(key, value)
    if get_origin(base) in (dict, Mapping) or base is Mapping:
        return dict(check.table(key, value))
    return value


def check_sections(study: Study) -> None:
    """Checks beyond each key's declared type, choices and range (:func:`setting`, applied by
    :func:`build_section`): the measures parse, the resample matrix fits in memory, the pool's
    timeout, the encoders' backend and precision combinations and the baseline among the systems."""
    source = study.source
    try:
        parse_measures(study.evaluation.metrics)
    except ConfigError as e:
        raise ConfigError(f"{source}: [evaluation].metrics: {e}") from e
    check = SectionChecker(source, "bootstrap")
    b = study.bootstrap
    for key, value, top in (("n_resamples", b.n_resamples, 10_000_000), ("sample_size", b.sample_size, 10**8)):
        if value > top:  # the resample matrix would not fit in memory
            raise check.fail(key, f"an integer <= {top:,}", value)
    emb = SectionChecker(source, "embedding")
    timeout = study.embedding.placement_timeout
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        raise emb.fail("placement_timeout", "a positive number of seconds (e.g. 300)", timeout)
    _check_inference(study)
    baseline = study.evaluation.baseline
    names = [m.name for m in study.models]
    if baseline and not study.adapt_table and all(names) and baseline not in names:
        raise ConfigError(
            f"{source}: [evaluation].baseline = {baseline!r} is not a [[models]] name; "
            f"expected one of {', '.join(names)}"
        )


def _check_inference(study: Study) -> None:
    """The encoders' backend and precision: a combination the backend offers (``[embedding]``'s and
    each entry's own), and names that show a reduced precision."""
    emb = SectionChecker(study.source, "embedding")
    try:
        Inference(study.embedding.backend, study.embedding.precision)
    except ConfigError as e:
        raise ConfigError(f"{emb.where()}: {e}") from e
    for i, m in enumerate(study.models):
        check = SectionChecker(study.source, f"models[{i}]")
        try:
            inference = study.inference(m)
        except ConfigError as e:
            raise ConfigError(f"{check.where()}: {e} (the entry's keys, else [embedding]'s)") from e
        if precision_name(m.name, inference.precision) != m.name:
            raise check.fail(
                "name",
                f"a name that shows its reduced precision {inference.precision!r} "
                f"(e.g. {precision_name(m.name, inference.precision)!r})",
                m.name,
            )


DATA_SUFFIXES: tuple[str, ...] = (
    ".csv",
    ".tsv",
    ".jsonl",
    ".ndjson",
    ".json",
    ".txt",
    ".trec",
    ".qrels",
    ".gz",
    ".zip",
)
"""File extensions a dataset name leaves out (``pairs:qa.csv`` -> ``qa``)."""


def default_name(ref: str, *, dataset: bool = False) -> str:
    """A system or dataset name from a reference: ``beir:../x/scifact`` -> ``scifact``; a
    dataset file is named by its stem (``pairs:data/qa.csv`` -> ``qa``, ``squad:dev.json.gz`` ->
    ``dev``); a model keeps its dots (``BAAI/bge-small-en-v1.5``)."""
    tail = ref.split(":", 1)[-1].rstrip("/\\") or ref
    name = Path(tail).name.split("?")[0] or ref
    while dataset and Path(name).suffix.lower() in DATA_SUFFIXES and Path(name).stem:
        name = Path(name).stem
    return name


def project_root(start: Path) -> Path:
    """Relative paths in a study resolve against the project root: the nearest folder above
    ``start`` holding pyproject.toml (else ``start``). The same file then means the same paths
    locally and in a submitted Ray job, whose working_dir is that root."""
    for p in [start, *start.parents]:
        if (p / "pyproject.toml").exists():
            return p
    return start
