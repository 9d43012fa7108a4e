"""Progress keeps its promise while an encoder loads in this process (issue 20): heartbeat lines
``[adaptlab] loading MODEL (N s)`` at the progress interval, continued by the embedding's own
lines without a longer gap, and silence when the load is shorter than one interval."""

from __future__ import annotations

import re
import sys
import threading
import time

import numpy as np
import pytest
from embedding_fakes import ClockedStream, make_texts

import adaptlab.runtime.progress as progress
from adaptlab.embedding import embed_texts_detailed
from adaptlab.models import HashingEncoder
from adaptlab.runtime.progress import Heartbeat

INTERVAL = 0.4
SLACK = 0.8  # the heartbeat polls every interval/4; a loaded machine adds scheduling delay
LOAD_LINE = re.compile(r"^\[adaptlab\] (loading \S+|starting Ray) \((\d+) s\)$")


class _SlowBatches(HashingEncoder):
    """Hashing encoder taking ``delay`` seconds per batch (so the embedding itself spans intervals)."""

    def __init__(self, delay: float) -> None:
        super().__init__(16)
        self.delay = delay

    def _encode(self, texts, kind, batch_size):  # noqa: ANN001
        time.sleep(self.delay * -(-len(texts) // batch_size))
        return super()._encode(texts, kind, batch_size)


class SlowLoader:
    """An encoder factory named ``slow-model`` whose load waits until ``ready`` is set (bounded by
    ``limit`` seconds), then returns ``encoder``."""

    ref = "slow-model"

    def __init__(self, ready: threading.Event, encoder: HashingEncoder, limit: float = 10.0) -> None:
        self.ready, self.encoder, self.limit = ready, encoder, limit
        self.waited: float | None = None

    def __call__(self, device: str | None = None) -> HashingEncoder:
        t0 = time.perf_counter()
        self.ready.wait(self.limit)
        self.waited = time.perf_counter() - t0
        return self.encoder


@pytest.fixture
def clocked(monkeypatch):
    """Progress on, every INTERVAL s, a fresh shared clock; call it in the test body (pytest's
    capture replaces sys.stderr again between a fixture and the test) to route stderr to a ClockedStream."""
    monkeypatch.setenv("ADAPTLAB_PROGRESS_INTERVAL", str(INTERVAL))
    monkeypatch.setenv("ADAPTLAB_PROGRESS", "1")
    monkeypatch.setitem(progress._LAST_LINE, "at", None)

    def start(beats: int = 3) -> ClockedStream:
        stream = ClockedStream(beats, LOAD_LINE)
        monkeypatch.setattr(sys, "stderr", stream)
        return stream

    return start


def _no_heartbeat_thread_left() -> bool:
    return not any(t.name == "adaptlab-heartbeat" for t in threading.enumerate())


def test_a_slow_in_process_load_is_never_silent_for_long(clocked):
    stream = clocked(beats=3)
    loader = SlowLoader(stream.event, _SlowBatches(delay=0.1))
    texts = make_texts(120, seed=3)
    run = embed_texts_detailed(texts, loader, batch_size=8, use_ray=False)
    end = time.perf_counter()
    assert loader.waited is not None and loader.waited < loader.limit, stream.lines  # released by the lines
    assert max(stream.gaps(end)) <= INTERVAL + SLACK, stream.lines
    texts_out = [line for _, line in stream.lines]
    loads = [i for i, line in enumerate(texts_out) if LOAD_LINE.match(line)]
    assert len(loads) >= 3 and loads == list(range(len(loads))), texts_out  # first, one after another
    assert all(texts_out[i].startswith("[adaptlab] loading slow-model (") for i in loads), texts_out
    assert texts_out[len(loads)].startswith("[adaptlab] loading slow-model: done in "), texts_out
    assert any(line.startswith("[adaptlab] embedding 120 documents with slow-model: ") for line in texts_out)
    np.testing.assert_array_equal(run.embeddings, HashingEncoder(16).encode_documents(texts))
    assert _no_heartbeat_thread_left()


def test_a_load_shorter_than_the_interval_prints_nothing(clocked, monkeypatch):
    monkeypatch.setenv("ADAPTLAB_PROGRESS_INTERVAL", "3")
    stream = clocked()
    ready = threading.Event()
    threading.Timer(0.3, ready.set).start()  # a 0.3 s load, a tenth of the interval
    loader = SlowLoader(ready, HashingEncoder(16))
    embed_texts_detailed(make_texts(20), loader, batch_size=8, use_ray=False)
    assert loader.waited is not None and loader.waited >= 0.25
    assert stream.lines == []


@pytest.mark.parametrize("off", ["argument", "environment", "quiet"])
def test_progress_off_means_no_load_lines(clocked, monkeypatch, off):
    stream = clocked()
    if off == "environment":
        monkeypatch.setenv("ADAPTLAB_PROGRESS", "0")
    if off == "quiet":  # what adaptlab --quiet does
        monkeypatch.setitem(progress._PROGRESS, "enabled", None)  # restored after the test
        progress.set_progress(False)
    ready = threading.Event()
    threading.Timer(3 * INTERVAL, ready.set).start()  # three intervals: three lines if it were on
    loader = SlowLoader(ready, HashingEncoder(16))
    embed_texts_detailed(make_texts(10), loader, use_ray=False, progress=off != "argument")
    assert loader.waited is not None and loader.waited >= 2.5 * INTERVAL
    assert stream.lines == [] and _no_heartbeat_thread_left()


def test_a_failed_load_stops_its_heartbeat_without_a_done_line(clocked):
    stream = clocked(beats=2)

    def broken(device: str | None = None) -> HashingEncoder:
        stream.event.wait(10.0)
        raise OSError("weights truncated")

    with pytest.raises(OSError, match="weights truncated"):
        with Heartbeat("loading broken"):
            broken()
    lines = [line for _, line in stream.lines]
    assert lines and all(re.fullmatch(r"\[adaptlab\] loading broken \(\d+ s\)", line) for line in lines), lines
    assert _no_heartbeat_thread_left()


def test_the_next_step_continues_the_clock_of_the_last_line(clocked, monkeypatch):
    """Load lines, a short quiet step, then an embedding: its first line is due one interval after
    the load's last line, not one interval after its own start (no 2x gap at a hand-over)."""
    monkeypatch.setenv("ADAPTLAB_PROGRESS_INTERVAL", "1")
    stream = clocked(beats=1)
    with Heartbeat("loading x"):
        stream.event.wait(5.0)  # until its first line (at ~1 s); the done line follows at once
    time.sleep(0.5)  # a step shorter than the interval: quiet
    started = time.perf_counter()
    with progress.Progress(10, "embedding 10 documents") as bar:
        deadline = started + 3.0
        while not any("embedding 10" in line for _, line in stream.lines) and time.perf_counter() < deadline:
            time.sleep(0.05)
        bar.update(10)
    done_line = next(t for t, line in stream.lines if line.startswith("[adaptlab] loading x: done in"))
    first = next(t for t, line in stream.lines if "embedding 10 documents" in line)
    assert first - done_line <= 1.0 + SLACK, stream.lines
    assert first - started < 1.0, stream.lines  # sooner than a clock of its own would allow


def test_waiting_for_ray_to_start_has_heartbeat_lines(clocked, monkeypatch):
    import adaptlab.embedding.pipeline as pipeline

    stream = clocked(beats=2)

    def slow_start() -> None:  # a Ray start that takes intervals, then fails (so no pool is needed)
        stream.event.wait(10.0)
        raise RuntimeError("no Ray here")

    monkeypatch.setattr(pipeline, "init_ray", slow_start)
    t0 = time.perf_counter()
    with pytest.raises(RuntimeError, match="no Ray here"):
        embed_texts_detailed(make_texts(5), "hash:16", use_ray=True)
    assert time.perf_counter() - t0 < 10.0, stream.lines  # released by the lines, not the bound
    lines = [line for _, line in stream.lines]
    assert len(lines) >= 2 and all(re.fullmatch(r"\[adaptlab\] starting Ray \(\d+ s\)", ln) for ln in lines), lines
