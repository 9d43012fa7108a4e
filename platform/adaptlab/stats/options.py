"""A bootstrap call's inputs, checked once: the per-query values and the settings of the call.

:func:`~adaptlab.stats.bootstrap_ci` and :func:`~adaptlab.stats.paired_bootstrap` take their
settings one way: a :class:`~adaptlab.stats.BootstrapConfig` (``config=``) or its fields as
keyword options (``n_resamples=``, ``seed=``, ...), never both; the execution options ``method``,
``backend`` and ``n_jobs`` (how the resamples are computed, :class:`Execution`) go with either.
:func:`resampling` resolves them (:func:`~adaptlab.stats.settings.resolve_bootstrap`, the config
declaring every default) and checks them against the number of queries ``Q``; the steps of both
functions then take the checked :class:`Resampling` whole.
"""

from __future__ import annotations

import numbers
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np

from adaptlab.errors import ConfigError, DataError
from adaptlab.stats._kernels import default_jobs
from adaptlab.stats.backend import get_xp, to_numpy
from adaptlab.stats.intervals import NEEDS_ALL_QUERIES
from adaptlab.stats.resample import check_sizes
from adaptlab.stats.settings import BootstrapConfig, ResampleOptions, check_option_keys, resolve_bootstrap

if sys.version_info >= (3, 11):
    from typing import Unpack
else:  # pragma: no cover - Python 3.10
    from typing_extensions import Unpack

__all__ = [
    "METHODS",
    "CIOptions",
    "Execution",
    "ExecutionOptions",
    "PairedOptions",
    "Resampling",
    "Unpack",
    "as_values",
    "resampling",
]

METHODS: tuple[str, ...] = ("auto", "index", "multinomial")
"""Accepted values of the ``method`` option."""


class ExecutionOptions(TypedDict, total=False):
    """How the resamples are computed, as keyword options (:class:`Execution`)."""

    method: str
    backend: str
    n_jobs: int | None


class CIOptions(ResampleOptions, ExecutionOptions, total=False):
    """The keyword options of :func:`~adaptlab.stats.bootstrap_ci`."""


class PairedOptions(CIOptions, total=False):
    """The keyword options of :func:`~adaptlab.stats.paired_bootstrap`: those of
    :func:`~adaptlab.stats.bootstrap_ci` and the paired ``test``."""

    test: str


@dataclass(frozen=True)
class Execution:
    """How a bootstrap call computes its resamples; never what they estimate.

    ``method``: ``"auto"`` (the cheaper path per system or pair), ``"index"`` or ``"multinomial"``
    (:mod:`adaptlab.stats.bootstrap`); ``backend``: ``"auto"``, ``"numpy"`` or ``"cupy"`` (the
    index path's arithmetic); ``n_jobs``: worker threads (None: the CPUs this process may use;
    no effect on the result).
    """

    method: str = "auto"
    backend: str = "auto"
    n_jobs: int | None = None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ConfigError(f"method={self.method!r} is not valid; expected one of {', '.join(METHODS)}")
        get_xp(self.backend)  # validates the name / availability
        n = self.n_jobs
        if n is not None and (isinstance(n, bool) or not isinstance(n, numbers.Integral) or int(n) < 1):
            raise ConfigError(f"n_jobs={n!r} must be a positive integer or None")

    @property
    def jobs(self) -> int:
        """``n_jobs`` as a number of threads."""
        return default_jobs() if self.n_jobs is None else int(self.n_jobs)


_EXECUTION_KEYS = frozenset(ExecutionOptions.__optional_keys__)


@dataclass(frozen=True)
class Resampling:
    """The settings of one bootstrap call, checked against its ``Q`` queries: ``m`` resamples of
    ``l`` queries (``l`` resolved: ``Q`` for ``sample_size=None``), the seed, the CI level, the
    requested interval (checked against ``l``), the paired test and the :class:`Execution`."""

    m: int
    l: int
    seed: int
    confidence: float
    interval: str
    test: str
    run: Execution

    @property
    def jobs(self) -> int:
        return self.run.jobs


def resampling(
    function: str,
    n_queries: int,
    config: BootstrapConfig | None,
    options: Mapping[str, Any],
    valid: type,
) -> Resampling:
    """The checked settings of the call ``function`` on ``n_queries`` queries: ``config`` or the
    statistics among ``options`` (not both: :func:`~adaptlab.stats.settings.resolve_bootstrap`),
    the execution options, ``m`` and ``l`` by :func:`~adaptlab.stats.resample.check_sizes`, and
    an interval that needs every query refused when ``l < Q``. A key of ``options`` not in the
    TypedDict ``valid`` is a :class:`TypeError` naming it and the valid ones."""
    check_option_keys(function, options, valid)
    stats = {k: v for k, v in options.items() if k not in _EXECUTION_KEYS}
    boot = resolve_bootstrap(function, config, config_key="config", **stats)
    run = Execution(**{k: v for k, v in options.items() if k in _EXECUTION_KEYS})
    m, l = check_sizes(n_queries, boot.n_resamples, boot.sample_size, boot.allow_oversampling)
    if boot.interval in NEEDS_ALL_QUERIES and l != n_queries:
        raise ConfigError(
            f"interval={boot.interval!r} needs resamples of all {n_queries} queries; got sample_size={l} "
            "(use sample_size=None or interval='percentile')"
        )
    return Resampling(m, l, boot.seed, float(boot.confidence), boot.interval, boot.test, run)


def as_values(values: Any) -> np.ndarray:
    """``values`` as a C-contiguous float64 ``[n_systems, n_queries]`` array (a 1-D row becomes one
    system), checked: at least one system and one query, every value finite (a
    :class:`~adaptlab.errors.DataError` naming the first bad entry otherwise)."""
    try:
        arr = np.asarray(to_numpy(values), dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise DataError(f"values must be numbers, [n_queries] or [n_systems, n_queries]: {e}") from e
    if arr.ndim not in (1, 2):
        raise DataError(f"values must have shape [n_queries] or [n_systems, n_queries]; got shape {arr.shape}")
    one = arr.ndim == 1
    arr = arr[None, :] if one else arr
    if arr.shape[0] < 1 or arr.shape[1] < 1:
        raise DataError(f"values has no queries or no systems (shape {arr.shape})")
    bad = ~np.isfinite(arr)
    if bad.any():
        s, q = (int(x) for x in np.argwhere(bad)[0])
        raise DataError(
            f"{f'values[{q}]' if one else f'values[{s}, {q}]'} is {arr[s, q]}: per-query metric values must be "
            f"finite numbers (NaN is not allowed; {int(bad.sum())} such value(s)); drop the queries without "
            "judgments or fill them before bootstrapping"
        )
    return np.ascontiguousarray(arr)
