"""The parameter-space language of adaptation sweeps, Ray-free.

A space maps tunable names (:data:`TUNABLE`) to plain entries, as a study file's
``[tune].param_space`` writes them:

- a list: a choice among its values (``epochs = [1, 2, 3]``);
- a one-key table ``{kind = [args]}`` with ``kind`` one of :data:`PARAM_DOMAINS`
  (``learning_rate = {loguniform = [1e-5, 1e-4]}``, ``batch_size = {grid = [16, 32]}``);
- a number or a string: a fixed value.

:func:`space_problem` checks a space whole (names, the scale/temperature pair, every entry's shape
and bounds) without importing Ray, so a study is checked when it loads;
:func:`build_param_space` turns a checked space into Ray Tune's (it imports Ray, when a sweep
runs); :func:`largest_value` reads the largest value a trial can draw (the memory a trial declares,
the epochs ASHA's last rung stands at). The sweep itself is :mod:`adaptlab.adapt.train.tune`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "PARAM_DOMAINS",
    "TUNABLE",
    "build_param_space",
    "conflicting_params",
    "default_param_space",
    "largest_value",
    "param_spec_problem",
    "space_problem",
]

TUNABLE: tuple[str, ...] = (
    "batch_size",
    "epochs",
    "learning_rate",
    "merge_weight",
    "num_negatives",
    "scale",
    "temperature",
    "warmup_ratio",
    "weight_decay",
)
"""Names a space may use (FTConfig fields, ``temperature`` = 1/scale, merge weight)."""

PARAM_DOMAINS: dict[str, str] = {
    "choice": "choice",
    "grid": "grid_search",
    "uniform": "uniform",
    "loguniform": "loguniform",
    "randint": "randint",
    "quniform": "quniform",
}
"""The kinds a table entry (``{kind = [args]}``) may use, and the Ray Tune function that builds
each (:func:`build_param_space`)."""

_RANGE_ARITY = {"uniform": 2, "loguniform": 2, "randint": 2, "quniform": 3}


def default_param_space() -> dict[str, Any]:
    """A modest default space: lr log-uniform in [1e-5, 1e-4], 1-3 epochs, 1/3/7 hard negatives,
    batch 16/32, scale 20 or 50 (temperature 0.05 or 0.02).

    >>> default_param_space()["epochs"]
    [1, 2, 3]
    """
    return {
        "learning_rate": {"loguniform": [1e-5, 1e-4]},
        "epochs": [1, 2, 3],
        "num_negatives": [1, 3, 7],
        "batch_size": [16, 32],
        "scale": [20.0, 50.0],
    }


def param_spec_problem(spec: Any) -> tuple[str, str] | None:
    """What is wrong with one entry: None when it is a non-empty list (a choice), a one-key table
    ``{kind = [args]}`` with a kind of :data:`PARAM_DOMAINS` and arguments Ray Tune accepts, or a
    fixed number or string; else ``(where, expected)`` with ``where`` the key path below the
    entry (``""``, ``"loguniform"``)."""
    if isinstance(spec, list):
        return None if spec else ("", "a non-empty list of values")
    if isinstance(spec, Mapping):
        if len(spec) != 1 or next(iter(spec)) not in PARAM_DOMAINS:
            return "", "a table with one key of " + ", ".join(sorted(PARAM_DOMAINS))
        kind, args = next(iter(spec.items()))
        if not isinstance(args, list) or not args:
            return kind, "a non-empty list"
        if kind in _RANGE_ARITY:
            want = _RANGE_ARITY[kind]
            if len(args) != want or not all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args):
                return kind, f"a list of {want} numbers"
            problem = _bounds_problem(kind, *args)
            return None if problem is None else (kind, f"valid bounds ({problem})")
        return None
    if isinstance(spec, (int, float, str)) and not isinstance(spec, bool):
        return None
    return "", "a list, a table or a number"


def _bounds_problem(kind: str, low: float, high: float, q: float = 1.0) -> str | None:
    """Why Ray Tune's ``kind`` domain over [low, high) (step ``q``) would be empty or refused."""
    if not math.isfinite(low) or not math.isfinite(high) or not low < high:
        return "finite lower < upper"
    if kind == "loguniform" and low <= 0:
        return "a lower bound > 0"
    if kind == "randint" and not (float(low).is_integer() and float(high).is_integer()):
        return "integer bounds"
    if kind == "quniform":
        if not (math.isfinite(q) and q > 0):
            return "a step q > 0"
        if not all(math.isclose(b / q, round(b / q)) for b in (low, high)):
            return "bounds divisible by q"
    return None


