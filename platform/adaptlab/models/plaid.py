"""A PLAID index of a ColBERT collection, built and searched through colbert-ai (RAGatouille's
backend): approximate late-interaction retrieval for corpora beyond the exact search's size limit.

PLAID (Santhanam et al., "PLAID: An Efficient Engine for Late Interaction Retrieval", CIKM 2022)
over ColBERTv2's residual compression (Santhanam et al., NAACL 2022, section 3.2):

- *Index*: every document token vector ``d_j`` (the checkpoint's ``docFromText``, the same
  ``doc_maxlen`` and punctuation mask as
  :meth:`~adaptlab.models.colbert.ColBERTEncoder.encode_document_tokens`) is stored as the id of
  its nearest centroid ``C_c(j)`` (k-means over a sample of the token vectors,
  ``2^floor(log2(16 sqrt(T)))`` centroids for ``T`` tokens) and its residual ``d_j - C_c(j)``
  quantised to ``nbits`` bits per dimension (default 2).
- *Search* for query token vectors ``q_1..q_m``: (1) candidates: the documents with a token in one
  of the ``ncells`` centroids nearest to some ``q_i``; (2) centroid interaction
  ``s~(q, d) = sum_i max_j <q_i, C_c(j)>`` keeps the best ``ndocs`` (centroids scoring below
  ``centroid_score_threshold`` pruned), then the best ``ndocs / 4`` (all centroids);
  (3) those are decompressed (centroid + quantised residual, renormalised) and scored by MaxSim.

Both steps approximate: a document outside the probed cells is never returned, and a returned
score is the MaxSim of the *decompressed* vectors, not of the encoder's vectors (with ``nbits = 2``
they differ by a few 1e-3 to 1e-2 per query token). Settings (:func:`search_settings`): as
RAGatouille 0.0.9 configures colbert-ai (``ncells`` 8 below 10k documents, 4 below 100k, else
colbert-ai's default for ``k``; ``ndocs = max(4 k, 1024)``); k-means iterations 20 / 10 / 4 (below
50k / 100k documents / above), faiss k-means as colbert-ai ships it. A query whose candidates
hold fewer than ``k`` documents (a small corpus, few probed cells) is scored against every
document of the compressed index instead, so every query gets ``min(k, N)`` results.

Determinism: colbert-ai seeds its own sampling (``random``/``numpy``/``torch`` seeded 12345 by its
launcher) and faiss k-means (seed 123), so an index is a function of the checkpoint, the texts and
the settings (on one machine and thread count). Those seeds are process-wide: this module saves
and restores the global RNG states around indexing, and the environment variables colbert-ai
rewrites (:func:`~adaptlab.models.colbert.import_colbert`). colbert-ai prints (also from C, faiss)
go to stderr, so a CLI's stdout keeps only results.

Files: everything lands under the ``index_dir`` given (built in a hidden sibling folder and
renamed when complete, so a half-written index is never read; :data:`PLAID_MANIFEST` marks a
complete one and :func:`build_plaid_index` reuses it); nothing is written under the working
directory. :func:`plaid_index_dir` names a content-addressed folder (checkpoint weights, texts,
settings) under a cache root. CPU: the first search compiles colbert-ai's C++ extensions
(``filter_pids_cpp``, ``decompress_residuals_cpp``, ``segmented_maxsim_cpp``) with ninja, minutes
cold on 2 cores, cached in ``TORCH_EXTENSIONS_DIR`` (default ``~/.cache/torch_extensions``).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import random
import shutil
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from adaptlab.errors import ConfigError, DataError
from adaptlab.models.base import short_error
from adaptlab.models.colbert import PLAID_NBITS, import_colbert, restored_env
from adaptlab.models.weights import weights_sha256

if TYPE_CHECKING:
    from adaptlab.models.colbert import ColBERTEncoder, TokenVectors

__all__ = [
    "PLAID_MANIFEST",
    "PlaidIndex",
    "build_plaid_index",
    "count_document_tokens",
    "open_plaid_index",
    "plaid_index_dir",
    "search_settings",
]

PLAID_MANIFEST = "adaptlab_plaid.json"
"""Written into an index folder after colbert-ai finished it: its presence means complete."""

_EXHAUSTIVE_BLOCK = 1 << 16  # documents decompressed per block when a query is scored against all


# =========================================================================== colbert-ai's side effects


@contextlib.contextmanager
def _colbert_io() -> Iterator[None]:
    """Run colbert-ai code with its stdout (Python and C level) sent to stderr, the environment
    variables it rewrites and the global RNG states (``random``, ``numpy``, ``torch``) restored."""
    import torch

    state = (random.getstate(), np.random.get_state())
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with torch.random.fork_rng(), restored_env(), contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        with contextlib.suppress(Exception):
            ctypes.CDLL(None).fflush(None)  # C stdio buffers (faiss) before fd 1 is restored
        os.dup2(saved, 1)
        os.close(saved)
        random.setstate(state[0])
        np.random.set_state(state[1])


def _kmeans_niters(n_docs: int) -> int:
    """k-means iterations by collection size (RAGatouille 0.0.9's PLAIDModelIndex.build)."""
    return 20 if n_docs <= 50_000 else 10 if n_docs <= 100_000 else 4


def search_settings(n_docs: int, k: int) -> dict[str, Any]:
    """colbert-ai search settings for a top-``k`` over ``n_docs`` documents (module docstring):
    ``ncells``, ``centroid_score_threshold``, ``ndocs`` (candidates after the first filter; the
    second keeps ``ndocs // 4 >= k``)."""
    if n_docs < 10_000:
        ncells, threshold = 8, 0.4
    elif n_docs < 100_000:
        ncells, threshold = 4, 0.45
    elif k <= 100:
        ncells, threshold = 2, 0.45
    else:
        ncells, threshold = 4, 0.4
    return {
        "ncells": ncells,
        "centroid_score_threshold": threshold,
        "ndocs": max(4 * int(k), 1024 if k <= 100 else 4096),
    }


# =========================================================================== token count


def count_document_tokens(encoder: ColBERTEncoder, texts: Sequence[str], *, batch_size: int = 4096) -> int:
    """Number of document token vectors ``encoder`` would produce for ``texts``, from the tokenizer
    alone (no forward pass): tokens up to ``doc_maxlen`` (``[CLS] [D] ... [SEP]``) minus padding and
    the punctuation ColBERT masks, as ``docFromText(keep_dims=False)`` keeps them."""
    import torch

    ckpt = encoder.checkpoint
    skip = [int(w) for w in getattr(ckpt, "skiplist", {}) if isinstance(w, int)]
    skip_ids = torch.tensor(skip + [int(ckpt.pad_token)], dtype=torch.long)
    total = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for b in range(0, len(texts), batch_size):
            ids, _ = ckpt.doc_tokenizer.tensorize(list(texts[b : b + batch_size]))
            total += int((~torch.isin(ids.cpu(), skip_ids)).sum())
    return total


# =========================================================================== the index


def plaid_index_dir(
    root: str | Path, checkpoint: str | Path, texts: Sequence[str], *, nbits: int, doc_maxlen: int
) -> Path:
    """``<root>/<hash>``: the folder of the index of ``texts`` with ``checkpoint``, the hash over the
    checkpoint's weights (or its hub id), the texts, ``nbits``, ``doc_maxlen`` and colbert-ai's
    version, so a re-run reuses the index and any change builds a new one."""
    from importlib.metadata import version

    ckpt = Path(checkpoint)
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8", "surrogatepass") + b"\x00")
    payload = [
        "plaid-v1",
        weights_sha256(ckpt) if ckpt.is_dir() else str(checkpoint),
        h.hexdigest(),
        int(nbits),
        int(doc_maxlen),
        version("colbert-ai"),
    ]
    return Path(root) / hashlib.sha256(json.dumps(payload).encode()).hexdigest()[:24]


def _indexer_config(
    checkpoint: str, n_docs: int, *, nbits: int, doc_maxlen: int | None, query_maxlen: int | None, batch_size: int
) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "nbits": int(nbits),
        "kmeans_niters": _kmeans_niters(n_docs),
        "index_bsize": int(batch_size),
        "avoid_fork_if_possible": True,
    }
    if Path(checkpoint).is_dir():
        settings["model_name"] = checkpoint  # offline: never fall back to a hub name
    for key, value in (("doc_maxlen", doc_maxlen), ("query_maxlen", query_maxlen)):
        if value:
            settings[key] = int(value)
    return settings


