"""ColBERT late-interaction encoders (Khattab & Zaharia, "ColBERT: Efficient and Effective Passage
Search via Contextualized Late Interaction over BERT", SIGIR 2020; ColBERTv2, Santhanam et al.,
NAACL 2022), loaded through colbert-ai (RAGatouille's backend).

A ColBERT encodes a text into one L2-normalised vector per token (BERT's last layer, then a linear
projection to ``dim``, 128 for ColBERTv2). Relevance is MaxSim (Khattab & Zaharia 2020, section 3):

    s(q, d) = sum_{i in query tokens} max_{j in document tokens} <q_i, d_j>

- *Queries* are padded to ``query_maxlen`` tokens with ``[MASK]`` (query augmentation, section
  3.2) and every position, the masks included, is a query vector: ``query_maxlen`` rows.
- *Documents* keep their real tokens up to ``doc_maxlen`` (padding and punctuation dropped, as
  ColBERT's own ``docFromText(keep_dims=False)`` and its PLAID index do).

:class:`ColBERTEncoder` implements :class:`~adaptlab.models.base.Encoder` with
``interaction = "late"``: :meth:`ColBERTEncoder.encode_query_tokens` /
:meth:`ColBERTEncoder.encode_document_tokens` return :class:`TokenVectors`, and
:meth:`ColBERTEncoder.score` is MaxSim. The dense ``encode_*`` methods raise
:class:`NotImplementedError`: a ColBERT has no single text vector.

References (``ref`` of a ``[[models]]`` entry with ``backend = "colbert"``):

- a ColBERT checkpoint directory (it has ``artifact.metadata``): loaded as is;
- an adaptlab ColBERT artifact directory (``manifest.json`` + ``model/``): its ``model/``;
- a plain BERT directory (``config.json`` + weights, e.g. the BERT inside the packaged MiniLM):
  only with the option ``from_bert = true``, it becomes an **untrained** ColBERT (the BERT plus a
  fresh, seeded ``hidden -> dim`` projection) saved once under a content-addressed cache
  directory; this is announced loudly on stderr and as a warning, and recorded in the encoder's
  options (``untrained_projection = true``), because its scores are those of a random projection;
- a hub id (``colbert-ir/colbertv2.0``) where a hub is reachable.

Importing colbert has process-wide side effects (the ``spawn`` start method,
``TOKENIZERS_PARALLELISM``, ``CUDA_VISIBLE_DEVICES``): it is imported only inside the functions
that need it, never when :mod:`adaptlab.models` is imported, and :func:`import_colbert` restores
the environment variables it rewrites.

Options: ``doc_maxlen`` (document tokens, default the checkpoint's), ``query_maxlen`` (default
the checkpoint's, 32 for ColBERTv2), ``from_bert`` (bool), ``dim`` (projection size for
``from_bert``, 128), ``seed`` (projection initialisation for ``from_bert``, 0), ``init_dir``
(where ``from_bert`` saves the checkpoint; default ``$ADAPTLAB_CACHE`` or
``~/.cache/adaptlab``, then ``colbert-init/<hash>``).

Retrieval options (:data:`RETRIEVAL_OPTIONS`, read by :func:`search_options`; accepted here so a
``[[models]]`` entry may carry them, validated, and dropped from the encoder's own options):
``search`` (``"auto"``, the default: exact MaxSim up to
:data:`adaptlab.retrieval.late.MAX_EXACT_TOKENS` document tokens and a PLAID index beyond;
``"exact"``; ``"plaid"``) and ``nbits`` (bits per dimension of PLAID's compressed residuals, 2;
see :mod:`adaptlab.models.plaid`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import sys
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from adaptlab.errors import ConfigError, DataError, require_extra
from adaptlab.models.base import (
    Encoder,
    TextKind,
    check_batch_size,
    check_texts,
    clean_options,
    describe_ref,
    short_error,
)
from adaptlab.models.variants import COLBERT_BACKEND
from adaptlab.models.weights import weights_sha256
from adaptlab.storage.env import cache_home

if TYPE_CHECKING:
    from adaptlab.models.ref import ModelRef

__all__ = [
    "COLBERT_METADATA",
    "ColBERTEncoder",
    "PLAID_NBITS",
    "RETRIEVAL_OPTIONS",
    "SEARCH_MODES",
    "TokenVectors",
    "colbert_from_bert",
    "import_colbert",
    "is_colbert_checkpoint",
    "maxsim",
    "relocate_checkpoint",
    "restored_env",
    "search_options",
]

COLBERT_METADATA = "artifact.metadata"
"""The file that marks a directory as a ColBERT checkpoint (colbert-ai's saved config)."""

SEARCH_MODES = ("auto", "exact", "plaid")
"""Values of the ``search`` option (module docstring)."""
PLAID_NBITS = (1, 2, 4)
"""Values of the ``nbits`` option (colbert-ai's residual codec; 2 is ColBERTv2's default)."""
RETRIEVAL_OPTIONS = ("search", "nbits")
"""Options of a ColBERT ``[[models]]`` entry that configure its search, not its encoder."""

_OPTIONS = ("doc_maxlen", "query_maxlen", "from_bert", "dim", "seed", "init_dir", *RETRIEVAL_OPTIONS)
_ENV_RESTORE = ("TOKENIZERS_PARALLELISM", "CUDA_VISIBLE_DEVICES")


# =========================================================================== token vectors


@dataclass(frozen=True)
class TokenVectors:
    """Variable-length token vectors of ``n`` texts, packed: ``vectors`` float32 ``[T, dim]`` (unit
    rows) and ``offsets`` int64 ``[n + 1]``; text ``i`` owns rows ``offsets[i]:offsets[i+1]``."""

    vectors: np.ndarray
    offsets: np.ndarray

    def __post_init__(self) -> None:
        v = np.ascontiguousarray(self.vectors, dtype=np.float32)
        o = np.ascontiguousarray(self.offsets, dtype=np.int64)
        if v.ndim != 2 or o.ndim != 1 or o.size < 1 or o[0] != 0 or o[-1] != v.shape[0] or np.any(np.diff(o) < 0):
            raise DataError(
                f"TokenVectors: vectors {v.shape} and offsets {o.shape} do not pack (expected offsets[0] = 0, "
                "non-decreasing, offsets[-1] = number of rows)"
            )
        object.__setattr__(self, "vectors", v)
        object.__setattr__(self, "offsets", o)

    @classmethod
    def from_list(cls, items: Sequence[np.ndarray], dim: int) -> TokenVectors:
        lengths = [int(np.asarray(x).shape[0]) for x in items]
        offsets = np.zeros(len(items) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        vectors = (
            np.concatenate([np.asarray(x, np.float32).reshape(-1, dim) for x in items])
            if items
            else (np.zeros((0, dim), np.float32))
        )
        return cls(vectors, offsets)

    def __len__(self) -> int:
        return int(self.offsets.size - 1)

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def __getitem__(self, i: int) -> np.ndarray:
        return self.vectors[self.offsets[i] : self.offsets[i + 1]]

    def select(self, idx: Sequence[int] | np.ndarray) -> TokenVectors:
        return TokenVectors.from_list([self[int(i)] for i in idx], self.dim)

    def padded(self) -> tuple[np.ndarray, np.ndarray]:
        """``([n, L, dim]`` zero-padded vectors, ``[n, L]`` bool mask of real tokens)``, L = longest."""
        n, L = len(self), int(self.lengths.max(initial=0))
        out = np.zeros((n, L, self.dim), np.float32)
        mask = np.zeros((n, L), bool)
        for i in range(n):
            x = self[i]
            out[i, : len(x)] = x
            mask[i, : len(x)] = True
        return out, mask


def maxsim(query: np.ndarray, docs: TokenVectors) -> np.ndarray:
    """MaxSim of one query ``[m, dim]`` against every document: float32 ``[len(docs)]``,
    ``s(q, d) = sum_i max_j <q_i, d_j>`` over the document's real tokens (Khattab & Zaharia 2020,
    section 3). A document without tokens scores ``-inf``. One matrix product over all document
    tokens, a segmented max (``np.maximum.reduceat``) and a sum over query tokens, in float64
    (exact products of the float32 inputs), rounded once to float32; the same numbers as
    :func:`adaptlab.retrieval.late.maxsim_scores`."""
    q = np.ascontiguousarray(query, dtype=np.float32)
    n = len(docs)
    out = np.full(n, -np.inf, dtype=np.float32)
    if n == 0 or docs.vectors.shape[0] == 0:
        return out
    sims = docs.vectors.astype(np.float64) @ q.astype(np.float64).T  # [T, m]
    nonempty = docs.lengths > 0
    starts = docs.offsets[:-1][nonempty]
    best = np.maximum.reduceat(sims, starts, axis=0)  # [n_nonempty, m]
    out[nonempty] = best.sum(axis=1, dtype=np.float64).astype(np.float32)
    return out


def search_options(options: Mapping[str, Any]) -> tuple[str, int]:
    """``(search, nbits)`` of a ColBERT model's options, validated: ``search`` in
    :data:`SEARCH_MODES` (unset: ``"auto"``), ``nbits`` in :data:`PLAID_NBITS` (unset: 2).
    A wrong value is a :class:`ConfigError` naming the option and the valid values."""
    search = options.get("search")
    search = "auto" if search is None or search == "" else search
    if not isinstance(search, str) or search.strip().lower() not in SEARCH_MODES:
        raise ConfigError(
            f"ColBERT model option search = {search!r} is not understood; expected one of 'auto' (exact MaxSim "
            "up to 2M document tokens, a PLAID index beyond), 'exact' (always exact MaxSim), 'plaid' (always a "
            "PLAID index, approximate)"
        )
    nbits = options.get("nbits")
    nbits = 2 if nbits is None or nbits == 0 else nbits
    if isinstance(nbits, bool) or not isinstance(nbits, int) or nbits not in PLAID_NBITS:
        raise ConfigError(
            f"ColBERT model option nbits = {nbits!r} is not understood; expected one of "
            f"{', '.join(map(str, PLAID_NBITS))} (bits per dimension of PLAID's residuals)"
        )
    return search.strip().lower(), int(nbits)


# =========================================================================== colbert import


@contextlib.contextmanager
def restored_env() -> Iterator[None]:
    """Put back the environment variables colbert-ai rewrites (``TOKENIZERS_PARALLELISM``,
    ``CUDA_VISIBLE_DEVICES``) when the block ends."""
    saved = {k: os.environ.get(k) for k in _ENV_RESTORE}
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def import_colbert() -> Any:
    """Import colbert-ai (once), undoing its rewrite of ``TOKENIZERS_PARALLELISM`` and
    ``CUDA_VISIBLE_DEVICES``; the ``spawn`` start method it forces stays (it cannot be undone
    safely). Raises :class:`~adaptlab.errors.MissingExtraError` (one line naming the colbert
    extra) when it is missing."""
    with restored_env():
        require_extra("colbert.modeling.checkpoint", "colbert", "ColBERT models")
    _guard_git_metadata()
    return sys.modules["colbert"]


_METADATA_USERS = (
    "colbert.infra.config.base_config",
    "colbert.infra.config.core_config",
    "colbert.data.examples",
    "colbert.data.ranking",
)


def _guard_git_metadata() -> None:
    """colbert-ai records the git branch of the *current folder* in every checkpoint it saves
    (``utility.utils.save_metadata.get_metadata_only``) and catches only "not a repository": run
    from a checkout on a detached HEAD (a CI job, a ``git worktree`` of a commit) building or
    saving a ColBERT failed with GitPython's TypeError. The modules that imported it by name get
    a version that records no git fields when git cannot say (idempotent)."""
    from utility.utils import save_metadata

    original = save_metadata.get_metadata_only
    if getattr(original, "adaptlab_guarded", False):
        return

    def guarded() -> Any:
        try:
            return original()
        except Exception:  # noqa: BLE001 - git's state is metadata, never a reason to fail
            args = save_metadata.dotdict()
            args.hostname, args.cmd = socket.gethostname(), " ".join(sys.argv)
            args.current_datetime = time.strftime("%b %d, %Y ; %l:%M%p %Z (%z)")
            return args

    guarded.adaptlab_guarded = True  # type: ignore[attr-defined]
    save_metadata.get_metadata_only = guarded
    for name in _METADATA_USERS:
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "get_metadata_only"):
            module.get_metadata_only = guarded  # type: ignore[attr-defined]  # present: hasattr above


def is_colbert_checkpoint(path: str | Path) -> bool:
    """True when ``path`` is a directory with colbert-ai's ``artifact.metadata``."""
    p = Path(path)
    return p.is_dir() and (p / COLBERT_METADATA).is_file()


def relocate_checkpoint(path: str | Path) -> None:
    """Make a saved checkpoint loadable from anywhere: drop the ``model_name`` and ``checkpoint``
    entries of ``artifact.metadata`` (colbert-ai writes the training-time, possibly relative,
    path there and prefers it over the directory it is loading from)."""
    file = Path(path) / COLBERT_METADATA
    data = json.loads(file.read_text())
    for key in ("model_name", "checkpoint"):
        data.pop(key, None)
    tmp = file.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=4))
    os.replace(tmp, file)


