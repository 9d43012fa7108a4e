"""The variant vocabulary: system names, their parsing and the predicates the layers above use."""

from __future__ import annotations

import pytest

from adaptlab.errors import ConfigError
from adaptlab.models import variants as v


@pytest.mark.parametrize(
    "label, variant, n, name",
    [
        ("minilm", v.BASE, None, "minilm-base"),
        ("minilm", v.PT, 10, "minilm-pt-s10"),
        ("minilm", v.FT, 100, "minilm-ft-s100"),
        ("minilm", v.PT_FT, 10, "minilm-pt-ft-s10"),
        ("bge-small-en", v.MERGED, 700, "bge-small-en-merged-s700"),
        ("colbert", v.family_variant(v.COLBERT_BASE), None, "colbert-base"),
        ("colbert", v.family_variant(v.COLBERT_FT), 100, "colbert-ft-s100"),
    ],
)
def test_system_names_round_trip(label, variant, n, name):
    assert v.system_name(label, variant, n) == name
    assert v.parse_system_name(name) == (label, variant, n)


def test_names_that_are_not_scale_study_systems():
    assert v.parse_system_name("minilm") is None and v.parse_system_name("minilm-ft-100") is None
    assert v.parse_system_name("minilm-xx-s10") is None
    with pytest.raises(ConfigError, match="needs the data scale"):
        v.system_name("minilm", v.FT)


def test_predicates_partition_the_variants():
    every = set(v.BI_ENCODER_VARIANTS) | set(v.COLBERT_VARIANTS) | {v.REFERENCE, v.MODEL}
    trained = {x for x in every if v.is_trained(x)}
    assert trained == set(v.TRAINED_VARIANTS) == every - set(v.UNTRAINED_VARIANTS)
    assert {x for x in every if v.is_colbert(x)} == {v.COLBERT_BASE, v.COLBERT_FT}
    assert {x for x in every if v.is_base(x)} == {v.BASE, v.COLBERT_BASE}
    assert set(v.TUNABLE_VARIANTS) <= trained and set(v.MERGE_SOURCES) <= trained
    assert v.family_variant(v.PT_FT) == v.PT_FT


def test_curve_order_follows_the_report_order_unknown_last():
    trained = [x for x in v.BI_ENCODER_VARIANTS if v.is_trained(x)]
    assert sorted(reversed(trained), key=v.curve_order) == trained
    assert v.curve_order("other") > max(v.curve_order(x) for x in trained)
