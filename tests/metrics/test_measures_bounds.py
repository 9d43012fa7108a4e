"""Cutoffs are bounded (issue 11, rows 1-2): a huge k is one clear error, not an OOM or a
numpy traceback."""

import pytest

from adaptlab.errors import ConfigError
from adaptlab.metrics import parse_measures
from adaptlab.metrics.measures import MAX_CUTOFF, Measure


@pytest.mark.parametrize(
    "spec",
    [
        "ndcg@1000000000",
        "ndcg@99999999999999999999999",
        f"acc@{MAX_CUTOFF + 1}",
        "recall@0",
        "p@00000000000000000000000000000000000000000001000000",
    ],
)
def test_out_of_range_cutoffs_are_config_errors(spec):
    with pytest.raises(ConfigError, match="cutoff k must be"):
        parse_measures(spec)


def test_largest_cutoff_and_leading_zeros_are_accepted():
    assert str(Measure.parse(f"ndcg@{MAX_CUTOFF}")) == f"ndcg@{MAX_CUTOFF}"
    assert Measure.parse("acc@0005") == Measure("acc", 5)


def test_non_integer_cutoff_is_rejected():
    with pytest.raises(ConfigError, match="integer"):
        Measure("ndcg", 2.5)  # type: ignore[arg-type]
