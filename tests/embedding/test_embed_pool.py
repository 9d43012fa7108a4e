"""Warm actor pools: one per model and placement, reused across calls, released on demand."""

from __future__ import annotations

import numpy as np
import pytest
from embedding_fakes import BulkyFactory, CrashAlwaysFactory, HashFactory, make_texts

from adaptlab.embedding import (
    Embedder,
    active_pools,
    embed_texts,
    embed_texts_detailed,
    embedding_pools,
    release_pools,
)
from adaptlab.models import HashingEncoder, resolve_model


def _expected(texts, dim=16, kind="document"):
    return HashingEncoder(dim).encode(texts, kind=kind)


def test_documents_and_queries_reuse_the_same_warm_actors(ray_fake_gpus):
    release_pools()
    factory = HashFactory(16)
    docs, queries = make_texts(200, seed=4), make_texts(30, seed=5)
    d = embed_texts_detailed(docs, factory, kind="document", block_size=25)
    q = embed_texts_detailed(queries, factory, kind="query", block_size=25)
    assert active_pools() == 1
    assert set(q.pid.tolist()) <= set(d.pid.tolist())  # no new actor, no second model load
    np.testing.assert_array_equal(d.embeddings, _expected(docs))
    np.testing.assert_array_equal(q.embeddings, _expected(queries, kind="query"))
    release_pools()
    assert active_pools() == 0
    again = embed_texts_detailed(queries, factory, kind="query", block_size=25)
    assert not set(again.pid.tolist()) & set(q.pid.tolist())  # released actors are gone
    np.testing.assert_array_equal(again.embeddings, q.embeddings)
    release_pools()


def test_context_manager_releases_pools_even_on_error(ray_fake_gpus):
    release_pools()
    with pytest.raises(KeyError), embedding_pools():
        embed_texts(make_texts(20), HashFactory(16))
        assert active_pools() == 1
        raise KeyError("boom")
    assert active_pools() == 0


def test_actor_crashing_on_every_batch_fails_after_bounded_retries(ray_fake_gpus):
    with embedding_pools(), pytest.raises(RuntimeError, match=r"died 2 times in one call \(max_restarts=1\)"):
        embed_texts(make_texts(20), CrashAlwaysFactory(), max_restarts=1, block_size=10)


def test_bulky_factory_gives_no_object_store_restart_warning(ray_fake_gpus, capfd):
    texts = make_texts(40)
    with embedding_pools():
        out = embed_texts(texts, BulkyFactory(16), block_size=10)
    np.testing.assert_array_equal(out, _expected(texts))
    assert "constructor arguments in the object store" not in capfd.readouterr().err


def test_embedder_keeps_tiny_calls_in_process_and_large_ones_on_the_pool(ray_fake_gpus):
    release_pools()
    emb = Embedder(resolve_model("hash:16"), options={}, batch_size=8, use_ray=True, local_below=50)
    small, large = make_texts(10, seed=6), make_texts(60, seed=7)
    np.testing.assert_array_equal(emb(small, "query"), _expected(small, kind="query"))
    assert active_pools() == 0 and not emb.used_ray  # tiny: no actor started
    np.testing.assert_array_equal(emb(large, "document"), _expected(large))
    assert active_pools() == 1 and emb.used_ray
    np.testing.assert_array_equal(emb(small, "query"), _expected(small, kind="query"))  # warm pool serves it
    release_pools()


@pytest.mark.stops_ray
def test_shutting_ray_down_releases_the_pools(ray_fake_gpus):
    from adaptlab.runtime import shutdown_ray

    embed_texts(make_texts(20), HashFactory(16))
    assert active_pools() == 1
    shutdown_ray()
    assert active_pools() == 0
