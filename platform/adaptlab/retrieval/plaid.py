"""Per-query records of a ColBERT system searched through a PLAID index (approximate MaxSim).

The same :class:`~adaptlab.retrieval.records.PerQueryRecords` as the exact path
(:func:`adaptlab.retrieval.late.build_late_records`), so every measure, bootstrap, paired test and
report works unchanged; only where the top-k comes from differs (the index:
:mod:`adaptlab.models.plaid`). For query ``q``:

- ``topk_ids`` / ``topk_scores``: PLAID's best ``k + margin`` documents (``margin = 8 + k // 8``,
  as the dense search's candidates), re-sorted by the platform's rule -- PLAID score descending,
  then document id descending (trec_eval's rule) -- and cut at ``k``. Tie rule: a tie is broken by
  id among the documents PLAID returned; a tie that straddles the last returned candidate cannot
  be seen (the exact path breaks ties over the whole corpus). Scores are PLAID's: MaxSim over the
  *decompressed* document vectors (raw MaxSim scale, ``[-m, m]``, as in late.py), approximate.
- ``gold_rank``: 1-based rank of the first gold document in that top-k; 0 when none is there,
  whether it ranked below ``k`` or PLAID never found it ("not retrieved", as in the dense path).
- ``sim_gold`` (MaxSim of the best gold document, retrieved or not) and ``sim_random`` (MaxSim
  of the document drawn by ``numpy.random.default_rng(seed)`` exactly as the dense and exact late
  paths draw it): **exact**, from the encoder's token vectors of only those documents
  (``encode_documents``) by :func:`~adaptlab.retrieval.late.maxsim_pairs`, so they mean what
  late.py's docstring says and thresholds / COE/ROE are comparable with the exact path. Unlike
  the exact path, a retrieved gold document's ``topk_scores`` entry (approximate) and
  ``sim_gold`` (exact) differ by the compression error.

Choice of path (:func:`choose_search`): the ColBERT model option ``search`` -- ``"exact"``,
``"plaid"``, or ``"auto"`` (default): exact while the corpus has at most
:data:`~adaptlab.retrieval.late.MAX_EXACT_TOKENS` document tokens (bounded first by
``n_docs * doc_maxlen``, else counted with the tokenizer, no forward pass), PLAID beyond,
announced on stderr and as a warning. On the PLAID path the corpus is never held in memory as
token vectors: the indexer encodes it in chunks straight into the compressed index;
only queries and the gold / random documents are encoded as token vectors.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from adaptlab.errors import ConfigError, DataError
from adaptlab.models.colbert import search_options
from adaptlab.options import settings_from
from adaptlab.retrieval.build import Ranking, check_query_ids, records_from_ranking
from adaptlab.retrieval.late import MAX_EXACT_TOKENS, maxsim_pairs
from adaptlab.retrieval.records import PerQueryRecords
from adaptlab.retrieval.search import id_order
from adaptlab.retrieval.settings import SearchOptions, SearchSettings
from adaptlab.stats.resample import check_seed

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from adaptlab.models.colbert import ColBERTEncoder, TokenVectors

__all__ = ["PlaidCorpus", "PlaidSearcher", "build_plaid_records", "choose_search", "plaid_records"]

_MAX_DOC_MAXLEN = 512  # BERT's positions: a bound on doc_maxlen before the model is loaded


class PlaidSearcher(Protocol):
    """What :func:`build_plaid_records` needs of an index (:class:`adaptlab.models.plaid.PlaidIndex`)."""

    n_docs: int
    nbits: int

    def search(self, queries: TokenVectors, k: int) -> list[tuple[np.ndarray, np.ndarray]]: ...


@dataclass(frozen=True)
class PlaidCorpus:
    """The documents a PLAID index is built from, and how to re-encode some of them exactly.

    Attributes:
        texts: the document texts, in the order of the records' ``doc_ids``.
        encoder: the ColBERT encoder whose checkpoint the indexer loads.
        encode_documents: ``positions -> TokenVectors`` of those documents (``sim_gold``,
            ``sim_random``).
        index_root: the folder of content-addressed indexes (a re-run reuses one); ``None``: a
            temporary folder removed afterwards.
    """

    texts: Sequence[str]
    encoder: ColBERTEncoder
    encode_documents: Callable[[list[int]], TokenVectors]
    index_root: str | Path | None = None


def _margin(k: int) -> int:
    return 8 + k // 8


def _rank_candidates(
    hits: list[tuple[np.ndarray, np.ndarray]], id_rank: np.ndarray, kk: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each query's candidates sorted by (score desc, id desc) and cut at ``kk``: ``[Q, kk]`` arrays."""
    scores = np.empty((len(hits), kk), np.float32)
    idx = np.empty((len(hits), kk), np.int64)
    for row, (pos, s) in enumerate(hits):
        pos, s = np.asarray(pos, np.int64), np.asarray(s, np.float32)
        in_range = pos.size == 0 or (pos.min() >= 0 and pos.max() < len(id_rank))
        if pos.size < kk or pos.size != s.size or np.unique(pos).size != pos.size or not in_range:
            raise DataError(
                f"PLAID returned {pos.size} documents for query row {row} (expected at least {kk} "
                f"distinct positions in [0, {len(id_rank)})); rebuild the index"
            )
        order = np.lexsort((-id_rank[pos], -s))[:kk]
        scores[row], idx[row] = s[order], pos[order]
    return scores, idx


