"""Read a study file and validate it whole: every section, ``[adapt]`` and ``[tune]`` included,
before any work starts (see :mod:`adaptlab.study.schema` for the sections and the error style)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from adaptlab.errors import ConfigError
from adaptlab.storage.names import check_name, check_names
from adaptlab.study.adapt_config import read_adapt_sections
from adaptlab.study.schema import (
    AnalysisSection,
    BootstrapSection,
    DatasetSection,
    EmbeddingSection,
    EvaluationSection,
    ModelSection,
    Study,
    StudySection,
    build_section,
    check_sections,
    default_name,
    project_root,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["load_study", "parse_study"]

_SECTIONS: dict[str, type] = {
    "study": StudySection,
    "evaluation": EvaluationSection,
    "bootstrap": BootstrapSection,
    "embedding": EmbeddingSection,
    "analysis": AnalysisSection,
}


def _entries(data: Mapping[str, Any], key: str, cls: type, required: str, source: str) -> list[Any]:
    """The ``[[datasets]]`` or ``[[models]]`` tables: at least one, each with ``required`` set
    and a distinct name (default: from the reference, :func:`~adaptlab.study.schema.default_name`)."""
    raw = data.get(key, [])
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{source}: [[{key}]]: expected at least one [[{key}]] table")
    items = [build_section(cls, item, f"{source}: {key}[{i}]") for i, item in enumerate(raw)]
    for i, item in enumerate(items):
        if not getattr(item, required):
            raise ConfigError(f"{source}: {key}[{i}].{required}: required, expected a non-empty string")
        if not item.name:
            item.name = default_name(getattr(item, required), dataset=key == "datasets")
    dup = _first_repeat(it.name for it in items)
    if dup:
        raise ConfigError(f"{source}: {key}: two entries are named {dup!r}; give each a distinct name")
    return items


def _first_repeat(names: Iterable[str]) -> str | None:
    """The first name that occurs twice (in linear time: a study may list 60,000 datasets)."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return name
        seen.add(name)
    return None


def _check_names(study: Study) -> None:
    """Every name the store, the job ids and printed tables carry, checked and put in NFC by
    :func:`~adaptlab.storage.names.check_name`; two datasets (or models) whose names are equal
    once normalised are refused."""
    study.study.name = check_name(study.study.name, f"{study.source}: [study].name")
    sections: list[tuple[str, list[Any]]] = [("datasets", study.datasets), ("models", study.models)]
    for key, items in sections:
        given = [item.name for item in items]
        for i, item in enumerate(items):
            item.name = check_name(item.name, f"{study.source}: {key}[{i}].name")
        check_names(given, f"{study.source}: [[{key}]] names")
    if study.evaluation.baseline:
        study.evaluation.baseline = check_name(study.evaluation.baseline, f"{study.source}: [evaluation].baseline")


def _name_precisions(study: Study) -> None:
    """Systems at reduced precision get names that show it (``minilm`` -> ``minilm-bf16``), checked
    for clashes; an invalid backend or precision is left to :func:`check_sections` to report."""
    try:
        study.name_precisions()
    except ConfigError:
        return
    dup = _first_repeat(m.name for m in study.models)
    if dup:
        raise ConfigError(
            f"{study.source}: models: two entries are named {dup!r} once reduced precisions are "
            "shown in the names; give each a distinct name"
        )


def parse_study(data: Mapping[str, Any], *, source: str = "<memory>", base_dir: Path | None = None) -> Study:
    """Validate a parsed TOML document into a :class:`~adaptlab.study.schema.Study`."""
    valid = sorted([*_SECTIONS, "datasets", "models", "adapt", "tune"])
    unknown = sorted(set(data) - set(valid))
    if unknown:
        raise ConfigError(f"{source}: unknown section {unknown[0]!r}; valid sections: {', '.join(valid)}")
    built = {k: build_section(cls, data.get(k, {}), f"{source}: [{k}]") for k, cls in _SECTIONS.items()}
    datasets = _entries(data, "datasets", DatasetSection, "spec", source)
    models = _entries(data, "models", ModelSection, "ref", source)
    for key in ("adapt", "tune"):
        if key in data and not isinstance(data[key], dict):
            raise ConfigError(f"{source}: [{key}]: expected a table")
    study = Study(
        **built,
        datasets=datasets,
        models=models,
        adapt_table=dict(data.get("adapt", {})),
        tune_table=dict(data.get("tune", {})),
        source=source,
        base_dir=base_dir or Path.cwd(),
    )
    _name_precisions(study)
    _check_names(study)
    check_sections(study)
    read_adapt_sections(study)
    return study


def load_study(path: str | Path) -> Study:
    """Read a study TOML file and validate it whole, ``[adapt]`` and ``[tune]`` included.

    Parameters
    ----------
    path : str or path
        The study file. Relative paths in it resolve against the project root
        (:func:`~adaptlab.study.schema.project_root` of the file's folder: the nearest folder
        above it with a pyproject.toml, else its own).

    Returns
    -------
    Study
        The validated sections (``study.study``, ``study.datasets``, ``study.models``, ...).

    Raises
    ------
    ConfigError
        Naming the file, the section and the key: an unknown key, a wrong type, a value out
        of range (``demo.toml: [adapt].fraction: expected a number in (0.0, 1.0], got 0``).

    Examples
    --------
    >>> from pathlib import Path
    >>> _ = Path("demo.toml").write_text('''
    ... [study]
    ... name = "demo"
    ... store = "results/demo"
    ... [[datasets]]
    ... name = "synthetic"
    ... spec = "synthetic:n_documents=3,seed=0"
    ... [[models]]
    ... name = "hash"
    ... ref = "hash"
    ... [evaluation]
    ... metrics = ["acc@1", "mrr@10"]
    ... [bootstrap]
    ... n_resamples = 200
    ... [embedding]
    ... use_ray = false
    ... cache = "off"
    ... ''')
    >>> study = load_study("demo.toml")
    >>> study.study.name, [m.name for m in study.models], study.evaluation.metrics
    ('demo', ['hash'], ['acc@1', 'mrr@10'])
    """
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
    except RecursionError as e:  # tomllib reads nested arrays and inline tables recursively
        raise ConfigError(
            f"{p}: invalid study file: arrays or inline tables nested too deeply to read; "
            "expected the sections of a study file (see jobs/quickstart.toml)"
        ) from e
    return parse_study(data, source=str(p), base_dir=project_root(p.resolve().parent))
