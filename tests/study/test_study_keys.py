"""The study-file reference (adaptlab.study.keys.sections) lists exactly the keys the parser
accepts, each with a type, a default and a help text."""

from __future__ import annotations

from dataclasses import fields

import pytest

from adaptlab.errors import ConfigError
from adaptlab.study import parse_study
from adaptlab.study.adapt_config import ADAPT_KEYS, TUNE_KEYS
from adaptlab.study.keys import sections
from adaptlab.study.load import _SECTIONS
from adaptlab.study.schema import DatasetSection, ModelSection

BASE = {"datasets": [{"spec": "synthetic:n_documents=3,seed=0"}], "models": [{"ref": "hash:8"}], "study": {"store": ""}}


def _keys(section):
    return {k.key for k in sections() if k.section == section}


def test_every_key_the_parser_accepts_is_listed_with_help():
    for name, cls in _SECTIONS.items():
        assert _keys(name) == {f.name for f in fields(cls)}
    assert _keys("datasets") == {f.name for f in fields(DatasetSection)}
    assert _keys("models") == {f.name for f in fields(ModelSection)}
    assert _keys("adapt") | {"pt", "ft", "llm", "colbert"} == set(ADAPT_KEYS)
    assert _keys("tune") == set(TUNE_KEYS)
    for k in sections():
        assert k.help and "\n" not in k.help and k.type and k.default, k


def test_the_listed_defaults_are_the_parsed_ones():
    study = parse_study({**BASE, "adapt": {"corpus": "synthetic:n_documents=20"}, "tune": {"num_samples": 2}})
    keys = {(k.section, k.key): k for k in sections()}
    assert keys[("adapt", "fraction")].default == str(study.adapt.fraction) == "0.3"
    assert keys[("adapt", "n_negatives")].default == str(study.adapt.n_negatives)
    assert keys[("adapt.ft", "learning_rate")].default == str(study.adapt.ft.learning_rate)
    assert keys[("tune", "confirm_fraction")].default == str(study.tune.sweep.confirm_fraction)
    assert keys[("adapt", "merge_source")].allowed == '"ft", "pt-ft"'


def test_declared_ranges_are_checked_with_the_file_section_and_key():
    with pytest.raises(
        ConfigError, match=r"^s.toml: \[bootstrap\]\.confidence: expected a number in \(0.0, 1.0\), got 1.5$"
    ):
        parse_study({**BASE, "bootstrap": {"confidence": 1.5}}, source="s.toml")
    with pytest.raises(ConfigError, match=r"^s.toml: models\[0\]\.batch_size: expected an integer >= 1, got 0$"):
        parse_study({**BASE, "models": [{"ref": "hash:8", "batch_size": 0}]}, source="s.toml")
    with pytest.raises(
        ConfigError, match=r"^s.toml: \[adapt\]\.test_fraction: expected a number in \(0.0, 1.0\), got 1$"
    ):
        parse_study({**BASE, "adapt": {"corpus": "synthetic:n_documents=20", "test_fraction": 1}}, source="s.toml")


def test_study_carries_typed_sections():
    from adaptlab.study import AdaptSettings, TuneSettings

    study = parse_study(
        {
            **BASE,
            "adapt": {"corpus": "synthetic:n_documents=20", "scales": [5, 10]},
            "tune": {"num_samples": 2, "scale": 5},
        }
    )
    assert isinstance(study.adapt, AdaptSettings) and isinstance(study.tune, TuneSettings)
    assert study.adapt.scales == (5, 10) and study.tune.sweep.num_samples == 2 and study.tune.scale == 5
    assert study.adapt.artifact_root is None  # placed under the store when the study runs
    assert parse_study(BASE).adapt is None and parse_study(BASE).tune is None


def test_model_override_rereads_the_adaptation_base_model():
    study = parse_study({**BASE, "adapt": {"corpus": "synthetic:n_documents=20"}})
    assert study.adapt.base_model == "hash:8"
    over = study.with_overrides(models=["hash:16"])
    assert over.adapt.base_model == "hash:16" and over.adapt.label == over.models[0].name
    assert study.adapt.base_model == "hash:8"  # the original is untouched
