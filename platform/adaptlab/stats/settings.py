"""Bootstrap settings as one frozen value, and every stage's seed derived from one root.

:class:`BootstrapConfig` carries what every bootstrap in a study shares: m resamples
(``n_resamples``) of l queries (``sample_size``; ``None`` = all Q queries), the seed and the CI
level (Roychowdhury et al. 2024, "Towards Understanding Domain Adapted Sentence Embeddings for
Document Retrieval", section 2.1: m = 500, l = 100). It is validated once, here, and passed whole
instead of four loose arguments. :class:`BootstrapOptions` names its fields as keyword options
(``**options: Unpack[BootstrapOptions]``) for the public functions that also take them one by one,
and :func:`resolve_bootstrap` turns either form into one config.

:func:`derive_seed` gives each stage its own seed from the study's root seed:
``SeedSequence(root, spawn_key=sha256(stage)[:4 words])`` -> first 32-bit word of its state.
Different stage names give independent streams; the same (root, stage) always gives the same
seed (NumPy's SeedSequence, O'Neill 2015, "PCG: a family of simple fast space-efficient
statistically good algorithms for random number generation", section 7: seeding).
"""

from __future__ import annotations

import hashlib
import numbers
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any, TypedDict

import numpy as np

from adaptlab.errors import ConfigError
from adaptlab.options import one_way_in, reject_unknown
from adaptlab.stats.intervals import INTERVALS
from adaptlab.stats.pvalues import ADJUSTMENTS, PAIRED_TESTS
from adaptlab.stats.resample import check_seed

__all__ = [
    "BootstrapConfig",
    "BootstrapOptions",
    "ResampleOptions",
    "check_option_keys",
    "derive_seed",
    "resolve_bootstrap",
    "sample_size_note",
]


def derive_seed(root: int, stage: str) -> int:
    """The seed of stage ``stage`` under root seed ``root``: a non-negative 31-bit integer.

    ``spawn_key`` is the stage name's SHA-256 read as four 32-bit words, so the derivation does
    not depend on Python's string hashing and is stable across processes and versions.
    """
    root = check_seed(root)
    if not isinstance(stage, str) or not stage:
        raise ConfigError(f"derive_seed: stage must be a non-empty string, got {stage!r}")
    digest = hashlib.sha256(stage.encode("utf-8")).digest()
    key = tuple(int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4))
    state = np.random.SeedSequence(root, spawn_key=key).generate_state(1, dtype=np.uint32)
    return int(state[0] & 0x7FFFFFFF)


def sample_size_note(sample_size: int, n_queries: int, *, pairs: bool = True) -> str:
    """What ``sample_size`` l below the number of queries Q means, one line for a table note, a
    help text or a warning ("" when l >= Q): each CI is the CI of an l-query mean, about
    sqrt(Q/l) times wider than the CI of the Q-query mean, and (``pairs``) the paired tests
    lose power (with l = 100 of Q = 1000 a true accuracy gain of 0.03 was found in none of the
    simulated studies, against about half with l = Q; issue 23)."""
    l, q = int(sample_size), int(n_queries)
    if l >= q:
        return ""
    txt = (
        f"sample_size {l} < {q} queries: each CI is the CI of an {l}-query mean, about "
        f"{(q / l) ** 0.5:.1f}x wider than the CI of the {q}-query mean"
    )
    if pairs:
        txt += "; paired tests lose power (use sample_size = all queries to test differences)"
    return txt