def build_plaid_index(
    checkpoint: str | Path,
    texts: Sequence[str],
    index_dir: str | Path,
    *,
    nbits: int = 2,
    doc_maxlen: int | None = None,
    query_maxlen: int | None = None,
    batch_size: int = 32,
) -> PlaidIndex:
    """Index ``texts`` (document ``i`` = position ``i``) with the ColBERT ``checkpoint`` into
    ``index_dir`` and return it; a complete index already there is reused (module docstring).
    ``doc_maxlen`` / ``query_maxlen`` default to the checkpoint's; ``batch_size`` is the encoding
    batch."""
    out = Path(index_dir).expanduser()
    if (out / PLAID_MANIFEST).is_file():
        return open_plaid_index(out)
    items = [str(t) for t in texts]
    if not items:
        raise ConfigError("a PLAID index needs at least one document")
    if nbits not in PLAID_NBITS:
        raise ConfigError(f"nbits must be one of {PLAID_NBITS}, got {nbits!r}")
    import_colbert()
    from colbert import Indexer
    from colbert.infra import ColBERTConfig, Run, RunConfig

    ckpt = str(checkpoint)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    config = ColBERTConfig(
        **_indexer_config(
            ckpt, len(items), nbits=nbits, doc_maxlen=doc_maxlen, query_maxlen=query_maxlen, batch_size=batch_size
        )
    )
    run = RunConfig(
        nranks=1, root=str(out.parent), experiment=".colbert", index_root=str(out.parent), avoid_fork_if_possible=True
    )
    try:
        with _colbert_io(), warnings.catch_warnings(), Run().context(run):
            warnings.simplefilter("ignore")
            Indexer(checkpoint=ckpt, config=config, verbose=0).index(name=tmp.name, collection=items, overwrite=False)
        meta = json.loads((tmp / "metadata.json").read_text())
    except Exception as e:  # colbert-ai asserts and raises bare exceptions
        shutil.rmtree(tmp, ignore_errors=True)
        raise DataError(
            f"building a PLAID index of {len(items)} documents with {ckpt} failed ({short_error(e)}); PLAID needs "
            "at least a few hundred document tokens (k-means over them): use search = 'exact' for a tiny corpus"
        ) from e
    manifest = {
        "n_docs": len(items),
        "n_tokens": int(meta["num_embeddings"]),
        "nbits": int(nbits),
        "num_partitions": int(meta["num_partitions"]),
        "checkpoint": ckpt,
    }
    (tmp / PLAID_MANIFEST).write_text(json.dumps(manifest, indent=2))
    try:
        os.rename(tmp, out)
    except OSError:  # another process published the same index first
        shutil.rmtree(tmp, ignore_errors=True)
    return open_plaid_index(out)


