"""The trainers' configs share their fields and checks through adapt/train/config.py without a
changed artifact key: an artifact key hashes the config, so a changed value or a new key would
silently retrain every stored model.

Every expected value below (dicts, SHA-256 digests, error messages) was computed with the code
BEFORE the shared base existed (PTConfig, FTConfig and ColBERTFTConfig each declaring and checking
their own fields) and is hard-coded here; the refactored code must reproduce it. The one thing
that did change is the order of ``dataclasses.asdict`` (the shared fields come first): keys and
stored configs are canonical JSON with sorted keys, which :func:`test_key_ignores_dict_order`
shows, and the configs are keyword-only so no call binds a value to another field by position.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import pytest

from adaptlab.adapt.train.addressing import artifact_key
from adaptlab.adapt.train.colbert import ColBERTFTConfig
from adaptlab.adapt.train.config import KEYED_IF_SET, RUNTIME_FIELDS
from adaptlab.adapt.train.ft import FTConfig
from adaptlab.adapt.train.pt import PTConfig
from adaptlab.errors import ConfigError

# the defaults, as asdict() of the old code gave them (values; the order was each class's own)
PT_DEFAULT = {
    "learning_rate": 5e-05,
    "epochs": 1,
    "batch_size": 16,
    "mlm_probability": 0.15,
    "max_seq_length": 256,
    "warmup_ratio": 0.1,
    "weight_decay": 0.01,
    "max_grad_norm": 1.0,
    "max_steps": None,
    "min_steps": 10,
    "min_weight_change": 1e-06,
    "warn_only": False,
}
FT_DEFAULT = {
    "learning_rate": 2e-05,
    "epochs": 1,
    "batch_size": 32,
    "num_negatives": 1,
    "scale": 20.0,
    "warmup_ratio": 0.1,
    "weight_decay": 0.01,
    "max_grad_norm": 1.0,
    "max_steps": None,
    "min_steps": 10,
    "min_weight_change": 1e-06,
    "warn_only": False,
    "max_seq_length": None,
    "query_prefix": "auto",
    "passage_prefix": "auto",
}
COLBERT_DEFAULT = {
    "batch_size": 8,
    "learning_rate": 2e-05,
    "epochs": 1,
    "max_steps": 0,
    "negatives_per_query": 2,
    "random_negatives": 1,
    "use_ib_negatives": True,
    "warmup_steps": 0,
    "doc_maxlen": 128,
    "query_maxlen": 32,
    "dim": 128,
    "timeout_s": 1800.0,
    "retries": 1,
}

# name -> (config, artifact_key({"hyperparameters": what the trainer hashes}),
#          artifact_key({"hyperparameters": asdict(config)}), the same of asdict(config.optim()) or None)
# PT and FT hash key_dict() (FT adds the resolved prefixes and temperature), ColBERT key_dict().
CASES: dict[str, tuple[Callable[[], Any], str, str, str | None]] = {
    "pt-default": (
        lambda: PTConfig(),
        "6eb31e1237db8aa5f390985cb55a4ebb21bc3683af780621c080a030bbfcedd7",
        "6eb31e1237db8aa5f390985cb55a4ebb21bc3683af780621c080a030bbfcedd7",
        "a0f0ffdadd612fdbdb6aa4e98220be98f2c234b62d18ffb78c4d5194b3999b08",
    ),
    "pt-custom": (
        lambda: PTConfig(
            learning_rate=1e-4, batch_size=8, mlm_probability=0.2, max_steps=5, min_steps=0, warn_only=True
        ),
        "e2b5a1091530eed578e2a244fdd0319c866a1143e39b85ce12ad132943c7515c",
        "e2b5a1091530eed578e2a244fdd0319c866a1143e39b85ce12ad132943c7515c",
        "43ce9b5fc51d965973b1c57cb283044f7a6dfaa33dbdb6f610abb36f4164d154",
    ),
    "ft-default": (
        lambda: FTConfig(),
        "6a68cc10be41ad0b9603daded501181719c94d13b1b4c1a18611f82907a4a847",
        "6a68cc10be41ad0b9603daded501181719c94d13b1b4c1a18611f82907a4a847",
        "a3f5b4ad85642c1a687793ff9f5e9be1fe881f195830e0c3714650b9214096b8",
    ),
    "ft-custom": (
        lambda: FTConfig(
            learning_rate=1e-3,
            epochs=3,
            num_negatives=2,
            scale=25.0,
            warmup_ratio=0.0,
            max_seq_length=64,
            query_prefix="query: ",
            passage_prefix="",
        ),
        "64ddc461a39a07276d340381ac58f21e426141ad1fb3fc0263935f060f515c38",
        "64ddc461a39a07276d340381ac58f21e426141ad1fb3fc0263935f060f515c38",
        "7ffc52ed71678ba305bf3b5cc5bdc3a8434a1ec264c8f3c9c2cd469e20aef6f4",
    ),
    "colbert-default": (
        lambda: ColBERTFTConfig(),
        "43dd5ff607cdb589b3e886b3a4f09b8abff6f2ece7855438892ec5da202a5966",
        "ccf051e0099ab223ac4a607cb41bdd63bcbba5d982a7d8e6bceb3f34ac657dff",
        None,
    ),
    "colbert-custom": (
        lambda: ColBERTFTConfig(
            batch_size=4,
            learning_rate=1e-4,
            max_steps=3,
            negatives_per_query=1,
            use_ib_negatives=False,
            dim=64,
            timeout_s=60.0,
            retries=0,
        ),
        "98fd7dbde00afc47a88336dcb84a16f76802f0acf16fdd015955adfca0592a86",
        "594f5a02b3074d44076e3cc7fdbb48a3a95c9b27209f176e6184f56e735dd10d",
        None,
    ),
}

# the messages of the old code's checks, one bad value each
ERRORS: dict[str, tuple[Callable[[], Any], str]] = {
    "pt-lr": (lambda: PTConfig(learning_rate=0), "PTConfig.learning_rate = 0: expected a positive number"),
    "pt-epochs": (lambda: PTConfig(epochs=0), "PTConfig.epochs = 0: expected an integer >= 1"),
    "pt-seq": (lambda: PTConfig(max_seq_length=0), "PTConfig.max_seq_length = 0: expected an integer >= 1"),
    "pt-mlm": (
        lambda: PTConfig(mlm_probability=1.5),
        "PTConfig.mlm_probability = 1.5: expected 0 < value < 1 (BERT: 0.15)",
    ),
    "pt-warmup": (lambda: PTConfig(warmup_ratio=1.0), "PTConfig.warmup_ratio = 1.0: expected 0 <= value < 1"),
    "pt-max-steps": (lambda: PTConfig(max_steps=0), "PTConfig.max_steps = 0: expected None or >= 1"),
    "pt-min-steps": (
        lambda: PTConfig(min_steps=-1),
        "PTConfig.min_steps = -1: expected an integer >= 0 (0: no minimum)",
    ),
    "pt-min-steps-bool": (
        lambda: PTConfig(min_steps=True),
        "PTConfig.min_steps = True: expected an integer >= 0 (0: no minimum)",
    ),
    "pt-change": (
        lambda: PTConfig(min_weight_change=-1.0),
        "PTConfig.min_weight_change = -1.0: expected a number >= 0 (0: no check)",
    ),
    "ft-lr-nan": (
        lambda: FTConfig(learning_rate=float("nan")),
        "FTConfig.learning_rate = nan: expected a positive number",
    ),
    "ft-batch": (lambda: FTConfig(batch_size=0), "FTConfig.batch_size = 0: expected an integer >= 1"),
    "ft-scale": (lambda: FTConfig(scale=0), "FTConfig.scale = 0: expected a positive number"),
    "ft-negatives": (lambda: FTConfig(num_negatives=-1), "FTConfig.num_negatives = -1: expected >= 0"),
    "ft-warmup": (lambda: FTConfig(warmup_ratio=-0.1), "FTConfig.warmup_ratio = -0.1: expected 0 <= value < 1"),
    "ft-max-steps": (lambda: FTConfig(max_steps=0), "FTConfig.max_steps = 0: expected None or >= 1"),
    "ft-min-steps": (
        lambda: FTConfig(min_steps=-1),
        "FTConfig.min_steps = -1: expected an integer >= 0 (0: no minimum)",
    ),
    "ft-change": (
        lambda: FTConfig(min_weight_change=float("inf")),
        "FTConfig.min_weight_change = inf: expected a number >= 0 (0: no check)",
    ),
    "colbert-batch": (lambda: ColBERTFTConfig(batch_size=0), "ColBERT FT: batch_size = 0; expected a positive integer"),
    "colbert-epochs": (lambda: ColBERTFTConfig(epochs=2.0), "ColBERT FT: epochs = 2.0; expected a positive integer"),
    "colbert-lr": (lambda: ColBERTFTConfig(learning_rate=0), "ColBERT FT: learning_rate and timeout_s must be > 0"),
    "colbert-dim": (lambda: ColBERTFTConfig(dim=0), "ColBERT FT: dim = 0; expected a positive integer"),
    "colbert-timeout": (lambda: ColBERTFTConfig(timeout_s=0), "ColBERT FT: learning_rate and timeout_s must be > 0"),
    "colbert-retries": (
        lambda: ColBERTFTConfig(retries=-1),
        "ColBERT FT: negatives_per_query, random_negatives, max_steps and retries must be >= 0",
    ),
}


def _digest(hyperparameters: dict[str, Any]) -> str:
    return artifact_key({"hyperparameters": hyperparameters})


def _fields(obj: Any) -> dict[str, Any]:
    """``asdict`` without the fields added since (RUNTIME_FIELDS: gradient_checkpointing, "auto" by
    default (decided per stage by the scheduler; before, false) and false in the loop's OptimConfig
    of an undecided config, which changes how training runs, not its numbers, and is left out of
    keys; and KEYED_IF_SET: precision and fused_attention, keyed only when not at their defaults)."""
    out = asdict(obj)
    assert all(out.get(k, False) is False or out[k] == "auto" for k in RUNTIME_FIELDS)
    assert all(out.get(k, v) == v for k, v in KEYED_IF_SET.items())
    return {k: v for k, v in out.items() if k not in RUNTIME_FIELDS and k not in KEYED_IF_SET}


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (PTConfig(), PT_DEFAULT),
        (FTConfig(), FT_DEFAULT),
        (ColBERTFTConfig(), COLBERT_DEFAULT),
    ],
)
def test_default_fields_and_values_are_unchanged(config: Any, expected: dict[str, Any]) -> None:
    assert _fields(config) == expected
    assert [type(v) for v in _fields(config).values()] == [type(expected[k]) for k in _fields(config)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_artifact_key_and_serialisation_are_unchanged(name: str) -> None:
    make, key, serialised, optim = CASES[name]
    config = make()
    assert _digest(config.key_dict()) == key
    assert _digest(_fields(config)) == serialised
    if optim is not None:
        assert _digest(_fields(config.optim())) == optim


def test_key_ignores_dict_order() -> None:
    """Why the new ``asdict`` order changes no key: the key is canonical JSON with sorted keys."""
    hyper = asdict(FTConfig())
    assert _digest(dict(reversed(list(hyper.items())))) == _digest(hyper)


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_check_messages_are_unchanged(name: str) -> None:
    make, message = ERRORS[name]
    with pytest.raises(ConfigError) as e:
        make()
    assert str(e.value) == message


def test_colbert_request_round_trips() -> None:
    """The ColBERT child rebuilds its config from ``asdict`` in the request JSON."""
    config = CASES["colbert-custom"][0]()
    assert ColBERTFTConfig(**asdict(config)) == config


@pytest.mark.parametrize("cls", [PTConfig, FTConfig, ColBERTFTConfig])
def test_configs_are_keyword_only(cls: type) -> None:
    with pytest.raises(TypeError):
        cls(1e-4)
