"""The same evaluation run again adds nothing, however its inputs were named (issue: one key).

The evaluation key is built from content: a run file's and the qrels' bytes, measures as a set,
the settings and values; never from paths, the order of options, or whether an adapted model was
trained now or reused. Two identical runs racing end with one stored and the other saying
"already in the store ... nothing added" (exit 0).
"""

from __future__ import annotations

import re
import shutil

from adaptlab import results
from adaptlab.evaluation import summarise_runs
from adaptlab.evaluation.persist import commit_summary
from adaptlab.metrics import parse_measures
from robustness.hostile import QRELS, RUN, cli

_ALREADY = re.compile(r"^already in the store as run [0-9a-f]{32} \(version 1\); nothing added$", re.M)


def _counts(uri) -> tuple[int, int, int, int]:
    store = results.open(uri)
    return store.runs().num_rows, store.metrics(kind="all").num_rows, store.per_query().num_rows, store.version()


def _evaluate(qrels: str, run: str, metrics: str, store: str) -> tuple[int, str, str]:
    return cli(
        [
            "evaluate",
            "--qrels",
            qrels,
            "--run",
            run,
            "--metrics",
            metrics,
            "--bootstrap",
            "20",
            "--dataset",
            "toy",
            "--store",
            store,
        ]
    )


def test_evaluate_by_another_path_folder_or_metric_order_adds_nothing(work, monkeypatch):
    store = str(work / "s")
    rc, _, err = _evaluate("qrels.txt", "run.txt", "ndcg@10,acc@1", store)
    assert rc == 0 and "already in the store" not in err, err
    first = _counts(store)
    rc, _, err = _evaluate(str(work / "qrels.txt"), str(work / "run.txt"), "ndcg@10,acc@1", store)  # absolute paths
    assert rc == 0 and _ALREADY.search(err), err
    rc, _, err = _evaluate("qrels.txt", "run.txt", "acc@1,ndcg@10", store)  # the metrics in another order
    assert rc == 0 and _ALREADY.search(err), err
    other = work / "elsewhere" / "in"
    other.mkdir(parents=True)
    shutil.copy(work / "run.txt", other / "run.txt")
    shutil.copy(work / "qrels.txt", other / "q.txt")
    monkeypatch.chdir(other)  # the same bytes, read from another folder under other relative names
    rc, _, err = _evaluate("q.txt", "run.txt", "ndcg@10,acc@1", store)
    assert rc == 0 and _ALREADY.search(err), err
    assert _counts(store) == first and first[3] == 1
    (other / "run.txt").write_text(RUN.replace("0.90 sys", "0.95 sys"))  # other bytes: a new evaluation
    rc, _, err = _evaluate("q.txt", "run.txt", "ndcg@10,acc@1", store)
    assert rc == 0 and "already in the store" not in err, err
    assert _counts(store)[3] == 2


def _scale_commit(tmp_path, store, *, reused: bool, folder: str):
    """What a scale study commits for one dataset: an adapted system whose artifact was trained
    now (reused False) or found (reused True), under some local folder."""
    from adaptlab.data.trec import read_trec_qrels, read_trec_run
    from adaptlab.stats import BootstrapConfig

    (tmp_path / "q.txt").write_text(QRELS)
    (tmp_path / "r.txt").write_text(RUN)
    qrels = read_trec_qrels(tmp_path / "q.txt")
    run = read_trec_run(tmp_path / "r.txt", qrels=qrels)
    summary = summarise_runs(qrels, {"ft-10": run}, parse_measures("ndcg@10"), boot=BootstrapConfig(n_resamples=20))
    config = {
        "study": "scale",
        "source": f"{folder}/scale.toml",
        "metrics": ["ndcg@10"],
        "systems": {
            "ft-10": {
                "variant": "ft",
                "artifact_key": "sha256:abc",
                "reused": reused,
                "artifact_path": f"{folder}/artifacts/abc",
            }
        },
    }
    return commit_summary(
        store, summary, dataset="toy", config=config, study="scale", provenance={"ft-10": {"model_id": "sha256:abc"}}
    )


