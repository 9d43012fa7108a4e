"""adaptlab: did adapting this embedding model to my domain help, by how much, how sure are we?

The public API::

    from adaptlab import load_study, run_study

    outcome = run_study(load_study("jobs/quickstart.toml"))
    store = adaptlab.results.open("results/quickstart")

Entry points (each docstring has a parameter list and a runnable example, which the suite runs:
tests/docs/test_api_examples.py):

- studies: :func:`load_study` (read and validate a study file), :func:`run_study` (run it,
  storing every dataset's results), :func:`submit_study` (send it to a Ray cluster as a job);
- results: :mod:`results` (``results.open(root)``: the store's queries as pyarrow or pandas);
- from notebook objects: :func:`evaluate` (per-query values of a run against qrels, with CIs),
  :func:`compare` (every pair of systems: paired tests, letters, tiers);
- statistics: :func:`bootstrap_ci`, :func:`paired_bootstrap`, :class:`BootstrapConfig`,
  :func:`plan_sample_size` (queries needed to detect a difference).

The top-level namespace is light: it imports neither torch nor ray. Every name below loads its
module on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from adaptlab._version import __version__

__all__ = [
    "BootstrapConfig",
    "__version__",
    "bootstrap_ci",
    "compare",
    "evaluate",
    "load_study",
    "paired_bootstrap",
    "plan_sample_size",
    "results",
    "run_study",
    "submit_study",
]

_LAZY: dict[str, tuple[str, str | None]] = {
    "BootstrapConfig": ("adaptlab.stats", "BootstrapConfig"),
    "bootstrap_ci": ("adaptlab.stats", "bootstrap_ci"),
    "compare": ("adaptlab.analysis", "compare"),
    "evaluate": ("adaptlab.evaluation", "evaluate"),
    "load_study": ("adaptlab.study", "load_study"),
    "paired_bootstrap": ("adaptlab.stats", "paired_bootstrap"),
    "plan_sample_size": ("adaptlab.analysis", "plan_sample_size"),
    "results": ("adaptlab.results", None),
    "run_study": ("adaptlab.study", "run_study"),
    "submit_study": ("adaptlab.study", "submit_study"),
}
"""Public name -> (module, attribute; None: the module itself). Loaded by name, not imported
here, so that ``import adaptlab`` stays fast and the package graph has no edge back up."""


def __getattr__(name: str) -> Any:  # lazy: keep `import adaptlab` fast
    if name not in _LAZY:
        raise AttributeError(f"module 'adaptlab' has no attribute {name!r}")
    module, attr = _LAZY[name]
    value = importlib.import_module(module)
    return value if attr is None else getattr(value, attr)


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
