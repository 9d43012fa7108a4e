"""Array backend for the bootstrap engine: CuPy on a CUDA GPU when available, else NumPy.

Random numbers never come from the backend: they are always drawn on the host with a numpy
Generator built from the ``seed`` argument, so a CuPy run and a NumPy run with the same seed
resample the same queries. Only the arithmetic (gathers, sums) runs on the chosen backend.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

import numpy as np

from adaptlab.errors import ConfigError

__all__ = ["BACKENDS", "cupy_available", "get_xp", "to_numpy"]

BACKENDS: tuple[str, ...] = ("auto", "numpy", "cupy")
"""Accepted values of the ``backend`` argument."""


@functools.lru_cache(maxsize=1)
def _cupy_or_none() -> ModuleType | None:
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None
        return cupy
    except Exception:  # ImportError, or CUDA present but unusable (driver, no device)
        return None


def cupy_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    return _cupy_or_none() is not None


def get_xp(backend: str = "auto") -> ModuleType:
    """The array module for ``backend``: ``"auto"`` (CuPy if usable, else NumPy), ``"numpy"``,
    or ``"cupy"`` (raises :class:`ConfigError` when CuPy or a CUDA device is missing)."""
    if backend not in BACKENDS:
        raise ConfigError(f"backend={backend!r} is not valid; expected one of {', '.join(BACKENDS)}")
    if backend == "numpy":
        return np
    cp = _cupy_or_none()
    if backend == "cupy" and cp is None:
        raise ConfigError(
            "backend='cupy' needs CuPy and a CUDA GPU; install the GPU extra "
            "(pip install 'adaptlab[gpu]', i.e. cupy-cuda12x) or use backend='numpy'"
        )
    return cp if cp is not None else np


def to_numpy(x: Any) -> np.ndarray:
    """A NumPy array from a NumPy or CuPy array (or anything ``np.asarray`` accepts)."""
    get = getattr(x, "get", None)
    if callable(get) and type(x).__module__.startswith("cupy"):
        return np.asarray(get())
    return np.asarray(x)


def is_numpy(xp: ModuleType) -> bool:
    """True when ``xp`` is NumPy itself."""
    return xp is np
