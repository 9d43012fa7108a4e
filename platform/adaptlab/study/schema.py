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
import math
import re
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints

from adaptlab.embedding.cache import LOCAL_BELOW
from adaptlab.errors import ConfigError, is_uri
from adaptlab.metrics import parse_measures
from adaptlab.models.base import canonical_backend
from adaptlab.models.inference import DEFAULT_BACKEND, EMBEDDING_BACKENDS, EXACT_PRECISION, PRECISIONS, Inference
from adaptlab.models.inference import precision_name
from adaptlab.models.resolve import MODEL_ALIASES
from adaptlab.models.variants import BI_ENCODER_BACKEND, BM25_REF
from adaptlab.analysis.thresholds import TESTS as THRESHOLD_TESTS
from adaptlab.stats import BootstrapConfig
from adaptlab.stats.intervals import INTERVALS
from adaptlab.stats.pvalues import ADJUSTMENTS
from adaptlab.storage.names import check_name
from adaptlab.study.seeds import stage_seed

__all__ = [
    "AnalysisSection",
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


@dataclass
class StudySection:
    """``[study]``: the name (used in the store and job ids), seed, store directory, Ray address."""

    name: str = "study"
    seed: int = 0
    store: str = "results/study"
    address: str = ""
    description: str = ""


@dataclass
class DatasetSection:
    """``[[datasets]]``: a dataset spec ``FORMAT:PATH`` (see ``adaptlab.data.load_dataset``)."""

    spec: str = ""
    name: str = ""
    split: str = "test"
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class ModelSection:
    """``[[models]]``: a model reference (alias, local path or hub id) and encoder options.
    ``embedding_backend`` and ``precision`` (``""``: ``[embedding]``'s) set how this system's
    sentence-transformers model runs (:mod:`adaptlab.models.inference`)."""

    ref: str = ""
    name: str = ""
    backend: str = "auto"
    embedding_backend: str = ""
    precision: str = ""
    batch_size: int = 64
    query_instruction: str = ""
    document_instruction: str = ""
    max_seq_length: int = 0
    trust_remote_code: bool = False
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class EvaluationSection:
    """``[evaluation]``: measures and retrieval depth; ``baseline`` for paired tests."""

    metrics: list[str] = field(default_factory=lambda: ["acc@1", "acc@5", "ndcg@10", "mrr@10", "recall@100"])
    k: int = 100
    baseline: str = ""


@dataclass
class BootstrapSection:
    """``[bootstrap]``: m resamples of l queries (l = 0: all queries), seed, CI level.

    ``seed`` left out: derived from ``[study].seed`` (see :mod:`adaptlab.study.seeds`)."""

    n_resamples: int = 1000
    sample_size: int = 0
    seed: int | None = None
    confidence: float = 0.95
    interval: str = "auto"
    adjustment: str = "holm"
    allow_oversampling: bool = False


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
    (``"torch"``, ``"onnx"``, ``"openvino"``) and ``precision`` (``"fp32"``, the exact path;
    ``"bf16"``, ``"int8"``, reduced): how sentence-transformers models run, for every
    ``[[models]]`` entry that does not set its own ``embedding_backend`` / ``precision``
    (:mod:`adaptlab.models.inference`). A system at reduced precision is named with it
    (``minilm`` -> ``minilm-bf16``, :func:`~adaptlab.models.inference.precision_name`)."""

    backend: str = DEFAULT_BACKEND
    precision: str = EXACT_PRECISION
    use_ray: bool = True
    num_actors: int = 0
    batch_size: int = 0
    cache: str = ""
    cache_max_gib: float = 0.0
    placement_timeout: float | None = None
    local_below: int = LOCAL_BELOW


@dataclass
class AnalysisSection:
    """``[analysis]``: which analyses of the reference studies to run on every system."""

    thresholds: bool = False
    coe_roe: bool = False
    isotropy: bool = False
    topic_diversity: bool = False
    top_k: int = 5
    psi: float = 5.0
    threshold_test: str = "exact"
    threshold_margin: float = 0.01


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
    adapt: dict[str, Any] = field(default_factory=dict)
    tune: dict[str, Any] = field(default_factory=dict)
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

    def inference(self, model: ModelSection) -> Inference:
        """How ``model`` runs: its own ``embedding_backend`` / ``precision``, else ``[embedding]``'s;
        an entry that is not a sentence-transformers model as far as the file says (BM25, ``hash:``,
        another explicit ``backend``) takes only its own keys, so ``[embedding]`` never renames it."""
        if not (model.embedding_backend or model.precision) and not _takes_inference(model):
            return Inference()
        return Inference(model.embedding_backend or self.embedding.backend, model.precision or self.embedding.precision)

    def name_precisions(self) -> None:
        """Give every ``[[models]]`` entry at reduced precision a name that shows it
        (:func:`~adaptlab.models.inference.precision_name`); a ``[evaluation].baseline`` naming such
        an entry follows it. Call after the sections are checked."""
        renamed = {}
        for m in self.models:
            name = precision_name(m.name, self.inference(m).precision)
            renamed[m.name], m.name = name, name
        self.evaluation.baseline = renamed.get(self.evaluation.baseline, self.evaluation.baseline)

    def store_root(self, store: str | Path | None = None) -> Path | StoreURI | None:
        """``store`` (a command-line override), else ``[study].store`` resolved, else None.
        A URI (``s3://bucket/prefix``) is returned as a :class:`StoreURI`, unchanged."""
        if store is not None:
            return _store_location(store)
        if not self.study.store:
            return None
        return StoreURI(self.study.store) if is_store_uri(self.study.store) else self.resolve_path(self.study.store)

    def bootstrap_config(self) -> BootstrapConfig:
        """``[bootstrap]`` as one frozen :class:`~adaptlab.stats.BootstrapConfig`; its seed is
        ``[bootstrap].seed`` when given, else derived from ``[study].seed`` (stage ``"bootstrap"``)."""
        b = self.bootstrap
        return BootstrapConfig(n_resamples=b.n_resamples, sample_size=b.sample_size or None,
                               seed=stage_seed(self.study.seed, "bootstrap", b.seed), confidence=b.confidence,
                               interval=b.interval, adjustment=b.adjustment,
                               allow_oversampling=b.allow_oversampling)

    def with_overrides(
        self,
        *,
        models: Sequence[str] = (),
        datasets: Sequence[str] = (),
        split: str | None = None,
        metrics: str | Sequence[str] | None = None,
        k: int | None = None,
        bootstrap: Mapping[str, Any] | None = None,
        use_ray: bool | None = None,
        store: str | None = None,
    ) -> Study:
        """A copy with command-line overrides applied: ``models``/``datasets`` (references)
        replace the file's entries; ``bootstrap`` maps BootstrapSection fields to values (None
        entries are ignored); ``store = ""`` turns the results store off."""
        out = copy.deepcopy(self)
        if models:
            out.models = [ModelSection(ref=m, name=_override_name(m, "--model")) for m in models]
            out.name_precisions()
        if datasets:
            out.datasets = [DatasetSection(spec=d, name=_override_name(d, "--dataset")) for d in datasets]
        if split:
            for d in out.datasets:
                d.split = split
        if metrics:
            out.evaluation.metrics = [str(m) for m in parse_measures(metrics)]
        if k:
            out.evaluation.k = k
        given = {key: v for key, v in (bootstrap or {}).items() if v is not None}
        if given:
            current = {key: v for key, v in vars(out.bootstrap).items() if v is not None}
            out.bootstrap = build_section(BootstrapSection, {**current, **given}, "command line: [bootstrap]")
        if use_ray is not None:
            out.embedding.use_ray = use_ray
        if store is not None:
            out.study.store = store
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


def _override_name(ref: str, option: str) -> str:
    """The name a command-line reference gives its system or dataset (:func:`default_name`),
    checked by :func:`~adaptlab.storage.names.check_name`; errors name the option and the reference."""
    return check_name(default_name(ref), f"command line: {option} {ref!r}: name")


_TYPE_WORDS = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}


class SectionChecker:
    """Value checks whose errors name the file, the section and the key:
    ``study.toml: [adapt].fraction: expected a number in (0.0, 1.0], got 0``."""

    def __init__(self, source: str, section: str) -> None:
        self.source, self.section = source, section

    def where(self, key: str = "") -> str:
        """``file: [section].key``; an array entry (``models[1]``) is not bracketed twice."""
        section = self.section if self.section.endswith("]") else f"[{self.section}]"
        return f"{self.source}: {section}" + (f".{key}" if key else "")

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

    def number(self, key: str, value: Any, lo: float | None = None, hi: float | None = None,
               lo_open: bool = False) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.fail(key, "a number", value)
        v = float(value)
        if (lo is not None and (v < lo or (lo_open and v == lo))) or (hi is not None and v > hi):
            lo_b = "(" if lo_open else "["
            raise self.fail(key, f"a number in {lo_b}{lo if lo is not None else '-inf'}, "
                                 f"{hi if hi is not None else 'inf'}]", value)
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


def build_section(cls: type, raw: Any, where: str) -> Any:
    """An instance of the dataclass ``cls`` from a TOML table: unknown keys and wrong types are
    :class:`ConfigError` naming ``where`` and the key; missing keys take the field defaults."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a table, got {raw!r}")
    hints = get_type_hints(cls)
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(raw) - names)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; valid keys: {', '.join(sorted(names))}")
    kwargs = {}
    for name, value in raw.items():
        tp = hints[name]
        kwargs[name] = (build_section(tp, value, f"{where}.{name}") if is_dataclass(tp)
                        else _check_value(value, tp, f"{where}.{name}"))
    return cls(**kwargs)


def check_sections(study: Study) -> None:
    """Cross-field checks of the evaluation sections (measures, bootstrap, depth)."""
    source = study.source
    try:
        parse_measures(study.evaluation.metrics)
    except ConfigError as e:
        raise ConfigError(f"{source}: [evaluation].metrics: {e}") from e
    check = SectionChecker(source, "bootstrap")
    b = study.bootstrap
    check.integer("n_resamples", b.n_resamples, 1)
    check.integer("sample_size", b.sample_size, 0)
    for key, value, top in (("n_resamples", b.n_resamples, 10_000_000), ("sample_size", b.sample_size, 10**8)):
        if value > top:  # the resample matrix would not fit in memory
            raise check.fail(key, f"an integer <= {top:,}", value)
    if b.seed is not None:
        check.integer("seed", b.seed, 0)
    if not 0 < b.confidence < 1:
        raise ConfigError(f"{source}: [bootstrap].confidence: expected a number in (0, 1), got {b.confidence}")
    check.string("interval", b.interval, INTERVALS)
    check.string("adjustment", b.adjustment, ADJUSTMENTS)
    SectionChecker(source, "evaluation").integer("k", study.evaluation.k, 1)
    SectionChecker(source, "study").integer("seed", study.study.seed, 0)
    _check_sizes(study)


def _check_sizes(study: Study) -> None:
    """Size-like keys in range and the baseline among the systems, before any work is done."""
    source = study.source
    emb = SectionChecker(source, "embedding")
    emb.integer("num_actors", study.embedding.num_actors, 0)
    emb.integer("batch_size", study.embedding.batch_size, 0)
    emb.integer("local_below", study.embedding.local_below, 0)
    timeout = study.embedding.placement_timeout
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        raise emb.fail("placement_timeout", "a positive number of seconds (e.g. 300)", timeout)
    _check_inference(study)
    an = SectionChecker(source, "analysis")
    an.integer("top_k", study.analysis.top_k, 1)
    an.string("threshold_test", study.analysis.threshold_test, THRESHOLD_TESTS)
    if not 0 < study.analysis.threshold_margin < 1:
        raise ConfigError(f"{source}: [analysis].threshold_margin: expected a number in (0, 1), "
                          f"got {study.analysis.threshold_margin}")
    if not 0 < study.analysis.psi <= 100:
        raise ConfigError(f"{source}: [analysis].psi: expected a percentage in (0, 100], got {study.analysis.psi}")
    for i, m in enumerate(study.models):
        check = SectionChecker(source, f"models[{i}]")
        check.integer("batch_size", m.batch_size, 1)
        check.integer("max_seq_length", m.max_seq_length, 0)
    baseline = study.evaluation.baseline
    names = [m.name for m in study.models]
    if baseline and not study.adapt and all(names) and baseline not in names:
        raise ConfigError(f"{source}: [evaluation].baseline = {baseline!r} is not a [[models]] name; "
                          f"expected one of {', '.join(names)}")


def _check_inference(study: Study) -> None:
    """``[embedding].backend`` / ``precision`` and each entry's own: known values, a combination the
    backend offers, and names that show a reduced precision."""
    emb = SectionChecker(study.source, "embedding")
    emb.string("backend", study.embedding.backend, EMBEDDING_BACKENDS)
    emb.string("precision", study.embedding.precision, PRECISIONS)
    try:
        Inference(study.embedding.backend, study.embedding.precision)
    except ConfigError as e:
        raise ConfigError(f"{emb.where()}: {e}") from e
    for i, m in enumerate(study.models):
        check = SectionChecker(study.source, f"models[{i}]")
        check.string("embedding_backend", m.embedding_backend, ("", *EMBEDDING_BACKENDS))
        check.string("precision", m.precision, ("", *PRECISIONS))
        try:
            inference = study.inference(m)
        except ConfigError as e:
            raise ConfigError(f"{check.where()}: {e} (the entry's keys, else [embedding]'s)") from e
        if precision_name(m.name, inference.precision) != m.name:
            raise check.fail("name", f"a name that shows its reduced precision {inference.precision!r} "
                                     f"(e.g. {precision_name(m.name, inference.precision)!r})", m.name)


def default_name(ref: str) -> str:
    """A system or dataset name from a reference: ``beir:../x/scifact`` -> ``scifact``."""
    tail = ref.split(":", 1)[-1].rstrip("/\\") or ref
    return Path(tail).name.split("?")[0] or ref


def project_root(start: Path) -> Path:
    """Relative paths in a study resolve against the project root: the nearest folder above
    ``start`` holding pyproject.toml (else ``start``). The same file then means the same paths
    locally and in a submitted Ray job, whose working_dir is that root."""
    for p in [start, *start.parents]:
        if (p / "pyproject.toml").exists():
            return p
    return start