@dataclass(frozen=True)
class BootstrapConfig:
    """The bootstrap settings, one frozen object: ``m`` resamples of ``l`` queries drawn with
    replacement, seeded, with a CI at ``confidence``.

    Parameters
    ----------
    n_resamples : int
        ``m``, resamples per CI or paired test.
    sample_size : int or None
        ``l``; None (or 0 in a study file) resamples Q queries, Q = the number of queries. Larger
        than Q is an error when the bootstrap runs, unless ``allow_oversampling`` (resamples
        larger than the data understate the variance).
    seed : int
        The root of the resamples' random streams.
    confidence : float
        Coverage of every interval.
    allow_oversampling : bool
        Allow ``sample_size`` > Q.
    interval : str
        How CIs of means are computed, one of :data:`INTERVALS`: ``"auto"`` (default: by the
        measure's definition, :func:`adaptlab.stats.intervals.measure_interval`: Wilson for the
        0/1 measure acc@k, the studentized bootstrap for every other measure and for paired
        differences, percentile when ``sample_size`` < Q), ``"percentile"``, ``"studentized"``,
        ``"bca"``, ``"wilson"`` / ``"jeffreys"`` (for 0/1 measures; others get their ``"auto"``
        interval).
    adjustment : str
        The multiplicity adjustment of paired p-values within one (dataset, measure) family:
        ``"holm"`` (default), ``"bh"`` or ``"none"``; it changes no raw p-value.
    test : str
        The paired test, the same at every number of queries: ``"sign-flip"`` (default; exact
        where the differences allow, else Monte Carlo sized to the family) or ``"bootstrap"``
        (the two-sided bootstrap p-value, only when asked for).

    Examples
    --------
    >>> boot = BootstrapConfig(n_resamples=500, sample_size=100, seed=3)  # the setting of paper 000
    >>> boot.kwargs()["n_resamples"], boot.with_seed(4).seed
    (500, 4)
    >>> BootstrapConfig(sample_size=0).sample_size is None
    True
    """

    n_resamples: int = 1000
    sample_size: int | None = None
    seed: int = 0
    confidence: float = 0.95
    allow_oversampling: bool = False
    interval: str = "auto"
    adjustment: str = "holm"
    test: str = "sign-flip"

    def __post_init__(self) -> None:
        if (
            isinstance(self.n_resamples, bool)
            or not isinstance(self.n_resamples, (int, np.integer))
            or self.n_resamples < 1
        ):
            raise ConfigError(f"n_resamples must be a positive integer, got {self.n_resamples!r}")
        if self.sample_size == 0:
            object.__setattr__(self, "sample_size", None)
        if self.sample_size is not None and (
            isinstance(self.sample_size, bool)
            or not isinstance(self.sample_size, (int, np.integer))
            or self.sample_size < 1
        ):
            raise ConfigError(f"sample_size must be a positive integer or None (all queries), got {self.sample_size!r}")
        object.__setattr__(self, "seed", check_seed(self.seed))
        if (
            isinstance(self.confidence, bool)
            or not isinstance(self.confidence, numbers.Real)
            or not 0.0 < float(self.confidence) < 1.0
        ):
            raise ConfigError(f"confidence must be a number strictly between 0 and 1, got {self.confidence!r}")
        if not isinstance(self.allow_oversampling, (bool, np.bool_)):
            raise ConfigError(f"allow_oversampling must be true or false, got {self.allow_oversampling!r}")
        object.__setattr__(self, "allow_oversampling", bool(self.allow_oversampling))
        if self.interval not in INTERVALS:
            raise ConfigError(f"interval={self.interval!r} is not valid; expected one of {', '.join(INTERVALS)}")
        if self.adjustment not in ADJUSTMENTS:
            raise ConfigError(f"adjustment={self.adjustment!r} is not valid; expected one of {', '.join(ADJUSTMENTS)}")
        if self.test not in PAIRED_TESTS:
            raise ConfigError(f"test={self.test!r} is not valid; expected one of {', '.join(PAIRED_TESTS)}")

    def kwargs(self) -> dict[str, Any]:
        """``n_resamples``, ``sample_size``, ``seed``, ``confidence``, ``allow_oversampling``
        and ``interval`` as keyword arguments of :func:`~adaptlab.stats.bootstrap.bootstrap_ci`
        and :func:`~adaptlab.stats.bootstrap.paired_bootstrap` (``adjustment`` is applied
        after the tests, not by them; ``test`` is in :meth:`paired_kwargs`)."""
        out = asdict(self)
        out.pop("adjustment")
        out.pop("test")
        return out

    def paired_kwargs(self) -> dict[str, Any]:
        """:meth:`kwargs` plus ``test``: the keyword arguments of
        :func:`~adaptlab.stats.bootstrap.paired_bootstrap`."""
        return {**self.kwargs(), "test": self.test}

    def with_seed(self, seed: int) -> BootstrapConfig:
        return replace(self, seed=seed)


class ResampleOptions(TypedDict, total=False):
    """The :class:`BootstrapConfig` fields one bootstrap call uses, as keyword options (those of
    :meth:`BootstrapConfig.kwargs`); their defaults are the config's."""

    n_resamples: int
    sample_size: int | None
    seed: int
    confidence: float
    allow_oversampling: bool
    interval: str


class BootstrapOptions(ResampleOptions, total=False):
    """Every :class:`BootstrapConfig` field as a keyword option (``adjustment`` and ``test`` too)."""

    adjustment: str
    test: str


def check_option_keys(function: str, options: Mapping[str, Any], valid: type) -> None:
    """:func:`adaptlab.options.reject_unknown` against the keys of the TypedDict ``valid`` (what
    ``**options: Unpack[valid]`` accepts)."""
    reject_unknown(function, options, valid.__optional_keys__ | valid.__required_keys__)  # type: ignore[attr-defined]  # a TypedDict class


def resolve_bootstrap(
    function: str,
    config: BootstrapConfig | None,
    *,
    config_key: str = "bootstrap",
    aliases: Mapping[str, str] | None = None,
    **loose: Any,
) -> BootstrapConfig:
    """The bootstrap settings of the public function ``function``, given one way only.

    ``config`` (the argument named ``config_key``) when given, else the ``loose`` keyword
    arguments (named as ``function`` names them) as one validated :class:`BootstrapConfig`; a loose value ``None`` means "not
    given" (the config's default). Both at once is a :class:`~adaptlab.errors.ConfigError`
    naming ``function``, ``config_key`` and the loose keys given: a setting has one way in and
    never a silent winner (DESIGN.md, scikit-learn's ``_param_validation``). ``aliases`` maps a
    loose key to its config field where the names differ (``{"ci_seed": "seed"}``).
    """
    given = {k: v for k, v in loose.items() if v is not None}
    if config is None:
        names = aliases or {}
        return BootstrapConfig(**{names.get(k, k): v for k, v in given.items()})
    return one_way_in(function, BootstrapConfig, config, given, config_key)
