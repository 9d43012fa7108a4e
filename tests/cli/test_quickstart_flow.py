"""The first run already answers "did it help?" (issue 30): the README's first command,
``adaptlab run jobs/quickstart.toml`` (here into a temporary store, in-process embedding and
fewer resamples for time), evaluates all-MiniLM-L6-v2 and BM25, and then ``compare --store``,
``plan --store ... --metric ndcg@10 --effect 0.02`` and ``inspect`` work on that store with no
extra option; a store of three systems asks for --system and --against naming what it has."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def quickstart_store(tmp_path_factory):
    from adaptlab.cli import main

    store = tmp_path_factory.mktemp("qs") / "store"
    assert (
        main(
            [
                "run",
                str(REPO / "jobs" / "quickstart.toml"),
                "--store",
                str(store),
                "--no-ray",
                "--bootstrap",
                "200",
                "--quiet",
            ]
        )
        == 0
    )
    return store


@pytest.mark.slow
def test_compare_plan_and_inspect_work_on_the_quickstart_store(quickstart_store, cli):
    from adaptlab import results

    runs = results.open(quickstart_store).runs().to_pylist()
    assert sorted(r["system"] for r in runs) == ["bm25", "minilm"]
    compared = cli("compare", "--store", str(quickstart_store))
    assert compared.returncode == 0, compared.stderr
    assert (
        "minilm - bm25" in compared.stdout
    )  # the study order: first named minus second and "synthetic-sentences" in compared.stdout
    plan = cli(
        "plan",
        "--store",
        str(quickstart_store),
        "--metric",
        "ndcg@10",
        "--effect",
        "0.02",
        "--experiments",
        "40",
        "--resamples",
        "99",
    )
    assert plan.returncode == 0, plan.stderr
    assert "to detect a mean difference of 0.02" in plan.stdout and "pilot: 421 queries" in plan.stdout
    shown = cli("inspect", "--store", str(quickstart_store))
    assert shown.returncode == 0, shown.stderr
    assert "minilm vs bm25 over 421 queries" in shown.stdout  # the baseline (bm25) is --against


def test_with_three_systems_plan_asks_for_the_pair_and_says_what_the_store_has(cli, tmp_path):
    from adaptlab.study import parse_study, run_study

    spec = {
        "study": {"name": "three"},
        "datasets": [{"spec": "synthetic:n_documents=6,seed=1", "name": "syn"}],
        "models": [{"ref": "hash:16", "name": "a"}, {"ref": "hash:32", "name": "b"}, {"ref": "bm25", "name": "c"}],
        "bootstrap": {"n_resamples": 50},
        "embedding": {"use_ray": False},
    }
    run_study(parse_study(spec), store=tmp_path / "three")
    out = cli("plan", "--store", str(tmp_path / "three"), "--effect", "0.02")
    assert out.returncode == 2 and "--system and --against" in out.stderr and "syn: a, b, c" in out.stderr
    single = {
        "study": {**spec["study"], "name": "one"},
        "datasets": spec["datasets"],
        "models": spec["models"][:1],
        "bootstrap": spec["bootstrap"],
        "embedding": spec["embedding"],
    }
    run_study(parse_study(single), store=tmp_path / "one")
    out = cli("plan", "--store", str(tmp_path / "one"), "--system", "a", "--against", "z", "--effect", "0.02")
    assert out.returncode == 2 and "compare" not in out.stderr and "at least 2 systems" in out.stderr


@pytest.mark.slow
def test_the_quickstart_gets_a_similarity_threshold(quickstart_store):
    """Issue 29: the exact rule chose none on the quickstart (421 queries; its grid started at
    psi = 5) and the report showed 'n/a (n/a)'; the order-statistic rule chooses one that keeps
    the guarantee (at most 0.01 lost with 95% confidence) and removes documents."""
    import numpy as np

    from adaptlab import results
    from adaptlab.analysis import similarity_thresholds
    from adaptlab.retrieval.records import PerQueryRecords

    table = results.open(quickstart_store).per_query(latest=True, system="minilm")
    r = similarity_thresholds(PerQueryRecords.from_arrow(table), k=5, n_resamples=100)
    assert r.chosen is not None and np.isfinite(r.chosen_tau)
    at = r.at_chosen()
    assert at["loss_upper"] <= 0.01 and at["removed"] > 0 and 0 < at["psi"] < 100
