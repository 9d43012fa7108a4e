"""A ColBERT encoder loading in this process is not silent (issue 20): ``[adaptlab] loading NAME
(N s)`` lines at the progress interval, as for the dense encoders, then ``loading NAME: done in
N s``; nothing with progress off. The load is a fake released by the lines themselves."""

from __future__ import annotations

import re
import sys
import threading
import time

import numpy as np
import pytest
from embedding_fakes import ClockedStream

import adaptlab.models.load as load
import adaptlab.runtime.progress as progress
from adaptlab.embedding.tokens import TokenEmbedder

INTERVAL = 0.3
LOAD_LINE = re.compile(r"^\[adaptlab\] loading fake-colbert \(\d+ s\)$")


class _Tokens:
    """Stands in for a loaded ColBERT encoder: one 4-dim vector per word."""

    def encode_tokens(self, texts, *, kind, batch_size):  # noqa: ANN001
        from adaptlab.models.colbert import TokenVectors

        lengths = [len(t.split()) for t in texts]
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        return TokenVectors(np.ones((int(offsets[-1]), 4), np.float32), offsets)


@pytest.fixture
def slow_load(monkeypatch):
    """Progress on every INTERVAL s on a fresh clock; ``start(release)`` routes stderr to a
    ClockedStream and makes ``load_encoder`` wait until ``release`` is set (at most 5 s)."""
    monkeypatch.setenv("ADAPTLAB_PROGRESS_INTERVAL", str(INTERVAL))
    monkeypatch.setenv("ADAPTLAB_PROGRESS", "1")
    monkeypatch.setitem(progress._PROGRESS, "enabled", None)
    monkeypatch.setitem(progress._LAST_LINE, "at", None)
    waited: list[float] = []

    def start(stream: ClockedStream, release: threading.Event) -> list[float]:
        def fake_load(ref, *, backend, device=None, **options):  # noqa: ANN001, ANN003
            assert backend == "colbert"
            t0 = time.perf_counter()
            release.wait(5.0)
            waited.append(time.perf_counter() - t0)
            return _Tokens()

        monkeypatch.setattr(load, "load_encoder", fake_load)
        monkeypatch.setattr(sys, "stderr", stream)
        return waited

    return start


def _embedder() -> TokenEmbedder:
    return TokenEmbedder("models/fake-colbert", options={"backend": "colbert"}, batch_size=8)


def test_a_slow_colbert_load_prints_loading_lines(slow_load):
    stream = ClockedStream(2, LOAD_LINE)
    waited = slow_load(stream, stream.event)  # the load ends once two lines came
    run = _embedder().encode(["a b c", "d e"], "document")  # no cache key: no model revision needed
    assert run.engine == "local" and run.tokens.offsets.tolist() == [0, 3, 5]
    assert waited and waited[0] < 5.0, stream.lines  # released by the lines, not the bound
    lines = [line for _, line in stream.lines]
    assert len(lines) >= 3 and all(LOAD_LINE.match(line) for line in lines[:-1]), lines
    assert lines[-1].startswith("[adaptlab] loading fake-colbert: done in "), lines


def test_quiet_prints_no_colbert_loading_lines(slow_load):
    progress.set_progress(False)  # what adaptlab --quiet does (restored by the fixture)
    stream, release = ClockedStream(), threading.Event()
    waited = slow_load(stream, release)
    threading.Timer(3 * INTERVAL, release.set).start()  # three intervals: three lines if it were on
    _embedder().encode(["a b c"], "query")
    assert waited and waited[0] >= 2.5 * INTERVAL
    assert stream.lines == []
