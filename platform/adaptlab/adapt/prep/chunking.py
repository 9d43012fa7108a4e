"""Chunks: consecutive whole sentences of one document, at most ``max_tokens`` model tokens.

Following the EIS study (004_d4e67b48691a8900.txt, section 3.1), a document is split into
sentences and the sentences are grouped greedily, in order, into chunks of at most 256 tokens
of the model's tokenizer, never splitting a sentence. A single sentence longer than the limit is
the one exception: it is cut into consecutive windows of tokens, each its own chunk, flagged
``split_sentence=True`` and reported by a logged warning.

The limit counts what the model sees: by default the tokenizer's special tokens ([CLS], [SEP])
are included, so ``len(tokenizer(chunk.text)["input_ids"]) <= max_tokens`` holds and a model with
a 256-token window embeds every chunk without truncation.

Chunk ids are stable: ``f"{doc_id}#c{i}"`` with ``i`` the 0-based position in the document.
A chunk of a paged document (a PDF, :class:`adaptlab.data.documents.PagedDocument`) records its
first and last page (1-based) and carries them in its id, ``f"{doc_id}#c{i}@p{first}"`` or
``f"{doc_id}#c{i}@p{first}-{last}"`` (:func:`adaptlab.data.pdf.page_ref`), so that the held-out
dataset, the per-query records of the store and ``adaptlab inspect`` say which pages were
retrieved without any other table.

Over-long sentences (PDF tables and lists often become one "sentence") are reported in one
warning line per corpus with their count and the longest; each one is logged at debug level.
"""

from __future__ import annotations

import logging
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from itertools import islice
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq

from adaptlab.data.dataset import Document
from adaptlab.data.pdf import page_ref
from adaptlab.data.text import split_sentences
from adaptlab.errors import ConfigError, DataError

__all__ = [
    "Chunk",
    "chunk_document",
    "chunk_documents",
    "chunk_id",
    "chunks_by_document",
    "read_chunks",
    "write_chunks",
]

log = logging.getLogger(__name__)

COUNT_BATCH = 256
"""Texts per tokenizer call when counting tokens (memory is one batch of token ids, not a corpus)."""

SentenceSplitter = Callable[[str], list[tuple[int, int]]]
LongSentence = tuple[str, int, int, int]
"""An over-long sentence: (document id, tokens, start, end character)."""


@dataclass(frozen=True)
class Chunk:
    """A run of whole sentences of one document.

    ``start``/``end``: character offsets of the chunk in its document's (cleaned) text, so
    ``text == document.text[start:end]``. ``n_tokens``: tokens of ``text`` as counted against
    the limit (special tokens included unless the chunker was told otherwise).
    ``split_sentence``: the chunk is a token window of one over-long sentence.
    ``first_page`` / ``last_page``: 1-based pages of the chunk's first and last character for a
    paged document (a PDF), None otherwise.
    """

    id: str
    doc_id: str
    index: int
    text: str
    start: int
    end: int
    n_tokens: int
    split_sentence: bool = False
    first_page: int | None = None
    last_page: int | None = None


def chunk_id(doc_id: str, index: int, pages: tuple[int, int] | None = None) -> str:
    """The stable id of chunk ``index`` of document ``doc_id``: ``f"{doc_id}#c{index}"``, with
    ``@p{first}[-{last}]`` appended for a chunk of a paged document."""
    if pages is not None:
        return page_ref(doc_id, index, pages[0], pages[1])
    return f"{doc_id}#c{index}"


