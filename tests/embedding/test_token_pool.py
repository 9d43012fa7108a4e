"""ColBERT token vectors on the warm Ray actor pool (TokenEmbedder with ``use_ray=True``): the
threshold rule of the dense Embedder, rows back in input order, the same vectors as in-process
within a stated tolerance, work on the actors (one fake GPU each), warm-pool reuse, and the
driver's reassembly of out-of-order packed batches."""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("colbert", reason="ColBERT needs colbert-ai (pip install ragatouille==0.0.9)")
pytest.importorskip("ray")

from adaptlab.embedding import LOCAL_BELOW, active_pools, release_pools  # noqa: E402
from adaptlab.embedding.tokens import TokenEmbedder, assemble_tokens  # noqa: E402
from adaptlab.models import resolve_model  # noqa: E402

ATOL = 1e-5
"""Pool vs in-process, per component of unit token vectors (tokens.py's module docstring: colbert-ai
pads and batches documents per call, so the float32 products run in other shapes and summation
orders; measured at most 1.8e-7 with this tiny model and 3.5e-7 with MiniLM, ~30x below ATOL)."""

WORDS = ["antenna", "tilt", "handover", "cell", "beam", "power", "paging", "band", "carrier", "latency"]


def _texts(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [f"text {i} " + " ".join(rng.choice(WORDS, int(rng.integers(0, 12)))) for i in range(n)]


@pytest.fixture(scope="module")
def colbert_ref(tiny_model, tmp_path_factory):
    from adaptlab.models.colbert import colbert_from_bert

    with pytest.warns(UserWarning, match="UNTRAINED"):  # over the session's tiny BERT
        ckpt = colbert_from_bert(
            tiny_model.parent / (tiny_model.name + "-hf"),
            tmp_path_factory.mktemp("cb") / "ckpt",
            dim=16,
            doc_maxlen=32,
            query_maxlen=16,
        )
    return resolve_model(str(ckpt))


def _embedder(ref, **kw) -> TokenEmbedder:
    return TokenEmbedder(ref, options={"backend": "colbert"}, batch_size=32, **kw)


@pytest.fixture(scope="module")
def docs():
    return _texts(LOCAL_BELOW, seed=1)


@pytest.fixture(scope="module")
def reference(colbert_ref, docs):
    """In-process encodings (use_ray=False) of the documents and of 20 queries."""
    local = _embedder(colbert_ref)
    return local(docs, "document"), local(_texts(20, seed=2), "query")


def test_small_call_stays_in_process(ray_fake_gpus, colbert_ref, reference):
    release_pools()
    emb = _embedder(colbert_ref, use_ray=True, num_actors=2)
    out = emb(_texts(20, seed=2), "query")
    assert emb.last_run.engine == "local" and set(emb.last_run.pid.tolist()) == {os.getpid()}
    assert active_pools() == 0 and not emb.used_ray  # under the threshold, no pool: no actor started
    np.testing.assert_array_equal(out.vectors, reference[1].vectors)  # the very same in-process encoder run


def test_large_call_runs_on_the_pool_and_the_warm_pool_is_reused(ray_fake_gpus, colbert_ref, docs, reference, tmp_path):
    ref_docs, ref_queries = reference
    release_pools()
    emb = _embedder(colbert_ref, use_ray=True, num_actors=2, cache_dir=tmp_path)
    out = emb(docs, "document")
    run = emb.last_run
    assert run.engine == "ray" and run.num_actors == 2 and active_pools() == 1
    # every row once, in input order: the same token counts as in-process, vectors within ATOL
    np.testing.assert_array_equal(out.offsets, ref_docs.offsets)
    np.testing.assert_allclose(out.vectors, ref_docs.vectors, rtol=0, atol=ATOL)
    # the work ran on the pool's actors, one (fake) GPU each, not in this process; blocks go only
    # to actors that are ready, so on a loaded machine the first ready actor may do them all
    pids = set(run.pid.tolist())
    assert 1 <= len(pids) <= 2 and os.getpid() not in pids
    gpu_of = {p: set(run.cuda_visible_devices[run.pid == p].tolist()) for p in pids}
    assert all(len(g) == 1 and "" not in g for g in gpu_of.values())
    assert len(set().union(*gpu_of.values())) == len(pids)

    # a fresh embedder's small call goes to the warm pool of this model (no second model load)
    again = _embedder(colbert_ref, use_ray=True, num_actors=2)
    q = again(_texts(20, seed=2), "query")
    # (the pool has 2 actors; the first call may have used only one of them, so the second may run
    # on the other: together they used at most the pool's 2 actors and no new process)
    again_pids = set(again.last_run.pid.tolist())
    assert again.last_run.engine == "ray" and os.getpid() not in again_pids
    assert len(pids | again_pids) <= 2
    np.testing.assert_array_equal(q.offsets, ref_queries.offsets)
    np.testing.assert_allclose(q.vectors, ref_queries.vectors, rtol=0, atol=ATOL)
    assert active_pools() == 1

    # the cache is as before: a second embedder reads the pool's result back, encoding nothing
    cached = _embedder(colbert_ref, use_ray=True, num_actors=2, cache_dir=tmp_path)
    hit = cached(docs, "document")
    assert cached.last_run is None
    np.testing.assert_array_equal(hit.vectors, out.vectors)
    release_pools()


def _batch(ids, lengths, dim=2, pid=7):
    lengths = np.asarray(lengths, np.int64)
    vectors = (
        np.concatenate([np.full((n, dim), i, np.float32) for i, n in zip(ids, lengths)])
        if len(ids)
        else (np.zeros((0, dim), np.float32))
    )
    return {
        "row_id": np.asarray(ids, np.int64),
        "vectors": vectors,
        "lengths": lengths,
        "pid": np.full(len(ids), pid, np.int64),
        "cuda_visible_devices": np.full(len(ids), "0", dtype=object),
    }


def test_assemble_puts_packed_rows_in_input_order():
    tokens, pid, cvd = assemble_tokens(5, [_batch([3, 0], [2, 1]), _batch([4, 1, 2], [0, 3, 1], pid=9)])
    assert tokens.lengths.tolist() == [1, 3, 1, 2, 0]
    for i in range(5):
        assert (tokens[i] == i).all()  # row i's vectors are filled with i
    assert pid.tolist() == [7, 9, 9, 7, 9] and cvd.tolist() == ["0"] * 5


@pytest.mark.parametrize("batches", [[_batch([0, 1], [1, 1]), _batch([1], [1])], [_batch([0], [2])]])
def test_assemble_rejects_duplicated_or_missing_rows(batches):
    with pytest.raises(RuntimeError, match="rows never"):
        assemble_tokens(2, batches)


def test_assemble_rejects_a_batch_that_does_not_pack():
    bad = _batch([0, 1], [1, 1])
    bad["lengths"] = np.array([1, 2], np.int64)  # 3 rows claimed, 2 vectors sent
    with pytest.raises(RuntimeError, match="does not pack"):
        assemble_tokens(2, [bad])
