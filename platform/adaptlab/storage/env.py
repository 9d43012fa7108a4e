"""Settings read from the environment, one way: positive numbers (time-outs, sizes, bounds) and
the folder of the machine's local caches.

Every ``ADAPTLAB_*`` number goes through :func:`env_number`, so a bad value is one line naming
the variable and what is expected, whichever package reads it; every local cache (embeddings,
artifacts, ColBERT start checkpoints) lives under :func:`cache_home`.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from adaptlab.errors import AdaptlabError, ConfigError

__all__ = ["CACHE_ENV", "cache_home", "env_number"]

CACHE_ENV = "ADAPTLAB_CACHE"


def env_number(
    name: str,
    default: float,
    *,
    kind: type = float,
    maximum: float | None = None,
    error: type[AdaptlabError] = ConfigError,
    unit: str = "",
    allow_zero: bool = False,
) -> float:
    """``$name`` as a number > 0 (>= 0 with ``allow_zero``; <= ``maximum`` when given), or
    ``default`` when unset or blank. ``kind=int`` for whole numbers. A value that is not such a
    number raises ``error`` with one line naming the variable, the value and what is expected."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = kind(text)
    except ValueError:
        value = math.nan
    low_ok = value >= 0 if allow_zero else value > 0
    if not (low_ok and math.isfinite(value)) or (maximum is not None and value > maximum):
        sign = "a non-negative" if allow_zero else "a positive"
        what = f"{sign} whole number" if kind is int else f"{sign} number"
        upto = f" up to {maximum:g}" if maximum is not None else ""
        raise error(f"${name}={text!r}: expected {what}{(' of ' + unit) if unit else ''}{upto}")
    return value


def cache_home() -> Path:
    """The machine's cache folder: ``$ADAPTLAB_CACHE``, else ``$XDG_CACHE_HOME/adaptlab``, else
    ``~/.cache/adaptlab`` (the XDG Base Directory rule)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "adaptlab"
