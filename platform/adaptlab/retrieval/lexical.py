"""BM25 (lexical) search and its per-query records: the baseline every IR table reports.

A ``[[models]]`` entry with ``ref = "bm25"`` is searched here instead of being embedded. Texts are
tokenised by bm25s's tokenizer (lower-cased words of two or more word characters, the regular
expression ``\\b\\w\\w+\\b``), stop words removed (``stopwords``: ``"en"``, bm25s's English list, or
``"none"``) and stemmed (``stemmer``: a Snowball algorithm of PyStemmer, ``"english"`` by default,
or ``"none"``). The score of document ``d`` for query ``q`` (Robertson & Zaragoza, "The
Probabilistic Relevance Framework: BM25 and Beyond", 2009, eq. 3.15; Lucene's variant as bm25s
computes it, Lù, "BM25S", 2024, section 2) is

    s(q, d) = sum_{t in q} idf(t) * tf(t, d) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))
    idf(t)  = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))                      (method "lucene")

(Lucene 8 and later leave out the textbook's constant factor ``k1 + 1``, which cannot change a
ranking), with ``N`` documents, ``df(t)`` of them containing ``t``, ``|d|`` the document's token count and
``avgdl`` the mean of those. ``method`` also takes bm25s's ``"robertson"``, ``"atire"``,
``"bm25l"`` and ``"bm25+"``. Defaults ``k1 = 0.9``, ``b = 0.4`` are Pyserini's (Lin et al.,
SIGIR 2021), whose flat Lucene index gives nDCG@10 = 0.679 on BEIR SciFact; these settings give
0.676 there with pytrec_eval (tests/retrieval/test_bm25.py; the rest of the gap is Lucene's
Porter stemmer and stop list against Snowball's English stemmer and bm25s's list).

The records are the dense path's (:class:`~adaptlab.retrieval.records.PerQueryRecords`): every
document is scored, the top-k taken by score descending, then document id descending (trec_eval's
order, so documents tied at the k-th place, zero-score ones included, are cut by id);
``sim_gold`` is the BM25 score of the best-scoring relevant document (also when it was not
retrieved) and ``sim_random`` that of the document drawn by ``numpy.random.default_rng(seed)``
as on the dense path. These are BM25 scores (non-negative, unbounded, on a per-query scale), not
cosines: similarity thresholds and COE/ROE apply on that scale and are not comparable with a dense
model's; isotropy and topic diversity need document vectors and are skipped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from importlib import metadata
from typing import TYPE_CHECKING, Any

import numpy as np

from adaptlab.errors import ConfigError
from adaptlab.models.ref import ModelRef
from adaptlab.options import settings_from
from adaptlab.retrieval.build import Ranking, check_query_ids, records_from_ranking
from adaptlab.retrieval.records import PerQueryRecords
from adaptlab.retrieval.search import id_order
from adaptlab.retrieval.settings import SearchOptions, SearchSettings
from adaptlab.stats.resample import check_seed

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["BM25_METHODS", "BM25Search", "BM25Settings", "bm25_records", "bm25_scores"]

BM25_METHODS: tuple[str, ...] = ("lucene", "robertson", "atire", "bm25l", "bm25+")
"""Scoring variants of bm25s (``method``)."""
_NONE = "none"
_SCORE_ELEMS = 1 << 24  # float32 scores held at once (64 MB)


@dataclass(frozen=True)
class BM25Settings:
    """The options of a BM25 system (``[[models]]`` ``options`` of ``ref = "bm25"``).

    ``k1`` (>= 0) saturates term frequency; ``b`` (in [0, 1]) normalises by document length;
    ``method`` one of :data:`BM25_METHODS`; ``stemmer`` a PyStemmer algorithm or ``"none"``;
    ``stopwords`` ``"en"`` or ``"none"``."""

    k1: float = 0.9
    b: float = 0.4
    method: str = "lucene"
    stemmer: str = "english"
    stopwords: str = "en"

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> BM25Settings:
        """Validated settings from a study's options; an unknown key or value is a ConfigError
        naming it and what is expected."""
        known = {f.name for f in fields(cls)}
        extra = sorted(set(options) - known)
        if extra:
            raise ConfigError(f"BM25 option {extra[0]!r} is unknown; expected some of {', '.join(sorted(known))}")
        s = cls(**dict(options))
        for key, low, high in (("k1", 0.0, None), ("b", 0.0, 1.0)):
            value = getattr(s, key)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or value < low
                or (high is not None and value > high)
            ):
                bound = f"a number in [{low}, {high}]" if high is not None else f"a number >= {low}"
                raise ConfigError(f"BM25 option {key!r}: expected {bound}, got {value!r}")
        if s.method not in BM25_METHODS:
            raise ConfigError(f"BM25 option 'method': expected one of {', '.join(BM25_METHODS)}, got {s.method!r}")
        if s.stopwords not in ("en", _NONE):
            raise ConfigError(f"BM25 option 'stopwords': expected 'en' or 'none', got {s.stopwords!r}")
        if s.stemmer != _NONE and s.stemmer not in _stemmer_module().algorithms():
            raise ConfigError(
                f"BM25 option 'stemmer': expected 'none' or one of "
                f"{', '.join(_stemmer_module().algorithms())}, got {s.stemmer!r}"
            )
        return s

    def describe(self) -> str:
        """``bm25s==VERSION k1=.. b=.. method=.. stemmer=.. stopwords=..`` (the runs' revision)."""
        return f"bm25s=={metadata.version('bm25s')} " + " ".join(f"{k}={v}" for k, v in asdict(self).items())


def _stemmer_module() -> Any:
    try:
        import Stemmer
    except ImportError as e:  # pragma: no cover - a dependency of adaptlab
        raise ConfigError("BM25 stemming needs PyStemmer: pip install PyStemmer (or set stemmer = 'none')") from e
    return Stemmer


def _bm25s() -> Any:
    try:
        import bm25s
    except ImportError as e:  # pragma: no cover - a dependency of adaptlab
        raise ConfigError("BM25 search needs bm25s: pip install bm25s") from e
    return bm25s


def bm25_scores(
    query_texts: Sequence[str],
    doc_texts: Sequence[str],
    settings: BM25Settings,
) -> tuple[Any, list[list[int]]]:
    """The bm25s index of ``doc_texts`` and each query's token ids; ``index.get_scores_from_ids``
    of a query's ids is its float32 score of every document."""
    bm25s = _bm25s()
    stemmer = None if settings.stemmer == _NONE else _stemmer_module().Stemmer(settings.stemmer)
    tok = bm25s.tokenization.Tokenizer(
        stopwords=None if settings.stopwords == _NONE else settings.stopwords, stemmer=stemmer
    )
    doc_tokens = tok.tokenize(list(doc_texts), update_vocab=True, return_as="ids", show_progress=False)
    index = bm25s.BM25(k1=float(settings.k1), b=float(settings.b), method=settings.method)
    index.index(bm25s.tokenization.Tokenized(ids=doc_tokens, vocab=tok.get_vocab_dict()), show_progress=False)
    query_tokens = tok.tokenize(list(query_texts), update_vocab=False, return_as="ids", show_progress=False)
    return index, query_tokens


def _top_k(scores: np.ndarray, rank: np.ndarray, k: int) -> np.ndarray:
    """Positions of the top ``k`` of one score row by (score desc, id rank desc): every document
    scoring at least the k-th score is a candidate, so ties at the k-th place are cut by id."""
    n = scores.shape[0]
    kth = np.partition(scores, n - k)[n - k] if k < n else scores.min()
    cand = np.flatnonzero(scores >= kth)
    order = np.lexsort((-rank[cand], -scores[cand]))
    return cand[order[:k]]


def bm25_records(
    query_ids: Sequence[str],
    query_texts: Sequence[str],
    doc_ids: Sequence[str],
    doc_texts: Sequence[str],
    qrels: Mapping[str, Mapping[str, int]],
    *,
    settings: BM25Settings,
    system: str,
    dataset: str,
    **options: Unpack[SearchOptions],
) -> PerQueryRecords:
    """BM25 top-``k`` of every query over the whole corpus, as per-query records (module doc);
    ``k`` and ``seed`` as keyword options of :class:`~adaptlab.retrieval.settings.SearchSettings`
    (a caller holding the settings passes ``**vars(search)``)."""
    search = settings_from(SearchSettings, None, options, "bm25_records")
    k, seed = search.k, search.seed
    query_ids = [str(q) for q in query_ids]
    doc_ids = [str(d) for d in doc_ids]
    if len(query_ids) != len(query_texts) or len(doc_ids) != len(doc_texts):
        raise ConfigError(
            f"BM25: {len(query_ids)} query ids for {len(query_texts)} texts, {len(doc_ids)} document "
            f"ids for {len(doc_texts)} texts; they must match"
        )
    if not doc_ids:
        raise ConfigError("BM25: the corpus is empty")
    check_query_ids(query_ids)
    seed = check_seed(seed)
    index, tokens = bm25_scores(query_texts, doc_texts, settings)
    rank = id_order(doc_ids, len(doc_ids))
    k = min(int(k), len(doc_ids))
    idx = np.empty((len(query_ids), k), dtype=np.int64)
    scores = np.empty((len(query_ids), k), dtype=np.float32)
    step = max(1, _SCORE_ELEMS // len(doc_ids))
    block: dict[int, np.ndarray] = {}

    def row(i: int) -> np.ndarray:  # the score row of query i, kept for one block of queries
        if i not in block:
            block.clear()
            for j in range(i, min(i + step, len(query_ids))):
                ids = tokens[j]
                block[j] = (
                    np.asarray(index.get_scores_from_ids(ids), dtype=np.float32)
                    if len(ids)
                    else np.zeros(len(doc_ids), dtype=np.float32)
                )
        return block[i]

    for i in range(len(query_ids)):
        s = row(i)
        idx[i] = _top_k(s, rank, k)
        scores[i] = s[idx[i]]

    def pair_score(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        order = np.argsort(rows, kind="stable")  # one pass over the queries, block by block
        out = np.empty(rows.shape[0], dtype=np.float32)
        for p in order:
            out[p] = row(int(rows[p]))[cols[p]]
        return out

    return records_from_ranking(
        Ranking(query_ids, doc_ids, scores, idx),
        qrels,
        pair_score,
        system=system,
        dataset=dataset,
        seed=seed,
        meta={
            "k": k,
            "seed": seed,
            "similarity": "BM25 score",
            "tie_rule": "score desc, doc id desc",
            "bm25": settings.describe(),
        },
    )


@dataclass(frozen=True)
class BM25Search:
    """A BM25 system of a study: what the runner needs beside the records (the resolved
    reference and the revision stored as provenance), and its search."""

    ref: ModelRef
    settings: BM25Settings

    @property
    def revision(self) -> str:
        return self.settings.describe()

    def records(
        self,
        query_ids: Sequence[str],
        query_texts: Sequence[str],
        doc_ids: Sequence[str],
        doc_texts: Sequence[str],
        qrels: Mapping[str, Mapping[str, int]],
        *,
        system: str,
        dataset: str,
        **options: Unpack[SearchOptions],
    ) -> PerQueryRecords:
        """:func:`bm25_records` with this system's settings."""
        return bm25_records(
            query_ids,
            query_texts,
            doc_ids,
            doc_texts,
            qrels,
            settings=self.settings,
            system=system,
            dataset=dataset,
            **options,
        )
