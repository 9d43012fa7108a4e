"""``ThresholdResult``: the thresholds on the grid, the chosen one, their accuracies and losses with
CIs, and its rows for the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from adaptlab.analysis._rows import metric_row


@dataclass(frozen=True)
class ThresholdResult:
    """Thresholds ``tau(psi)`` on a grid of ``psi`` and the one chosen by ``test``.

    Arrays are indexed like ``psi``. ``acc`` is the thresholded accuracy on all queries and
    ``removed`` the fraction of retrieved top-K documents below ``tau``. ``acc_boot_mean`` /
    ``acc_ci_*`` and ``loss_*`` (paired loss ``a_j - a_j(tau)``) are taken on the resamples of
    ``test`` (all ``Q`` queries for ``"margin"``, ``m x l`` for ``"paper"``). ``paper_pass`` and
    ``margin_pass`` say which ``psi`` pass each rule; ``chosen`` is the index chosen by ``test``,
    ``chosen_paper`` / ``chosen_margin`` by each rule (``None``: no threshold passes).
    ``lost`` is the number of lost queries at each ``tau``, ``loss_upper`` its one-sided
    Clopper-Pearson upper bound as a loss fraction, ``exact_pass`` the fixed-sequence result
    and ``chosen_exact`` the exact rule's choice. Accuracies are fractions in [0, 1].
    """

    system: str
    dataset: str
    k: int
    test: str
    gamma: str
    margin: float
    psi: np.ndarray
    tau: np.ndarray
    acc: np.ndarray
    removed: np.ndarray
    acc_boot_mean: np.ndarray
    acc_ci_low: np.ndarray
    acc_ci_high: np.ndarray
    loss_boot_mean: np.ndarray
    loss_ci_low: np.ndarray
    loss_ci_high: np.ndarray
    paper_pass: np.ndarray
    margin_pass: np.ndarray
    base_acc: float
    base_boot_mean: float
    base_ci_low: float
    base_ci_high: float
    chosen: int | None
    chosen_paper: int | None
    chosen_margin: int | None
    confidence: float
    n_queries: int
    n_excluded: int
    n_resamples: int
    sample_size: int
    seed: int
    lost: np.ndarray | None = None
    loss_upper: np.ndarray | None = None
    exact_pass: np.ndarray | None = None
    chosen_exact: int | None = None

    @property
    def chosen_psi(self) -> float:
        return float(self.psi[self.chosen]) if self.chosen is not None else float("nan")

    @property
    def chosen_tau(self) -> float:
        return float(self.tau[self.chosen]) if self.chosen is not None else float("nan")

    def at_chosen(self) -> dict[str, float]:
        """At the chosen threshold: tau, psi, accuracy (value, boot_mean, ci_low, ci_high), the
        loss (loss, loss_ci_low, loss_ci_high) and the fraction of top-K documents removed."""
        keys = (
            "tau",
            "psi",
            "value",
            "boot_mean",
            "ci_low",
            "ci_high",
            "loss",
            "loss_boot_mean",
            "loss_ci_low",
            "loss_ci_high",
            "removed",
            "loss_upper",
        )
        if self.chosen is None:
            return dict.fromkeys(keys, float("nan"))
        i = self.chosen
        upper = self.loss_upper[i] if self.loss_upper is not None else float("nan")
        vals = (
            self.tau[i],
            self.psi[i],
            self.acc[i],
            self.acc_boot_mean[i],
            self.acc_ci_low[i],
            self.acc_ci_high[i],
            self.base_acc - self.acc[i],
            self.loss_boot_mean[i],
            self.loss_ci_low[i],
            self.loss_ci_high[i],
            self.removed[i],
            upper,
        )
        return {k: float(v) for k, v in zip(keys, vals)}

    def _choice(self, i: int | None) -> dict[str, float | None]:
        if i is None:
            return {"psi": None, "tau": None}
        return {"psi": float(self.psi[i]), "tau": float(self.tau[i])}

    def to_metric_rows(self) -> list[dict[str, Any]]:
        """Rows ``threshold`` (value = tau; extra: k, psi, test, margin, both rules' choices, the
        removed fraction and the whole grid), ``acc_at_threshold`` (accuracy at tau with its CI)
        and ``threshold_loss`` (the paired loss with its CI; for ``test="exact"`` the one-sided
        Clopper-Pearson interval ``[0, U]``, ``interval_method`` ``"clopper-pearson-upper"``)."""
        l = self.sample_size if self.test == "paper" else self.n_queries
        common: dict[str, Any] = {
            "n_queries": self.n_queries,
            "n_resamples": self.n_resamples,
            "sample_size": l,
            "seed": self.seed,
            "confidence": self.confidence,
            "interval_method": "percentile",
        }
        at = self.at_chosen()
        loss_ci: dict[str, Any] = {"ci_low": at["loss_ci_low"], "ci_high": at["loss_ci_high"], **common}
        if self.test == "exact":
            loss_ci.update(
                ci_low=0.0 if self.chosen is not None else float("nan"),
                ci_high=at["loss_upper"],
                interval_method="clopper-pearson-upper",
            )
        grid = {
            "psi": [float(x) for x in self.psi],
            "tau": [float(x) for x in self.tau],
            "acc_boot_mean": [float(x) for x in self.acc_boot_mean],
            "removed": [float(x) for x in self.removed],
            "loss_ci_high": [float(x) for x in self.loss_ci_high],
            "paper_pass": [bool(x) for x in self.paper_pass],
            "margin_pass": [bool(x) for x in self.margin_pass],
        }
        if self.loss_upper is not None and self.exact_pass is not None:
            grid.update(loss_upper=[float(x) for x in self.loss_upper], exact_pass=[bool(x) for x in self.exact_pass])
        rule = {"k": self.k, "psi": at["psi"], "test": self.test, "gamma": self.gamma, "margin": self.margin}
        return [
            metric_row(
                self.system,
                self.dataset,
                "threshold",
                at["tau"],
                extra={
                    **rule,
                    "removed": at["removed"],
                    "grid": grid,
                    "n_excluded": self.n_excluded,
                    "paper": self._choice(self.chosen_paper),
                    "margin_rule": self._choice(self.chosen_margin),
                    "exact_rule": self._choice(self.chosen_exact),
                },
                **common,
            ),
            metric_row(
                self.system,
                self.dataset,
                "acc_at_threshold",
                at["value"],
                boot_mean=at["boot_mean"],
                ci_low=at["ci_low"],
                ci_high=at["ci_high"],
                extra={
                    **rule,
                    "tau": at["tau"],
                    "base_acc": self.base_acc,
                    "base_boot_mean": self.base_boot_mean,
                    "removed": at["removed"],
                },
                **common,
            ),
            metric_row(
                self.system,
                self.dataset,
                "threshold_loss",
                at["loss"],
                boot_mean=at["loss_boot_mean"],
                extra={**rule, "tau": at["tau"]},
                **loss_ci,
            ),
        ]
