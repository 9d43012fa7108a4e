"""The adaptation-data stage end to end: documents -> chunks -> scales -> questions -> triplets.

Order of operations (each step is a function of this package; all randomness from ``seed``):

1. :func:`~adaptlab.adapt.prep.chunking.chunk_documents`: chunks of whole sentences, <= 256 tokens.
2. Hold out test documents first, from the whole corpus
   (:func:`~adaptlab.adapt.prep.splits.split_documents`, ``test_fraction``): they are outside every
   data scale, so one test set serves the base model and every adapted variant of every scale.
3. :func:`~adaptlab.adapt.prep.scales.build_scales` on the remaining documents: nested scales,
   ``fraction`` of each document's chunks sampled.
4. Questions for the sampled chunks of the largest scale and of the test documents, generated
   once (a chunk's questions do not depend on the scale, so smaller scales reuse them and an
   LLM generator's cache answers repeats).
5. Per scale: documents split into train / validation (``validation_fraction``); hard negatives
   mined with the base model (embeddings memoised across scales) from all chunks (sampled or
   not) of the training documents for training triplets, and of the scale's training and
   validation documents for validation triplets; never from test documents. Triplets are
   written to ``{out_dir}/{scale}/{split}.parquet``.
Units (``unit=``, ``[adapt].unit``): steps 2, 3 and 5 count and split ``"documents"``
(default), ``"pages"`` (the chunks whose first page is that page, for PDFs; a document without
pages is one page) or ``"chunks"``, so a corpus of a few long documents can still be studied at
growing scales. Every chunk belongs to one unit, so held-out evaluation never shares a unit
with training (with pages or chunks it can share a document: neighbouring text of the same
document may be trained on; the summary records the unit).

6. The held-out questions become an evaluation Dataset
   (:func:`~adaptlab.adapt.prep.evalset.heldout_dataset`), written as a BEIR folder
   ``{out_dir}/heldout``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from adaptlab.adapt.prep.chunking import Chunk, chunk_documents, chunks_by_document, write_chunks
from adaptlab.adapt.prep.evalset import heldout_dataset
from adaptlab.adapt.prep.negatives import as_embed_fn, memoize_embed, mine_hard_negatives
from adaptlab.adapt.prep.questions import QuestionGenerator, SyntheticQuestion
from adaptlab.adapt.prep.scales import UNITS, DataScale, build_scales, sample_chunks
from adaptlab.adapt.prep.splits import DocumentSplits, split_documents
from adaptlab.adapt.prep.triplets import Triplet, TripletProvenance, build_triplets, write_triplets
from adaptlab.data.beir import write_beir
from adaptlab.data.dataset import Dataset, Document
from adaptlab.errors import ConfigError

__all__ = ["AdaptationData", "PrepSettings", "ScaleData", "chunk_units", "prepare_adaptation_data"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PrepSettings:
    """What decides the adaptation data (steps in the module docstring), with its defaults
    declared once (``[adapt]`` of a study file takes them from here).

    ``sizes``: the nested scales, counts of ``unit`` (``"documents"``, ``"pages"`` or
    ``"chunks"``; ``"all"`` only last); ``fraction``: share of each unit's chunks sampled;
    ``test_fraction`` (in (0, 1)) / ``validation_fraction`` (in [0, 1)): units held out for the
    evaluation / kept for validation questions; ``max_tokens``: tokens per chunk; ``n_negatives``,
    ``duplicate_threshold``, ``margin`` (None: rule off): hard-negative mining; ``eval_corpus``:
    the held-out set's corpus (``"documents"``: its documents' chunks, ``"all"``); ``seed``: all
    randomness."""

    sizes: tuple[int | str, ...] = (10, 100, 700)
    fraction: float = 0.3
    seed: int = 0
    test_fraction: float = 0.1
    validation_fraction: float = 0.1
    max_tokens: int = 256
    n_negatives: int = 10
    duplicate_threshold: float | None = 0.95
    margin: float | None = 0.05
    eval_corpus: Literal["documents", "all"] = "documents"
    unit: Literal["documents", "pages", "chunks"] = "documents"

    def __post_init__(self) -> None:
        object.__setattr__(self, "sizes", tuple(self.sizes))
        if not 0.0 < self.test_fraction < 1.0:
            raise ConfigError(f"test_fraction={self.test_fraction}: expected a number in (0, 1)")
        if not 0.0 <= self.validation_fraction < 1.0:
            raise ConfigError(f"validation_fraction={self.validation_fraction}: expected a number in [0, 1)")
        if self.unit not in UNITS:
            raise ConfigError(f"unit={self.unit!r}: expected one of {', '.join(UNITS)}")

    def mining(self) -> dict[str, Any]:
        """The hard-negative miner's keyword arguments."""
        return {"n": self.n_negatives, "duplicate_threshold": self.duplicate_threshold, "margin": self.margin}


