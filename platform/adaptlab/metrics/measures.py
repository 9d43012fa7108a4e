"""Measures as value objects with a canonical string, used as the store key.

``Measure.parse("nDCG@10")`` gives ``Measure("ndcg", 10)`` whose ``str`` is ``"ndcg@10"``.
Aliases follow common usage: ``acc``/``accuracy``/``hits``/``success`` -> ``acc`` (hit rate,
trec_eval's ``success``), ``p`` -> ``precision``, ``r`` -> ``recall``, ``rr``/``recip_rank``
-> ``mrr``, ``ap`` -> ``map``.

MTEB's spellings are accepted too: ``ndcg_at_10`` -> ``ndcg@10``, ``recall_at_100``,
``mrr_at_10``, ``map_at_100``, ``precision_at_10``, ``hit_rate_at_10`` (``NAME_at_K``).
MTEB's ``main_score`` is refused: it names a different measure per task (``ndcg_at_10`` for
MTEB's retrieval tasks), so the measure must be named.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from adaptlab.errors import ConfigError

__all__ = ["IR_MEASURES_NAMES", "JUDGMENT_MEASURES", "MAX_CUTOFF", "MEASURE_NAMES", "Measure", "parse_measures"]

MEASURE_NAMES: tuple[str, ...] = (
    "acc",
    "bpref",
    "err",
    "infap",
    "judged",
    "map",
    "mrr",
    "ndcg",
    "precision",
    "recall",
    "rprec",
)
"""Canonical measure names. ``mrr``, ``ndcg`` and ``map`` accept no cutoff (the full ranking);
``rprec``, ``bpref`` and ``infap`` refuse one; the others need one."""

IR_MEASURES_NAMES: dict[str, str] = {"bpref": "Bpref", "infap": "infAP", "rprec": "Rprec"}
"""The measures computed through ir_measures, canonical name -> ir_measures' name."""

JUDGMENT_MEASURES = frozenset({"bpref", "infap", "judged"})
"""Measures that read the judged non-relevant documents of the qrels (which the results store's
per-query records, holding only the gold documents, do not keep)."""

_ALIASES = {
    "acc": "acc",
    "accuracy": "acc",
    "hits": "acc",
    "hit": "acc",
    "success": "acc",
    "hit_rate": "acc",
    "hitrate": "acc",
    "p": "precision",
    "precision": "precision",
    "prec": "precision",
    "r": "recall",
    "recall": "recall",
    "mrr": "mrr",
    "rr": "mrr",
    "recip_rank": "mrr",
    "ndcg": "ndcg",
    "ndcg_cut": "ndcg",
    "map": "map",
    "ap": "map",
    "map_cut": "map",
    "rprec": "rprec",
    "r-prec": "rprec",
    "r_prec": "rprec",
    "bpref": "bpref",
    "infap": "infap",
    "judged": "judged",
    "err": "err",
}
MAX_CUTOFF = 10_000
"""The largest cutoff k accepted. Per-query kernels hold a (queries x k) matrix, so an
unbounded k (``ndcg@1000000000``) would exhaust memory; the deepest cutoffs in common use are
100-1000 (BEIR reports recall@100 and recall@1000)."""

_NEEDS_K = frozenset({"acc", "err", "judged", "precision", "recall"})
_NO_K = frozenset(IR_MEASURES_NAMES)
_PATTERN = re.compile(r"^\s*([A-Za-z_][A-Za-z_-]*)\s*(?:[@_](\d+))?\s*$")
_ACCEPTED = (
    "(with @K where needed; ir_measures and MTEB spellings such as P@10, R-Prec, Bpref, infAP, "
    "Judged@10, ERR@10, ndcg_at_10 are accepted)"
)
_MTEB_AT = "_at"
"""MTEB writes ``ndcg_at_10``: the name ends in ``_at`` before the ``_K`` cutoff."""
_MAIN_SCORE = "main_score"


