"""One entry point for every dataset format: ``load_dataset("FORMAT:PATH")``.

======================  ==============================================  =====================
spec                    loads                                           options
======================  ==============================================  =====================
``beir:DIR``            BEIR folder, queries of ``split`` (test)        --
``squad:FILE``          SQuAD JSON, paragraph level                     --
``squad-sentence:FILE`` SQuAD JSON, sentence level                      --
``pubmedqa:FILE``       PubMedQA ``ori_pqal.json``                      ``ids_file``
``sciq:FILE``           SciQ JSON                                       --
``pairs:FILE``          CSV/TSV/JSONL (question, context) rows          ``question_col``,
                                                                        ``context_col``,
                                                                        ``query_id_col``,
                                                                        ``doc_id_col``,
                                                                        ``title_col``,
                                                                        ``file_format``
``synthetic:[k=v,...]`` the synthetic domain (:mod:`.synthetic`)        ``n_documents``,
                                                                        ``n_queries``,
                                                                        ``level``, ``seed``,
                                                                        ``jargon_rate``,
                                                                        ``sentences_per_document``
======================  ==============================================  =====================

Only ``beir`` has splits; the other formats hold one set of questions and accept only the
default ``split="test"``. Options may also be given as keyword arguments, which override the
``k=v`` pairs of a synthetic spec (values there are parsed as int, float or text;
``sentences_per_document=8-14`` gives a range).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from adaptlab.data.beir import load_beir
from adaptlab.data.dataset import Dataset
from adaptlab.data.pairs import PairSettings, load_pairs
from adaptlab.data.pubmedqa import load_pubmedqa
from adaptlab.data.sciq import load_sciq
from adaptlab.data.squad import load_squad
from adaptlab.data.synthetic import synthetic_dataset
from adaptlab.errors import ConfigError

__all__ = ["DATASET_FORMATS", "check_dataset_options", "load_dataset", "parse_dataset_spec"]


def _squad_sentence(path: str | Path, *, name: str | None = None) -> Dataset:
    return load_squad(path, level="sentence", name=name)


_LOADERS: dict[str, Callable[..., Dataset]] = {
    "beir": load_beir,
    "pairs": load_pairs,
    "pubmedqa": load_pubmedqa,
    "sciq": load_sciq,
    "squad": load_squad,
    "squad-sentence": _squad_sentence,
    "synthetic": synthetic_dataset,
}
_SETTINGS: dict[str, type[Any]] = {"pairs": PairSettings}
"""The settings object of a loader that takes one (its fields are the format's options)."""
DATASET_FORMATS: tuple[str, ...] = tuple(sorted(_LOADERS))
"""The formats :func:`load_dataset` accepts before the colon."""


def parse_dataset_spec(spec: str) -> tuple[str, str]:
    """Split ``"FORMAT:PATH"`` into ``(format, rest)``; the format is lowercased."""
    if not isinstance(spec, str) or ":" not in spec:
        raise ConfigError(
            f"dataset spec {spec!r} is not FORMAT:PATH; expected one of "
            f"{', '.join(f + ':...' for f in DATASET_FORMATS)} (for example beir:data/scifact)"
        )
    fmt, rest = spec.split(":", 1)
    fmt = fmt.strip().lower()
    if fmt not in _LOADERS:
        raise ConfigError(f"unknown dataset format {fmt!r} in {spec!r}; valid formats: {', '.join(DATASET_FORMATS)}")
    return fmt, rest.strip()


def _parse_value(text: str) -> Any:
    text = text.strip()
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    if text.lower() in ("none", "null"):
        return None
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return text


def _synthetic_options(rest: str, spec: str) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for item in filter(None, (x.strip() for x in rest.split(","))):
        if "=" not in item:
            raise ConfigError(
                f"dataset spec {spec!r}: {item!r} is not key=value (for example synthetic:n_documents=40,seed=3)"
            )
        key, value = (x.strip() for x in item.split("=", 1))
        if key == "sentences_per_document":
            lo, _, hi = value.partition("-")
            options[key] = (int(lo), int(hi or lo))
        else:
            options[key] = _parse_value(value)
    return options


def load_dataset(spec: str, *, split: str = "test", name: str | None = None, **options: Any) -> Dataset:
    """Load the dataset described by ``spec`` (``"FORMAT:PATH"``; formats in the module doc).

    Raises ConfigError for an unknown format (listing the valid ones), an option the format
    does not take (listing those it does) or a split the format lacks; DataError for problems
    in the files themselves.
    """
    fmt, rest = parse_dataset_spec(spec)
    loader = _LOADERS[fmt]
    if fmt == "synthetic":
        try:
            kwargs = {**_synthetic_options(rest, spec), **options}
        except ValueError as e:
            raise ConfigError(f"dataset spec {spec!r}: {e}") from e
        if name is not None:
            kwargs["name"] = name
        args: tuple[Any, ...] = ()
    else:
        if not rest:
            raise ConfigError(f"dataset spec {spec!r} names no path after '{fmt}:'")
        kwargs = dict(options)
        if name is not None:
            kwargs["name"] = name
        args = (Path(rest).expanduser(),)
    if fmt == "beir":
        kwargs["split"] = split
    elif split != "test":
        raise ConfigError(
            f"dataset {spec!r}: format {fmt!r} has a single set of questions; split={split!r} "
            "is only available for beir datasets (leave split at its default 'test')"
        )
    check_dataset_options(spec, **kwargs)
    return loader(*args, **kwargs)


def check_dataset_options(spec: str, **options: Any) -> None:
    """A ConfigError naming the first of ``options`` that the format of ``spec`` does not take,
    and the options it does take."""
    fmt, _ = parse_dataset_spec(spec)
    accepted = _keyword_options(_LOADERS[fmt]) - {"config"}
    if fmt in _SETTINGS:  # a loader with a settings object takes its fields as keyword options
        accepted |= {f.name for f in dataclasses.fields(_SETTINGS[fmt])}
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise ConfigError(
            f"dataset {spec!r}: option {unknown[0]!r} is not valid for format {fmt!r}; "
            f"valid options: {', '.join(sorted(accepted - {'name', 'split'})) or 'none'}"
        )


def _keyword_options(fn: Callable[..., Any]) -> set[str]:
    params = inspect.signature(fn).parameters.values()
    return {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)} - {"path"}
