"""Study files: a TOML description of datasets, models, measures, bootstrap, store and cluster.

Validated strictly: an unknown key or a wrong type is a :class:`ConfigError` that names the file
and the dotted key (``study.toml: models[1].batch_size: expected an integer, got 'big'``).

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

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

from adaptlab.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "AnalysisSection", "BootstrapSection", "DatasetSection", "EmbeddingSection", "EvaluationSection",
    "ModelSection", "Study", "StudySection", "load_study", "parse_study",
]


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
    """``[[models]]``: a model reference (alias, local path or hub id) and encoder options."""

    ref: str = ""
    name: str = ""
    backend: str = "auto"
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
    """``[bootstrap]``: m resamples of l queries (l = 0: all queries), seed, CI level."""

    n_resamples: int = 1000
    sample_size: int = 0
    seed: int = 0
    confidence: float = 0.95


@dataclass
class EmbeddingSection:
    """``[embedding]``: Ray actor pool settings (``use_ray = false``: embed in-process)."""

    use_ray: bool = True
    num_actors: int = 0
    batch_size: int = 0


@dataclass
class AnalysisSection:
    """``[analysis]``: which analyses of the reference studies to run on every system."""

    thresholds: bool = False
    coe_roe: bool = False
    isotropy: bool = False
    topic_diversity: bool = False
    top_k: int = 5
    psi: float = 5.0


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


_TYPE_WORDS = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}


def _check_value(value: Any, tp: Any, where: str) -> Any:
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


def _build(cls: type, raw: Any, where: str) -> Any:
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
        kwargs[name] = _build(tp, value, f"{where}.{name}") if is_dataclass(tp) else _check_value(value, tp, f"{where}.{name}")
    return cls(**kwargs)


def parse_study(data: Mapping[str, Any], *, source: str = "<memory>", base_dir: Path | None = None) -> Study:
    """Validate a parsed TOML document into a :class:`Study`."""
    sections = {"study": StudySection, "evaluation": EvaluationSection, "bootstrap": BootstrapSection,
                "embedding": EmbeddingSection, "analysis": AnalysisSection}
    valid = sorted([*sections, "datasets", "models", "adapt", "tune"])
    unknown = sorted(set(data) - set(valid))
    if unknown:
        raise ConfigError(f"{source}: unknown section {unknown[0]!r}; valid sections: {', '.join(valid)}")
    built = {k: _build(cls, data.get(k, {}), f"{source}: [{k}]") for k, cls in sections.items()}
    lists: dict[str, list[Any]] = {}
    for key, cls, required in (("datasets", DatasetSection, "spec"), ("models", ModelSection, "ref")):
        raw = data.get(key, [])
        if not isinstance(raw, list) or not raw:
            raise ConfigError(f"{source}: [[{key}]]: expected at least one [[{key}]] table")
        items = [_build(cls, item, f"{source}: {key}[{i}]") for i, item in enumerate(raw)]
        for i, item in enumerate(items):
            if not getattr(item, required):
                raise ConfigError(f"{source}: {key}[{i}].{required}: required, expected a non-empty string")
            if not item.name:
                item.name = _default_name(getattr(item, required))
        names = [it.name for it in items]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup:
            raise ConfigError(f"{source}: {key}: two entries are named {dup!r}; give each a distinct name")
        lists[key] = items
    for key in ("adapt", "tune"):
        if key in data and not isinstance(data[key], dict):
            raise ConfigError(f"{source}: [{key}]: expected a table")
    from adaptlab.metrics import parse_measures

    try:
        parse_measures(built["evaluation"].metrics)
    except ConfigError as e:
        raise ConfigError(f"{source}: [evaluation].metrics: {e}") from e
    b = built["bootstrap"]
    if b.n_resamples < 1:
        raise ConfigError(f"{source}: [bootstrap].n_resamples: expected an integer >= 1, got {b.n_resamples}")
    if not 0 < b.confidence < 1:
        raise ConfigError(f"{source}: [bootstrap].confidence: expected a number in (0, 1), got {b.confidence}")
    if built["evaluation"].k < 1:
        raise ConfigError(f"{source}: [evaluation].k: expected an integer >= 1")
    return Study(**built, **lists, adapt=dict(data.get("adapt", {})), tune=dict(data.get("tune", {})),
                 source=source, base_dir=base_dir or Path.cwd())


def _default_name(ref: str) -> str:
    """A system or dataset name from a reference: ``beir:../x/scifact`` -> ``scifact``."""
    tail = ref.split(":", 1)[-1].rstrip("/\\") or ref
    return Path(tail).name.split("?")[0] or ref


def load_study(path: str | Path) -> Study:
    """Read and validate a study TOML file."""
    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8")
    except FileNotFoundError as e:
        raise ConfigError(f"{p}: study file not found") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"{p}: not UTF-8 text (byte {e.start})") from e
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: invalid TOML: {e}") from e
    return parse_study(data, source=str(p), base_dir=_project_root(p.resolve().parent))


def _project_root(start: Path) -> Path:
    """Relative paths in a study resolve against the project root: the nearest folder above
    the study holding pyproject.toml (else the study's own folder). The same file then means
    the same paths locally and in a submitted Ray job, whose working_dir is that root."""
    for p in [start, *start.parents]:
        if (p / "pyproject.toml").exists():
            return p
    return start
