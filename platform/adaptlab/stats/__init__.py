"""adaptlab.stats: the bootstrap engine.

Percentile bootstrap confidence intervals of mean per-query metrics (:func:`bootstrap_ci`),
paired comparisons with two-sided p-values (:func:`paired_bootstrap`: the sign-flip
randomization test, exact or with as many sign vectors as the family needs,
:mod:`adaptlab.stats.signflip`; the bootstrap p-value only from :data:`PERMUTATION_Q` queries on
when its floor fits the family), and the shared
resample indices (:func:`resample_indices`, :func:`iter_resample_indices`) that other analyses
reuse to see exactly the same bootstrap samples, and the percentile interval
(:func:`percentile_interval`) every analysis reports; BCa, Wilson and Jeffreys intervals
(:mod:`adaptlab.stats.intervals`), multiplicity adjustment, exact paired tests and p-value printing
(:mod:`adaptlab.stats.pvalues`) and simultaneous rank intervals with the tied-with-best set
(:mod:`adaptlab.stats.ranks`). :mod:`adaptlab.stats.backend` selects NumPy or
CuPy for the arithmetic; random numbers always come from a seeded numpy Generator on the host.
"""

from __future__ import annotations

from adaptlab.stats import backend
from adaptlab.stats._kernels import percentile_interval
from adaptlab.stats.bootstrap import (
    METHODS,
    BootstrapResult,
    PairedDifference,
    bootstrap_ci,
    paired_bootstrap,
)
from adaptlab.stats.intervals import INTERVALS
from adaptlab.stats.pvalues import (
    ADJUSTMENTS,
    PAIRED_TESTS,
    PERMUTATION_Q,
    SMALL_SAMPLE_Q,
    adjust_pvalues,
    exact_paired_tests,
    format_p_value,
    sign_flip_p_values,
)
from adaptlab.stats.ranks import RankIntervals, rank_intervals, ranks_from_tests, simultaneous_ranks
from adaptlab.stats.resample import iter_resample_indices, resample_indices
from adaptlab.stats.settings import BootstrapConfig, derive_seed

__all__ = [
    "ADJUSTMENTS",
    "BootstrapConfig",
    "BootstrapResult",
    "INTERVALS",
    "PAIRED_TESTS",
    "METHODS",
    "PERMUTATION_Q",
    "PairedDifference",
    "RankIntervals",
    "SMALL_SAMPLE_Q",
    "adjust_pvalues",
    "backend",
    "bootstrap_ci",
    "derive_seed",
    "exact_paired_tests",
    "format_p_value",
    "iter_resample_indices",
    "paired_bootstrap",
    "percentile_interval",
    "rank_intervals",
    "ranks_from_tests",
    "resample_indices",
    "sign_flip_p_values",
    "simultaneous_ranks",
]