class _Counter:
    """Token counting through any HF-tokenizer-like callable."""

    def __init__(self, tokenizer: Any, count_special_tokens: bool) -> None:
        if not callable(tokenizer):
            raise ConfigError(
                f"tokenizer: expected a Hugging Face-style tokenizer (callable returning "
                f"'input_ids'), got {type(tokenizer).__name__}"
            )
        self.tok = tokenizer
        self.special = count_special_tokens
        self._quiet = True  # HF tokenizers: verbose=False silences the over-length warning
        self.overhead = self._overhead() if count_special_tokens else 0

    def __call__(self, text: Any, **kw: Any) -> Any:
        if self._quiet:
            try:
                return self.tok(text, verbose=False, **kw)
            except TypeError:
                self._quiet = False
        return self.tok(text, **kw)

    def _overhead(self) -> int:
        fn = getattr(self.tok, "num_special_tokens_to_add", None)
        if callable(fn):
            return int(fn(pair=False))
        with_sp = len(self("x", add_special_tokens=True)["input_ids"])
        without = len(self("x", add_special_tokens=False)["input_ids"])
        return with_sp - without

    def content(self, texts: Iterable[str]) -> array:
        """Tokens of each text without special tokens."""
        return self._lengths(texts, False)

    def exact(self, texts: Iterable[str]) -> array:
        """Tokens of each text as counted against the limit."""
        return self._lengths(texts, self.special)

    def _lengths(self, texts: Iterable[str], special: bool) -> array:
        """Token counts, tokenising :data:`COUNT_BATCH` texts at a time: only the counts are
        kept (8 bytes each, an ``array``), so a document of millions of sentences never holds all
        their token ids, or a Python int per sentence, at once."""
        out = array("q")
        it = iter(texts)
        while batch := list(islice(it, COUNT_BATCH)):
            out.extend(len(x) for x in self(batch, add_special_tokens=special)["input_ids"])
        return out

    def windows(self, text: str, budget: int) -> list[tuple[int, int]] | None:
        """Character spans of consecutive windows of ``budget`` tokens of ``text``.

        None when the tokenizer gives no character offsets (a slow tokenizer).
        """
        try:
            enc = self(text, add_special_tokens=False, return_offsets_mapping=True)
            offsets = enc["offset_mapping"]
        except (NotImplementedError, KeyError, TypeError, ValueError):
            return None
        spans = []
        for i in range(0, len(offsets), budget):
            window = [o for o in offsets[i : i + budget] if o[1] > o[0]]
            if window:
                spans.append((int(window[0][0]), int(window[-1][1])))
        return spans


def _default_splitter() -> SentenceSplitter:
    return split_sentences


def _pieces(
    text: str,
    start: int,
    end: int,
    n: int,
    budget: int,
    counter: _Counter,
    doc_id: str,
    sink: list[LongSentence],
) -> list[tuple[int, int, str | None]]:
    """Token windows of the over-long sentence ``text[start:end]`` as (start, end, decoded)."""
    sentence = text[start:end]
    # one line per sentence at debug level; chunk_documents logs one warning with the count
    log.debug(
        "document %r: a sentence of %d tokens (characters %d-%d) exceeds the chunk limit of %d "
        "content tokens; it is split by tokens and its chunks are flagged split_sentence",
        doc_id,
        n,
        start,
        end,
        budget,
    )
    sink.append((doc_id, n, start, end))
    spans = counter.windows(sentence, budget)
    if spans is None:  # no offsets: decode token windows instead (text may be normalised)
        ids = counter(sentence, add_special_tokens=False)["input_ids"]
        return [(start, end, counter.tok.decode(ids[i : i + budget])) for i in range(0, len(ids), budget)]
    return [(start + s, start + e, None) for s, e in spans]


def chunk_document(
    doc: Document,
    tokenizer: Any,
    *,
    max_tokens: int = 256,
    count_special_tokens: bool = True,
    splitter: SentenceSplitter | None = None,
    long_sentences: list[LongSentence] | None = None,
) -> list[Chunk]:
    """Split one document into chunks of whole sentences of at most ``max_tokens`` tokens.

    Greedy packing: sentences are added in order to the current chunk while the sum of their
    token counts stays within the budget (``max_tokens`` minus the tokenizer's special tokens
    when ``count_special_tokens``); the packed text is then tokenised once more and, if a
    tokenizer merges across sentence boundaries so that the exact count exceeds the limit,
    the chunk gives up its last sentences to the next one. A sentence alone over the budget is
    cut into token windows (see the module docstring). Sentences come from
    :func:`adaptlab.data.text.split_sentences` unless ``splitter`` is given.
    ``long_sentences``: a list that collects the over-long sentences (the caller reports them);
    without it, one warning line for this document when it has any.
    """
    if max_tokens < 8:
        raise ConfigError(f"max_tokens={max_tokens}: expected an integer >= 8")
    counter = _Counter(tokenizer, count_special_tokens)
    budget = max_tokens - counter.overhead
    if budget < 1:
        raise ConfigError(f"max_tokens={max_tokens} leaves no room after {counter.overhead} special tokens")
    text = doc.text
    starts, ends = _sentences(text, splitter or _default_splitter())
    if not starts:
        return []
    counts = counter.content(text[s:e] for s, e in zip(starts, ends))  # streamed: see _Counter._lengths
    sink: list[LongSentence] = long_sentences if long_sentences is not None else []

    groups = _group(doc, starts, ends, counts, budget, counter, sink)
    out: list[tuple[int, int, str | None, bool, int]] = []
    exact = counter.exact(g.decoded if g.decoded is not None else text[g.start : g.end] for g in groups)
    for g, n in zip(groups, exact, strict=True):
        if n <= max_tokens or g.hi - g.lo == 1:
            if n > max_tokens:
                log.warning(
                    "document %r: chunk at characters %d-%d has %d tokens after re-tokenisation (limit %d)",
                    doc.id,
                    g.start,
                    g.end,
                    n,
                    max_tokens,
                )
            out.append((g.start, g.end, g.decoded, g.flagged, n))
            continue
        out.extend(_repack(text, starts[g.lo : g.hi], ends[g.lo : g.hi], counter, max_tokens))
    if long_sentences is None and sink:
        _warn_long(sink, max_tokens, sum(1 for g in groups if g.flagged), None)
    return _make_chunks(doc, out)