def open_plaid_index(index_dir: str | Path) -> PlaidIndex:
    """A complete index folder (one with :data:`PLAID_MANIFEST`) as a :class:`PlaidIndex`."""
    path = Path(index_dir).expanduser()
    if not (path / PLAID_MANIFEST).is_file():
        raise DataError(f"{path} is not a complete PLAID index (no {PLAID_MANIFEST}); build it with build_plaid_index")
    m = json.loads((path / PLAID_MANIFEST).read_text())
    return PlaidIndex(
        path,
        n_docs=int(m["n_docs"]),
        n_tokens=int(m["n_tokens"]),
        nbits=int(m["nbits"]),
        num_partitions=int(m["num_partitions"]),
    )


@dataclass
class PlaidIndex:
    """A PLAID index on disk; :meth:`search` loads colbert-ai's ``IndexScorer`` on first use (the
    index's codes and residuals in memory, not the model: queries come as token vectors)."""

    path: Path
    n_docs: int
    n_tokens: int
    nbits: int
    num_partitions: int
    _scorer: Any = field(default=None, repr=False)
    _config: Any = field(default=None, repr=False)

    def _load(self) -> None:
        if self._scorer is not None:
            return
        import_colbert()
        from colbert.infra import ColBERTConfig
        from colbert.search.index_storage import IndexScorer

        with _colbert_io(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = ColBERTConfig.load_from_index(str(self.path))
            self._scorer = IndexScorer(str(self.path), config.total_visible_gpus > 0, load_index_with_mmap=False)
        self._config = config

    def search(
        self, queries: TokenVectors, k: int, *, settings: Mapping[str, Any] | None = None
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per query: ``(positions int64, scores float32)`` of its ``min(k, n_docs)`` best documents
        by PLAID score, descending (module docstring); ``queries`` are query token vectors
        (:meth:`~adaptlab.models.colbert.ColBERTEncoder.encode_query_tokens`). ``settings``
        override :func:`search_settings` (``ncells``, ``centroid_score_threshold``, ``ndocs``)."""
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ConfigError(f"k must be a positive integer, got {k!r}")
        import torch

        self._load()
        depth = min(int(k), self.n_docs)
        config = self._config
        chosen = {**search_settings(self.n_docs, depth), **(settings or {})}
        unknown = set(chosen) - {"ncells", "centroid_score_threshold", "ndocs"}
        if unknown:
            raise ConfigError(
                f"unknown PLAID search settings {sorted(unknown)}; expected ncells, centroid_score_threshold, ndocs"
            )
        config.configure(**chosen)
        out = []
        with _colbert_io():
            for i in range(len(queries)):
                q = torch.from_numpy(np.array(queries[i], dtype=np.float32))[None]  # [1, m, dim]
                config.configure(query_maxlen=int(q.shape[1]))
                pids, scores = self._scorer.rank(config, q)
                if len(pids) < depth:  # too few candidates in the probed cells: score every document
                    pids, scores = self._exhaustive(config, q, depth)
                out.append((np.asarray(pids[:depth], np.int64), np.asarray(scores[:depth], np.float32)))
        return out

    def _exhaustive(self, config: Any, q: Any, depth: int) -> tuple[list[int], list[float]]:
        """The ``depth`` best of all documents by decompressed MaxSim, in blocks of documents."""
        pids: list[int] = []
        scores: list[float] = []
        for b in range(0, self.n_docs, _EXHAUSTIVE_BLOCK):
            p, s = self._scorer.rank(config, q, pids=list(range(b, min(self.n_docs, b + _EXHAUSTIVE_BLOCK))))
            pids, scores = pids + list(p), scores + list(s)
            order = np.argsort(-np.asarray(scores, np.float32), kind="stable")[:depth]
            pids, scores = [pids[j] for j in order], [scores[j] for j in order]
        return pids, scores
