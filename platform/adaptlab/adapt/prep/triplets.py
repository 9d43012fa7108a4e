"""Training triplets (query, positive, hard negatives) and their Parquet files.

One row per question: ``query_id, query, positive_id, positive, negative_ids, negatives,
doc_id`` (``negative_ids`` / ``negatives`` are lists, best negative first). The schema metadata
key ``adaptlab`` holds JSON provenance: schema version, base model, data scale, seed, question
generator, mining settings and the content fingerprint of the triplets.

Fingerprint: SHA-256 over the canonical JSON of the rows sorted by ``query_id`` (all fields,
negatives in order), first 16 hex characters, the same convention as
:meth:`adaptlab.data.dataset.Dataset.fingerprint`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from adaptlab.adapt.prep.chunking import Chunk
from adaptlab.adapt.prep.negatives import HardNegatives
from adaptlab.adapt.prep.questions import SyntheticQuestion, positive_text
from adaptlab.errors import ConfigError, DataError

__all__ = [
    "SCHEMA_VERSION",
    "Triplet",
    "TripletProvenance",
    "build_triplets",
    "read_triplets",
    "triplets_fingerprint",
    "triplets_table",
    "write_triplets",
]

SCHEMA_VERSION = 1
_META_KEY = b"adaptlab"


@dataclass(frozen=True)
class Triplet:
    """A query, its positive context and its hard negatives (texts and chunk ids)."""

    query_id: str
    query: str
    positive_id: str
    positive: str
    negative_ids: tuple[str, ...]
    negatives: tuple[str, ...]
    doc_id: str


@dataclass(frozen=True)
class TripletProvenance:
    """Where a triplet file came from; stored as JSON in the Parquet schema metadata.

    ``fingerprint`` is filled in by :func:`write_triplets`; ``extra`` holds anything else
    (mining settings, split, corpus fingerprint).
    """

    base_model: str
    scale: str
    seed: int
    generator: str
    split: str = "train"
    extra: Mapping[str, Any] = field(default_factory=dict)
    fingerprint: str = ""

    def to_json(self) -> str:
        return json.dumps(
            {
                "kind": "triplets",
                "schema_version": SCHEMA_VERSION,
                "base_model": self.base_model,
                "scale": self.scale,
                "seed": self.seed,
                "generator": self.generator,
                "split": self.split,
                "fingerprint": self.fingerprint,
                "extra": dict(self.extra),
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str, where: str) -> TripletProvenance:
        try:
            obj = json.loads(text)
            version = int(obj.get("schema_version", 0))
            if version > SCHEMA_VERSION:
                raise DataError(
                    f"{where}: triplets schema version {version} is newer than this adaptlab "
                    f"reads ({SCHEMA_VERSION}); upgrade adaptlab"
                )
            return cls(
                base_model=str(obj["base_model"]),
                scale=str(obj["scale"]),
                seed=int(obj["seed"]),
                generator=str(obj["generator"]),
                split=str(obj.get("split", "train")),
                extra=dict(obj.get("extra", {})),
                fingerprint=str(obj.get("fingerprint", "")),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise DataError(f"{where}: malformed triplet provenance metadata ({e})") from e


def build_triplets(
    questions: Sequence[SyntheticQuestion],
    chunks: Sequence[Chunk],
    negatives: HardNegatives | Mapping[str, Sequence[str]],
) -> list[Triplet]:
    """Triplets for ``questions`` (in order); positives and negatives are looked up in
    ``chunks``, which must hold every chunk referred to. The positive text is
    :func:`~adaptlab.adapt.prep.questions.positive_text` (the chunk minus the query for ICT)."""
    by_id = {c.id: c for c in chunks}
    neg_ids = negatives.ids if isinstance(negatives, HardNegatives) else negatives
    out = []
    for q in questions:
        if q.chunk_id not in by_id:
            raise ConfigError(f"question {q.id!r}: positive chunk {q.chunk_id!r} not among the chunks")
        if q.id not in neg_ids:
            raise ConfigError(f"question {q.id!r}: no negatives mined for it")
        ids = tuple(neg_ids[q.id])
        unknown = [i for i in ids if i not in by_id]
        if unknown:
            raise ConfigError(f"question {q.id!r}: negative chunk {unknown[0]!r} not among the chunks")
        out.append(
            Triplet(
                query_id=q.id,
                query=q.text,
                positive_id=q.chunk_id,
                positive=positive_text(q, by_id[q.chunk_id]),
                negative_ids=ids,
                negatives=tuple(by_id[i].text for i in ids),
                doc_id=q.doc_id,
            )
        )
    return out


def triplets_fingerprint(triplets: Sequence[Triplet]) -> str:
    """Content fingerprint (16 hex chars of SHA-256; see the module docstring)."""
    h = hashlib.sha256()
    for t in sorted(triplets, key=lambda t: t.query_id):
        row = [t.query_id, t.query, t.positive_id, t.positive, list(t.negative_ids), list(t.negatives), t.doc_id]
        h.update(json.dumps(row, ensure_ascii=False).encode())
        h.update(b"\n")
    return h.hexdigest()[:16]


_SCHEMA = pa.schema(
    [
        ("query_id", pa.string()),
        ("query", pa.string()),
        ("positive_id", pa.string()),
        ("positive", pa.string()),
        ("negative_ids", pa.list_(pa.string())),
        ("negatives", pa.list_(pa.string())),
        ("doc_id", pa.string()),
    ]
)


def triplets_table(triplets: Sequence[Triplet], provenance: TripletProvenance) -> pa.Table:
    """The triplets as an Arrow table with provenance (fingerprint filled in) in its metadata."""
    prov = TripletProvenance(
        provenance.base_model,
        provenance.scale,
        provenance.seed,
        provenance.generator,
        provenance.split,
        provenance.extra,
        triplets_fingerprint(triplets),
    )
    cols = {
        "query_id": [t.query_id for t in triplets],
        "query": [t.query for t in triplets],
        "positive_id": [t.positive_id for t in triplets],
        "positive": [t.positive for t in triplets],
        "negative_ids": [list(t.negative_ids) for t in triplets],
        "negatives": [list(t.negatives) for t in triplets],
        "doc_id": [t.doc_id for t in triplets],
    }
    return pa.table(cols, schema=_SCHEMA.with_metadata({_META_KEY: prov.to_json().encode()}))


def write_triplets(path: str | Path, triplets: Sequence[Triplet], provenance: TripletProvenance) -> TripletProvenance:
    """Write triplets to Parquet (atomically: temporary file, then rename).

    Returns the provenance as stored, with the fingerprint filled in.
    """
    table = triplets_table(triplets, provenance)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    pq.write_table(table, tmp)
    tmp.replace(p)
    return TripletProvenance.from_json(table.schema.metadata[_META_KEY].decode(), str(p))


def read_triplets(path: str | Path, *, verify: bool = True) -> tuple[list[Triplet], TripletProvenance]:
    """Triplets and provenance from a file of :func:`write_triplets`.

    ``verify`` recomputes the fingerprint and raises DataError when it does not match (the
    file was edited or truncated).
    """
    p = Path(path)
    try:
        table = pq.read_table(p)
    except (OSError, pa.ArrowInvalid) as e:
        raise DataError(f"{p}: cannot read triplets Parquet ({e})") from e
    meta = table.schema.metadata or {}
    if _META_KEY not in meta:
        raise DataError(f"{p}: no adaptlab provenance in the schema metadata; not a triplets file")
    prov = TripletProvenance.from_json(meta[_META_KEY].decode(), str(p))
    missing = [n for n in _SCHEMA.names if n not in table.column_names]
    if missing:
        raise DataError(f"{p}: missing triplet column(s) {', '.join(missing)}")
    rows = table.select(_SCHEMA.names).to_pylist()
    triplets = [
        Triplet(
            r["query_id"],
            r["query"],
            r["positive_id"],
            r["positive"],
            tuple(r["negative_ids"] or ()),
            tuple(r["negatives"] or ()),
            r["doc_id"],
        )
        for r in rows
    ]
    if verify and prov.fingerprint and triplets_fingerprint(triplets) != prov.fingerprint:
        raise DataError(
            f"{p}: content fingerprint {triplets_fingerprint(triplets)} does not match the stored "
            f"{prov.fingerprint}; the file was modified after it was written"
        )
    return triplets, prov