def _sentences(text: str, split: SentenceSplitter) -> tuple[array, array]:
    """Start and end offsets of the sentences of ``text`` that hold non-space text, as two
    ``array``s (16 bytes a sentence, where a list of ``(start, end)`` tuples costs about 120)."""
    starts, ends = array("q"), array("q")
    for s, e in split(text):
        if text[s:e].strip():
            starts.append(s)
            ends.append(e)
    return starts, ends


class _Unit(NamedTuple):
    """A packing unit: sentences ``lo``..``hi - 1`` (characters ``start``..``end``), or one token
    window of an over-long sentence (``flagged``; ``decoded``: its text when the tokenizer gives
    no offsets)."""

    start: int
    end: int
    lo: int
    hi: int
    flagged: bool
    decoded: str | None


def _group(
    doc: Document,
    starts: array,
    ends: array,
    counts: array,
    budget: int,
    counter: _Counter,
    sink: list[LongSentence],
) -> list[_Unit]:
    """Greedy packing units: runs of whole sentences within ``budget``, or token windows of an
    over-long sentence (flagged, standalone)."""
    groups: list[_Unit] = []
    lo, used = 0, 0
    for i, n in enumerate(counts):
        if n > budget:
            if lo < i:
                groups.append(_Unit(starts[lo], ends[i - 1], lo, i, False, None))
            for ps, pe, decoded in _pieces(doc.text, starts[i], ends[i], n, budget, counter, doc.id, sink):
                groups.append(_Unit(ps, pe, i, i + 1, True, decoded))
            lo, used = i + 1, 0
            continue
        if lo < i and used + n > budget:
            groups.append(_Unit(starts[lo], ends[i - 1], lo, i, False, None))
            lo, used = i, 0
        used += n
    if lo < len(counts):
        groups.append(_Unit(starts[lo], ends[-1], lo, len(counts), False, None))
    return groups


def _make_chunks(doc: Document, out: list[tuple[int, int, str | None, bool, int]]) -> list[Chunk]:
    """Chunks from (start, end, decoded text or None, flagged, tokens), with their pages for a
    paged document (``page_at`` of :class:`adaptlab.data.documents.PagedDocument`)."""
    page_at = getattr(doc, "page_at", None) if getattr(doc, "page_starts", None) else None
    chunks = []
    for i, (s, e, decoded, flagged, n) in enumerate(out):
        span = None if page_at is None else (page_at(s), page_at(max(s, e - 1)))
        chunks.append(
            Chunk(
                id=chunk_id(doc.id, i, span),
                doc_id=doc.id,
                index=i,
                text=decoded if decoded is not None else doc.text[s:e],
                start=s,
                end=e,
                n_tokens=n,
                split_sentence=flagged,
                first_page=None if span is None else span[0],
                last_page=None if span is None else span[1],
            )
        )
    return chunks


def _repack(
    text: str, starts: array, ends: array, counter: _Counter, max_tokens: int
) -> list[tuple[int, int, None, bool, int]]:
    """Re-pack sentences (``starts[i]``..``ends[i]``) whose joined text tokenises longer than the
    sum of their parts."""
    out: list[tuple[int, int, None, bool, int]] = []
    i = 0
    while i < len(starts):
        j = i + 1
        n = counter.exact([text[starts[i] : ends[i]]])[0]
        while j < len(starts):
            m = counter.exact([text[starts[i] : ends[j]]])[0]
            if m > max_tokens:
                break
            n, j = m, j + 1
        out.append((starts[i], ends[j - 1], None, False, n))
        i = j
    return out


