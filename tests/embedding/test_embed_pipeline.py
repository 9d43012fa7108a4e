"""The Ray embedding pipeline (warm actor pool): placement, fault tolerance, exactly-once reassembly."""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import pytest
from embedding_fakes import ClockedStream, CrashOnceFactory, FailingFactory, HashFactory, make_texts

from adaptlab.embedding import embed_texts, embed_texts_detailed, plan_blocks
from adaptlab.embedding.pipeline import _assemble
from adaptlab.embedding.settings import EmbedSettings
from adaptlab.errors import ConfigError, DataError
from adaptlab.models import HashingEncoder


def _expected(texts: list[str], dim: int = 16) -> np.ndarray:
    return HashingEncoder(dim).encode_documents(texts)


# -- pure parts (no Ray) ------------------------------------------------------------------
def test_plan_blocks_hand_checked():
    # 20000 texts, 2 actors: ~1250 rows per call -> capped at 8 batches of 64
    assert plan_blocks(20_000, num_actors=2, batch_size=64) == 512
    # 1000 texts, 2 actors: 62.5 rows -> one batch of 64
    assert plan_blocks(1_000, num_actors=2, batch_size=64) == 64
    # 5000 texts, 2 actors: 312.5 rows -> round(4.9) = 5 batches of 64
    assert plan_blocks(5_000, num_actors=2, batch_size=64) == 320
    assert plan_blocks(10, num_actors=2, batch_size=64) == 64
    assert plan_blocks(10, num_actors=2, batch_size=64, block_size=7) == 7
    with pytest.raises(ConfigError, match="block_size"):
        plan_blocks(10, num_actors=2, batch_size=64, block_size=0)


def _batch(ids, dim=2):
    ids = np.asarray(ids, dtype=np.int64)
    return {
        "row_id": ids,
        "embedding": np.tile(ids[:, None], (1, dim)).astype(np.float32),
        "pid": np.zeros(len(ids), dtype=np.int64),
        "cuda_visible_devices": np.full(len(ids), "", dtype=object),
    }


def test_assemble_puts_rows_in_input_order():
    emb, _, _ = _assemble(5, [_batch([3, 0]), _batch([4, 1, 2])])
    np.testing.assert_array_equal(emb[:, 0], [0, 1, 2, 3, 4])


@pytest.mark.parametrize("batches", [[_batch([0, 1]), _batch([1, 2])], [_batch([0, 1])]])
def test_assemble_rejects_duplicated_or_missing_rows(batches):
    with pytest.raises(RuntimeError, match="rows never and"):
        _assemble(3, batches)


def test_local_path_matches_the_encoder():
    texts = make_texts(50)
    run = embed_texts_detailed(texts, "hash:16", use_ray=False)
    assert run.engine == "local"
    np.testing.assert_array_equal(run.embeddings, _expected(texts))
    assert run.embeddings.dtype == np.float32 and run.embeddings.flags.c_contiguous


def test_embed_settings_whole_or_as_keyword_options():
    texts = make_texts(20)
    by_keywords = embed_texts(texts, "hash:16", use_ray=False, batch_size=4, progress=False)
    whole = embed_texts(texts, "hash:16", config=EmbedSettings(use_ray=False, batch_size=4, progress=False))
    mixed = embed_texts(
        texts, "hash:16", config=EmbedSettings(use_ray=True, batch_size=4), use_ray=False, progress=False
    )
    np.testing.assert_array_equal(whole, by_keywords)
    np.testing.assert_array_equal(mixed, by_keywords)


def test_local_path_uses_query_instructions_option_and_kind():
    q = embed_texts(["a b"], "hash:16", kind="query", use_ray=False)
    d = embed_texts(["a b"], "hash:16", kind="document", use_ray=False)
    np.testing.assert_array_equal(q, d)  # the hashing encoder treats both sides alike
    assert embed_texts([], "hash:16", use_ray=False).shape == (0, 16)


def test_input_errors_fail_before_ray_starts():
    with pytest.raises(DataError, match=r"texts\[1\]"):
        embed_texts(["a", 3], "hash:16", use_ray=False)
    with pytest.raises(ConfigError, match="kind"):
        embed_texts(["a"], "hash:16", kind="passage")
    with pytest.raises(ConfigError, match="does not exist"):
        embed_texts(["a"], "./no/such/model/dir")
    with pytest.raises(TypeError, match="unexpected keyword argument .blocksize.; expected one of"):
        embed_texts(["a"], "hash:16", blocksize=3)


# -- on Ray (two fake GPUs) ------------------------------------------------------------------
def test_two_gpu_actors_get_distinct_devices_and_each_row_once(ray_fake_gpus):
    texts = make_texts(400)
    run = embed_texts_detailed(texts, HashFactory(16, delay=0.05), block_size=20, progress=False)
    assert run.engine == "ray" and run.num_actors == 2
    devices = set(run.cuda_visible_devices.tolist())
    assert devices == {"0", "1"}
    pids = {d: set(run.pid[run.cuda_visible_devices == d].tolist()) for d in devices}
    assert len(pids["0"]) == 1 and len(pids["1"]) == 1 and pids["0"] != pids["1"]
    np.testing.assert_array_equal(run.embeddings, _expected(texts))  # in input order


def test_model_reference_without_length_sorting_keeps_input_order(ray_fake_gpus):
    texts = make_texts(120, seed=3)
    out = embed_texts(texts, "hash:16", block_size=16, sort_by_length=False, progress=False)
    np.testing.assert_array_equal(out, _expected(texts))


