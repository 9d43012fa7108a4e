"""Validation of the [adapt] and [tune] sections of a scale study (no training, no models)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaptlab.errors import ConfigError
from adaptlab.study import load_study, parse_adapt_section, parse_tune_section, system_name
from adaptlab.study.adaptation import comparison_pairs
from adaptlab.study.outcome import SystemInfo
from adaptlab.study.schema import ModelSection

MODELS = [{"name": "minilm", "ref": "minilm"}]


def _adapt(study_factory, tmp_path, **adapt):
    study = study_factory({"corpus": "synthetic:n_documents=20,seed=0", **adapt}, models=MODELS)
    return study, parse_adapt_section(study, store=tmp_path)


def test_defaults_and_paths(study_factory, tmp_path):
    study, s = _adapt(study_factory, tmp_path)
    assert s.label == "minilm" and s.base_model == "minilm"
    assert s.base_section.name == "minilm-base" and s.base_section.ref == "minilm"
    assert s.scales == (10, 100, 700) and s.fraction == 0.3 and s.n_negatives == 10
    assert s.variants == ("base", "pt", "ft", "pt-ft", "merged")
    assert s.questions == "template"  # synthetic corpus
    assert s.artifact_root == (tmp_path / "artifacts").resolve()
    assert s.data_dir == (tmp_path / "adaptation").resolve()
    assert s.use_ray is False  # follows [embedding].use_ray of the study
    assert s.gpus_per_job is None  # "auto"
    # the data key depends on data settings only
    _, other = _adapt(study_factory, tmp_path, merge_weight=0.3)
    _, third = _adapt(study_factory, tmp_path, fraction=0.5)
    assert other.data_key() == s.data_key() != third.data_key()


def test_sub_tables_and_variant_order(study_factory, tmp_path):
    _, s = _adapt(
        study_factory,
        tmp_path,
        variants=["merged", "ft", "base"],
        scales=[5, 10, "all"],
        duplicate_threshold=False,
        gpus_per_job=0.5,
        ft={"learning_rate": 1e-4, "max_steps": 0, "num_negatives": 2},
        pt={"epochs": 2, "max_seq_length": 64},
    )
    assert s.variants == ("base", "ft", "merged")  # report order
    assert s.scales == (5, 10, "all")
    assert s.duplicate_threshold is None and s.gpus_per_job == 0.5
    assert s.ft.learning_rate == 1e-4 and s.ft.max_steps is None and s.ft.num_negatives == 2
    assert s.pt.epochs == 2 and s.pt.max_seq_length == 64


@pytest.mark.parametrize(
    ("adapt", "message"),
    [
        ({"scalez": [1]}, "[adapt]: unknown key 'scalez'; valid keys:"),
        ({"scales": [10, "x"]}, "[adapt].scales: expected a list of integers >= 1"),
        ({"scales": [100, 10]}, "[adapt].scales: expected strictly increasing"),
        ({"scales": ["all", 10]}, "strictly increasing"),
        ({"fraction": 0}, "[adapt].fraction: expected a number in (0.0, 1.0]"),
        ({"fraction": "half"}, "[adapt].fraction: expected a number"),
        ({"variants": ["ft", "pt-ft", "lora"]}, "[adapt].variants: expected a non-empty list of 'base'"),
        ({"variants": ["ft", "ft"]}, "without repeats"),
        ({"merge_weight": 1.5}, "[adapt].merge_weight: expected a number in [0.0, 1.0]"),
        ({"questions": "magic"}, "[adapt].questions: expected one of"),
        ({"questions": "llm"}, "[adapt.llm]: required"),
        ({"n_negatives": 2, "ft": {"num_negatives": 3}}, "[adapt.ft].num_negatives = 3 is more than"),
        ({"ft": {"learning_rate": "fast"}}, "[adapt.ft].learning_rate: expected a number"),
        ({"ft": {"lr": 1e-4}}, "[adapt.ft]: unknown key 'lr'"),
        ({"pt": {"mlm_probability": 1.5}}, "[adapt.pt]: PTConfig.mlm_probability"),
        ({"gpus_per_job": "many"}, '[adapt].gpus_per_job: expected a number or "auto"'),
        ({"llm": {"model": "m"}}, "[adapt.llm].base_url: required"),
        ({"heldout_name": "bench"}, "[adapt].heldout_name: expected a name no [[datasets]] entry uses"),
        ({"name": "a b"}, "[adapt].name: expected a non-empty system-name prefix"),
    ],
)
def test_errors_name_the_key(study_factory, tmp_path, adapt, message):
    with pytest.raises(ConfigError) as e:
        _adapt(study_factory, tmp_path, **adapt)
    assert message in str(e.value) and str(e.value).startswith("test.toml: ")


def test_corpus_required_and_template_needs_synthetic(study_factory, tmp_path):
    # validated whole when the study is parsed, before any work
    with pytest.raises(ConfigError, match=r"\[adapt\]\.corpus: required"):
        study_factory({"scales": [2]}, models=MODELS)
    with pytest.raises(ConfigError, match="needs a synthetic: corpus"):
        study_factory({"corpus": "corpus_dir", "questions": "template"}, models=MODELS)
    # a folder corpus defaults to inverse-cloze questions
    study = study_factory({"corpus": "corpus_dir"}, models=MODELS)
    assert parse_adapt_section(study, store=tmp_path).questions == "inverse-cloze"


def test_no_store_needs_explicit_roots(study_factory, tmp_path):
    study = study_factory({"corpus": "synthetic:n_documents=20"}, models=MODELS)
    with pytest.raises(ConfigError, match=r"\[adapt\]\.artifact_root: required when the study has no results store"):
        parse_adapt_section(study)
    study = study_factory(
        {"corpus": "synthetic:n_documents=20", "artifact_root": "art", "data_dir": "data"},
        models=MODELS,
        base_dir=tmp_path,
    )
    s = parse_adapt_section(study)
    assert s.artifact_root == (tmp_path / "art").resolve() and s.data_dir == (tmp_path / "data").resolve()


def test_base_model_by_name_or_reference(study_factory, tmp_path):
    models = [{"name": "mini", "ref": "minilm"}, {"name": "hashy", "ref": "hash:64"}]
    study = study_factory({"corpus": "synthetic:n_documents=20", "base_model": "hashy"}, models=models)
    s = parse_adapt_section(study, store=tmp_path)
    assert (s.label, s.base_model) == ("hashy", "hash:64")
    study = study_factory({"corpus": "synthetic:n_documents=20", "name": "m6"}, models=models)
    s = parse_adapt_section(study, store=tmp_path)
    assert (s.label, s.base_model, s.base_section.name) == ("m6", "minilm", "m6-base")
    # a model directory relative to the project root becomes an absolute path
    (tmp_path / "models" / "enc").mkdir(parents=True)
    study = study_factory(
        {"corpus": "synthetic:n_documents=20", "base_model": "./models/enc"}, models=models, base_dir=tmp_path
    )
    s = parse_adapt_section(study, store=tmp_path)
    assert Path(s.base_model) == (tmp_path / "models" / "enc").resolve() and s.label == "enc"


def test_system_names():
    assert system_name("minilm", "base") == "minilm-base"
    assert system_name("minilm", "ft", 100) == "minilm-ft-s100"
    assert system_name("minilm", "pt-ft", 10) == "minilm-pt-ft-s10"
    assert system_name("minilm", "merged", 700) == "minilm-merged-s700"
    with pytest.raises(ConfigError, match="needs the data scale"):
        system_name("minilm", "ft")


def test_tune_section(study_factory, tmp_path):
    pytest.importorskip("ray")
    adapt = {"corpus": "synthetic:n_documents=20", "scales": [5, 10]}
    tune = {
        "scale": 5,
        "num_samples": 2,
        "param_space": {"learning_rate": {"loguniform": [1e-5, 1e-4]}, "epochs": [1, 2], "merge_weight": 0.5},
    }
    study = study_factory(adapt, tune=tune, models=MODELS)
    s = parse_adapt_section(study, store=tmp_path)
    t = parse_tune_section(study, s, store=tmp_path)
    assert (t.scale, t.sweep.variant, t.sweep.measure, t.sweep.num_samples) == (5, "ft", "acc@5", 2)
    assert t.storage_path == (tmp_path / "tune").resolve() and t.sweep.gpus_per_trial is None
    from adaptlab.adapt.train.space import build_param_space

    space = build_param_space(t.sweep.param_space)
    assert space["merge_weight"] == 0.5 and sorted(space["epochs"].categories) == [1, 2]
    assert space["learning_rate"].lower == 1e-5

    for bad, message in [
        ({"scale": 7}, "[tune].scale: expected one of [adapt].scales"),
        ({"param_space": {"momentum": [0.9]}}, "[tune].param_space: unknown parameter 'momentum'"),
        ({"measure": "bleu"}, "[tune]: SweepConfig.measure: unknown measure 'bleu'"),
        ({"num_samples": 0}, "[tune]: SweepConfig.num_samples = 0: expected an integer >= 1"),
        ({"num_samples": 2.5}, "[tune].num_samples: expected an integer, got 2.5"),
        ({"variant": "pt"}, "[tune]: SweepConfig.variant = 'pt': expected 'ft' or 'pt-ft'"),
        ({"n_resamples": 0}, "[tune]: n_resamples must be a positive integer, got 0"),
        ({"confirm_fraction": 1.0}, "[tune]: SweepConfig.confirm_fraction = 1.0: expected a share strictly"),
        ({"trials": 3}, "[tune]: unknown key 'trials'"),
    ]:
        with pytest.raises(ConfigError) as e:  # at parse time: the whole study is validated
            study_factory(adapt, tune=bad, models=MODELS)
        assert message in str(e.value)
    with pytest.raises(ConfigError, match=r"\[tune\]\.param_space\.epochs: expected a table with one key of"):
        study_factory(adapt, tune={"param_space": {"epochs": {"lognormal": [1, 2]}}}, models=MODELS)
    with pytest.raises(ConfigError, match="validation_fraction > 0"):
        study_factory({**adapt, "validation_fraction": 0}, tune={"num_samples": 1}, models=MODELS)


@pytest.mark.parametrize(
    "space, message",
    [
        (
            {"learning_rate": {"loguniform": [0.0, 1e-4]}},
            "[tune].param_space.learning_rate.loguniform: expected valid bounds (a lower bound > 0), got [0.0, 0.0001]",
        ),
        (
            {"warmup_ratio": {"uniform": [0.2, 0.1]}},
            "[tune].param_space.warmup_ratio.uniform: expected valid bounds (finite lower < upper)",
        ),
        (
            {"epochs": {"randint": [1.5, 4]}},
            "[tune].param_space.epochs.randint: expected valid bounds (integer bounds)",
        ),
        ({"weight_decay": {"quniform": [0.0, 0.1, 0.03]}}, "expected valid bounds (bounds divisible by q)"),
        ({"weight_decay": {"quniform": [0.0, 0.1, 0]}}, "expected valid bounds (a step q > 0)"),
        ({"epochs": {"uniform": [1]}}, "[tune].param_space.epochs.uniform: expected a list of 2 numbers, got [1]"),
        ({"epochs": []}, "[tune].param_space.epochs: expected a non-empty list of values"),
        (
            {"scale": [20.0], "temperature": [0.05]},
            "[tune].param_space: give either scale or temperature (= 1/scale), not both",
        ),
    ],
)
def test_tune_space_is_checked_whole_when_the_study_loads(study_factory, space, message):
    """Bounds Ray Tune would refuse or sample nothing from, and a conflicting pair, fail when the
    study file is read (no Ray import), not when the sweep starts after the data preparation."""
    adapt = {"corpus": "synthetic:n_documents=20", "scales": [5, 10]}
    with pytest.raises(ConfigError) as e:
        study_factory(adapt, tune={"param_space": space}, models=MODELS)
    assert message in str(e.value)


def test_search_space_built_from_checked_entries(study_factory, tmp_path):
    pytest.importorskip("ray")
    from adaptlab.adapt.train.space import build_param_space

    adapt = {"corpus": "synthetic:n_documents=20", "scales": [5, 10]}
    space = {
        "learning_rate": {"loguniform": [1e-5, 1e-4]},
        "warmup_ratio": {"uniform": [0.0, 0.2]},
        "epochs": {"randint": [1, 4]},
        "weight_decay": {"quniform": [0.0, 0.1, 0.05]},
        "batch_size": {"grid": [8, 16]},
        "num_negatives": {"choice": [1, 3]},
        "merge_weight": 0.5,
    }
    study = study_factory(adapt, tune={"param_space": space}, models=MODELS)
    t = parse_tune_section(study, parse_adapt_section(study, store=tmp_path), store=tmp_path)
    built = build_param_space(t.sweep.param_space)
    assert (built["learning_rate"].lower, built["learning_rate"].upper) == (1e-5, 1e-4)
    assert (built["epochs"].lower, built["epochs"].upper) == (1, 4)
    assert built["weight_decay"].get_sampler().q == 0.05
    assert built["batch_size"] == {"grid_search": [8, 16]} and list(built["num_negatives"].categories) == [1, 3]
    assert built["merge_weight"] == 0.5


def test_bad_adapt_key_fails_in_load_study(tmp_path):
    path = tmp_path / "study.toml"
    path.write_text(
        '[[datasets]]\nspec = "synthetic:n_documents=4"\n[[models]]\nref = "hash:8"\n'
        '[adapt]\ncorpus = "synthetic:n_documents=20"\nscalez = [1]\n'
    )
    with pytest.raises(ConfigError, match=r"study.toml: \[adapt\]: unknown key 'scalez'"):
        load_study(path)


def test_seeds_derive_from_the_study_seed_unless_given(study_factory, tmp_path):
    from adaptlab.stats import derive_seed

    adapt = {"corpus": "synthetic:n_documents=20", "scales": [5, 10]}
    study = study_factory(adapt, tune={}, models=MODELS)
    s = parse_adapt_section(study, store=tmp_path)
    assert s.seed == 0  # [adapt].seed: the root itself (content keys of stored data and artifacts)
    assert parse_tune_section(study, s, store=tmp_path).sweep.bootstrap.seed == derive_seed(0, "tune")
    study = study_factory(adapt, tune={"ci_seed": 5}, models=MODELS)
    assert parse_tune_section(study, s, store=tmp_path).sweep.bootstrap.seed == 5


def test_job_files_validate():
    root = Path(__file__).resolve().parents[3]
    for name, scales in (("scale_study_small.toml", (10, 30, 90)), ("scale_study.toml", (10, 100, 700))):
        study = load_study(root / "jobs" / name)
        s = parse_adapt_section(study, store=root / "results" / "x")
        assert s.scales == scales
        assert s.variants == ("base", "pt", "ft", "pt-ft", "merged", "colbert-base", "colbert-ft")
        assert s.label == "minilm"
        if study.tune:
            pytest.importorskip("ray")
            assert parse_tune_section(study, s, store=root / "results" / "x").scale == 100


def test_each_family_is_compared_with_its_own_base():
    def sys(name, variant, n=None):
        return SystemInfo(name, variant, n, ModelSection(ref="minilm", name=name))

    bi = [sys("m-base", "base"), sys("m-ft-s10", "ft", 10), sys("m-pt-s10", "pt", 10), sys("ref", "reference")]
    assert comparison_pairs(bi, "m-base") is None  # no ColBERT: every system against the baseline
    systems = bi + [sys("c-base", "colbert-base"), sys("c-ft-s10", "colbert-ft", 10), sys("c-ft-s30", "colbert-ft", 30)]
    assert comparison_pairs(systems, "m-base") == (
        ("m-ft-s10", "m-base"),
        ("m-pt-s10", "m-base"),
        ("ref", "m-base"),
        ("c-base", "m-base"),
        ("c-ft-s10", "c-base"),
        ("c-ft-s10", "m-ft-s10"),
        ("c-ft-s30", "c-base"),
    )
    no_cb = [s for s in systems if s.name != "c-base"]
    assert ("c-ft-s30", "m-base") in comparison_pairs(no_cb, "m-base")
    assert comparison_pairs(systems, None) is None


def test_tune_defaults_are_the_sweep_configs(study_factory, tmp_path):
    """[tune] keys not given keep SweepConfig's defaults (defined once, in adapt/): the parsed
    config equals one built from the given keys alone; 0 means none where the docs say so, and
    confirm_fraction reaches the config."""
    from adaptlab.adapt.train.sweep_config import SweepConfig
    from adaptlab.stats import BootstrapConfig
    from adaptlab.study import stage_seed

    adapt = {"corpus": "synthetic:n_documents=20", "scales": [5, 10]}
    tune = {
        "num_samples": 2,
        "max_epochs": 0,
        "max_concurrent_trials": 3,
        "gpus_per_trial": "auto",
        "confirm_fraction": 0.25,
        "sample_size": 0,
    }
    study = study_factory(adapt, tune=tune, models=MODELS)
    t = parse_tune_section(study, parse_adapt_section(study, store=tmp_path), store=tmp_path)
    boot = BootstrapConfig(seed=stage_seed(0, "tune", None))
    assert t.sweep == SweepConfig(num_samples=2, max_concurrent_trials=3, confirm_fraction=0.25, bootstrap=boot)
    assert (t.scale, t.name, t.apply_best) == (None, "", False)