def chunk_documents(
    docs: Iterable[Document],
    tokenizer: Any,
    *,
    max_tokens: int = 256,
    count_special_tokens: bool = True,
    splitter: SentenceSplitter | None = None,
    details_path: str | Path | None = None,
) -> list[Chunk]:
    """:func:`chunk_document` over a corpus, in document order.

    A document that yields no chunk (no sentence with non-space text) is skipped with a
    logged warning; it then takes no part in data scales. Over-long sentences give one warning
    line for the corpus (how many, in how many documents, the longest, how many chunks they
    became); ``details_path``, when given, receives one tab-separated line per sentence
    (document, tokens, start, end), and each is logged at debug level.
    """
    split = splitter or _default_splitter()
    out: list[Chunk] = []
    n_split = 0
    empty: list[str] = []
    long: list[LongSentence] = []
    for doc in docs:
        chunks = chunk_document(
            doc,
            tokenizer,
            max_tokens=max_tokens,
            count_special_tokens=count_special_tokens,
            splitter=split,
            long_sentences=long,
        )
        if not chunks:
            empty.append(doc.id)
            log.debug("document %r has no sentences; it yields no chunk", doc.id)
        n_split += sum(c.split_sentence for c in chunks)
        out.extend(chunks)
    if empty:
        log.warning(
            "%d document(s) have no sentences and yield no chunk: %s",
            len(empty),
            ", ".join(repr(d) for d in empty[:5]) + (", ..." if len(empty) > 5 else ""),
        )
    if long:
        _warn_long(long, max_tokens, n_split, details_path)
    return out


def _warn_long(long: list[LongSentence], max_tokens: int, n_chunks: int, details_path: str | Path | None) -> None:
    """One warning line for many over-long sentences; the list goes to ``details_path``."""
    worst = max(long, key=lambda x: x[1])
    where = ""
    if details_path is not None:
        dp = Path(details_path)
        dp.parent.mkdir(parents=True, exist_ok=True)
        dp.write_text("document\ttokens\tstart\tend\n" + "".join(f"{d}\t{n}\t{s}\t{e}\n" for d, n, s, e in long))
        where = f"; list in {dp}"
    log.warning(
        "%d over-long sentence(s) in %d document(s) exceed the chunk limit of %d tokens "
        "(longest: %d tokens in %r); cut into %d token-window chunk(s) flagged "
        "split_sentence%s",
        len(long),
        len({d for d, *_ in long}),
        max_tokens,
        worst[1],
        worst[0],
        n_chunks,
        where,
    )


def chunks_by_document(chunks: Iterable[Chunk]) -> dict[str, list[Chunk]]:
    """Chunks grouped by document id, each list in chunk order (first-seen document order)."""
    out: dict[str, list[Chunk]] = {}
    for c in chunks:
        out.setdefault(c.doc_id, []).append(c)
    for lst in out.values():
        lst.sort(key=lambda c: c.index)
    return out


_CHUNK_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("doc_id", pa.string()),
        ("index", pa.int32()),
        ("text", pa.string()),
        ("start", pa.int64()),
        ("end", pa.int64()),
        ("n_tokens", pa.int32()),
        ("split_sentence", pa.bool_()),
        ("first_page", pa.int32()),
        ("last_page", pa.int32()),
    ]
)


def write_chunks(path: str | Path, chunks: Sequence[Chunk], meta: dict[str, str] | None = None) -> Path:
    """Write chunks as a Parquet file (one row per chunk); ``meta`` goes to schema metadata."""
    cols: dict[str, list[Any]] = {name: [] for name in _CHUNK_SCHEMA.names}
    for c in chunks:
        for k, v in asdict(c).items():
            cols[k].append(v)
    schema = _CHUNK_SCHEMA.with_metadata({k.encode(): str(v).encode() for k, v in (meta or {}).items()})
    table = pa.table(cols, schema=schema)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    pq.write_table(table, tmp)
    tmp.replace(p)
    return p


def read_chunks(path: str | Path) -> list[Chunk]:
    """Chunks written by :func:`write_chunks`."""
    p = Path(path)
    try:
        table = pq.read_table(p)
    except (OSError, pa.ArrowInvalid) as e:
        raise DataError(f"{p}: cannot read chunks Parquet ({e})") from e
    optional = ("first_page", "last_page")  # absent in files written before page provenance
    missing = [n for n in _CHUNK_SCHEMA.names if n not in table.column_names and n not in optional]
    if missing:
        raise DataError(f"{p}: not a chunks file; missing column(s) {', '.join(missing)}")
    rows = table.select([n for n in _CHUNK_SCHEMA.names if n in table.column_names]).to_pylist()
    return [Chunk(**r) for r in rows]
