"""All-pairs comparison of systems with significance letters, tiers and detectable effects.

:func:`compare` takes per-query values of several systems (from :func:`adaptlab.evaluate`, plain
arrays, or a results store) and, for every dataset and measure, reads from the evaluation
summary (:func:`adaptlab.evaluation.summary.summarise_arrays`: the bootstrap tasks and the
p-value adjustment of ``adaptlab evaluate``, so each CI and p-value is the one ``evaluate``
prints for the same values and seed):

* each system's mean with its bootstrap CI (:func:`adaptlab.stats.bootstrap_ci`);
* every pair of systems ``(a, b)`` (``a`` named before ``b``, difference ``a - b``, the same
  direction and interval as ``adaptlab run`` and ``inspect``: a pair's resampled differences
  depend only on its two systems, and a store's pairs keep their stored direction)
  with its paired bootstrap CI and two-sided p-value (:func:`adaptlab.stats.paired_bootstrap`),
  the p-values adjusted within the (dataset, measure) family (Holm by default, or
  Benjamini-Hochberg: :func:`adaptlab.stats.adjust_pvalues`);

and adds what is its own:

* **significance letters** as ranx prints them (Bassani 2022, "ranx: A Blazing-Fast Python
  Library for Ranking Evaluation and Comparison", ECIR): every system gets a letter (``a``,
  ``b``, ... in input order) and lists the letters of the systems it is significantly *better*
  than (adjusted p < ``alpha`` and a positive mean difference). This is not the compact letter
  display (where systems sharing a letter do not differ);
* **tiers**: each system's simultaneous rank interval and whether it is tied with the best,
  from the same adjusted p-values as the letters (:func:`adaptlab.stats.ranks_from_tests`): a
  system is tied with the best exactly when no system lists it among those it is better than;
  with Holm, with probability at least ``1 - alpha`` every interval holds at once and the tied
  set contains the best system;
* **minimum detectable effect** of every pair at ``power`` (default 0.8) for its number of
  queries ``Q``: the smallest true mean difference a two-sided level-``alpha`` paired test
  detects with probability ``power`` under the normal approximation,
  ``MDE = (z_{1-alpha/2} + z_{power}) * sd(d) / sqrt(Q)``, with ``d`` the per-query
  differences and ``sd`` their sample standard deviation (Cohen 1988, "Statistical Power
  Analysis for the Behavioral Sciences", 2nd ed., ch. 2: ``d = (z_{1-alpha/2} + z_{1-beta}) /
  sqrt(n)`` in units of ``sd``).

Every number is written by :mod:`adaptlab.analysis.present`, so text, Markdown and LaTeX print
the same digits.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np

from adaptlab.analysis.compare_inputs import (
    FRAME_COLUMNS,
    Directions,
    Groups,
    _from_frame,
    _from_mapping,
    _select_systems,
    _stored_directions,
    store_groups,
)
from adaptlab.analysis.present import (
    ALPHA,
    RULE,
    CellValue,
    Estimate,
    headline_pair,
    render_table,
    verdict_line,
    warn_lookalike_names,
)
from adaptlab.errors import ConfigError, DataError
from adaptlab.evaluation.summary import GroupSummary, summarise_arrays
from adaptlab.evaluation.workers import BootstrapGroup
from adaptlab.stats import BootstrapConfig, ranks_from_tests
from adaptlab.stats.pvalues import ci_label, p_value_note
from adaptlab.stats.settings import resolve_bootstrap

__all__ = [
    "FRAME_COLUMNS",
    "Comparison",
    "GroupComparison",
    "compare",
    "minimum_detectable_effect",
    "store_groups",
]

DEFAULT_POWER: float = 0.8
"""The power of the minimum detectable effect column."""


def minimum_detectable_effect(diffs: Any, *, alpha: float = ALPHA, power: float = DEFAULT_POWER) -> float:
    """``(z_{1-alpha/2} + z_{power}) * sd(d) / sqrt(Q)`` of per-query differences ``d`` (module doc)."""
    d = np.asarray(diffs, dtype=np.float64).ravel()
    if d.size < 2:
        raise DataError(f"the minimum detectable effect needs at least 2 queries, got {d.size}")
    if not (0.0 < alpha < 1.0 and 0.0 < power < 1.0):
        raise ConfigError(f"alpha and power must be strictly between 0 and 1, got alpha={alpha}, power={power}")
    z = NormalDist().inv_cdf(1.0 - alpha / 2.0) + NormalDist().inv_cdf(power)
    return float(z * d.std(ddof=1) / np.sqrt(d.size))


@dataclass(frozen=True)
class GroupComparison:
    """One dataset and measure: ``values[i]`` are system ``names[i]``'s per-query values."""

    dataset: str
    measure: str
    names: tuple[str, ...]
    values: np.ndarray
    systems: list[dict[str, Any]]
    pairs: list[dict[str, Any]]