def test_a_reused_adapted_model_is_the_same_evaluation(tmp_path):
    store = tmp_path / "s"
    first = _scale_commit(tmp_path, store, reused=False, folder="/data/a")
    again = _scale_commit(tmp_path, store, reused=True, folder="/data/b")
    assert first.added and not again.added and dict(first) == dict(again)
    assert "nothing added" in again.already_stored()
    assert _counts(store)[0] == 1 and _counts(store)[3] == 1


def test_two_identical_runs_racing_end_with_one_stored_and_nothing_added(work, monkeypatch):
    """The race of two identical `adaptlab run`: both looked before either committed, so the second
    commits the same run ids (with another time stamp) after the first landed."""
    store = str(work / "s")
    rc, _, err = cli(["run", "study.toml", "--store", store])
    assert rc == 0, err
    before = _counts(store)
    monkeypatch.setattr(results.ResultsStore, "commit_of", _blind_once(results.ResultsStore.commit_of))
    monkeypatch.setenv("ADAPTLAB_PROGRESS", "1")  # the per-dataset line is a progress line
    rc, out, err = cli(["run", "study.toml", "--store", store])
    assert rc == 0, err
    assert re.search(r"syn: already in the store as run [0-9a-f]{32} \(version 1\); nothing added", err), err
    assert "get a new id" not in err and _counts(store) == before


def _blind_once(real):
    """``commit_of`` that finds nothing the first time (the other run had not landed yet)."""
    calls = []

    def commit_of(self, run_ids):
        calls.append(1)
        return None if len(calls) == 1 else real(self, run_ids)

    return commit_of


def test_a_scale_study_run_twice_stores_every_evaluation_once(tiny_model, tmp_path, monkeypatch, capsys):
    """The second run finds every adapted model (``reused: true``, the first run recorded false)
    and adds nothing, saying so per dataset."""
    import pytest

    torch = pytest.importorskip("torch")
    pytest.importorskip("sentence_transformers")

    from adaptlab.study import parse_study, run_scale_study

    adapt = {
        "corpus": "synthetic:n_documents=12,seed=0",
        "base_model": str(tiny_model),
        "name": "tiny",
        "scales": [3, 6],
        "fraction": 0.5,
        "test_fraction": 0.25,
        "validation_fraction": 0.2,
        "max_tokens": 48,
        "questions_per_chunk": 2,
        "n_negatives": 2,
        "margin": False,
        "duplicate_threshold": False,
        "variants": ["base", "ft"],
        "ft": {"batch_size": 8, "max_steps": 1, "num_negatives": 1, "learning_rate": 1e-3},
        "use_ray": False,
    }
    study = parse_study(
        {
            "study": {"name": "scale-rerun", "store": ""},
            "datasets": [{"name": "bench", "spec": "synthetic:n_documents=4,seed=1"}],
            "models": [{"name": "tiny", "ref": str(tiny_model)}],
            "evaluation": {"metrics": ["acc@1", "mrr@10"], "k": 20},
            "bootstrap": {"n_resamples": 50, "seed": 0},
            "embedding": {"use_ray": False},
            "adapt": adapt,
        },
        source="scale.toml",
        base_dir=tmp_path,
    )
    store = tmp_path / "store"
    monkeypatch.setenv("ADAPTLAB_PROGRESS", "1")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models train fastest on one thread
    try:
        first = run_scale_study(study, store=store)
        after_first = _counts(store)
        capsys.readouterr()
        second = run_scale_study(study, store=store)
    finally:
        torch.set_num_threads(threads)
    assert all(s.reused for s in second.systems.values() if s.variant != "base")
    assert not any(s.reused for s in first.systems.values() if s.variant != "base")
    assert _counts(store) == after_first
    err = capsys.readouterr().err
    for ds in first.datasets:
        assert re.search(rf"{re.escape(ds.dataset)}: already in the store as runs .*nothing added", err), err
