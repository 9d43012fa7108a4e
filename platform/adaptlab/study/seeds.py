"""Randomness from one root: how a study's seeds are chosen (the one place that says so).

Every random choice of a study comes from ``[study].seed`` (the *root*, default 0), derived per
stage by name with :func:`adaptlab.stats.derive_seed` (``SeedSequence(root, spawn_key=sha256(
stage))``), unless the stage's own seed is given explicitly in the study file, which then wins:

==============  =========================  ===============================================
stage           explicit key               when not given
==============  =========================  ===============================================
``bootstrap``   ``[bootstrap].seed``       ``derive_seed(root, "bootstrap")``
``tune``        ``[tune].ci_seed``         ``derive_seed(root, "tune")``
``adapt``       ``[adapt].seed``           the root itself
``retrieval``   (none)                     the root itself
==============  =========================  ===============================================

- ``bootstrap`` draws the resamples of every CI and paired test; the ``[analysis]`` measures
  (thresholds, COE/ROE, topic diversity) use the same seed, so they see the same resamples.
- ``tune`` is the bootstrap of a Ray Tune trial's objective (lower CI bound).
- ``adapt`` (data order, question generation, splits, training) and ``retrieval`` (the random
  corpus document of ``sim_random``) take the root itself: both fixed their numbers before
  stage derivation existed, and ``adapt``'s seed is part of the content keys of the stored
  adaptation data and trained artifacts, so deriving it would retrain everything.

So a study file that sets ``[bootstrap].seed = 0`` (all of ``jobs/``) gives the numbers it gave
before; one that leaves it out gets a bootstrap seed independent of the retrieval draw.
"""

from __future__ import annotations

from adaptlab.stats import derive_seed

__all__ = ["DERIVED_STAGES", "ROOT_STAGES", "stage_seed"]

DERIVED_STAGES: tuple[str, ...] = ("bootstrap", "tune")
"""Stages whose seed, when not given, is ``derive_seed(root, stage)``."""

ROOT_STAGES: tuple[str, ...] = ("adapt", "retrieval")
"""Stages whose seed, when not given, is the root seed itself."""


def stage_seed(root: int, stage: str, explicit: int | None = None) -> int:
    """The seed of ``stage``: ``explicit`` when given, else the rule of the module docstring."""
    if explicit is not None:
        return explicit
    if stage in ROOT_STAGES:
        return root
    return derive_seed(root, stage)
