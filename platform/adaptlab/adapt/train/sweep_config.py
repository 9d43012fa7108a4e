"""The settings of an adaptation sweep as one frozen object, with its defaults defined once.

:class:`SweepConfig` is to :func:`adaptlab.adapt.train.tune.tune_adaptation` what
:class:`~adaptlab.adapt.train.ft.FTConfig` is to fine-tuning: built once, validated on
construction (every error names the field, ``SweepConfig.num_samples = 0: expected an integer >=
1``), passed whole. A study's ``[tune]`` section is validated into one
(:func:`adaptlab.study.adapt_config.parse_tune_section`); it imports neither Ray nor the sweep
driver.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from adaptlab.adapt.train.config import check_at_least_one, check_positive
from adaptlab.adapt.train.space import default_param_space, space_problem
from adaptlab.errors import ConfigError
from adaptlab.metrics.measures import Measure
from adaptlab.models.variants import FT, TUNABLE_VARIANTS
from adaptlab.stats.settings import BootstrapConfig

__all__ = ["CONFIRM_FRACTION", "SEARCHES", "SweepConfig", "check_confirm_fraction"]

CONFIRM_FRACTION = 0.5
"""Share of the judged validation queries kept out of the selection: the chosen trial is
re-scored on them (:mod:`adaptlab.adapt.train.tune`). Half keeps both intervals about sqrt(2)
wider than one on all queries; a larger share confirms more tightly and selects more noisily."""

SEARCHES: tuple[str, ...] = ("random", "optuna")
"""How trials are drawn: seeded random sampling, or Optuna's TPE (needs optuna)."""


def check_confirm_fraction(value: Any, owner: str = "confirm_fraction") -> float:
    """``value`` as a float strictly between 0 and 1, else a :class:`ConfigError` naming ``owner``."""
    try:
        ok = 0.0 < float(value) < 1.0
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ConfigError(f"{owner} = {value!r}: expected a share strictly between 0 and 1")
    return float(value)


@dataclass(frozen=True, kw_only=True)
class SweepConfig:
    """How a sweep searches, scores and schedules its trials.

    Parameters
    ----------
    param_space : mapping
        Tunable name -> plain entry of :mod:`adaptlab.adapt.train.space` (a list = choice,
        ``{"loguniform": [1e-5, 1e-4]}``, a fixed value); default
        :func:`~adaptlab.adapt.train.space.default_param_space`.
    variant : str
        ``"ft"`` fine-tunes the base model, ``"pt-ft"`` its PT artifact.
    measure : str
        The per-query measure of the objective (``"acc@5"``).
    num_samples : int
        Trials to draw (a grid entry multiplies them).
    search : str
        ``"random"`` (seeded) or ``"optuna"`` (TPE; needs optuna).
    bootstrap : BootstrapConfig
        The objective's bootstrap: a trial's objective is the lower end of its CI.
    confirm_fraction : float
        Share of the validation queries kept apart to re-score the chosen trial.
    grace_period, reduction_factor : int
        ASHA: epochs before a trial may stop, and the share (1/factor) kept at each rung.
    max_epochs : int or None
        ASHA's last rung; None: the largest ``epochs`` the space allows.
    cpus_per_trial, gpus_per_trial : float
        Resources of a trial; ``gpus_per_trial=None`` asks for 1 GPU when the cluster has GPUs.
    max_concurrent_trials : int or None
        At most this many trials at once; None: as many as fit.
    resume : bool
        Restore an experiment already at the storage path (finished trials kept).

    Examples
    --------
    >>> cfg = SweepConfig(param_space={"learning_rate": [1e-5, 1e-4]}, num_samples=2)
    >>> cfg.measure, cfg.bootstrap.n_resamples, cfg.confirm_fraction
    ('acc@5', 1000, 0.5)
    >>> SweepConfig(num_samples=0)
    Traceback (most recent call last):
    adaptlab.errors.ConfigError: SweepConfig.num_samples = 0: expected an integer >= 1
    """

    param_space: Mapping[str, Any] = field(default_factory=default_param_space)
    variant: str = FT
    measure: str = "acc@5"
    num_samples: int = 4
    search: str = "random"
    bootstrap: BootstrapConfig = field(default_factory=BootstrapConfig)
    confirm_fraction: float = CONFIRM_FRACTION
    grace_period: int = 1
    reduction_factor: int = 2
    max_epochs: int | None = None
    cpus_per_trial: float = 1.0
    gpus_per_trial: float | None = None
    max_concurrent_trials: int | None = None
    resume: bool = True

    def __post_init__(self) -> None:
        owner = type(self).__name__
        problem = space_problem(self.param_space)
        if problem is not None:
            path, message = problem
            raise ConfigError(f"{owner}.param_space{'.' + path if path else ''}: {message}")
        object.__setattr__(self, "param_space", dict(self.param_space))
        if self.variant not in TUNABLE_VARIANTS:
            raise ConfigError(
                f"{owner}.variant = {self.variant!r}: expected " + " or ".join(map(repr, TUNABLE_VARIANTS))
            )
        if self.search not in SEARCHES:
            raise ConfigError(f"{owner}.search = {self.search!r}: expected " + " or ".join(map(repr, SEARCHES)))
        try:
            object.__setattr__(self, "measure", str(Measure.parse(self.measure)))
        except ConfigError as e:
            raise ConfigError(f"{owner}.measure: {e}") from e
        if not isinstance(self.bootstrap, BootstrapConfig):
            raise ConfigError(
                f"{owner}.bootstrap must be an adaptlab.stats.BootstrapConfig, got {type(self.bootstrap).__name__}"
            )
        check_confirm_fraction(self.confirm_fraction, f"{owner}.confirm_fraction")
        self._check_schedule(owner)

    def _check_schedule(self, owner: str) -> None:
        """Counts of trials and epochs, ASHA's factor, resources."""
        for name in ("num_samples", "grace_period"):
            check_at_least_one(owner, name, getattr(self, name))
        if (
            isinstance(self.reduction_factor, bool)
            or not isinstance(self.reduction_factor, int)
            or self.reduction_factor < 2
        ):
            raise ConfigError(f"{owner}.reduction_factor = {self.reduction_factor!r}: expected an integer >= 2")
        for name in ("max_epochs", "max_concurrent_trials"):
            if getattr(self, name) is not None:
                check_at_least_one(owner, name, getattr(self, name))
        check_positive(owner, "cpus_per_trial", self.cpus_per_trial)
        gpus = self.gpus_per_trial
        if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, (int, float)) or not gpus >= 0):
            raise ConfigError(
                f"{owner}.gpus_per_trial = {gpus!r}: expected a number >= 0, or None (1 when the cluster has GPUs)"
            )
        if not isinstance(self.resume, bool):
            raise ConfigError(f"{owner}.resume = {self.resume!r}: expected true or false")