@dataclass(frozen=True, order=True)
class Measure:
    """A ranking measure and its cutoff ``k`` (``None`` = the whole ranking)."""

    name: str
    k: int | None = None

    def __post_init__(self) -> None:
        if self.name not in MEASURE_NAMES:
            raise ConfigError(f"unknown measure {self.name!r}; expected one of {', '.join(MEASURE_NAMES)}")
        if self.k is not None and (isinstance(self.k, bool) or not isinstance(self.k, int)):
            raise ConfigError(f"measure {self.name}@{self.k!r}: the cutoff k must be an integer")
        if self.k is not None and not 1 <= self.k <= MAX_CUTOFF:
            raise ConfigError(f"measure {self.name}@{self.k}: the cutoff k must be between 1 and {MAX_CUTOFF}")
        if self.k is None and self.name in _NEEDS_K:
            raise ConfigError(f"measure {self.name!r} needs a cutoff, for example {self.name}@10")
        if self.k is not None and self.name in _NO_K:
            raise ConfigError(
                f"measure {self.name}@{self.k}: {self.name} takes no cutoff (it reads the whole "
                f"ranking); write {self.name}"
            )

    @classmethod
    def parse(cls, text: str | Measure) -> Measure:
        """Parse ``"ndcg@10"``, ``"acc@5"``, ``"mrr"``, ``"map@100"``, ``"P_10"``, ..."""
        if isinstance(text, Measure):
            return text
        m = _PATTERN.match(str(text))
        if not m:
            raise ConfigError(f"cannot parse measure {text!r}; expected NAME or NAME@K such as ndcg@10, acc@5, mrr")
        raw, k = _mteb_name(m.group(1).lower(), m.group(2), str(text))
        if raw not in _ALIASES:
            raise ConfigError(
                f"unknown measure {m.group(1)!r} in {text!r}; expected one of {', '.join(MEASURE_NAMES)} {_ACCEPTED}"
            )
        if k is not None and len(k.lstrip("0")) > len(str(MAX_CUTOFF)):
            raise ConfigError(f"measure {text!r}: the cutoff k must be between 1 and {MAX_CUTOFF}")
        return cls(_ALIASES[raw], int(k) if k is not None else None)

    def __str__(self) -> str:
        return self.name if self.k is None else f"{self.name}@{self.k}"

    @property
    def depth(self) -> int | None:
        """How many top documents the measure reads (``None``: all retrieved)."""
        return self.k

    @property
    def needs_judgments(self) -> bool:
        """Whether the value depends on the judged non-relevant documents (bpref, infap, judged@k)."""
        return self.name in JUDGMENT_MEASURES

    @property
    def ir_measures_name(self) -> str | None:
        """ir_measures' name when the measure is computed through ir_measures, else None."""
        return IR_MEASURES_NAMES.get(self.name)


def _mteb_name(raw: str, k: str | None, text: str) -> tuple[str, str | None]:
    """``ndcg_at`` + ``10`` (MTEB's ``ndcg_at_10``) -> ``ndcg`` + ``10``; ``main_score`` refused."""
    if raw == _MAIN_SCORE:
        raise ConfigError(
            f"measure {text!r} is MTEB's per-task headline score, not one measure (ndcg_at_10 for "
            "MTEB's retrieval tasks); name the measure instead, for example ndcg@10"
        )
    if k is not None and raw.endswith(_MTEB_AT) and raw[: -len(_MTEB_AT)] in _ALIASES:
        return raw[: -len(_MTEB_AT)], k
    return raw, k


def parse_measures(spec: str | Iterable[str | Measure]) -> list[Measure]:
    """Parse a comma-separated string or an iterable; duplicates are dropped, order kept."""
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    out: list[Measure] = []
    for item in items:
        if isinstance(item, str) and not item.strip():
            continue
        m = Measure.parse(item)
        if m not in out:
            out.append(m)
    if not out:
        raise ConfigError("no measures given; expected for example ndcg@10,acc@5,mrr")
    return out