@dataclass
class ScaleData:
    """One data scale's outputs: document split, questions and triplet files per split."""

    scale: DataScale
    splits: DocumentSplits
    questions: dict[str, list[SyntheticQuestion]]
    triplets: dict[str, list[Triplet]] = field(default_factory=dict)
    triplet_files: dict[str, Path] = field(default_factory=dict)
    provenance: dict[str, TripletProvenance] = field(default_factory=dict)


@dataclass
class AdaptationData:
    """Everything :func:`prepare_adaptation_data` produced."""

    chunks: list[Chunk]
    test_documents: tuple[str, ...]
    test_questions: list[SyntheticQuestion]
    heldout: Dataset
    scales: list[ScaleData]
    out_dir: Path | None
    unit: str = "documents"

    def summary(self) -> dict[str, Any]:
        """Counts per scale and split, and the held-out set (JSON-ready). With a unit other
        than documents, ``test_documents`` and each scale's ``documents`` count units."""
        return {
            "unit": self.unit,
            "chunks": len(self.chunks),
            "documents": len({c.doc_id for c in self.chunks}),
            "test_documents": len(self.test_documents),
            "test_questions": len(self.test_questions),
            "heldout_corpus": self.heldout.n_documents,
            "heldout_fingerprint": self.heldout.fingerprint(),
            "scales": {
                s.scale.name: {
                    "documents": s.scale.n_documents,
                    "sampled_chunks": len(s.scale.chunk_ids),
                    **{f"{k}_questions": len(v) for k, v in s.questions.items()},
                    **{f"{k}_fingerprint": p.fingerprint for k, p in s.provenance.items()},
                }
                for s in self.scales
            },
        }


def prepare_adaptation_data(
    documents: Sequence[Document],
    tokenizer: Any,
    generator: QuestionGenerator,
    model: Any,
    settings: PrepSettings | None = None,
    *,
    out_dir: str | Path | None = None,
    base_model: str = "",
) -> AdaptationData:
    """Run the adaptation-data stage (steps in the module docstring) with ``settings``
    (:class:`PrepSettings`; None: its defaults).

    ``model`` is the base model used to mine negatives (see
    :func:`~adaptlab.adapt.prep.negatives.as_embed_fn`); ``base_model`` is its name for provenance
    (defaults to ``model`` when that is a string). ``out_dir`` None keeps everything in memory.
    """
    s = settings or PrepSettings()
    base_name = base_model or (model if isinstance(model, str) else type(model).__name__)
    out = Path(out_dir) if out_dir is not None else None

    details = out / "overlong_sentences.tsv" if out is not None else None
    chunks = chunk_documents(documents, tokenizer, max_tokens=s.max_tokens, details_path=details)
    units = chunk_units(chunks, s.unit)
    # the unit view: chunks whose doc_id is their unit (documents: the chunks themselves)
    uchunks = chunks if units is None else [replace(c, doc_id=units[c.id]) for c in chunks]
    grouped = chunks_by_document(uchunks)
    held = split_documents(grouped, (1.0 - s.test_fraction, 0.0, s.test_fraction), seed=s.seed)
    test_docs = held.test
    scales = build_scales(
        uchunks, s.sizes, fraction=s.fraction, seed=s.seed, exclude_documents=test_docs, unit=s.unit, units=units
    )

    questions, test_questions, heldout = _heldout(chunks, uchunks, units, grouped, test_docs, scales[-1], generator, s)
    by_chunk: dict[str, list[SyntheticQuestion]] = {}
    for q in questions:
        by_chunk.setdefault(q.chunk_id, []).append(q)

    embed = memoize_embed(as_embed_fn(model))
    record = _Provenance(
        base_name,
        generator.name,
        {"fraction": s.fraction, "max_tokens": s.max_tokens, "heldout_fingerprint": heldout.fingerprint()},
    )
    results = [_scale_data(scale, chunks, by_chunk, units, embed, out, record, s) for scale in scales]

    result = AdaptationData(chunks, test_docs, test_questions, heldout, results, out, s.unit)
    if out is not None:
        write_chunks(out / "chunks.parquet", chunks, {"max_tokens": str(s.max_tokens)})
        write_beir(heldout, out / "heldout")
        (out / "summary.json").write_text(json.dumps(result.summary(), indent=2) + "\n")
    log.info("adaptation data: %s", json.dumps(result.summary()))
    return result