def test_killed_actor_is_replaced_and_every_row_is_embedded_once(ray_fake_gpus, tmp_path):
    texts = make_texts(300, seed=1)
    marker = tmp_path / "crashed.pid"
    run = embed_texts_detailed(texts, CrashOnceFactory(str(marker), 16), block_size=20, progress=False)
    assert marker.exists(), "no actor crashed: the test did not exercise a failure"
    crashed_pid = int(marker.read_text())
    assert crashed_pid not in set(run.pid.tolist())  # its batch was redone by a live actor
    np.testing.assert_array_equal(run.embeddings, _expected(texts))


def test_actor_that_cannot_load_its_model_gives_a_config_error(ray_fake_gpus):
    from adaptlab.embedding import active_pools, release_pools

    release_pools()
    with pytest.raises(ConfigError, match="could not load the encoder: model directory '/gone'"):
        embed_texts(make_texts(10), FailingFactory(), progress=False)
    assert active_pools() == 0  # the broken pool is dropped, not kept for the next call


@pytest.mark.slow
def test_real_minilm_on_ray_matches_in_process(ray_fake_gpus):
    from embedding_fakes import make_texts as mk

    texts = mk(96, seed=2)
    local = embed_texts(texts, "minilm", use_ray=False, batch_size=32)
    remote = embed_texts_detailed(texts, "minilm", batch_size=32, block_size=32, num_actors=2, progress=False)
    assert remote.embeddings.shape == (96, 384)
    np.testing.assert_allclose(remote.embeddings, local, atol=2e-5)
    assert set(remote.cuda_visible_devices.tolist()) <= {"0", "1"}
    assert os.environ.get("HF_HUB_OFFLINE") == "1"  # the model is local: no hub access


# -- progress keeps its promise: a line at least every interval, whatever the block size ---------
class _PerBatchSlow(HashingEncoder):
    """Hashing encoder that takes ``delay`` seconds per batch of every call and records the calls."""

    def __init__(self, delay: float) -> None:
        super().__init__(16)
        self.delay, self.calls = delay, []

    def _encode(self, texts, kind, batch_size):  # noqa: ANN001
        self.calls.append(len(texts))
        time.sleep(self.delay * -(-len(texts) // batch_size))
        return super()._encode(texts, kind, batch_size)


INTERVAL = 0.4
SLACK = 0.8  # the heartbeat polls every interval/4; a loaded machine adds scheduling delay


@pytest.fixture
def clocked(monkeypatch):
    """Progress lines every INTERVAL s; call it in the test body (pytest's capture replaces
    sys.stderr again between a fixture and the test) to route stderr into a ClockedStream."""
    monkeypatch.setenv("ADAPTLAB_PROGRESS_INTERVAL", str(INTERVAL))
    monkeypatch.setenv("ADAPTLAB_PROGRESS", "1")

    def start() -> ClockedStream:
        stream = ClockedStream()
        monkeypatch.setattr(sys, "stderr", stream)
        return stream

    return start


def test_in_process_progress_is_never_silent_for_long_and_numbers_do_not_change(clocked, monkeypatch):
    import adaptlab.embedding.pipeline as pipeline

    monkeypatch.setattr(pipeline, "LOCAL_SLICE_SECONDS", 0.1)
    stream = clocked()
    enc = _PerBatchSlow(delay=0.06)
    texts = make_texts(300, seed=5)  # <= 1,024 texts: the quickstart's case, silent before
    run = embed_texts_detailed(texts, lambda device=None: enc, batch_size=8, use_ray=False)
    end = time.perf_counter()
    assert max(stream.gaps(end)) <= INTERVAL + SLACK, stream.lines
    assert stream.lines[-1][1].endswith("/s)")  # the final line
    assert len({line.split(": ")[1].split("/")[0] for _, line in stream.lines}) >= 4  # the count moves
    assert all(n % 8 == 0 for n in enc.calls[:-1]) and len(enc.calls) > 3  # whole batches per call
    np.testing.assert_array_equal(run.embeddings, _expected(texts))


def test_a_long_step_gets_heartbeat_lines(clocked):
    from adaptlab.runtime.progress import Progress

    stream = clocked()
    with Progress(100, "embedding 100 documents") as bar:
        time.sleep(5 * INTERVAL)  # one block that takes 5 intervals
        bar.update(100)
    end = time.perf_counter()
    assert max(stream.gaps(end)) <= INTERVAL + SLACK, stream.lines
    assert any("0/100 texts (0%), still working" in line and "since the start" in line for _, line in stream.lines)


def test_progress_off_prints_nothing_and_stops_its_heartbeat(clocked):
    from adaptlab.runtime.progress import Progress

    stream = clocked()
    bar = Progress(10, "x", enabled=False)
    time.sleep(2 * INTERVAL)
    bar.close()
    assert stream.lines == [] and bar._beat is None


def test_ray_progress_lines_while_blocks_run_longer_than_the_interval(ray_fake_gpus, clocked):
    stream = clocked()
    texts = make_texts(40, seed=6)
    run = embed_texts_detailed(texts, HashFactory(16, delay=4 * INTERVAL), block_size=10)
    end = time.perf_counter()
    np.testing.assert_array_equal(run.embeddings, _expected(texts))
    assert max(stream.gaps(end)) <= INTERVAL + SLACK, stream.lines
    assert any("still working" in line for _, line in stream.lines)
