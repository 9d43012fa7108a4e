"""The study-file reference, generated from the schema's dataclasses.

:func:`sections` lists every section of a study file with its keys, in file order: the sections
the :class:`~adaptlab.study.schema.Study` dataclass declares (``[study]``, ``[[datasets]]``, ...),
then ``[adapt]`` and ``[tune]`` with their sub-tables. Each key's type and default come from the
field's type hint and default, its meaning from the field's metadata (``help``, and
``default_text`` where the default depends on the rest of the study; see
:func:`adaptlab.study.schema.setting`). Where a field has no help text the row says so instead of
guessing. The ``adaptlab-study`` directive (:mod:`adaptlab_docs.directives`) renders the
tables with :func:`render`."""

from __future__ import annotations

import dataclasses
import importlib
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, dataclass
from pathlib import Path
from typing import Any

from docutils import nodes

from adaptlab_docs.nodes_util import inline_paragraph, section, table

NO_MEANING = "(no description in the code yet)"
"""The meaning cell of a key whose field declares no help text."""


@dataclass(frozen=True)
class Key:
    """One key of a section: its name in the file, type, default and meaning ("" when the code
    gives none)."""

    name: str
    type: str
    default: str
    meaning: str
    allowed: str = ""


@dataclass(frozen=True)
class Section:
    """A section (``study``, ``datasets``, ``adapt.pt``): whether it is an array of tables
    (``[[datasets]]``), what it is for, and its keys."""

    name: str
    array: bool
    doc: str
    keys: tuple[Key, ...]

    @property
    def header(self) -> str:
        return f"[[{self.name}]]" if self.array else f"[{self.name}]"


# -- types and defaults as a study file writes them -------------------------------------------

_WORDS = {str: "string", int: "integer", float: "number", bool: "boolean", Path: "path"}


def type_text(tp: Any) -> str:
    """``int | None`` -> ``integer (optional)``, ``list[str]`` -> ``list of strings``, ..."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        words = " or ".join(dict.fromkeys(type_text(a) for a in rest))
        return words + (" (optional)" if len(rest) < len(args) else "")
    if origin in (list, tuple) or tp in (list, tuple):
        items = [
            m
            for a in args
            if a is not Ellipsis
            for m in (typing.get_args(a) if typing.get_origin(a) in (typing.Union, types.UnionType) else (a,))
        ]
        inner = " or ".join(dict.fromkeys(type_text(a) + "s" for a in items)) if items else "values"
        return f"list of {inner}"
    if origin in (dict, Mapping) or tp in (dict, Mapping) or (dataclasses.is_dataclass(tp) and isinstance(tp, type)):
        return "table"
    if tp is Any:
        return "any"
    return _WORDS.get(tp, getattr(tp, "__name__", str(tp)))


def toml_value(value: Any) -> str:
    """A Python default written as TOML: ``"x"``, ``true``, ``[10, 100]``, ``{}``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, Path)):
        return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + "}"
    return repr(value)


def default_text(f: dataclasses.Field) -> str:
    """The default of a field as the reference shows it: ``default_text`` metadata, else the
    TOML value, ``required`` when there is none, ``(not set)`` for None."""
    if f.metadata.get("default_text"):
        return str(f.metadata["default_text"])
    if f.default is not MISSING:
        value = f.default
    elif f.default_factory is not MISSING:  # type: ignore[misc]
        value = f.default_factory()  # type: ignore[misc]
    else:
        return "required"
    return "(not set)" if value is None else toml_value(value)


def toml_key(f: dataclasses.Field) -> str:
    """The study-file key of a field: its ``key`` metadata, else its name."""
    return f.metadata.get("key") or f.name


def _hints(cls: type) -> dict[str, Any]:
    """Type hints of ``cls``, also where they name classes imported only for type checking."""
    namespace: dict[str, Any] = {}
    for name in ("adaptlab.study.schema", "adaptlab.study.adapt_config"):
        namespace.update(vars(importlib.import_module(name)))
    return typing.get_type_hints(cls, localns=namespace)


def _key(f: dataclasses.Field, tp: Any) -> Key:
    return Key(toml_key(f), type_text(tp), default_text(f), " ".join(str(f.metadata.get("help", "")).split()))


def keys_of(cls: type, *, skip: Iterable[str] = ()) -> list[Key]:
    """The keys a dataclass declares, in field order; fields typed as a dataclass (sub-tables or
    values derived by the reader) and ``skip`` are left out."""
    hints = _hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        inner = [a for a in typing.get_args(tp) if a is not type(None)] or [tp]
        if f.name in skip or any(dataclasses.is_dataclass(a) and isinstance(a, type) for a in inner):
            continue
        out.append(_key(f, tp))
    return out


def _doc(cls: type) -> str:
    """The first paragraph of a class docstring, as one line."""
    text = (cls.__doc__ or "").strip().split("\n\n")[0]
    return " ".join(text.split())


# -- the enumeration -------------------------------------------------------------------------


def _study_sections() -> list[Section]:
    """The sections the :class:`Study` dataclass declares, in field order."""
    from adaptlab.study.schema import Study

    hints = _hints(Study)
    out = []
    for f in dataclasses.fields(Study):
        tp = hints[f.name]
        array = typing.get_origin(tp) is list
        cls = typing.get_args(tp)[0] if array else tp
        inner = [a for a in typing.get_args(cls) if a is not type(None)] if typing.get_origin(cls) else [cls]
        if f.name in ("adapt", "tune") or not (dataclasses.is_dataclass(inner[0]) and isinstance(inner[0], type)):
            continue
        out.append(Section(f.name, array, _doc(inner[0]), tuple(keys_of(inner[0]))))
    return out


