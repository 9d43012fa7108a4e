"""Settings objects taken whole, or built from keyword options: the one rule of every function
that has a settings dataclass.

Such a function takes ``config: SomeSettings | None = None, **options: Unpack[SomeOptions]``
(``SomeOptions`` a ``TypedDict`` of the settings' field names, ``total=False``). The dataclass is
the one place that declares each default; :func:`settings_from` gives the settings of a call:
``config`` (or the dataclass' defaults) with the keyword options on top, so
``f(x, k=10)`` and ``f(x, config=SomeSettings(k=10))`` are the same call. An option that is not a
field of the settings is an :class:`UnknownOptionError` naming it and the valid ones.
Settings that decide how a reported number is computed take :func:`one_way_in` instead: the
object or the keywords, not both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from adaptlab.errors import ConfigError

__all__ = ["UnknownOptionError", "check_option_names", "one_way_in", "reject_unknown", "settings_from"]

S = TypeVar("S")


class UnknownOptionError(ConfigError, TypeError):
    """A keyword option that the settings do not have: a ``TypeError`` as for any unexpected
    keyword argument, and a :class:`~adaptlab.errors.ConfigError` (one line in the CLI)."""


def reject_unknown(where: str, given: Iterable[str], allowed: Iterable[str]) -> None:
    """Raise :class:`UnknownOptionError` naming the call ``where``, the first keyword of ``given``
    that is not in ``allowed``, and the allowed ones (sorted)."""
    valid = sorted(allowed)
    unknown = sorted(set(given) - set(valid))
    if unknown:
        raise UnknownOptionError(
            f"{where}() got an unexpected keyword argument {unknown[0]!r}; expected one of {', '.join(valid)}"
        )


def check_option_names(cls: type[Any], options: Mapping[str, Any], where: str) -> None:
    """:func:`reject_unknown` against the fields of the dataclass ``cls``."""
    reject_unknown(where, options, (f.name for f in dataclasses.fields(cls)))


def settings_from(cls: type[S], config: S | None, options: Mapping[str, Any], where: str) -> S:
    """The settings of one call: ``config`` (default: ``cls()``; a dataclass without defaults for
    every field is built from ``options`` alone) with ``options`` replacing its fields.

    Raises:
        UnknownOptionError: an option that is not a field of ``cls``; ``TypeError`` when ``config``
        is not a ``cls``.
    """
    check_option_names(cls, options, where)
    if config is None:
        return cls(**options)
    if not isinstance(config, cls):
        raise TypeError(f"{where}: config must be a {cls.__name__}, got {type(config).__name__}")
    return dataclasses.replace(config, **options) if options else config  # type: ignore[type-var]


def one_way_in(
    function: str, cls: type[S], config: S | None, given: Mapping[str, Any], config_key: str = "config"
) -> S:
    """The settings of ``function`` given one way only: ``config`` (the argument ``config_key``)
    or the keywords ``given`` (``cls(**given)``), never both.

    For settings that decide how a reported number is computed (the bootstrap, a threshold rule,
    a run's identity), where a keyword quietly overriding an object's field would hide a choice:
    both at once is a :class:`~adaptlab.errors.ConfigError` naming the keys; a ``config`` that is
    not a ``cls`` is one too. Call settings that may be overridden use :func:`settings_from`.
    """
    if config is None:
        return cls(**given)
    if not isinstance(config, cls):
        raise ConfigError(
            f"{function}: {config_key} must be an {cls.__module__}.{cls.__qualname__}, got {type(config).__name__}"
        )
    if given:
        raise ConfigError(
            f"{function}: give the {cls.__name__} settings either as {config_key}= or as keywords, not both "
            f"(got {config_key}= and {', '.join(sorted(given))}); put them in the {config_key} "
            f"(dataclasses.replace({config_key}, ...)) or drop {config_key}="
        )
    return config
