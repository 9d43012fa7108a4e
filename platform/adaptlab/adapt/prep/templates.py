"""Template questions for the synthetic domain of :mod:`adaptlab.data.synthetic` (offline).

The synthetic documents know their facts: each fact is one sentence with a set of paraphrased
questions, some in the domain's jargon. For a chunk of such a document, this generator takes
the facts whose sentence lies in the chunk and asks one of their paraphrases; the chunk, whole,
is the positive. Unlike inverse cloze the query does not copy the text, so it exercises the
vocabulary gap (jargon) that fine-tuning can learn.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from adaptlab.adapt.prep.chunking import Chunk
from adaptlab.adapt.prep.questions import SyntheticQuestion, question_id
from adaptlab.data.dataset import Document
from adaptlab.data.synthetic import RawDocument
from adaptlab.errors import ConfigError

__all__ = ["SyntheticTemplateGenerator", "synthetic_raw_corpus"]


def synthetic_raw_corpus(documents: Sequence[RawDocument]) -> list[Document]:
    """The synthetic documents as a raw corpus (text only, so facts match chunk text)."""
    return [Document(d.id, d.text) for d in documents]


class SyntheticTemplateGenerator:
    """Paraphrase questions about the facts stated in each chunk (see the module doc).

    Up to ``n_per_chunk`` facts per chunk are drawn, and for each a jargon paraphrase with
    probability ``jargon_rate`` (else a plain one), by a Generator seeded with
    ``(seed, sha256(chunk_id))``. Name: ``"template:synthetic"``.
    """

    def __init__(
        self,
        documents: Sequence[RawDocument],
        n_per_chunk: int = 1,
        *,
        jargon_rate: float = 1 / 3,
        seed: int = 0,
    ) -> None:
        if isinstance(n_per_chunk, bool) or n_per_chunk < 1:
            raise ConfigError(f"n_per_chunk={n_per_chunk}: expected an integer >= 1")
        if not 0.0 <= jargon_rate <= 1.0:
            raise ConfigError(f"jargon_rate={jargon_rate}: expected a number in [0, 1]")
        self.facts = {d.id: d.facts for d in documents}
        self.n_per_chunk = int(n_per_chunk)
        self.jargon_rate = float(jargon_rate)
        self.seed = int(seed)
        self.name = "template:synthetic"

    def generate(self, chunks: Sequence[Chunk]) -> list[SyntheticQuestion]:
        out: list[SyntheticQuestion] = []
        for chunk in chunks:
            facts = [f for f in self.facts.get(chunk.doc_id, ()) if f.sentence in chunk.text]
            if not facts:
                continue
            key = int.from_bytes(hashlib.sha256(chunk.id.encode()).digest()[:8], "big")
            rng = np.random.default_rng([self.seed, key])
            k = min(self.n_per_chunk, len(facts))
            for j, i in enumerate(sorted(rng.choice(len(facts), size=k, replace=False).tolist())):
                fact = facts[i]
                want = bool(rng.random() < self.jargon_rate)
                pool = [p for p, is_j in enumerate(fact.jargon) if is_j == want] or list(range(len(fact.questions)))
                text = fact.questions[pool[int(rng.integers(len(pool)))]]
                out.append(
                    SyntheticQuestion(
                        id=question_id(chunk.id, j),
                        text=text,
                        chunk_id=chunk.id,
                        doc_id=chunk.doc_id,
                        generator=self.name,
                        answer=fact.value,
                    )
                )
        return out
