"""Keyword options of the public analyses: one settings object or its fields as keywords.

A public analysis takes ``config: SomeSettings | None = None, **options: Unpack[SomeOptions]``
(``SomeOptions`` a ``TypedDict`` of the settings' field names, ``total=False``), so the keyword
call style keeps working while the settings dataclass is the one place that declares each
default. :func:`split_options` checks the keys (an unknown key is a ``TypeError`` naming it and
the valid ones, like Python's own for an unexpected keyword) and sorts them into groups;
:func:`settings_of` builds the settings from one group, refusing a config and keywords at once
(one way in, as :func:`adaptlab.stats.settings.resolve_bootstrap` does for the bootstrap).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict, TypeVar

from adaptlab.options import one_way_in, reject_unknown

__all__ = ["BootstrapOptions", "Labels", "split_options", "settings_of"]

S = TypeVar("S")


class BootstrapOptions(TypedDict, total=False):
    """The loose bootstrap keywords of an analysis (``None``: the
    :class:`~adaptlab.stats.BootstrapConfig` default)."""

    n_resamples: int | None
    sample_size: int | None
    seed: int | None
    confidence: float | None


class Labels(TypedDict, total=False):
    """What an analysis on arrays records about its input: the system, the dataset and the
    number of queries excluded before the arrays were built."""

    system: str
    dataset: str
    n_excluded: int


def _keys(group: type) -> tuple[str, ...]:
    """The keys of the ``TypedDict`` ``group``, inherited ones included."""
    return tuple(group.__annotations__)


def split_options(function: str, options: Mapping[str, Any], *groups: type) -> tuple[dict[str, Any], ...]:
    """``options`` sorted into one dict per ``TypedDict`` of ``groups`` (in order; a key goes to
    the first group that has it). An unknown key is a ``TypeError`` naming ``function``, the key
    and the valid keys."""
    reject_unknown(function, options, {k for g in groups for k in _keys(g)})
    out: list[dict[str, Any]] = []
    taken: set[str] = set()
    for g in groups:
        keys = [k for k in _keys(g) if k in options and k not in taken]
        taken.update(keys)
        out.append({k: options[k] for k in keys})
    return tuple(out)


def settings_of(function: str, cls: type[S], config: S | None, given: Mapping[str, Any], config_key: str) -> S:
    """``config`` (the argument ``config_key`` of ``function``) or ``cls(**given)``, never both:
    :func:`adaptlab.options.one_way_in`."""
    return one_way_in(function, cls, config, given, config_key)
