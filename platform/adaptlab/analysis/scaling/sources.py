"""Inputs of the scaling fits: the training seconds of the store's runs, a results store's per-query
records and ``{system: PerQueryRecords}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from adaptlab.analysis.scaling.fit import fit_scaling
from adaptlab.analysis.scaling.result import ScalingFit
from adaptlab.errors import ConfigError, StoreError
from adaptlab.models.variants import PT, PT_FT, parse_system_name, system_name
from adaptlab.stats import BootstrapConfig


def _seconds_of(info: Any) -> float | None:
    """The training seconds of one ``config.systems`` entry: ``training.seconds`` (bi-encoder
    loops) or ``training.wall_s`` (ColBERT), else those of its artifact's manifest."""
    if not isinstance(info, dict):
        return None
    t = info.get("training")
    if not t and info.get("artifact_path"):
        from adaptlab.adapt.train.artifacts import read_manifest

        try:
            t = read_manifest(str(info["artifact_path"])).get("training")
        except StoreError:
            t = None
    s = t.get("seconds", t.get("wall_s")) if isinstance(t, dict) else None
    return float(s) if isinstance(s, (int, float)) and not isinstance(s, bool) and s > 0 else None


def training_seconds(runs: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """``{system: seconds}`` of each adapted model's training, from ``config.systems.<name>`` of
    the store's runs (the latest run's entry wins; see :func:`_seconds_of`). A ``pt-ft`` model
    adds the seconds of its PT stage (``<label>-pt-s<N>``) to those of its FT stage; a model
    without a recorded time (a merge trains nothing) is left out."""
    out: dict[str, float] = {}
    for run in runs:
        try:
            config = json.loads(run.get("config") or "{}")
        except (TypeError, ValueError):
            continue
        entries = config.get("systems") if isinstance(config, dict) else None
        for name, info in entries.items() if isinstance(entries, dict) else ():
            seconds = _seconds_of(info)
            if seconds is not None:
                out[str(name)] = seconds
    for name in list(out):
        parsed = parse_system_name(name)
        if parsed is not None and parsed[1] == PT_FT and system_name(parsed[0], PT, parsed[2]) in out:
            out[name] += out[system_name(parsed[0], PT, parsed[2])]
    return out


def _store_fits(
    store: Any,
    measures: Sequence[str],
    dataset: str | None,
    target: float | None,
    boot: BootstrapConfig | None,
    model: str,
) -> tuple[list[ScalingFit], Any]:
    """:func:`fit_scaling` of every (dataset, measure) group of the store's records, and the groups."""
    from adaptlab.analysis.compare import store_groups

    groups = store_groups(store, dataset, list(measures))
    seconds = training_seconds(store.runs().to_pylist())
    fits = []
    for (ds, m), (names, values) in groups.items():
        fits += fit_scaling(
            dict(zip(names, values)), m, dataset=ds, target=target, boot=boot, training_seconds=seconds, model=model
        )
    return fits, groups


def scaling_from_store(
    store: Any,
    measure: str = "ndcg@10",
    *,
    dataset: str | None = None,
    target: float | None = None,
    boot: BootstrapConfig | None = None,
    model: str = "auto",
) -> list[ScalingFit]:
    """:func:`fit_scaling` on a results store's latest per-query records (re-scored as
    :func:`adaptlab.compare` does), every dataset (or ``dataset``), with the training seconds of
    its runs."""
    fits, groups = _store_fits(store, [measure], dataset, target, boot, model)
    if not fits:
        have = "; ".join(f"{ds}: {', '.join(names)}" for (ds, _m), (names, _v) in groups.items())
        raise ConfigError(
            "no scale-study variant with at least 2 scales and its own <label>-base on one dataset "
            f"(systems named <label>-<variant>-s<N>); the store has {have}"
        )
    return fits


def scaling_from_records(
    records: Mapping[str, Any],
    measure: str = "ndcg@10",
    *,
    dataset: str = "",
    target: float | None = None,
    boot: BootstrapConfig | None = None,
    training_seconds: Mapping[str, float] | None = None,
) -> list[ScalingFit]:
    """:func:`fit_scaling` on ``{system: PerQueryRecords}`` of one dataset: ``measure`` per query
    from the stored rankings (the gold documents relevant, as :func:`adaptlab.compare` re-scores a
    store), on the queries every system has."""
    from adaptlab.metrics import evaluate, parse_measures

    m = parse_measures([measure])[0]
    recs = dict(records)
    if not recs:
        return []
    common = [q for q in next(iter(recs.values())).query_ids if all(q in set(r.query_ids) for r in recs.values())]
    qrels = {q: {g: 1 for g in gold} for r in recs.values() for q, gold in zip(r.query_ids, r.gold_ids) if gold}
    common = [q for q in common if q in qrels]
    if len(common) < 2:
        return []
    values = {
        s: np.asarray(evaluate(qrels, r.to_run(), [m], query_ids=common).matrix(str(m)), dtype=np.float64)
        for s, r in recs.items()
    }
    return fit_scaling(values, str(m), dataset=dataset, target=target, boot=boot, training_seconds=training_seconds)
