"""The Encoder contract, l2_normalize, the backend registry and the hashing encoder."""

from __future__ import annotations

import numpy as np
import pytest

from adaptlab.errors import ConfigError, DataError
from adaptlab.models import BACKENDS, Encoder, HashingEncoder, l2_normalize, load_encoder, register_backend


def test_l2_normalize_hand_checked():
    out = l2_normalize(np.array([[3.0, 4.0], [0.0, 0.0]]))
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 0.0]])
    assert out.dtype == np.float32
    with pytest.raises(DataError, match="2-D"):
        l2_normalize(np.zeros(3))


def test_hashing_encoder_counts_signed_buckets():
    enc = HashingEncoder(dim=8)
    # "a a b": bucket(a) gets 2 * sign(a), bucket(b) gets sign(b) -> norm sqrt(5) (if no collision)
    raw = enc._encode(["a a b"], "document", 1)[0]
    assert sorted(np.abs(raw[raw != 0]).tolist()) in ([1.0, 2.0], [1.0, 3.0], [3.0])
    out = enc.encode_documents(["a a b", "", "A, a; B!"])
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), [1.0, 0.0, 1.0], atol=1e-6)
    np.testing.assert_array_equal(out[0], out[2])  # lowercased word tokens
    assert enc.revision == "hash-v1" and enc.dim == 8


def test_hashing_encoder_is_deterministic_across_instances():
    a = load_encoder("hash:32").encode_documents(["the quick brown fox"])
    b = HashingEncoder(32).encode_documents(["the quick brown fox"])
    np.testing.assert_array_equal(a, b)


def test_encode_contract_shapes_and_errors():
    enc = HashingEncoder(4)
    assert enc.encode_queries([]).shape == (0, 4)
    with pytest.raises(DataError, match="single str"):
        enc.encode_documents("one string")
    with pytest.raises(DataError, match=r"queries\[1\]"):
        enc.encode_queries(["ok", None])
    with pytest.raises(ConfigError, match="batch_size"):
        enc.encode_documents(["x"], batch_size=0)
    with pytest.raises(ConfigError, match="kind"):
        enc.encode(["x"], kind="passage")


def test_score_is_the_inner_product_of_normalised_embeddings():
    enc = HashingEncoder(16)
    q, d = ["red apple", "green"], ["apple", "green tea", "car"]
    expected = enc.encode_queries(q) @ enc.encode_documents(d).T
    np.testing.assert_allclose(enc.score(q, d), expected, atol=1e-7)
    assert enc.score(q, d).shape == (2, 3)


class _Broken(Encoder):
    backend = "broken"

    def _encode(self, texts, kind, batch_size):
        return np.ones((len(texts), self.dim + 1))


def test_subclass_returning_the_wrong_shape_is_a_bug():
    with pytest.raises(RuntimeError, match="shape"):
        _Broken("x", 3, revision="r").encode_documents(["a"])


def test_register_backend_and_unknown_backend():
    register_backend("unit-test-hash", lambda model, device=None, **o: HashingEncoder(6))
    try:
        assert load_encoder("hash", backend="unit-test-hash").dim == 6
    finally:
        BACKENDS.pop("unit-test-hash", None)
    with pytest.raises(ConfigError, match="unknown encoder backend 'nope'"):
        load_encoder("hash", backend="nope")


def test_unknown_option_names_the_key():
    with pytest.raises(ConfigError, match="'pooling_typo'"):
        load_encoder("hash", pooling_typo="cls")


def test_backend_in_options_as_the_study_runner_passes_it():
    enc = load_encoder("hash:8", backend="hash", query_instruction="", max_seq_length=0)
    assert enc.dim == 8
