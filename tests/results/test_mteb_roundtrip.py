"""MTEB round trip with the real mteb package (issue 30): adaptlab's export loads with mteb's own
``TaskResult.from_disk``, its ``get_score()`` is the stored main score, the languages and task
name are mteb's metadata where mteb knows the task, the version is the installed mteb's; and a
result file that mteb itself writes, imported into a store, exports back to the same values."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import pytest

from adaptlab import results
from adaptlab.results.exports.mteb import export_mteb, import_mteb

mteb = pytest.importorskip("mteb", reason="the test extra installs mteb")


def _store(root: Path):
    """A store with two scored runs: ``bm25`` on ``scifact`` (an MTEB task) and on ``synthetic-sentences``."""
    store = results.open(root, create=True)
    recs = [
        results.run_record(
            "bm25", ds, model_id="bm25", model_revision=None, dataset_fingerprint=f"fp-{ds}", seed=0, config={}
        )
        for ds in ("scifact", "synthetic-sentences")
    ]
    rows = [
        {
            "run_id": r["run_id"],
            "system": "bm25",
            "dataset": r["dataset"],
            "measure": m,
            "value": v,
            "ci_low": v - 0.03,
            "ci_high": v + 0.03,
        }
        for r in recs
        for m, v in (("ndcg@10", 0.676), ("recall@100", 0.925), ("acc@1", 0.5625))
    ]
    store.commit(recs, rows)
    return store


def test_export_loads_with_mtebs_own_reader(tmp_path):
    from mteb.results import TaskResult

    paths = {p.stem: p for p in export_mteb(_store(tmp_path / "store"), tmp_path / "out")}
    assert set(paths) == {"SciFact", "synthetic-sentences"}  # scifact -> mteb's task name
    for path in paths.values():
        theirs = TaskResult.from_disk(path)
        assert theirs.get_score() == pytest.approx(0.676, abs=1e-12)  # main_score, not NaN
        assert theirs.mteb_version == metadata.version("mteb")
        (subset,) = theirs.scores["test"]
        assert subset["languages"] == ["eng-Latn"] and subset["ndcg_at_10_ci_low"] == pytest.approx(0.646)
    assert mteb.get_task("SciFact").metadata.eval_langs == ["eng-Latn"]  # where "SciFact"'s came from


def test_a_file_mteb_writes_imports_and_exports_back(tmp_path):
    from mteb.results import TaskResult

    written = TaskResult.from_dict(
        {
            "dataset_revision": "rev",
            "task_name": "SciFact",
            "mteb_version": metadata.version("mteb"),
            "evaluation_time": 1.0,
            "kg_co2_emissions": None,
            "scores": {
                "test": [
                    {
                        "hf_subset": "default",
                        "languages": ["eng-Latn"],
                        "main_score": 0.64508,
                        "ndcg_at_10": 0.64508,
                        "recall_at_100": 0.925,
                        "mrr_at_10": 0.61097,
                    }
                ]
            },
        }
    )
    written.to_disk(tmp_path / "SciFact.json")
    store = results.open(tmp_path / "store", create=True)
    ids = import_mteb(store, [tmp_path / "SciFact.json"], system="minilm-published")
    stored = {r["measure"]: r["value"] for r in store.metrics(system="minilm-published").to_pylist()}
    assert stored == {"ndcg@10": 0.64508, "recall@100": 0.925, "mrr@10": 0.61097}
    config = json.loads(store.runs(run_id=ids["SciFact"]).to_pylist()[0]["config"])
    assert config["format"] == "mteb" and config["task_name"] == "SciFact"
    (path,) = export_mteb(store, tmp_path / "again")
    back = TaskResult.from_disk(path)
    assert back.get_score() == pytest.approx(0.64508) and back.task_name == "SciFact"
    assert {k: back.scores["test"][0][k] for k in ("ndcg_at_10", "recall_at_100", "mrr_at_10")} == {
        "ndcg_at_10": 0.64508,
        "recall_at_100": 0.925,
        "mrr_at_10": 0.61097,
    }


def test_cli_import_then_export_with_a_language(tmp_path, cli):
    from mteb.results import TaskResult

    (tmp_path / "Mine.json").write_text(
        json.dumps(
            {
                "dataset_revision": None,
                "task_name": "Mine",
                "mteb_version": None,
                "evaluation_time": None,
                "kg_co2_emissions": None,
                "scores": {
                    "test": [
                        {
                            "hf_subset": "default",
                            "languages": ["deu-Latn"],
                            "main_score": 0.5,
                            "ndcg_at_10": 0.5,
                            "ndcg_at_10_ci_low": 0.4,
                            "ndcg_at_10_ci_high": 0.6,
                        }
                    ]
                },
            }
        )
    )
    store = str(tmp_path / "store")
    done = cli("import", "--store", store, "--system", "pub", str(tmp_path / "Mine.json"))
    assert done.returncode == 0 and "imported 1 run(s)" in done.stdout, done.stderr
    (row,) = results.open(store).metrics(system="pub").to_pylist()
    assert (row["measure"], row["value"], row["ci_low"], row["ci_high"]) == ("ndcg@10", 0.5, 0.4, 0.6)
    done = cli("export", "--store", store, "--to", "mteb", "--out", str(tmp_path / "out"), "--language", "deu-Latn")
    assert done.returncode == 0, done.stderr
    back = TaskResult.from_disk(tmp_path / "out" / "pub" / "no_revision_available" / "Mine.json")
    assert back.get_score() == 0.5 and back.scores["test"][0]["languages"] == ["deu-Latn"]


def test_export_is_laid_out_as_mtebs_result_cache_and_mteb_reads_it(tmp_path):
    """``OUT/MODEL/REVISION/TASK.json`` with a ``model_meta.json`` per revision folder, as
    mteb's ResultCache.save_to_cache writes; the dataset revision is mteb's "not available", not
    adaptlab's fingerprint; mteb's own ResultCache finds the model, its revision and the scores."""
    from mteb.cache import ResultCache
    from mteb.results import TaskResult

    store = results.open(tmp_path / "store", create=True)
    recs = [
        results.run_record(
            s, "scifact", model_id=f"org/{s}", model_revision=rev, dataset_fingerprint="fp-1", seed=0, config={}
        )
        for s, rev in (("org/minilm ft", "abc123"), ("bm25", None))
    ]
    store.commit(
        recs,
        [
            {"run_id": r["run_id"], "system": r["system"], "dataset": "scifact", "measure": "ndcg@10", "value": v}
            for r, v in zip(recs, (0.7, 0.6))
        ],
    )
    out = tmp_path / "cache" / "results"
    paths = export_mteb(store, out)
    assert sorted(p.relative_to(out).as_posix() for p in paths) == [
        "bm25/no_revision_available/SciFact.json",
        "org__minilm_ft/abc123/SciFact.json",
    ]
    meta = json.loads((out / "org__minilm_ft/abc123/model_meta.json").read_text())
    assert (meta["name"], meta["revision"]) == ("org/minilm ft", "abc123")
    assert (
        json.loads((out / "bm25/no_revision_available/model_meta.json").read_text())["revision"]
        == "no_revision_available"
    )
    back = TaskResult.from_disk(out / "org__minilm_ft/abc123/SciFact.json")
    assert back.dataset_revision == "dataset revision not available" and back.get_score() == pytest.approx(0.7)
    loaded = ResultCache(cache_path=tmp_path / "cache").load_results(tasks=["SciFact"], include_remote=False)
    found = {(m.model_name, m.model_revision): m.task_results[0].get_score() for m in loaded.model_results}
    assert found == {
        ("org/minilm ft", "abc123"): pytest.approx(0.7),
        ("bm25", "no_revision_available"): pytest.approx(0.6),
    }