def _heldout(
    chunks: Sequence[Chunk],
    uchunks: Sequence[Chunk],
    units: dict[str, str] | None,
    grouped: dict[str, list[Chunk]],
    test_docs: Sequence[str],
    largest_scale: DataScale,
    generator: QuestionGenerator,
    s: PrepSettings,
) -> tuple[list[SyntheticQuestion], list[SyntheticQuestion], Dataset]:
    """Steps 4 and 6: questions for the largest scale's and the held-out units' sampled chunks
    (generated once), the held-out questions, and the held-out evaluation dataset."""
    by_id = {c.id: c for c in chunks}
    largest = largest_scale.chunks(chunks)
    test_sample = [by_id[c.id] for d in test_docs for c in sample_chunks(grouped[d], s.fraction, seed=s.seed)]
    questions = generator.generate([*largest, *test_sample])
    test_set = set(test_docs)
    test_questions = [q for q in questions if (q.doc_id if units is None else units[q.chunk_id]) in test_set]
    if not test_questions:
        raise ConfigError(
            f"the {len(test_docs)} held-out {s.unit} yielded no question; raise test_fraction or check the generator"
        )
    heldout = heldout_dataset(
        [q if units is None else replace(q, doc_id=units[q.chunk_id]) for q in test_questions],
        uchunks,
        name="heldout",
        corpus=s.eval_corpus,
        documents=test_docs,
        meta={"seed": s.seed, "test_documents": list(test_docs), "fraction": s.fraction, "unit": s.unit},
    )
    return questions, test_questions, heldout


@dataclass(frozen=True)
class _Provenance:
    """What every triplet file records beside its scale and split: the base model's name, the
    question generator's and the data settings (``meta``)."""

    base_name: str
    generator_name: str
    meta: dict[str, Any]


def _scale_data(
    scale: DataScale,
    chunks: Sequence[Chunk],
    by_chunk: dict[str, list[SyntheticQuestion]],
    units: dict[str, str] | None,
    embed: Any,
    out: Path | None,
    record: _Provenance,
    s: PrepSettings,
) -> ScaleData:
    """Step 5 for one scale: train/validation split by unit, negatives, triplets (and files)."""
    splits = split_documents(scale.doc_ids, (1.0 - s.validation_fraction, s.validation_fraction, 0.0), seed=s.seed)
    if units is not None:
        splits = splits.with_units(s.unit, units)
    scale_qs = [q for cid in scale.chunk_ids for q in by_chunk.get(cid, [])]
    data = ScaleData(scale, splits, {})
    for split in ("train", "validation"):
        qs = splits.select(scale_qs, split)
        data.questions[split] = qs
        if not qs:
            continue
        # train: negatives from training units only, so validation text stays unseen;
        # validation: from all the scale's units (nothing of the test set either way)
        pool = splits.select(chunks, "train") + (splits.select(chunks, "validation") if split == "validation" else [])
        negs = mine_hard_negatives(qs, chunks, embed, pool=pool, **s.mining())
        triplets = build_triplets(qs, chunks, negs)
        data.triplets[split] = triplets
        if out is None:
            continue
        path = out / scale.name / f"{split}.parquet"
        data.provenance[split] = write_triplets(
            path,
            triplets,
            TripletProvenance(
                base_model=record.base_name,
                scale=scale.name,
                seed=s.seed,
                generator=record.generator_name,
                split=split,
                extra={
                    **negs.settings(),
                    "n_documents": scale.n_documents,
                    "unit": s.unit,
                    **record.meta,
                    "dropped_duplicate": negs.dropped_duplicate,
                    "dropped_margin": negs.dropped_margin,
                },
            ),
        )
        data.triplet_files[split] = path
    return data


def chunk_units(chunks: Sequence[Chunk], unit: str) -> dict[str, str] | None:
    """chunk id -> unit id for ``unit`` ``"pages"`` (``f"{doc}@p{first_page}"``; a chunk without
    pages is on page 1 of its document) or ``"chunks"`` (the chunk id); None for documents.
    ``"pages"`` on a corpus without any paged document (no PDF) is a ConfigError."""
    if unit == "documents":
        return None
    if unit == "chunks":
        return {c.id: c.id for c in chunks}
    if unit == "pages":
        if chunks and all(c.first_page is None for c in chunks):
            raise ConfigError('unit = "pages": no document has pages (only PDFs do); use "documents" or "chunks"')
        return {c.id: f"{c.doc_id}@p{c.first_page or 1}" for c in chunks}
    raise ConfigError(f"unit={unit!r}: expected one of {', '.join(UNITS)}")
