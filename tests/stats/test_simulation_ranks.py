"""The tied-with-best set and simultaneous rank intervals (held-out style, bounded, seeded).

With K truly equal systems (exchangeable: a per-query difficulty shared by all, each system's
outcome drawn independently given it) no system may be left out of the tied-with-best set more
than 5% of the time, for K = 2 to 20. The set comes from the same Holm-adjusted sign-flip tests
as the significance letters, so it is bounded by Holm's family-wise error. Monte Carlo precision:
``REPS`` = 400 data sets per K give a standard error of about sqrt(0.05 * 0.95 / 400) = 0.011 at
a true rate of 0.05; the measured rates (printed) are far lower, as Holm over exact sign tests
is conservative.
"""

from __future__ import annotations

import numpy as np
import pytest

from adaptlab.analysis.compare import compare
from adaptlab.stats import BootstrapConfig, ranks_from_tests, simultaneous_ranks

REPS = 400
Q = 100


def _equal_systems(k: int, q: int, rng: np.random.Generator, graded: bool = False) -> np.ndarray:
    p_q = rng.beta(4.0, 1.5, size=q)
    if not graded:
        return (rng.random((k, q)) < p_q).astype(np.float64)
    rank = rng.geometric(p_q, size=(k, q))
    return np.where(rank <= 10, 1.0 / np.log2(rank + 1.0), 0.0)


@pytest.mark.parametrize("k", [2, 5, 10, 20])
def test_equal_systems_are_all_tied_with_the_best(k: int) -> None:
    rng = np.random.default_rng(100 + k)
    excluded = sum(
        not simultaneous_ranks(_equal_systems(k, Q, rng), n_resamples=200, seed=i).tied_with_best.all()
        for i in range(REPS)
    )
    rate = excluded / REPS
    print(f"K={k} equal accuracy-like systems, Q={Q}: P(any excluded) = {rate:.4f} over {REPS} data sets")
    assert rate <= 0.05


def test_equal_graded_systems_are_all_tied_with_the_best() -> None:
    """nDCG-like values (no exact count: Monte Carlo sign vectors), K = 5."""
    rng = np.random.default_rng(7)
    reps = REPS
    excluded = sum(
        not simultaneous_ranks(_equal_systems(5, Q, rng, graded=True), n_resamples=200, seed=i).tied_with_best.all()
        for i in range(reps)
    )
    print(f"K=5 equal nDCG-like systems, Q={Q}: P(any excluded) = {excluded / reps:.4f} over {reps} data sets")
    assert excluded / reps <= 0.05


def test_a_clearly_better_system_is_alone_in_the_tied_set() -> None:
    rng = np.random.default_rng(1)
    v = _equal_systems(5, 300, rng)
    v[2] = np.maximum(v[2], rng.random(300) < 0.6)  # system 2 is better on many queries
    r = simultaneous_ranks(v, n_resamples=200, seed=0)
    assert r.tied_with_best.tolist() == [False, False, True, False, False]
    assert r.rank_low[2] == r.rank_high[2] == 1 and (r.rank_low[[0, 1, 3, 4]] >= 2).all()
    assert "simultaneous" in r.guarantee and "Holm" in r.guarantee
    assert "no simultaneous guarantee" in simultaneous_ranks(v, adjustment="bh").guarantee


def test_ranks_from_tests_contains_the_true_ranks_and_checks_its_input() -> None:
    r = ranks_from_tests([0.5, 0.7, 0.6], [(0, 1), (0, 2), (1, 2)], [0.01, 0.2, 0.3])
    assert r.rank.tolist() == [3, 1, 2] and r.rank_low.tolist() == [2, 1, 1] and r.rank_high.tolist() == [3, 2, 3]
    assert r.tied_with_best.tolist() == [False, True, True]
    with pytest.raises(Exception, match="all 3 pairs"):
        ranks_from_tests([0.5, 0.7, 0.6], [(0, 1)], [0.01])


def test_compare_tied_column_and_letters_never_contradict() -> None:
    """Ten equal systems: compare marks all ten tied with the best (the bootstrap rank intervals it
    used before left about four of ten out), and in every group a system is tied exactly when no
    letter says another system is better than it."""
    rng = np.random.default_rng(5)
    for rep in range(3):
        v = _equal_systems(10, Q, rng, graded=rep == 2)
        per = {f"s{i}": {"ndcg@10": v[i]} for i in range(10)}
        c = compare(per, boot=BootstrapConfig(n_resamples=300, seed=rep))
        frame = c.frame()
        if rep == 0:
            assert frame["tied_with_best"].all()
        beaten = {ch for s in frame["better_than"] for ch in s.replace(",", "")}
        for _, row in frame.iterrows():
            assert row["tied_with_best"] == (row["letter"] not in beaten)
