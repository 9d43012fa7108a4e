"""Bounded memory when chunking a big adaptation corpus (issue 28): token counting streams in
batches, so chunking a document costs about its own size again (the chunks' text), not the token
ids of every sentence at once (a 200 MB .txt pushed a study past 6 GB; 10 MB of text with the
minilm tokenizer grew RSS by 407 MB before, 27 MB after)."""

from __future__ import annotations

import random
import tracemalloc

from adaptlab.adapt.prep import chunking
from adaptlab.adapt.prep.chunking import chunk_documents
from adaptlab.data.dataset import Document

WORDS = ["alpha", "beta", "gamma", "delta", "river", "stone", "energy", "policy", "report", "impact"]


class WordTokenizer:
    """One token id per word, each a Python int of its own as a real vocabulary's ids are (ids
    above 256 are not shared), in a list per text as a tokenizer returns; no special tokens."""

    def __call__(self, texts, add_special_tokens=True, **kw):
        batch = [texts] if isinstance(texts, str) else texts
        ids = [[1000 + i for i in range(len(t.split()))] for t in batch]
        return {"input_ids": ids[0] if isinstance(texts, str) else ids}

    def num_special_tokens_to_add(self, pair=False):
        return 0


def _text(mb: int) -> str:
    rng = random.Random(0)
    sentences, size = [], 0
    while size < mb * 2**20:
        s = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30))).capitalize() + ". "
        sentences.append(s)
        size += len(s)
    return "".join(sentences)


def test_chunking_a_big_document_peaks_near_its_own_size():
    doc = Document("big", _text(8))
    size = len(doc.text)
    tracemalloc.start()
    try:
        chunks = chunk_documents([doc], WordTokenizer(), max_tokens=256)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert chunks and "".join(c.text for c in chunks[:3]) and all(c.n_tokens <= 256 for c in chunks)
    assert chunks[-1].end == len(doc.text.rstrip())
    # the chunks' text (1x) plus the sentence spans, counts and Chunk objects: 3.0x measured; before,
    # every sentence's token ids at once: 9.6x (RSS growth with the minilm tokenizer: 41x before, 2.7x after)
    assert peak <= 3.5 * size, f"peak {peak / 2**20:.0f} MiB for {size / 2**20:.0f} MiB of text"


def test_counting_batches_give_the_same_chunks(monkeypatch):
    doc = Document("d", _text(1)[:200_000])
    before = chunk_documents([doc], WordTokenizer(), max_tokens=64)
    monkeypatch.setattr(chunking, "COUNT_BATCH", 3)
    assert chunk_documents([doc], WordTokenizer(), max_tokens=64) == before