def _letters(n: int) -> list[str]:
    """``a`` .. ``z`` for up to 26 systems; beyond, ``aa``, ``ab``, ... for every system (as
    spreadsheet columns), so a scale study's 30 systems still get one label each."""
    abc = string.ascii_lowercase
    if n <= len(abc):
        return list(abc[:n])
    return [abc[i // len(abc)] + abc[i % len(abc)] for i in range(n)]


def _letter_list(letters: list[str]) -> str:
    """The letters of the systems one is better than: ``"abd"``, or ``"aa,ab"`` for two-letter labels."""
    return ("," if any(len(x) > 1 for x in letters) else "").join(sorted(letters))


def _oriented_pairs(names: tuple[str, ...], directions: Directions) -> list[tuple[str, str]]:
    """Every pair, the first named system minus the second (``i < j``), unless the store holds it
    the other way round (``(names[j], names[i])`` in ``directions``): then as stored, so compare
    prints a difference in the direction ``run`` printed and stored it."""
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            out.append((b, a) if (b, a) in directions and (a, b) not in directions else (a, b))
    return out


def _pair_rows(
    group: GroupSummary, values: np.ndarray, boot: BootstrapConfig, alpha: float, power: float
) -> list[dict[str, Any]]:
    """Every pair of the summary (:func:`_oriented_pairs`): its paired CI, p and adjusted p as
    the evaluation summary holds them, and the minimum detectable effect."""
    col = {n: i for i, n in enumerate(group.names)}
    return [
        {
            "a": p.a,
            "b": p.b,
            "diff": p.diff,
            "ci_low": p.ci_low,
            "ci_high": p.ci_high,
            "p_value": p.p_value,
            "p_adjusted": p.p_adjusted,
            "adjustment": p.adjustment,
            "test": p.test,
            "interval": p.interval,
            "p_bound": p.p_bound,
            "p_adjusted_bound": p.p_adjusted_bound,
            "p_text": p.p_text,
            "p_adjusted_text": p.p_adjusted_text,
            "family_size": p.family_size,
            "n_resamples": boot.n_resamples,
            "p_draws": p.p_draws,
            "mde": minimum_detectable_effect(values[col[p.a]] - values[col[p.b]], alpha=alpha, power=power),
        }
        for p in group.pairs
    ]


def _better_than(names: tuple[str, ...], pairs: list[dict[str, Any]], alpha: float) -> dict[str, list[str]]:
    """For each system, the names of those it is significantly better than."""
    out: dict[str, list[str]] = {n: [] for n in names}
    for p in pairs:
        if p["p_adjusted"] < alpha and p["diff"] != 0:
            win, lose = (p["a"], p["b"]) if p["diff"] > 0 else (p["b"], p["a"])
            out[win].append(lose)
    return out


def _compare_group(
    group: GroupSummary, values: np.ndarray, boot: BootstrapConfig, alpha: float, power: float
) -> GroupComparison:
    """Letters, rank intervals and detectable effects of one (dataset, measure) group, built on
    its evaluation summary (CIs, paired tests, adjusted p)."""
    names = group.names
    pairs = _pair_rows(group, values, boot, alpha, power)
    col = {n: i for i, n in enumerate(names)}
    ranks = ranks_from_tests(
        values.mean(axis=1),
        [(col[p["a"]], col[p["b"]]) for p in pairs],
        [p["p_adjusted"] for p in pairs],
        alpha=alpha,
        adjustment=boot.adjustment,
        n_resamples=boot.n_resamples,
        sample_size=values.shape[1],
        seed=boot.seed,
    )
    letter = dict(zip(names, _letters(len(names))))
    better = _better_than(names, pairs, alpha)
    systems = [
        {
            "system": n,
            "letter": letter[n],
            "value": s.value,
            "ci_low": s.ci_low,
            "ci_high": s.ci_high,
            "interval": s.interval,
            "better_than": _letter_list([letter[b] for b in better[n]]),
            **ranks.row(i),
            "n_queries": int(values.shape[1]),
        }
        for i, (n, s) in enumerate(zip(names, group.systems))
    ]
    return GroupComparison(group.key[0], group.key[1], names, values, systems, pairs)


def _summarise(groups: Groups, boot: BootstrapConfig, directions: Directions) -> list[GroupSummary]:
    """The evaluation summary of every group: one bootstrap task per (dataset, measure), every
    pair in the direction of :func:`_oriented_pairs`
    (:func:`adaptlab.evaluation.summary.summarise_arrays`)."""
    tasks = [
        BootstrapGroup(key, values, names, None, tuple(_oriented_pairs(names, directions)))
        for key, (names, values) in groups.items()
    ]
    return summarise_arrays(tasks, boot)


@dataclass(frozen=True)
class Comparison:
    """The result of :func:`compare`: one :class:`GroupComparison` per (dataset, measure)."""

    groups: list[GroupComparison]
    boot: BootstrapConfig
    alpha: float
    power: float

    def frame(self) -> Any:
        """One row per (dataset, measure, system): value, CI, letter, better_than, rank interval,
        tied_with_best (a pandas DataFrame)."""
        import pandas as pd

        return pd.DataFrame([{"dataset": g.dataset, "measure": g.measure, **s} for g in self.groups for s in g.systems])

    def pairs_frame(self) -> Any:
        """One row per (dataset, measure, pair): diff, CI, p, adjusted p, test, MDE (a DataFrame)."""
        import pandas as pd

        return pd.DataFrame([{"dataset": g.dataset, "measure": g.measure, **p} for g in self.groups for p in g.pairs])

    def verdict(self) -> str:
        """The one-line verdict of the first (dataset, measure) group
        (:func:`adaptlab.analysis.present.verdict_line`), from the numbers of its pairs table."""
        g = self.groups[0] if self.groups else None
        if g is None or not g.pairs:
            return ""
        row = headline_pair(
            [{**p, "measure": g.measure} for p in g.pairs], {s["system"]: s["value"] for s in g.systems}
        )
        return "" if row is None else verdict_line(row, alpha=self.alpha)

    def render(self, style: str = "text") -> str:
        """The verdict, then both tables (systems, then pairs) in ``style``
        (:data:`adaptlab.analysis.present.STYLES`)."""
        lead = "% " if style == "latex" else ""  # a LaTeX comment: compiles as is
        footer = lead + self._footer()
        verdict = self.verdict()
        top = [f"{lead}verdict: {verdict}"] if verdict else []
        return "\n\n".join(
            [*top, render_table(*self._system_table(), style), render_table(*self._pair_table(), style), footer]
        )

    def to_markdown(self) -> str:
        return self.render("markdown")

    def to_latex(self) -> str:
        return self.render("latex")

    def __str__(self) -> str:
        return self.render("text")

    def _methods(self, kind: str) -> list[str]:
        """The interval methods of the systems' (``kind`` "systems") or the pairs' CIs."""
        return sorted({str(r["interval"]) for g in self.groups for r in getattr(g, kind)})

    def _system_table(self) -> tuple[list[str], list[Sequence[CellValue] | str]]:
        methods = self._methods("systems")
        mixed = len(methods) > 1  # e.g. Wilson for acc@k, studentized for nDCG: named per row
        ci = ci_label(self.boot.confidence, None if mixed else methods[0] if methods else None)
        header = (
            ["dataset", "measure", "", "system", f"value [{ci}]"]
            + (["CI method"] if mixed else [])
            + ["better than", "rank [interval]", "tied with best"]
        )
        rows: list[Sequence[CellValue] | str] = []
        for g in self.groups:
            rows += [RULE] if rows else []
            rows += [
                [g.dataset, g.measure, s["letter"], s["system"], Estimate(s["value"], s["ci_low"], s["ci_high"])]
                + ([s["interval"]] if mixed else [])
                + [
                    s["better_than"],
                    f"{s['rank']} [{s['rank_low']}, {s['rank_high']}]",
                    "yes" if s["tied_with_best"] else "no",
                ]
                for s in g.systems
            ]
        return header, rows

    def _pair_table(self) -> tuple[list[str], list[Sequence[CellValue] | str]]:
        methods = self._methods("pairs")
        header = [
            "dataset",
            "measure",
            "a - b",
            f"difference [{ci_label(self.boot.confidence, methods[0] if len(methods) == 1 else None)}]",
            "p",
            f"p ({self.boot.adjustment})",
            f"MDE ({self.power:.0%} power)",
        ]
        rows: list[Sequence[CellValue] | str] = []
        for g in self.groups:
            rows += [RULE] if rows else []
            rows += [
                [
                    g.dataset,
                    g.measure,
                    f"{p['a']} - {p['b']}",
                    Estimate(p["diff"], p["ci_low"], p["ci_high"], marked=p["p_adjusted"] < self.alpha),
                    p["p_text"],
                    p["p_adjusted_text"],
                    p["mde"],
                ]
                for p in g.pairs
            ]
        return header, rows

    def _footer(self) -> str:
        return (
            f"letters: each system lists the systems it is significantly better than "
            f"(p adjusted by {self.boot.adjustment} < {self.alpha}); \u2020 after a difference: the same "
            f"(adjusted p < {self.alpha}); tied with best: no system is significantly better (rank "
            f"intervals and tied set from the same tests; {self._rank_guarantee()}); "
            f"MDE: (z(1-alpha/2) + z(power)) * sd(d) / sqrt(Q); {self._p_note()}"
        )

    def _rank_guarantee(self) -> str:
        if self.boot.adjustment != "holm":
            return f"no simultaneous guarantee with adjustment {self.boot.adjustment}"
        return f"with probability >= {1 - self.alpha:g} all hold at once and the best is in the tied set"

    def _n_queries(self) -> int:
        return min((int(g.values.shape[1]) for g in self.groups), default=0)

    def _p_note(self) -> str:
        """The tests behind the p column and the most sign vectors one family drew."""
        pairs = [p for g in self.groups for p in g.pairs]
        return p_value_note(
            self._n_queries(),
            self.boot.n_resamples,
            tests=sorted({p["test"] for p in pairs}),
            n_vectors=max((p["p_draws"] for p in pairs), default=0),
        )


def compare(
    per_query: Any,
    *,
    measures: Sequence[str] | str | None = None,
    dataset: str | None = None,
    systems: Sequence[str] | None = None,
    boot: BootstrapConfig | None = None,
    alpha: float = ALPHA,
    power: float = DEFAULT_POWER,
) -> Comparison:
    """Compare every pair of systems on every dataset and measure (module doc).

    Parameters
    ----------
    per_query : mapping, DataFrame or ResultsStore
        ``{system: adaptlab.evaluate(...) result}``, ``{system: {measure: values}}`` (the same
        query order for every system), a long DataFrame with columns ``system``, ``query_id``,
        ``measure``, ``value`` (and optionally ``dataset``; systems and queries in the order they
        first appear, which fixes the letters and the resamples), or a results store
        (``adaptlab.results.open(uri)``) whose latest per-query records are re-scored.
    measures : str or sequence of str, optional
        The measures to compare (default: all given; a store: ``ndcg@10``).
    dataset : str, optional
        The dataset's name (a store: only this dataset).
    systems : sequence of str, optional
        Only these systems, in this order: each difference is the first named system minus the
        second (default: all, in input order; a store's pairs keep the direction they were
        stored in, which is the direction ``adaptlab run`` printed).
    boot : BootstrapConfig, optional
        Seed, resamples and p-value adjustment (default ``BootstrapConfig()``).
    alpha : float
        The level of the letters.
    power : float
        The power of each pair's minimum detectable effect.

    Returns
    -------
    Comparison
        ``frame()`` (systems: value, CI, letter, better_than, rank interval), ``pairs_frame()``
        (pairs: diff, CI, p, adjusted p, MDE) and ``render(style)``.

    Examples
    --------
    >>> from adaptlab.stats import BootstrapConfig
    >>> per_query = {"ft": {"acc@1": [1, 1, 1, 0, 1, 1, 1, 0]}, "base": {"acc@1": [0, 1, 0, 0, 1, 0, 1, 0]}}
    >>> c = compare(per_query, boot=BootstrapConfig(n_resamples=200))
    >>> c.frame()[["system", "value", "letter"]].values.tolist()
    [['ft', 0.75, 'a'], ['base', 0.375, 'b']]
    >>> pair = c.pairs_frame().iloc[0]
    >>> pair["a"], pair["b"], float(pair["diff"])
    ('ft', 'base', 0.375)
    """
    boot = resolve_bootstrap("compare", boot, config_key="boot")
    measures = measures.split(",") if isinstance(measures, str) else measures
    if isinstance(per_query, (str, Path)):
        raise ConfigError(f"compare: open the store first: compare(adaptlab.results.open({str(per_query)!r}))")
    directions: Directions = frozenset()
    if hasattr(per_query, "per_query"):
        groups = store_groups(per_query, dataset, measures)
        directions = _stored_directions(per_query) if systems is None else frozenset()
    elif hasattr(per_query, "columns") and hasattr(per_query, "groupby"):
        groups = _from_frame(per_query, dataset, measures)
    elif isinstance(per_query, Mapping) and len(per_query) >= 2:
        groups = _from_mapping(per_query, dataset or "", measures)
    else:
        raise ConfigError(
            "compare needs a results store, a DataFrame or a mapping {system: per-query values} "
            f"of at least 2 systems, got {type(per_query).__name__}"
        )
    minimum_detectable_effect([0.0, 0.0], alpha=alpha, power=power)  # checks alpha and power once
    groups = _select_systems(groups, systems)
    warn_lookalike_names([n for names, _ in groups.values() for n in names])
    summaries = _summarise(groups, boot, directions)
    return Comparison(
        [_compare_group(g, v, boot, alpha, power) for g, (_, v) in zip(summaries, groups.values())],
        boot,
        alpha,
        power,
    )
