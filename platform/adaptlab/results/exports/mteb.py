"""MTEB TaskResult JSON out of a store and back in, to compare with published scores.

An MTEB result file holds one task (here: one dataset of one system)::

    {"dataset_revision": "...", "task_name": "SciFact", "mteb_version": "2.26.24",
     "scores": {"test": [{"hf_subset": "default", "languages": ["eng-Latn"], "main_score": 0.645,
                          "ndcg_at_10": 0.645, "recall_at_100": 0.925, ...}]},
     "evaluation_time": null, "kg_co2_emissions": null}

Values are fractions (MTEB's leaderboard shows them x 100). Measure keys follow MTEB
(``ndcg@10`` -> ``ndcg_at_10``, ``acc@5`` -> ``accuracy_at_5``); each also gets ``KEY_ci_low``
and ``KEY_ci_high`` when the store holds its confidence interval (MTEB readers ignore keys they
do not know). The file loads with mteb's own ``TaskResult.from_disk`` and its ``get_score()`` is
``main_score`` (tests/results/test_mteb_roundtrip.py, mteb 2.26):

- ``task_name``: the MTEB task of the dataset when the installed mteb knows one of that name
  (case-insensitive: ``scifact`` -> ``SciFact``), else the dataset's name (``task_names=`` maps
  others);
- ``languages``: the task's ``eval_langs`` from mteb's metadata, else ``languages=`` (default
  ``["eng-Latn"]``: every dataset format adaptlab reads is English); mteb's ``get_score()``
  averages over the subsets whose languages it is asked for, so an empty list made it NaN;
- ``main_score``: the value of ``main_measure`` (default: the task's main score in mteb's metadata,
  else ``ndcg@10``, MTEB's main score for its retrieval tasks);
- ``mteb_version``: the version of the mteb installed where the file was written, or ``null``
  without mteb (mteb reads a version below 1.12.48 as an old layout to convert, which looks the
  task up in its registry and failed for a dataset that is not an MTEB task);
- ``dataset_revision``: ``"dataset revision not available"`` (mteb's own words for it): adaptlab
  reads datasets from local files and cannot name the Hugging Face commit they came from; its own
  fingerprint of the data is kept under ``adaptlab.dataset_fingerprint``. The evaluation time is
  not stored, so it is ``null``.

:func:`export_mteb` lays the files out as mteb's result cache does
(``mteb.cache.ResultCache.save_to_cache``)::

    OUT/MODEL/REVISION/TASK.json     MODEL: the system, "/" as "__" and " " as "_" (mteb's rule)
    OUT/MODEL/REVISION/model_meta.json   {"name": SYSTEM, "revision": REVISION, ...}

where REVISION is the run's model revision, or ``no_revision_available`` (mteb's word) when the
store has none. mteb reads one file with ``TaskResult.from_disk(Path(...))`` (a ``Path``, not a
string) and the folder with ``ResultCache`` when OUT is the ``results`` folder of its cache path.

Reading (:meth:`MtebTaskResult.from_disk`) gives the per-measure values of a split and subset
(:meth:`MtebTaskResult.values`, canonical measure names); :func:`compare_mteb` puts them beside
a stored run's values and confidence intervals; :func:`import_mteb` stores an MTEB result file's
scores (and bounds, when it has them) as a run of a system, so published or mteb-computed results
sit in the store beside adaptlab's and export back to the same values.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adaptlab.errors import ConfigError, DataError, StoreError
from adaptlab.storage.files import READABLE, safe_name

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from adaptlab.results.store import ResultsStore

__all__ = [
    "DEFAULT_LANGUAGES",
    "MtebTaskResult",
    "compare_mteb",
    "export_mteb",
    "import_mteb",
    "installed_mteb_version",
    "metric_key",
    "mteb_results",
]

DEFAULT_LANGUAGES: tuple[str, ...] = ("eng-Latn",)
"""``languages`` of a dataset that is no MTEB task the installed mteb knows (adaptlab's formats are English)."""
_REQUIRED = ("task_name", "scores")
_SUBSET_KEYS = frozenset({"hf_subset", "languages", "main_score"})
_UNSAFE_KEY = re.compile(r"[^A-Za-z0-9_\-. /]+")
_MTEB_NAMES = {"acc": "accuracy"}
NO_MODEL_REVISION = "no_revision_available"
"""The revision folder of a model whose revision is not known (mteb's own name for it)."""
NO_DATASET_REVISION = "dataset revision not available"
"""``dataset_revision`` of an export: adaptlab cannot name the Hugging Face commit of its data (mteb's words)."""


def metric_key(measure: str) -> str:
    """The MTEB (and MLflow-safe) key of a stored measure: ``ndcg@10`` -> ``ndcg_at_10``,
    ``acc@5`` -> ``accuracy_at_5``, ``mrr`` -> ``mrr``; a free measure string (``coe``) keeps
    its letters, digits, ``_ - . /`` and space, anything else becomes ``_``."""
    from adaptlab.metrics.measures import Measure

    try:
        m = Measure.parse(measure)
    except ConfigError:
        return _UNSAFE_KEY.sub("_", str(measure)) or "_"
    name = _MTEB_NAMES.get(m.name, m.name)
    return name if m.k is None else f"{name}_at_{m.k}"


@dataclass(frozen=True)
class MtebTaskResult:
    """One MTEB TaskResult: ``scores[split]`` is a list of subsets, each a dict of MTEB keys."""

    task_name: str
    scores: dict[str, list[dict[str, Any]]]
    dataset_revision: str | None = None
    mteb_version: str | None = None
    evaluation_time: float | None = None
    kg_co2_emissions: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of MTEB's result files (MTEB's field names)."""
        return {
            "dataset_revision": self.dataset_revision,
            "task_name": self.task_name,
            "mteb_version": self.mteb_version,
            "scores": self.scores,
            "evaluation_time": self.evaluation_time,
            "kg_co2_emissions": self.kg_co2_emissions,
            **self.extra,
        }

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the JSON file (parent folders created; whole or not at all); returns its path."""
        from adaptlab.results.exports.export_files import write_all

        return write_all([(Path(path), json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n")])[0]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "MTEB result") -> MtebTaskResult:
        """Parse and check one TaskResult object; ``source`` names it in errors."""
        if not isinstance(data, Mapping):
            raise DataError(f"{source}: expected a JSON object, got {type(data).__name__}")
        missing = [k for k in _REQUIRED if k not in data]
        if missing:
            raise DataError(
                f"{source}: missing key(s) {', '.join(missing)}; an MTEB TaskResult has "
                "task_name and scores {split: [{hf_subset, main_score, ...}]}"
            )
        scores = data["scores"]
        if not isinstance(scores, Mapping) or not all(
            isinstance(v, list) and all(isinstance(s, Mapping) for s in v) for v in scores.values()
        ):
            raise DataError(f"{source}: 'scores' must map each split to a list of objects (one per hf_subset)")
        known = {"dataset_revision", "task_name", "mteb_version", "scores", "evaluation_time", "kg_co2_emissions"}
        return cls(
            str(data["task_name"]),
            {str(k): [dict(s) for s in v] for k, v in scores.items()},
            data.get("dataset_revision"),
            data.get("mteb_version"),
            data.get("evaluation_time"),
            data.get("kg_co2_emissions"),
            {k: v for k, v in data.items() if k not in known},
        )

    @classmethod
    def from_disk(cls, path: str | os.PathLike[str]) -> MtebTaskResult:
        """Read an MTEB result file (``TaskName.json``)."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise DataError(f"{path}: not valid JSON ({e.msg}, line {e.lineno})") from e
        return cls.from_dict(data, str(path))

    def subset(self, split: str = "test", hf_subset: str = "default") -> dict[str, Any]:
        """The score dict of one split and subset."""
        if split not in self.scores:
            raise DataError(
                f"MTEB result {self.task_name!r}: no split {split!r}; it has {', '.join(sorted(self.scores)) or 'none'}"
            )
        for s in self.scores[split]:
            if s.get("hf_subset", "default") == hf_subset:
                return s
        have = ", ".join(str(s.get("hf_subset")) for s in self.scores[split])
        raise DataError(
            f"MTEB result {self.task_name!r}, split {split!r}: no hf_subset {hf_subset!r}; it has {have or 'none'}"
        )

    def get_score(self, key: str, split: str = "test", hf_subset: str = "default") -> float:
        """One value by MTEB key (``main_score``, ``ndcg_at_10``) or measure name (``ndcg@10``)."""
        scores = self.subset(split, hf_subset)
        name = key if key in scores else metric_key(key)
        if name not in scores:
            raise DataError(f"MTEB result {self.task_name!r}, split {split!r}: no score {key!r}")
        return float(scores[name])

    def values(self, split: str = "test", hf_subset: str = "default") -> dict[str, float]:
        """Per-measure values under canonical names (``ndcg_at_10`` -> ``ndcg@10``); keys that
        are not ranking measures (``main_score``, ``nauc_*``, ``*_ci_low``) are left out."""
        from adaptlab.metrics.measures import Measure

        out: dict[str, float] = {}
        for key, value in self.subset(split, hf_subset).items():
            if key in _SUBSET_KEYS or not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            try:
                out[str(Measure.parse(key))] = float(value)
            except ConfigError:
                continue
        return out


def installed_mteb_version() -> str | None:
    """The version of the installed mteb package, or None."""
    from importlib import metadata

    try:
        return metadata.version("mteb")
    except metadata.PackageNotFoundError:
        return None


def _mteb_task(name: str) -> Any | None:
    """The metadata of the MTEB task called ``name`` (case-insensitive) when mteb is installed and
    knows it, else None."""
    if installed_mteb_version() is None:
        return None
    import mteb

    try:
        from mteb.get_tasks import _TASKS_REGISTRY as registry  # the names, without building every task
    except ImportError:  # pragma: no cover - another mteb layout: exact names only
        registry = {}
    exact = {n.lower(): n for n in registry}.get(name.lower(), name)
    try:
        return mteb.get_task(exact).metadata
    except (KeyError, ValueError):
        return None


def _languages(meta: Any, languages: Sequence[str] | None) -> list[str]:
    """The subset's languages: ``languages`` if given, else the task's eval_langs, else the default."""
    if languages:
        return list(languages)
    langs = getattr(meta, "eval_langs", None)
    if isinstance(langs, Mapping):  # a multilingual task: its "default" subset, else every language
        langs = langs.get("default") or sorted({x for v in langs.values() for x in v})
    return list(langs or DEFAULT_LANGUAGES)


def _subset_scores(
    rows: Sequence[Mapping[str, Any]], main_measure: str, where: str, languages: list[str]
) -> dict[str, Any]:
    """MTEB keys (value and CI bounds) of one run's score rows, with main_score."""
    scores: dict[str, Any] = {"hf_subset": "default", "languages": languages}
    by_measure = {str(r["measure"]): r for r in rows}
    if main_measure not in by_measure:
        raise StoreError(
            f"{where}: no {main_measure} score to use as MTEB's main_score; "
            f"stored measures: {', '.join(sorted(by_measure))}; pass main_measure="
        )
    scores["main_score"] = float(by_measure[main_measure]["value"])
    for measure in sorted(by_measure):
        row, key = by_measure[measure], metric_key(measure)
        scores[key] = float(row["value"])
        for bound in ("ci_low", "ci_high"):
            if row.get(bound) is not None:
                scores[f"{key}_{bound}"] = float(row[bound])
    return scores


def mteb_results(
    store: ResultsStore,
    *,
    system: str | None = None,
    dataset: str | None = None,
    split: str = "test",
    main_measure: str | None = None,
    task_names: Mapping[str, str] | None = None,
    languages: Sequence[str] | None = None,
) -> dict[tuple[str, str], MtebTaskResult]:
    """One :class:`MtebTaskResult` per (system, dataset) of the latest run of each in ``store``
    (filtered by ``system`` / ``dataset``); ``task_names`` maps a dataset to its MTEB task name
    (default: the MTEB task of that name, else the dataset name); ``main_measure`` and
    ``languages`` default to the task's (module docstring)."""
    from adaptlab.results.validate import canonical_measure

    filters: dict[str, Any] = {k: v for k, v in (("system", system), ("dataset", dataset)) if v is not None}
    rows = store.metrics(kind="score", latest=True, **filters).to_pylist()
    if not rows:
        raise StoreError(f"no scores in the store for {filters or 'any system'}; run a study first or check the filter")
    runs = {r["run_id"]: r for r in store.runs(latest=True, **filters).to_pylist()}
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["system"], r["dataset"]), []).append(r)
    out = {}
    for (sys_name, ds), group in sorted(groups.items()):
        run = runs.get(group[0]["run_id"], {})
        meta = _mteb_task((task_names or {}).get(ds, ds))
        main = canonical_measure(main_measure or getattr(meta, "main_score", None) or "ndcg@10")
        scores = _subset_scores(group, main, f"system {sys_name!r}, dataset {ds!r}", _languages(meta, languages))
        out[(sys_name, ds)] = MtebTaskResult(
            meta.name if meta is not None else (task_names or {}).get(ds, ds),
            {split: [scores]},
            dataset_revision=NO_DATASET_REVISION,
            mteb_version=installed_mteb_version(),
            extra={
                "adaptlab": {
                    "system": sys_name,
                    "dataset": ds,
                    "run_id": group[0]["run_id"],
                    "package_version": run.get("package_version"),
                    "model_id": run.get("model_id"),
                    "model_revision": run.get("model_revision"),
                    "dataset_fingerprint": run.get("dataset_fingerprint"),
                }
            },
        )
    return out


def _revision_folder(out_dir: Path, system: str, revision: str | None) -> Path:
    """``OUT/MODEL/REVISION`` of mteb's result cache for ``system`` (module docstring)."""
    model = safe_name(system.replace("/", "__").replace(" ", "_"), READABLE)
    return out_dir / model / safe_name(revision or NO_MODEL_REVISION, READABLE)


def _model_meta(system: str, revision: str | None, adaptlab: Mapping[str, Any]) -> dict[str, Any]:
    """The ``model_meta.json`` of a revision folder: mteb's ``name`` and ``revision`` (what its
    result cache reads), the rest unknown to adaptlab left out, and where the model came from."""
    return {
        "name": system,
        "revision": revision or NO_MODEL_REVISION,
        "adaptlab": {"model_id": adaptlab.get("model_id"), "package_version": adaptlab.get("package_version")},
    }


def export_mteb(store: ResultsStore, out_dir: str | os.PathLike[str], **kwargs: Any) -> list[Path]:
    """Write :func:`mteb_results` in mteb's result-cache layout (module docstring):
    ``out_dir/MODEL/REVISION/TASK.json`` and a ``model_meta.json`` per revision folder, all files
    or none (:func:`adaptlab.results.exports.export_files.write_all`); two systems or tasks that would
    share a file are refused, naming both. Returns the paths of the task files."""
    from adaptlab.results.exports.export_files import refuse_shared_files, write_all

    out, targets, files, metas = Path(out_dir), [], [], {}
    for (sys_name, ds), result in mteb_results(store, **kwargs).items():
        info = result.extra["adaptlab"]
        folder = _revision_folder(out, sys_name, info.get("model_revision"))
        path = folder / f"{safe_name(result.task_name, READABLE)}.json"
        targets += [
            (f"system {sys_name!r} on dataset {ds!r}", path),
            (f"system {sys_name!r}", folder / "model_meta.json"),
        ]
        files.append((path, json.dumps(result.to_dict(), indent=2) + "\n"))
        metas[folder / "model_meta.json"] = json.dumps(
            _model_meta(sys_name, info.get("model_revision"), info), indent=2
        )
    refuse_shared_files(targets, "export to MTEB")
    written = write_all(files + [(p, text + "\n") for p, text in metas.items()])
    return written[: len(files)]


def compare_mteb(
    result: MtebTaskResult,
    store: ResultsStore,
    *,
    system: str,
    dataset: str,
    split: str = "test",
    hf_subset: str = "default",
) -> pd.DataFrame:
    """Published (MTEB) values beside the stored ones of the latest run of (system, dataset):
    one row per measure both hold, columns ``mteb``, ``value``, ``ci_low``, ``ci_high``,
    ``difference`` (``value - mteb``) and ``within_ci`` (the published value inside the CI)."""
    import pandas as pd

    published = result.values(split, hf_subset)
    stored = {
        r["measure"]: r for r in store.metrics(kind="score", latest=True, system=system, dataset=dataset).to_pylist()
    }
    rows = []
    for measure in sorted(set(published) & set(stored)):
        r = stored[measure]
        low, high = r.get("ci_low"), r.get("ci_high")
        within = None if low is None or high is None else bool(low <= published[measure] <= high)
        rows.append(
            {
                "measure": measure,
                "mteb": published[measure],
                "value": r["value"],
                "ci_low": low,
                "ci_high": high,
                "difference": r["value"] - published[measure],
                "within_ci": within,
            }
        )
    if not rows:
        raise StoreError(
            f"MTEB result {result.task_name!r} and the store's {system!r} on {dataset!r} share no "
            f"measure (MTEB: {', '.join(sorted(published)) or 'none'}; store: "
            f"{', '.join(sorted(stored)) or 'none'})"
        )
    return pd.DataFrame(rows).set_index("measure")


def _fingerprint(res: MtebTaskResult) -> str:
    """The dataset fingerprint a file records: adaptlab's own (an export of a store), else the
    file's dataset revision when it names one, else ""."""
    own = res.extra.get("adaptlab")
    if isinstance(own, Mapping) and own.get("dataset_fingerprint"):
        return str(own["dataset_fingerprint"])
    return "" if res.dataset_revision in (None, NO_DATASET_REVISION) else str(res.dataset_revision)


def import_mteb(
    store: ResultsStore,
    paths: Sequence[str | os.PathLike[str]],
    *,
    system: str,
    dataset: str | None = None,
    split: str = "test",
    hf_subset: str = "default",
    model_id: str = "",
) -> dict[str, str]:
    """Store MTEB result files (``TaskName.json``, as mteb writes them) as runs of ``system``, in one
    commit: one run per file on ``dataset`` (default: the file's task name), a metric row per
    ranking measure of ``split`` / ``hf_subset`` with its bounds when the file has ``KEY_ci_low`` /
    ``KEY_ci_high``; the run's config records the file, task, split and mteb version. Returns
    ``{dataset: run_id}``. Exported again (:func:`export_mteb`) the values are the file's."""
    from adaptlab.results.provenance import new_run_id, run_record

    if dataset is not None and len(paths) > 1:
        raise ConfigError(f"import_mteb: dataset={dataset!r} with {len(paths)} files; one file per dataset name")
    runs, rows, ids = [], [], {}
    for path in paths:
        res = MtebTaskResult.from_disk(path)
        ds = dataset or res.task_name
        if ds in ids:
            raise ConfigError(f"{path}: a second file for dataset {ds!r}; import each task once")
        ids[ds] = new_run_id()
        sub = res.subset(split, hf_subset)
        runs.append(
            run_record(
                system,
                ds,
                run_id=ids[ds],
                model_id=model_id or system,
                model_revision=None,
                dataset_fingerprint=_fingerprint(res),
                seed=None,
                config={
                    "command": "import",
                    "format": "mteb",
                    "source": str(path),
                    "task_name": res.task_name,
                    "split": split,
                    "hf_subset": hf_subset,
                    "mteb_version": res.mteb_version,
                    "languages": sub.get("languages"),
                },
            )
        )
        for measure, value in sorted(res.values(split, hf_subset).items()):
            key = metric_key(measure)
            rows.append(
                {
                    "run_id": ids[ds],
                    "system": system,
                    "dataset": ds,
                    "measure": measure,
                    "value": value,
                    "ci_low": sub.get(f"{key}_ci_low"),
                    "ci_high": sub.get(f"{key}_ci_high"),
                }
            )
    if not rows:
        raise DataError(f"{', '.join(map(str, paths))}: no ranking measure in split {split!r} to import")
    store.commit(runs, rows)
    return ids
