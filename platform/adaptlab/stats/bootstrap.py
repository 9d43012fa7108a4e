"""Bootstrap confidence intervals of mean per-query metrics, and paired system comparisons.

Definitions (docs/sections/bootstrap.md has the full text): given per-query values
``x_1..x_Q`` of a system, one resample draws ``l`` queries uniformly with replacement
(``l = sample_size``, default ``Q``) and computes their mean ``x*``; ``m = n_resamples``
resamples give ``x*_1..x*_m``. The point estimate is the mean over all queries, ``boot_mean``
is the mean of the ``x*_j``, and the ``confidence`` interval is the percentile interval: the
``(1-c)/2`` and ``(1+c)/2`` quantiles of the ``x*_j`` (linear interpolation, as
``scipy.stats.bootstrap(method="percentile")``). The paper setting ``m=500, l=100`` is
``n_resamples=500, sample_size=100``.

Two computation paths give the same bootstrap distribution:

* ``"index"``: draw the query indices (:func:`adaptlab.stats.resample_indices`, shared by
  every system), gather and average. Cost grows with ``m * l``.
* ``"multinomial"``: exact for any data, fast when the values take few distinct values
  (accuracy@k, nDCG@k or MRR@k with one gold document): the resample mean is
  ``sum_k N_k v_k / l`` with counts ``N ~ Multinomial(l, n_k / Q)`` over the ``K`` distinct
  values, drawn exactly by :mod:`adaptlab.stats._multinomial`; cost grows with ``m * K``,
  not with ``Q`` or ``l``. Paired differences use the distinct per-query differences of the
  two systems (exact pairing), drawn in the pair's canonical orientation from a stream keyed by
  the two rows' contents.

``method="auto"`` picks the path with the smaller estimated cost, per system for CIs and per pair
for differences, from that system's or pair's own values: a CI depends only on its system's
values, a paired difference only on its two systems' values (never on the other systems or on
their order), and the pair ``(b, a)`` gets exactly the negated differences and interval of
``(a, b)``. Randomness comes only from
``seed`` (numpy Generators with SFC64 bit generators seeded by
``SeedSequence(seed, spawn_key=...)``, :func:`adaptlab.stats.resample.stream`); results do not
depend on ``n_jobs`` or on the backend.

The public bootstrap, one concept per module, re-exported here: :mod:`adaptlab.stats.means`
(:func:`bootstrap_ci`, :class:`BootstrapResult`), :mod:`adaptlab.stats.paired`
(:func:`paired_bootstrap`, :class:`PairedDifference`), :mod:`adaptlab.stats.pairs` (which systems
are compared) and :mod:`adaptlab.stats.options` (the values and settings of a call, checked once:
:data:`METHODS`, the keyword options, :class:`~adaptlab.stats.options.Resampling`).
"""

from __future__ import annotations

from adaptlab.stats.means import BootstrapResult, bootstrap_ci
from adaptlab.stats.options import METHODS
from adaptlab.stats.paired import PairedDifference, paired_bootstrap

__all__ = ["METHODS", "BootstrapResult", "PairedDifference", "bootstrap_ci", "paired_bootstrap"]