def conflicting_params(names: Sequence[str] | Mapping[str, Any]) -> str | None:
    """Why these names cannot be swept together, or None: ``scale`` and ``temperature``
    (= 1/scale) set the same thing."""
    if "scale" in names and "temperature" in names:
        return "give either scale or temperature (= 1/scale), not both"
    return None


def space_problem(space: Any) -> tuple[str, str] | None:
    """What is wrong with a whole space, or None: ``(path, message)`` with ``path`` the key path
    below the space (``""``, ``"epochs"``, ``"epochs.randint"``) and ``message`` what is wrong.

    >>> space_problem({"epochs": [1, 2], "learning_rate": {"loguniform": [1e-5, 1e-4]}}) is None
    True
    >>> space_problem({"epochs": {"randint": [1.5, 4]}})
    ('epochs.randint', 'expected valid bounds (integer bounds), got [1.5, 4]')
    >>> space_problem({"momentum": [0.9]})[1]
    "unknown parameter 'momentum'; tunable: batch_size, epochs, learning_rate, merge_weight, \
num_negatives, scale, temperature, warmup_ratio, weight_decay"
    """
    if not isinstance(space, Mapping):
        return "", f"expected a table of parameters, got {space!r}"
    if not space:
        return "", "expected at least one parameter, got {}"
    unknown = sorted(set(space) - set(TUNABLE))
    if unknown:
        return "", f"unknown parameter {unknown[0]!r}; tunable: {', '.join(TUNABLE)}"
    conflict = conflicting_params(space)
    if conflict is not None:
        return "", conflict
    for name, spec in space.items():
        problem = param_spec_problem(spec)
        if problem is not None:
            where, expected = problem  # where: "" (the entry) or its kind (its arguments)
            got = spec[where] if where else (dict(spec) if isinstance(spec, Mapping) else spec)
            return (f"{name}.{where}" if where else name), f"expected {expected}, got {got!r}"
    return None


def build_param_space(specs: Mapping[str, Any]) -> dict[str, Any]:
    """Ray Tune's ``param_space`` from a space :func:`space_problem` accepts: a list is a
    choice, ``{kind = [args]}`` the :data:`PARAM_DOMAINS` function of ``kind``, anything else a
    fixed value. Imports ray."""
    from ray import tune  # deferred: the language itself needs no Ray

    space: dict[str, Any] = {}
    for name, spec in specs.items():
        if isinstance(spec, list):
            space[name] = tune.choice(spec)
        elif isinstance(spec, Mapping):
            kind, args = next(iter(spec.items()))
            make = getattr(tune, PARAM_DOMAINS[kind])
            space[name] = make(args) if kind in ("choice", "grid") else make(*args)
        else:
            space[name] = spec
    return space


def largest_value(space: Mapping[str, Any], name: str, default: int) -> int:
    """The largest value a trial can draw for ``name`` as an integer: the largest of a choice or
    a grid, the upper bound of a range, a fixed value; ``default`` when the space does not set it.

    >>> largest_value({"batch_size": {"grid": [16, 32]}, "epochs": 2}, "batch_size", 8)
    32
    >>> largest_value({"epochs": {"randint": [1, 4]}}, "epochs", 1), largest_value({}, "epochs", 1)
    (4, 1)
    """
    spec = space.get(name)
    if isinstance(spec, list):
        return int(max(spec))
    if isinstance(spec, Mapping):
        kind, args = next(iter(spec.items()))
        return int(max(args)) if kind in ("choice", "grid") else int(args[1])
    return int(spec) if isinstance(spec, (int, float)) and not isinstance(spec, bool) else default
