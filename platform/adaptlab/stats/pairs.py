"""The systems a paired bootstrap compares: names, a baseline, or explicit pairs, as row pairs.

A pair ``(a, b)`` of rows of the ``[n_systems, n_queries]`` values stands for the difference
``a - b``. :func:`compared_pairs` checks the names and builds the pairs: the explicit ones when
given, else every system against the baseline, else every pair ``(i, j)`` with ``i < j``.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np

from adaptlab.errors import ConfigError, DataError

__all__ = ["compared_pairs"]


def _system_index(n_sys: int, names: Sequence[str] | None, system: int | str, what: str) -> int:
    """The row index of ``system`` (a name among ``names`` or an index in ``0..n_sys-1``)."""
    if isinstance(system, str):
        if names is None or system not in names:
            raise ConfigError(
                f"{what}={system!r} is not one of the system names "
                f"{list(names) if names is not None else '(no names given)'}"
            )
        return list(names).index(system)
    if isinstance(system, numbers.Integral) and not isinstance(system, bool):
        if not 0 <= int(system) < n_sys:
            raise ConfigError(f"{what}={system!r} is not a system index in 0..{n_sys - 1}")
        return int(system)
    raise ConfigError(f"{what}={system!r} must be a system index, a name, or None")


def _explicit_pairs(
    n_sys: int, names: Sequence[str] | None, explicit: Sequence[tuple[int | str, int | str]]
) -> list[tuple[int, int]]:
    """``explicit`` as row pairs, checked: two different systems each, no pair twice, not empty."""
    out: list[tuple[int, int]] = []
    for pair in explicit:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ConfigError(f"pairs: each entry must be (system, compared_to); got {pair!r}")
        a, b = (_system_index(n_sys, names, x, "pairs entry") for x in pair)
        if a == b or (a, b) in out:
            raise ConfigError(f"pairs: {tuple(pair)!r} compares a system with itself or repeats a pair")
        out.append((a, b))
    if not out:
        raise ConfigError("pairs: empty; give at least one (system, compared_to) pair or pairs=None")
    return out


def _pairs(
    n_sys: int,
    names: Sequence[str] | None,
    baseline: int | str | None,
    explicit: Sequence[tuple[int | str, int | str]] | None = None,
) -> list[tuple[int, int]]:
    """Row-index pairs ``(a, b)`` (difference ``a - b``): ``explicit`` when given, else every
    system against ``baseline``, else all pairs."""
    if explicit is not None:
        if baseline is not None:
            raise ConfigError("give either baseline= or pairs=, not both")
        return _explicit_pairs(n_sys, names, explicit)
    if baseline is None:
        return [(i, j) for i in range(n_sys) for j in range(i + 1, n_sys)]
    base = _system_index(n_sys, names, baseline, "baseline")
    return [(i, base) for i in range(n_sys) if i != base]


def _check_names(names: Sequence[str] | None, n_sys: int) -> list[str] | None:
    """``names`` as strings, checked to be ``n_sys`` distinct ones (``None`` stays ``None``)."""
    if names is None:
        return None
    names = [str(x) for x in names]
    if len(names) != n_sys or len(set(names)) != n_sys:
        raise ConfigError(f"names must be {n_sys} distinct strings (one per row); got {names}")
    return names


def compared_pairs(
    arr: np.ndarray,
    names: Sequence[str] | None,
    baseline: int | str | None,
    pairs: Sequence[tuple[int | str, int | str]] | None,
) -> tuple[list[str] | None, list[tuple[int, int]]]:
    """At least two systems (rows of ``arr``), their checked ``names`` and the row pairs to
    compare, checked in that order: ``pairs`` (names or indices) when given, else every system
    against ``baseline``, else every pair ``(i, j)``, ``i < j``."""
    n_sys = arr.shape[0]
    if n_sys < 2:
        raise DataError(f"paired_bootstrap needs at least 2 systems; values has shape {arr.shape}")
    names = _check_names(names, n_sys)
    return names, _pairs(n_sys, names, baseline, pairs)