def _cache_root(init_dir: str | None) -> Path:
    if init_dir:
        return Path(init_dir).expanduser()
    return cache_home() / "colbert-init"


def _announce(msg: str) -> None:
    print(f"[adaptlab] WARNING: {msg}", file=sys.stderr, flush=True)
    warnings.warn(msg, UserWarning, stacklevel=3)


def colbert_from_bert(
    bert_dir: str | Path,
    out_dir: str | Path | None = None,
    *,
    dim: int = 128,
    seed: int = 0,
    doc_maxlen: int = 180,
    query_maxlen: int = 32,
    init_dir: str | None = None,
) -> Path:
    """Turn a plain local BERT directory into an **untrained** ColBERT checkpoint and return its path.

    The BERT keeps its weights; the ``hidden -> dim`` projection is freshly initialised under
    ``torch.manual_seed(seed)``. ``out_dir`` defaults to ``<cache>/colbert-init/<hash>`` where the
    hash covers the BERT's weights and the settings, so the conversion runs once. Said loudly:
    such a model is a starting point for fine-tuning, not a retriever.
    """
    src = Path(bert_dir).expanduser().resolve()
    if not (src / "config.json").is_file():
        raise ConfigError(f"{src}: not a BERT directory (no config.json); from_bert needs a local transformers model")
    settings = {"dim": int(dim), "seed": int(seed), "doc_maxlen": int(doc_maxlen), "query_maxlen": int(query_maxlen)}
    if out_dir is None:
        digest = hashlib.sha256(json.dumps([weights_sha256(src), settings], sort_keys=True).encode()).hexdigest()
        out_dir = _cache_root(init_dir) / digest[:24]
    out = Path(out_dir)
    if is_colbert_checkpoint(out):
        return out
    _announce(
        f"building an UNTRAINED ColBERT from the plain BERT {src} (random {dim}-d projection, seed {seed}) "
        f"-> {out}; fine-tune it before reading its scores as a retriever's"
    )
    import_colbert()
    import torch
    from colbert.infra import ColBERTConfig
    from colbert.modeling.checkpoint import Checkpoint

    config = ColBERTConfig(
        checkpoint=str(src),
        model_name=str(src),
        dim=int(dim),
        doc_maxlen=int(doc_maxlen),
        query_maxlen=int(query_maxlen),
    )
    with torch.random.fork_rng(devices=[]), restored_env(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(int(seed))
        ckpt = Checkpoint(str(src), colbert_config=config, verbose=0)
    tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
    ckpt.save(str(tmp))
    relocate_checkpoint(tmp)
    (tmp / "adaptlab_init.json").write_text(json.dumps({"untrained_projection": True, "bert": str(src), **settings}))
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(tmp, out)
    except OSError:  # another process made it first
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return out


# =========================================================================== the encoder


def _checkpoint_dir(model: ModelRef, opts: dict[str, Any]) -> tuple[str, bool]:
    """(directory or hub id to load, untrained?)."""
    if model.path is None:
        return model.model_id, False
    path = Path(model.path)
    if (path / "manifest.json").is_file() and is_colbert_checkpoint(path / "model"):
        path = path / "model"
    if is_colbert_checkpoint(path):
        return str(path), (path / "adaptlab_init.json").is_file()
    if (path / "config.json").is_file():
        if not opts.get("from_bert"):
            raise ConfigError(
                f"{path} is a plain transformers model, not a ColBERT checkpoint (no {COLBERT_METADATA}); "
                "set the model option from_bert = true to build an UNTRAINED ColBERT from it, or give a "
                "ColBERT checkpoint"
            )
        out = colbert_from_bert(
            path,
            dim=int(opts.get("dim") or 128),
            seed=int(opts.get("seed") or 0),
            doc_maxlen=int(opts.get("doc_maxlen") or 180),
            query_maxlen=int(opts.get("query_maxlen") or 32),
            init_dir=opts.get("init_dir"),
        )
        return str(out), True
    raise ConfigError(
        f"{path}: neither a ColBERT checkpoint ({COLBERT_METADATA}) nor a transformers model (config.json)"
    )


class ColBERTEncoder(Encoder):
    """A colbert-ai ``Checkpoint`` behind the :class:`Encoder` interface (``interaction = "late"``)."""

    backend = COLBERT_BACKEND
    interaction = "late"

    def __init__(
        self, checkpoint: Any, *, model_id: str, path: Path | None, revision: str | None, options: dict[str, Any]
    ) -> None:
        super().__init__(model_id, int(checkpoint.colbert_config.dim), path=path, revision=revision, options=options)
        self.checkpoint = checkpoint
        self.doc_maxlen = int(checkpoint.doc_tokenizer.doc_maxlen)
        self.query_maxlen = int(checkpoint.query_tokenizer.query_maxlen)

    @classmethod
    def load(cls, model: ModelRef, *, device: str | None = None, **options: Any) -> ColBERTEncoder:
        """Backend loader (see the module docstring for the references and options)."""
        opts = clean_options({**model.options, **options}, _OPTIONS, cls.backend)
        search_options(opts)  # retrieval options: validated here, used by adaptlab.retrieval
        if model.path is not None:
            from adaptlab.models.load import go_offline

            go_offline()
        where, untrained = _checkpoint_dir(model, opts)
        if untrained:
            _announce(f"ColBERT {where} has an UNTRAINED projection (built from a plain BERT)")
        import_colbert()
        try:
            import torch
            from colbert.infra import ColBERTConfig
            from colbert.modeling.checkpoint import Checkpoint

            overrides: dict[str, Any] = {"checkpoint": where}
            if model.path is not None:
                overrides["model_name"] = where  # never fall back to a hub name offline
            for key in ("doc_maxlen", "query_maxlen"):
                if key in opts:
                    overrides[key] = int(opts[key])
            with restored_env(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ckpt = Checkpoint(where, colbert_config=ColBERTConfig(**overrides), verbose=0)
            if device:
                ckpt = ckpt.to(torch.device(device))
            ckpt.eval()
        except (OSError, ValueError, KeyError) as e:
            raise ConfigError(
                f"cannot load ColBERT: tried {describe_ref(model)} (reference {model.ref!r}): {short_error(e)}"
            ) from e
        path = Path(where) if model.path is not None else None
        kept = {k: v for k, v in opts.items() if k not in ("init_dir", *RETRIEVAL_OPTIONS)}
        if untrained:
            kept["untrained_projection"] = True
        return cls(
            ckpt, model_id=model.model_id, path=path, revision=model.revision if path is None else None, options=kept
        )

    # -- dense interface: not defined for late interaction ------------------------------
    def _encode(self, texts: list[str], kind: TextKind, batch_size: int) -> np.ndarray:
        raise NotImplementedError(
            "a ColBERT has one vector per token, not per text: use encode_query_tokens / "
            "encode_document_tokens and adaptlab.retrieval.late (MaxSim)"
        )

    # -- token vectors -------------------------------------------------------------------
    def encode_tokens(self, texts: Sequence[str], *, kind: TextKind = "document", batch_size: int = 32) -> TokenVectors:
        """Token vectors of ``texts`` (queries: ``query_maxlen`` rows each; documents: real tokens)."""
        if kind not in ("query", "document"):
            raise ConfigError(f"kind must be 'query' or 'document', got {kind!r}")
        items = check_texts(texts, "queries" if kind == "query" else "documents")
        bs = check_batch_size(batch_size)
        if not items:
            return TokenVectors(np.zeros((0, self.dim), np.float32), np.zeros(1, np.int64))
        import torch

        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if kind == "query":
                q = self.checkpoint.queryFromText(items, bsize=bs, to_cpu=True).float().numpy()
                return TokenVectors.from_list(list(q), self.dim)
            docs = self.checkpoint.docFromText(items, bsize=bs, keep_dims=False)[0]  # keep_dims=False moves to CPU
        return TokenVectors.from_list([d.float().numpy() for d in docs], self.dim)

    def encode_query_tokens(self, texts: Sequence[str], *, batch_size: int = 32) -> TokenVectors:
        return self.encode_tokens(texts, kind="query", batch_size=batch_size)

    def encode_document_tokens(self, texts: Sequence[str], *, batch_size: int = 32) -> TokenVectors:
        return self.encode_tokens(texts, kind="document", batch_size=batch_size)

    def score(self, queries: Sequence[str], documents: Sequence[str], *, batch_size: int = 32) -> np.ndarray:
        """MaxSim scores float32 ``[len(queries), len(documents)]`` (module docstring)."""
        q = self.encode_query_tokens(queries, batch_size=batch_size)
        d = self.encode_document_tokens(documents, batch_size=batch_size)
        out = np.empty((len(q), len(d)), np.float32)
        for i in range(len(q)):
            out[i] = maxsim(q[i], d)
        return out

    def provenance(self) -> dict[str, Any]:
        out = super().provenance()
        out["doc_maxlen"], out["query_maxlen"] = self.doc_maxlen, self.query_maxlen
        return out
