"""EvalRank: embedding quality as ranking of positive pairs (reference 003; Wang et al. 2022,
"Just Rank: Rethinking Evaluation with Word and Sentence Similarities").

A pool ``C = {c_1..c_n}`` of texts and positive pairs ``P = {(c_x, c_y)}`` of semantically
similar texts from ``C``. For pair ``i`` the query is ``c_x`` and the candidates are all of
``C`` except ``c_x``; with ``s`` the cosine similarity (inner product of L2-normalised
embeddings)::

    rank_i = 1 + |{j != x, y : s(c_x, c_j) > s(c_x, c_y)}|
               + |{j != x, y : s(c_x, c_j) = s(c_x, c_y) and j > y}|

(ties are broken like adaptlab's rankings: larger id first, here the pool index), and::

    MRR = (1/m) sum_i 1 / rank_i        Hits@k = (1/m) sum_i 1[rank_i <= k]

Pairs are the resampling unit of the bootstrap CIs (``adaptlab.stats.bootstrap_ci``). The
original benchmark also adds every reversed pair ``(c_y, c_x)``: ``symmetric=True`` in
:func:`load_pairs`. A pair and its reverse are not independent (their reciprocal ranks correlate
strongly), so they form one resampling unit: :attr:`PairPool.groups` numbers the source pair of
every ranked pair, and the bootstrap resamples whole groups (a cluster bootstrap; Davison &
Hinkley 1997, "Bootstrap Methods and their Application", sec. 3.8): with group sums ``S_g`` and
sizes ``n_g`` of the drawn groups, one resample's value is ``sum S_g / sum n_g``, and the CI is
the percentile interval of those values.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from adaptlab.analysis._options import BootstrapOptions, split_options
from adaptlab.analysis._rows import metric_row
from adaptlab.errors import ConfigError, DataError
from adaptlab.stats import BootstrapConfig, bootstrap_ci, percentile_interval, resample_indices
from adaptlab.stats.settings import resolve_bootstrap

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["EvalRankResult", "PairPool", "evalrank", "evalrank_ranks", "load_pairs"]


@dataclass(frozen=True)
class PairPool:
    """Pool texts and positive pairs as indices into ``texts`` ([m, 2] int64)."""

    texts: list[str]
    pairs: np.ndarray
    source: str = ""
    groups: np.ndarray | None = None  # [m] source-pair number of each pair (resampling unit)

    def __len__(self) -> int:
        return int(self.pairs.shape[0])


def _read_rows(path: Path, fmt: str, delimiter: str) -> Iterable[tuple[int, dict[str, Any]]]:
    if fmt == "jsonl":
        with path.open(encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as e:
                    raise DataError(f"{path}:{n}: invalid JSON ({e.msg}); expected one JSON object per line") from e
                if not isinstance(obj, dict):
                    raise DataError(f"{path}:{n}: expected a JSON object, got {type(obj).__name__}")
                yield n, obj
    else:
        with path.open(encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f, delimiter=delimiter)
            for n, row in enumerate(reader, 2):  # line 1 is the header
                yield n, row


def load_pairs(
    path: str | Path,
    *,
    columns: Sequence[str] = ("sentence1", "sentence2"),
    fmt: str | None = None,
    delimiter: str | None = None,
    symmetric: bool = False,
    background: str | Path | Iterable[str] | None = None,
) -> PairPool:
    """Read positive pairs from CSV/TSV (with a header) or JSONL into a pool and index pairs.

    ``columns`` names the two text columns/keys. ``fmt`` is ``csv``, ``tsv`` or ``jsonl``
    (default: from the suffix). The pool holds every distinct text in order of first appearance,
    then the ``background`` texts (an iterable, or a file with one text per line) not seen yet.
    ``symmetric`` adds each reversed pair (the original benchmark does). Duplicate pairs are kept.
    """
    p = Path(path)
    if len(columns) != 2:
        raise ConfigError(f"columns must name exactly two fields, got {list(columns)}")
    if fmt is None:
        suffix = p.suffix.lower()
        fmt = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl"}.get(suffix)
        if fmt is None:
            raise ConfigError(f"{p}: cannot tell the format from suffix {suffix!r}; pass fmt='csv', 'tsv' or 'jsonl'")
    if fmt not in ("csv", "tsv", "jsonl"):
        raise ConfigError(f"fmt must be 'csv', 'tsv' or 'jsonl', got {fmt!r}")
    if not p.is_file():
        raise DataError(f"{p}: no such file")
    delim = delimiter if delimiter is not None else ("\t" if fmt == "tsv" else ",")
    index: dict[str, int] = {}
    texts: list[str] = []
    pairs: list[tuple[int, int]] = []
    groups: list[int] = []

    def _id(t: str) -> int:
        if t not in index:
            index[t] = len(texts)
            texts.append(t)
        return index[t]

    a_col, b_col = columns
    for n, row in _read_rows(p, fmt, delim):
        for col in (a_col, b_col):
            if col not in row:
                raise DataError(
                    f"{p}:{n}: missing column {col!r}; found {sorted(row)}; set columns=(...) to the text fields"
                )
        a, b = row[a_col], row[b_col]
        if not isinstance(a, str) or not isinstance(b, str) or not a.strip() or not b.strip():
            raise DataError(f"{p}:{n}: columns {a_col!r} and {b_col!r} must be non-empty strings")
        if a == b:
            raise DataError(
                f"{p}:{n}: a pair of identical texts cannot be ranked (the query is excluded from the pool)"
            )
        ia, ib = _id(a), _id(b)
        pairs.append((ia, ib))
        groups.append(len(groups) if not symmetric else len(pairs) // 2)
        if symmetric:
            pairs.append((ib, ia))
            groups.append(groups[-1])
    if not pairs:
        raise DataError(f"{p}: no pairs found")
    if background is not None:
        if isinstance(background, (str, Path)):
            bp = Path(background)
            if not bp.is_file():
                raise DataError(f"{bp}: no such background file")
            items: Iterable[str] = (line.rstrip("\n") for line in bp.open(encoding="utf-8"))
        else:
            items = background
        for t in items:
            if t.strip():
                _id(t)
    return PairPool(texts, np.asarray(pairs, dtype=np.int64), str(p), np.asarray(groups, dtype=np.int64))


def evalrank_ranks(
    pool_embeddings: object, pairs: object, *, normalize: bool = True, block_size: int = 512
) -> np.ndarray:
    """``rank_i`` of ``c_y`` for ``c_x`` over the pool minus ``c_x`` -> int64 [m]."""
    e: np.ndarray = np.asarray(pool_embeddings, dtype=np.float32)
    if e.ndim != 2 or e.shape[0] < 2:
        raise ConfigError(f"pool_embeddings must be [n >= 2, dim], got shape {e.shape}")
    pr = np.asarray(pairs, dtype=np.int64)
    if pr.ndim != 2 or pr.shape[1] != 2 or pr.shape[0] == 0:
        raise ConfigError(f"pairs must be a non-empty [m, 2] integer array, got shape {pr.shape}")
    n = e.shape[0]
    if pr.min() < 0 or pr.max() >= n:
        raise ConfigError(f"pair indices must lie in [0, {n}), got [{pr.min()}, {pr.max()}]")
    if (pr[:, 0] == pr[:, 1]).any():
        raise ConfigError("a pair (x, x) cannot be ranked: the query is excluded from the pool")
    if normalize:
        norms = np.linalg.norm(e, axis=1, keepdims=True)
        e = e / np.where(norms > 0, norms, 1.0)
    cols = np.arange(n)
    ranks = np.empty(pr.shape[0], dtype=np.int64)
    bs = max(1, int(block_size))
    for s in range(0, pr.shape[0], bs):
        x, y = pr[s : s + bs, 0], pr[s : s + bs, 1]
        r = np.arange(x.size)
        sim = e[x] @ e.T  # [b, n]
        pos = sim[r, y]
        sim[r, x] = -np.inf
        above = (sim > pos[:, None]).sum(axis=1)
        ties = ((sim == pos[:, None]) & (cols[None, :] > y[:, None])).sum(axis=1)
        ranks[s : s + bs] = 1 + above + ties
    return ranks


@dataclass(frozen=True)
class EvalRankResult:
    """MRR and Hits@k over pairs: ``values[measure] = (value, boot_mean, ci_low, ci_high)``
    for ``evalrank_mrr`` and ``evalrank_hits@k``; ``ranks`` per pair."""

    system: str
    dataset: str
    ranks: np.ndarray
    values: dict[str, tuple[float, float, float, float]]
    n_resamples: int
    sample_size: int
    seed: int
    confidence: float

    @property
    def mrr(self) -> float:
        return self.values["evalrank_mrr"][0]

    def hits(self, k: int) -> float:
        return self.values[f"evalrank_hits@{int(k)}"][0]

    def to_metric_rows(self) -> list[dict[str, Any]]:
        """One row per measure; ``n_queries`` is the number of pairs."""
        return [
            metric_row(
                self.system,
                self.dataset,
                m,
                v[0],
                boot_mean=v[1],
                ci_low=v[2],
                ci_high=v[3],
                n_queries=int(self.ranks.size),
                n_resamples=self.n_resamples,
                sample_size=self.sample_size,
                seed=self.seed,
                confidence=self.confidence,
                interval_method="percentile",
                extra={"confidence": self.confidence},
            )
            for m, v in self.values.items()
        ]


def evalrank(
    pool_embeddings: object,
    pairs: object,
    *,
    ks: Sequence[int] = (1, 3, 5, 10),
    normalize: bool = True,
    system: str = "",
    dataset: str = "",
    bootstrap: BootstrapConfig | None = None,
    groups: object = None,
    **options: Unpack[BootstrapOptions],
) -> EvalRankResult:
    """EvalRank MRR and Hits@k of one embedding model with bootstrap CIs over pairs.

    ``pool_embeddings`` [n, d] embeds :attr:`PairPool.texts` in order; ``pairs`` a
    :class:`PairPool` (its pairs and groups) or an [m, 2] array. ``groups`` [m] (default: the
    pool's, else each pair alone) numbers the resampling unit of every pair: pairs of one group
    are resampled together (a pair and its reverse). ``bootstrap`` (one
    :class:`~adaptlab.stats.BootstrapConfig`) or the loose ``n_resamples`` (default 1000),
    ``sample_size`` (in groups; default: all), ``seed`` (default 0) and ``confidence`` (default
    0.95) give the bootstrap settings, not both.
    """
    if isinstance(pairs, PairPool):
        groups = pairs.groups if groups is None else groups
        pairs = pairs.pairs
    cfg = resolve_bootstrap("evalrank", bootstrap, **split_options("evalrank", options, BootstrapOptions)[0])
    kk = sorted({int(k) for k in ks})
    if any(k < 1 for k in kk):
        raise ConfigError(f"ks must be >= 1, got {list(ks)}")
    ranks = evalrank_ranks(pool_embeddings, pairs, normalize=normalize)
    names = ["evalrank_mrr"] + [f"evalrank_hits@{k}" for k in kk]
    per_pair = np.vstack([1.0 / ranks] + [(ranks <= k).astype(np.float64) for k in kk])
    g = _groups(groups, ranks.size)
    if g is None:
        # each row's interval by its measure's definition: MRR graded, Hits@k 0/1 (Wilson)
        cis = [
            bootstrap_ci(per_pair[i], measure="mrr" if i == 0 else "acc@1", **cfg.kwargs()) for i in range(len(names))
        ]
        values = {
            m: (float(c.point), float(c.boot_mean), float(c.ci_low), float(c.ci_high)) for m, c in zip(names, cis)
        }
        l = ranks.size if cfg.sample_size is None else int(cfg.sample_size)
    else:
        rows, l = _cluster_bootstrap(per_pair, g, cfg)
        values = dict(zip(names, rows))
    return EvalRankResult(system, dataset, ranks, values, int(cfg.n_resamples), l, cfg.seed, float(cfg.confidence))


def _groups(groups: object, m: int) -> np.ndarray | None:
    """Group ids 0..G-1 per pair, or None when every pair is its own group."""
    if groups is None:
        return None
    g = np.asarray(groups)
    if g.shape != (m,):
        raise ConfigError(f"groups must have one entry per pair ({m}), got shape {g.shape}")
    _, inv = np.unique(g, return_inverse=True)
    return None if inv.max() + 1 == m else inv.astype(np.int64)


def _cluster_bootstrap(
    per_pair: np.ndarray,
    g: np.ndarray,
    cfg: BootstrapConfig,
) -> tuple[list[tuple[float, float, float, float]], int]:
    """Resample whole groups: each resample's value is sum(group sums) / sum(group sizes)."""
    n_g = int(g.max()) + 1
    sums = np.stack([np.bincount(g, weights=row, minlength=n_g) for row in per_pair])  # [P, G]
    sizes = np.bincount(g, minlength=n_g).astype(np.float64)
    idx = resample_indices(
        n_g,
        n_resamples=cfg.n_resamples,
        sample_size=cfg.sample_size,
        seed=cfg.seed,
        allow_oversampling=cfg.allow_oversampling,
    )
    offs = (np.arange(idx.shape[0], dtype=np.int64) * n_g)[:, None]
    counts = np.bincount((idx + offs).ravel(), minlength=idx.shape[0] * n_g).reshape(idx.shape[0], n_g)
    boot = (counts @ sums.T) / (counts @ sizes)[:, None]  # [B, P]
    lo, hi = percentile_interval(boot, cfg.confidence, axis=0)
    point = per_pair.mean(axis=1)
    vals = [(float(point[i]), float(boot[:, i].mean()), float(lo[i]), float(hi[i])) for i in range(per_pair.shape[0])]
    return vals, int(idx.shape[1])