def _exact_pair_sims(
    query_tokens: TokenVectors,
    q_idx: np.ndarray,
    d_idx: np.ndarray,
    encode_documents: Callable[[list[int]], TokenVectors],
) -> np.ndarray:
    """Exact MaxSim of (query row, document position) pairs, encoding only the documents named."""
    if q_idx.size == 0:
        return np.zeros(0, np.float32)
    uniq, inv = np.unique(d_idx, return_inverse=True)
    docs = encode_documents([int(i) for i in uniq])
    if len(docs) != uniq.size:
        raise DataError(f"encode_documents returned {len(docs)} documents for {uniq.size} positions")
    return maxsim_pairs(query_tokens, docs, q_idx, inv.ravel())


def build_plaid_records(
    query_ids: Sequence[str],
    query_tokens: TokenVectors,
    doc_ids: Sequence[str],
    index: PlaidSearcher,
    qrels: Mapping[str, Mapping[str, int]],
    *,
    encode_documents: Callable[[list[int]], TokenVectors],
    system: str,
    dataset: str,
    **options: Unpack[SearchOptions],
) -> PerQueryRecords:
    """Per-query records from a PLAID ``index`` of the documents ``doc_ids`` (index position ``i`` =
    ``doc_ids[i]``): the contract of :func:`~adaptlab.retrieval.late.build_late_records`, with the
    top-k from the index and ``sim_gold`` / ``sim_random`` exact (module docstring).
    ``encode_documents(positions)`` returns the token vectors of those documents; ``k`` and
    ``seed`` as keyword options of :class:`~adaptlab.retrieval.settings.SearchSettings`."""
    search = settings_from(SearchSettings, None, options, "build_plaid_records")
    k = search.k
    query_ids = [str(q) for q in query_ids]
    doc_ids = [str(d) for d in doc_ids]
    if len(query_ids) != len(query_tokens):
        raise ConfigError(f"query_ids has {len(query_ids)} ids but query_tokens has {len(query_tokens)} texts")
    if len(doc_ids) != int(index.n_docs):
        raise ConfigError(f"doc_ids has {len(doc_ids)} ids but the PLAID index holds {index.n_docs} documents")
    check_query_ids(query_ids)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ConfigError(f"k must be a positive integer, got {k!r}")
    seed = check_seed(search.seed)
    n, n_q = len(doc_ids), len(query_ids)
    kk = min(int(k), n)
    hits = index.search(query_tokens, min(n, kk + _margin(kk)))
    if len(hits) != n_q:
        raise DataError(f"the PLAID index answered {len(hits)} of {n_q} queries")
    scores, idx = _rank_candidates(hits, id_order(doc_ids, n), kk)
    return records_from_ranking(
        Ranking(query_ids, doc_ids, scores, idx),
        qrels,
        lambda rows, cols: _exact_pair_sims(query_tokens, rows, cols, encode_documents),
        system=system,
        dataset=dataset,
        seed=seed,
        meta={
            "k": int(k),
            "seed": int(seed),
            "similarity": "maxsim",
            "search": "plaid",
            "nbits": int(index.nbits),
            "query_tokens": int(query_tokens.lengths.max(initial=0)),
            "tie_rule": "score desc, doc id desc (among PLAID's candidates)",
        },
    )


