"""The package version, read from the installed distribution's metadata."""

from __future__ import annotations

from importlib import metadata

__all__ = ["__version__"]

try:
    __version__ = metadata.version("adaptlab")
except metadata.PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0+source"