def _lookup(key: str, classes: Iterable[type]) -> Key | None:
    """The first field among ``classes`` whose study-file key is ``key``."""
    for cls in classes:
        hints = _hints(cls)
        for f in dataclasses.fields(cls):
            if toml_key(f) == key:
                return _key(f, hints[f.name])
    return None


def _listed(section: str, names: Iterable[str], classes: tuple[type, ...], doc: str) -> Section:
    """A section whose reader lists its keys (``[adapt]``, ``[tune]``): a row per listed key,
    typed and described by the first of ``classes`` declaring it."""
    rows = []
    for name in sorted(names):
        found = _lookup(name, classes)
        rows.append(found or Key(name, "", "", ""))
    return Section(section, False, doc, tuple(rows))


def _adapt_sections() -> list[Section]:
    """``[adapt]``, its sub-tables and ``[tune]``."""
    from adaptlab.adapt.train.colbert import ColBERTFTConfig
    from adaptlab.adapt.train.ft import FTConfig
    from adaptlab.adapt.train.pt import PTConfig
    from adaptlab.adapt.train.sweep_config import SweepConfig
    from adaptlab.stats import BootstrapConfig
    from adaptlab.study import adapt_config as ac

    subtables = {"pt": PTConfig, "ft": FTConfig, "llm": ac.LLMSettings, "colbert": ac.ColBERTSettings}
    adapt_keys = getattr(ac, "ADAPT_KEYS", None) or ac._ADAPT_KEYS
    adapt = _listed(
        "adapt", [k for k in adapt_keys if k not in subtables], (ac.AdaptSettings, PTConfig), _doc(ac.AdaptSettings)
    )
    out = [adapt]
    for name, cls in subtables.items():
        keys = keys_of(cls)
        if cls is ac.ColBERTSettings:
            keys = _colbert_keys(keys) + keys_of(ColBERTFTConfig)
        out.append(Section(f"adapt.{name}", False, _doc(cls), tuple(keys)))
    out.append(_listed("tune", ac.TUNE_KEYS, (ac.TuneSettings, SweepConfig, BootstrapConfig), _doc(ac.TuneSettings)))
    return out


_COLBERT_READER_KEYS = {"batch_size_eval": "integer"}
"""``[adapt.colbert]`` keys its reader takes that a ColBERTSettings without ``setting`` metadata
does not declare: ``name`` fills the ``label`` field; ``batch_size_eval`` is read beside the
fields. Used only while the dataclass does not declare them itself."""


def _colbert_keys(keys: list[Key]) -> list[Key]:
    """``[adapt.colbert]``'s own keys: the declared ones, the reader's ``name`` for ``label`` and
    its ``batch_size_eval`` when the dataclass does not declare them."""
    names = {k.name for k in keys}
    out = []
    for k in keys:
        if k.name == "label" and "name" not in names:
            k = Key("name", k.type, k.default, k.meaning)
        out.append(k)
    for name, type_word in _COLBERT_READER_KEYS.items():
        if name not in {k.name for k in out}:
            out.append(Key(name, type_word, "", ""))
    return out


def _from_keys_module(infos: Iterable[Any]) -> list[Section]:
    """Sections from :func:`adaptlab.study.keys.sections` (one record per key, with its section,
    key, type, default, allowed values and help), in its order; a section's text is its class
    docstring where the :class:`Study` dataclass names the class."""
    from adaptlab.study.schema import Study

    hints = _hints(Study)
    grouped: dict[str, list[Key]] = {}
    for info in infos:
        grouped.setdefault(info.section, []).append(
            Key(info.key, info.type, info.default, " ".join(str(info.help).split()), info.allowed)
        )
    out = []
    for name, keys in grouped.items():
        tp = hints.get(name)
        array = typing.get_origin(tp) is list
        cls = typing.get_args(tp)[0] if array else tp
        inner = [a for a in typing.get_args(cls) if a is not type(None)] if typing.get_origin(cls) else [cls]
        doc = _doc(inner[0]) if inner and isinstance(inner[0], type) and dataclasses.is_dataclass(inner[0]) else ""
        out.append(Section(name, array, doc, tuple(keys)))
    return out


def sections() -> list[Section]:
    """Every section of a study file with its keys, in the order a study file is read: from
    :func:`adaptlab.study.keys.sections` where the code has it (one enumeration of the declarative
    sections), else from the dataclasses and the key lists of ``[adapt]`` and ``[tune]``."""
    try:
        keys_module = importlib.import_module("adaptlab.study.keys")
    except ImportError:
        return [*_study_sections(), *_adapt_sections()]
    return _from_keys_module(keys_module.sections())


def undocumented(secs: Iterable[Section]) -> list[str]:
    """``[section].key`` of every key without a meaning in the code."""
    return [f"{s.header}.{k.name}" for s in secs for k in s.keys if not k.meaning]


# -- rendering -------------------------------------------------------------------------------


def render(secs: list[Section], document: nodes.document) -> list[nodes.Node]:
    """A section per study-file section: what it is for, then a table of its keys."""
    out: list[nodes.Node] = []
    for s in secs:
        sec = section(s.header, "study-" + s.name.replace(".", "-"), document)
        if s.doc:
            sec += inline_paragraph(s.doc)
        rows = [[k.name, k.type or "-", k.default or "-", k.allowed or "-", k.meaning or NO_MEANING] for k in s.keys]
        sec += table(
            ["Key", "Type", "Default", "Allowed", "Meaning"], rows, [16, 12, 16, 16, 40], literal_columns=(0, 2)
        )
        out.append(sec)
    return out
