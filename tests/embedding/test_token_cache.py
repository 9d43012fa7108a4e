"""The ColBERT token-vector cache on a local folder and on a URI (through pyarrow.fs, here a
``file://`` URI), with the offsets written last and read first."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from adaptlab.embedding.tokens import TokenEmbedder  # noqa: E402
from adaptlab.models.colbert import TokenVectors  # noqa: E402


class _FakeEncoder:
    def __init__(self) -> None:
        self.calls = 0

    def encode_tokens(self, texts, *, kind, batch_size):
        self.calls += 1
        lengths = [len(t.split()) for t in texts]
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        vectors = np.arange(offsets[-1] * 4, dtype=np.float32).reshape(-1, 4)
        return TokenVectors(vectors, offsets)


def _embedder(cache) -> TokenEmbedder:
    emb = TokenEmbedder("fake", options={"backend": "colbert"}, batch_size=8, cache_dir=cache)
    emb._encoder, emb._revision = _FakeEncoder(), "rev-1"  # no model needed for the cache
    return emb


@pytest.mark.parametrize("as_uri", [False, True])
def test_token_vectors_round_trip_through_the_cache(tmp_path, as_uri):
    cache = (tmp_path / "c").as_uri() if as_uri else tmp_path / "c"
    texts = ["a b c", "d e", "f"]
    first = _embedder(cache)
    out = first(texts, "document")
    again = _embedder(cache)
    hit = again(texts, "document")
    assert again.encoder.calls == 0  # answered from the cache
    np.testing.assert_array_equal(hit.vectors, out.vectors)
    np.testing.assert_array_equal(hit.offsets, out.offsets)
    assert sorted(p.name.split(".", 1)[1] for p in (tmp_path / "c").iterdir()) == [
        "tokens.offsets.npy",
        "tokens.vectors.npy",
    ]


def test_vectors_without_offsets_are_a_miss(tmp_path):
    texts = ["a b c"]
    emb = _embedder(tmp_path)
    emb(texts, "query")
    (tmp_path / f"{emb.cache_key(texts, 'query')}.tokens.offsets.npy").unlink()  # a cut-short write
    again = _embedder(tmp_path)
    again(texts, "query")
    assert again.encoder.calls == 1


def test_search_options_do_not_change_the_cache_key(tmp_path):
    texts = ["a b c", "d e"]
    plain = _embedder(tmp_path)
    plaid = TokenEmbedder(
        "fake", options={"backend": "colbert", "search": "plaid", "nbits": 4}, batch_size=8, cache_dir=tmp_path
    )
    plaid._revision = "rev-1"
    longer = TokenEmbedder("fake", options={"backend": "colbert", "doc_maxlen": 64}, batch_size=8, cache_dir=tmp_path)
    longer._revision = "rev-1"
    assert plaid.cache_key(texts, "document") == plain.cache_key(texts, "document")
    assert longer.cache_key(texts, "document") != plain.cache_key(texts, "document")  # an encoder option does


def test_token_vectors_go_to_the_shared_cache_tokens_folder(tmp_path, caplog):
    import logging

    from adaptlab.embedding.cache import EmbeddingCache

    cache = EmbeddingCache(tmp_path / "shared")
    texts = ["a b c", "d e"]
    out = _embedder(cache)(texts, "document")
    again = _embedder(cache)  # another study or store, the same machine
    with caplog.at_level(logging.INFO, logger="adaptlab.embedding.cache"):
        hit = again(texts, "document")
    assert again.encoder.calls == 0 and again.from_cache == 2
    np.testing.assert_array_equal(hit.vectors, out.vectors)
    assert "tokens: 2 of 2 texts from cache" in caplog.text
    assert {p.parent.name for p in (tmp_path / "shared").rglob("*.npy")} == {"tokens"}
    assert cache.summary()["folders"] == {"embeddings": 0, "tokens": 2}


def test_token_key_carries_the_adaptlab_version(tmp_path, monkeypatch):
    import adaptlab._version

    before = _embedder(tmp_path).cache_key(["a b"], "query")
    monkeypatch.setattr(adaptlab._version, "__version__", "999.0")
    assert _embedder(tmp_path).cache_key(["a b"], "query") != before
