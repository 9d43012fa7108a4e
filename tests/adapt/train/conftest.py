"""Shared fixtures for the adaptation-training tests: tiny triplets and chunks, the session's
shared Ray, and one torch thread per module. The tiny local sentence encoder (``tiny_model``) is
the root conftest's, built once for the session and shared with tests/study."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from s3servers import running
from tiny_models import one_torch_thread  # noqa: F401 (autouse fixture)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

TOPICS = {
    "antenna": "The antenna tilt controls the coverage footprint of the radio cell.",
    "handover": "A handover moves an active call from one base station to another.",
    "spectrum": "Spectrum refarming reuses old frequency bands for newer radio access.",
    "latency": "Latency is the delay between sending a packet and receiving the reply.",
    "beam": "Beamforming steers the radio energy towards the user equipment.",
    "power": "Power control lowers transmit power when the signal is strong enough.",
    "paging": "Paging wakes idle devices when data arrives for them.",
    "carrier": "Carrier aggregation combines several bands into one wider channel.",
}
QUESTIONS = {
    "antenna": "What does antenna tilt control?",
    "handover": "What moves an active call between base stations?",
    "spectrum": "How are old frequency bands reused?",
    "latency": "What is the delay between a packet and its reply?",
    "beam": "What steers radio energy to the user?",
    "power": "When is transmit power lowered?",
    "paging": "How are idle devices woken up?",
    "carrier": "What combines several bands into one channel?",
}


@pytest.fixture(scope="session")
def chunks() -> list[str]:
    return list(TOPICS.values()) * 2


@pytest.fixture(scope="session")
def triplets() -> list[tuple[str, str, tuple[str, ...]]]:
    keys = list(TOPICS)
    return [
        (QUESTIONS[k], TOPICS[k], (TOPICS[keys[(i + 1) % len(keys)]], TOPICS[keys[(i + 2) % len(keys)]]))
        for i, k in enumerate(keys)
    ]


@pytest.fixture(scope="module")
def ray_local(shared_ray):
    """The session's shared local Ray (tests/conftest.py ``shared_ray``: 4 logical CPUs, started
    once and kept); these tests need nothing of their own from Ray."""
    return shared_ray


def _read_weights(model_dir: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(Path(model_dir) / "model.safetensors"))


@pytest.fixture(scope="session")
def read_weights():
    """``read_weights(model_dir)``: all tensors of a saved model's ``model.safetensors``."""
    return _read_weights


@pytest.fixture(scope="session")
def validation_set():
    """The eight topics as a validation Dataset: each question's only relevant doc is its topic."""
    from adaptlab.data.dataset import Dataset, Document

    return Dataset.build(
        "tiny-val",
        [Document(k, t) for k, t in TOPICS.items()],
        dict(QUESTIONS),
        {k: {k: 1} for k in TOPICS},
    )


@pytest.fixture(scope="module")
def moto_s3(tmp_path_factory) -> Iterator[tuple[dict[str, str], object, str]]:
    """A moto S3 server of the module's own (tests/s3servers.py: a free 127.0.0.1 port, stopped
    by pid) with one bucket; yields (AWS environment, boto3 client, bucket). Skips when
    moto_server is missing."""
    with running("moto", tmp_path_factory.mktemp("moto"), "adaptlab-artifacts") as server:
        yield server.env, server.client(), server.bucket
