"""adaptlab: did adapting this embedding model to my domain help, by how much, how sure are we?

The top-level namespace is light: it imports neither torch nor ray. Heavy subpackages
(models, embedding on Ray, adaptation) load on first use.
"""

from __future__ import annotations

from typing import Any

from adaptlab._version import __version__

__all__ = ["__version__", "bootstrap_ci", "paired_bootstrap", "results"]


def __getattr__(name: str) -> Any:  # lazy: keep `import adaptlab` fast
    if name in ("bootstrap_ci", "paired_bootstrap"):
        from adaptlab.stats import bootstrap

        return getattr(bootstrap, name)
    if name == "results":
        import importlib

        return importlib.import_module("adaptlab.results")
    raise AttributeError(f"module 'adaptlab' has no attribute {name!r}")