def choose_search(
    options: Mapping[str, Any],
    doc_texts: Sequence[str],
    encoder: Callable[[], ColBERTEncoder],
    *,
    max_tokens: int | None = None,
) -> tuple[str, int]:
    """``("exact" | "plaid", nbits)`` for a ColBERT system with model ``options`` on ``doc_texts``
    (module docstring). ``encoder()`` loads the encoder; it is called only when ``search = "auto"``
    and the corpus may exceed ``max_tokens`` (default :data:`MAX_EXACT_TOKENS`) by its size alone."""
    mode, nbits = search_options(options)
    if mode != "auto":
        return mode, nbits
    limit = MAX_EXACT_TOKENS if max_tokens is None else int(max_tokens)
    n = len(doc_texts)
    if n * int(options.get("doc_maxlen") or _MAX_DOC_MAXLEN) <= limit:
        return "exact", nbits
    enc = encoder()
    if n * int(enc.doc_maxlen) <= limit:
        return "exact", nbits
    from adaptlab.models.plaid import count_document_tokens

    tokens = count_document_tokens(enc, doc_texts)
    if tokens <= limit:
        return "exact", nbits
    msg = (
        f"the corpus has {tokens:,} ColBERT document tokens, above the exact MaxSim limit of {limit:,}: "
        f"searching {n:,} documents through a PLAID index (nbits={nbits}), which is APPROXIMATE "
        "(set the model option search = 'exact' to refuse, or 'plaid' to say so explicitly)"
    )
    print(f"[adaptlab] WARNING: {msg}", file=sys.stderr, flush=True)
    warnings.warn(msg, UserWarning, stacklevel=2)
    return "plaid", nbits


def plaid_records(
    query_ids: Sequence[str],
    query_tokens: TokenVectors,
    doc_ids: Sequence[str],
    qrels: Mapping[str, Mapping[str, int]],
    *,
    corpus: PlaidCorpus,
    system: str,
    dataset: str,
    config: SearchSettings | None = None,
    **options: Unpack[SearchOptions],
) -> PerQueryRecords:
    """Build (or reuse) the PLAID index of ``corpus.texts`` with ``corpus.encoder``'s checkpoint
    and return :func:`build_plaid_records`. The index lives in a content-addressed folder under
    ``corpus.index_root`` (:func:`~adaptlab.models.plaid.plaid_index_dir`; a re-run reuses it) or,
    with ``index_root=None``, in a temporary folder removed afterwards. ``k``, ``seed``, ``nbits``
    and ``batch_size`` from ``config`` and the keyword options
    (:class:`~adaptlab.retrieval.settings.SearchSettings`)."""
    from adaptlab.models.plaid import build_plaid_index, plaid_index_dir

    search = settings_from(SearchSettings, config, options, "plaid_records")
    doc_texts, encoder = corpus.texts, corpus.encoder
    if len(doc_texts) != len(doc_ids):
        raise ConfigError(f"doc_ids has {len(doc_ids)} ids but doc_texts has {len(doc_texts)} texts")
    ckpt = str(encoder.path) if encoder.path is not None else encoder.model_id
    settings = {
        "nbits": search.nbits,
        "doc_maxlen": encoder.doc_maxlen,
        "query_maxlen": encoder.query_maxlen,
        "batch_size": search.batch_size,
    }
    with contextlib.ExitStack() as stack:
        if corpus.index_root is None:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="adaptlab-plaid-")))
        else:
            root = Path(corpus.index_root)
        where = plaid_index_dir(root, ckpt, doc_texts, nbits=search.nbits, doc_maxlen=encoder.doc_maxlen)
        index = build_plaid_index(ckpt, doc_texts, where, **settings)
        return build_plaid_records(
            query_ids,
            query_tokens,
            doc_ids,
            index,
            qrels,
            encode_documents=corpus.encode_documents,
            system=system,
            dataset=dataset,
            k=search.k,
            seed=search.seed,
        )
