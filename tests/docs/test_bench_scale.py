"""benchmarks/bench_scale.py (docs/performance.md's cost curves): its pieces on hand-checkable
input in-process, and its --small mode end to end (slow: two real adaptation studies)."""

from __future__ import annotations

import math

import pytest

from adaptlab.errors import ConfigError

BENCHMARK = "bench_scale"  # the bench fixture (conftest) imports benchmarks.bench_scale


def test_growth_is_the_log_log_slope(bench):
    assert bench.growth([10, 100, 700], [3 * s**1.5 for s in (10, 100, 700)]) == pytest.approx(1.5)
    assert bench.growth([10, 100], [5.0, 5.0]) == pytest.approx(0.0)
    # two points: (log 10, log 2), (log 100, log 20) -> slope 1
    assert bench.growth([10, 100, 700], [2.0, 20.0, 0.0]) == pytest.approx(1.0)
    assert bench.growth([10], [1.0]) is None


def test_log_lines_open_their_phases(bench):
    lines = {
        "[adaptlab] adaptation data: 14 documents -> /x": "prepare",
        "[adaptlab] training 2 adapted model(s) (Ray tasks) into /x": "train",
        "[adaptlab] heldout: 1 judged queries, 3 documents, 3 systems": "evaluate",
        "[adaptlab] embedding 52 documents with minilm: 52/52 texts in 3 s (19.8/s)": "prepare",  # outer
        "[adaptlab] embedding 3 documents and 1 queries with 'minilm-base'": "embed",
        "[adaptlab] heldout: bootstrapping 3 system(s) (2 s)": "bootstrap",
        "[adaptlab] scale study done in prepare_s 22, train_s 28": "other",
        "(adapt:pt pid=1) [adaptlab] variant 'pt': step 1/1": "train",  # a worker's line continues
        "adaptlab: WARNING: only 1 queries": "train",
    }
    for line, phase in lines.items():
        assert bench.phase_of(line, "train", "prepare") == phase, line


def test_a_replayed_log_splits_embedding_out_of_its_phase(bench, tmp_path):
    log = tmp_path / "run.log"
    log.write_text(
        "\n".join(
            [
                "100.0 [adaptlab] adaptation data: 3 documents -> /x",
                "104.0 [adaptlab] embedding 9 documents with minilm: 0/9 texts (0%), 0.0/s",
                "107.0 [adaptlab] embedding 9 documents with minilm: 9/9 texts in 3 s (3.0/s)",  # back to prepare
                "108.0 [adaptlab] training 2 adapted model(s) (Ray tasks) into /x",
                "120.0 [adaptlab] heldout: 4 judged queries, 9 documents, 3 systems",
                "120.5 [adaptlab] embedding 9 documents and 4 queries with 'minilm-base'",
                "122.5 [adaptlab] embedding 9 documents with minilm: 9/9 texts in 2 s (4.5/s)",  # back to evaluate
                "126.0 [adaptlab] heldout: bootstrapping 3 system(s) (2 s)",  # began at 124
                "127.0 [adaptlab] scale study done in prepare_s 8, train_s 12, evaluate_s 7, total_s 27",
            ]
        )
    )
    got = bench.replay(log, start=99.0).seconds
    want = {"startup": 1.0, "prepare": 5.0, "embed": 5.0, "train": 12.0, "evaluate": 2.0, "bootstrap": 3.0}
    assert {k: got[k] for k in want} == pytest.approx(want)


def test_a_heartbeat_backdates_its_phase(bench):
    clock = bench.PhaseClock()
    clock.since -= 10.0  # startup began 10 s ago
    clock.switch("bootstrap", back=4.0)  # "... bootstrapping (4 s)"
    assert clock.seconds["startup"] == pytest.approx(6.0, abs=0.5)
    clock.switch("other")
    assert clock.seconds["bootstrap"] == pytest.approx(4.0, abs=0.5)  # the 4 s taken from startup
    clock.switch("embed", back=99.0)  # never more than the phase has run
    assert clock.seconds["other"] == 0.0 and clock.seconds["startup"] + clock.seconds["bootstrap"] == pytest.approx(
        10.0, abs=0.5
    )


def test_corpus_and_study_reach_adaptlab(bench, tmp_path):
    from adaptlab.data.documents import load_documents
    from adaptlab.study import load_study, parse_adapt_section

    words = bench.write_corpus(tmp_path / "c", 3, pages=2, words=220, seed=0)
    files = sorted((tmp_path / "c").glob("*.txt"))
    assert len(files) == 3 and all(f.read_text().count(", page ") == 2 for f in files)
    assert 3 * 2 * 2 * 60 < words < 3 * 2 * 2 * 160  # 2 notes of ~110 words per page
    assert len(load_documents(tmp_path / "c")) == 3
    study_file = tmp_path / "s.toml"
    study_file.write_text(bench.study_text(tmp_path / "c", tmp_path / "store", 2, 3, ""))
    study = load_study(study_file)
    assert study.embedding.cache == str(tmp_path / "store-embedding-cache")
    settings = parse_adapt_section(study)
    assert settings.scales == (2,) and settings.pt.max_steps == 3 and settings.ft.max_steps == 3
    assert settings.variants == ("base", "pt", "ft")


def test_a_corpus_larger_than_one_seed_gives_is_written_from_several(bench, tmp_path, monkeypatch):
    """700 documents of 20 pages need 56,000 notes, more than one seed's distinct component names
    (~50,700): the corpus writer hung there, drawing names it could never find. It now draws blocks
    of notes from consecutive seeds; the first block is what one seed gave before."""
    from adaptlab.data.synthetic import max_synthetic_documents, synthetic_documents

    assert 700 * 20 * 4 > max_synthetic_documents()
    with pytest.raises(ConfigError, match=r"n_documents must be <= \d+ \(distinct component names\)"):
        synthetic_documents(max_synthetic_documents() + 1)
    monkeypatch.setattr(bench, "NOTES_PER_SEED", 50)  # a small block: the same path as 8,000
    bench.write_corpus(tmp_path / "c", 3, pages=30, words=110, seed=4)  # 90 notes: two seeds
    text = "\n".join((tmp_path / "c" / f"manual{d:04d}.txt").read_text() for d in range(3))
    first, second = synthetic_documents(50, seed=4), synthetic_documents(40, seed=5)
    assert first[0].text in text and first[-1].text in text and second[-1].text in text


@pytest.mark.slow
def test_small_mode_runs_two_sizes(bench, tiny_model, tmp_path, capsys):
    """The script's plumbing end to end on the session's tiny encoder (the figures of
    docs/performance.md are all-MiniLM-L6-v2's; with it this test took 142 s, CI 2026-11-28)."""
    results = bench.main(
        [
            "--small",
            "--model",
            str(tiny_model),
            "--no-negative-rules",
            "--work",
            str(tmp_path),
            "--json",
            str(tmp_path / "out.json"),
        ]
    )
    assert [r.size for r in results] == [10, 20] and all(r.exit_code == 0 for r in results)
    for r in results:
        assert r.seconds["train"] > 0 and r.seconds["embed"] > 0 and r.peak_gb["train"] > 0
        assert set(r.study_timings) >= {"prepare_s", "train_s", "evaluate_s"}
        assert math.isclose(sum(r.seconds.values()), r.study_timings["total_s"], rel_tol=0.5, abs_tol=15)
    assert "growth exponents" in capsys.readouterr().out


def test_the_backend_and_mining_options_reach_the_study(bench, tmp_path):
    from adaptlab.models.inference import backend_installed, resolve_backend
    from adaptlab.study import load_study, parse_adapt_section

    if not backend_installed(resolve_backend("int8")):
        pytest.skip("no int8 backend installed (pip install 'adaptlab[fast]')")
    bench.write_corpus(tmp_path / "c", 3, pages=1, words=110, seed=0)
    args = bench.parse_args(["--backend", "auto", "--mining-precision", "int8"])
    study_file = tmp_path / "s.toml"
    study_file.write_text(bench.study_text(tmp_path / "c", tmp_path / "store", 2, 3, "", keys=bench.study_keys(args)))
    study = load_study(study_file)
    assert study.embedding.backend == "auto" and parse_adapt_section(study).mining_precision == "int8"
    assert bench.study_keys(args, "fp32")["adapt"] == {"mining_precision": "fp32"}  # --compare-mining's first run


def test_changed_negatives_are_counted_per_question(bench):
    fp32 = {"s1/train/q1": {"a", "b", "c"}, "s1/train/q2": {"d"}, "s1/train/q3": {"e"}}
    int8 = {"s1/train/q1": {"a", "b", "x"}, "s1/train/q2": {"y"}, "s1/train/q3": {"e"}, "s1/train/q9": {"z"}}
    assert bench.negatives_changed(fp32, int8) == {
        "questions": 3,
        "negatives": 5,
        "changed_negatives": 2,
        "changed_questions": 2,
    }


@pytest.mark.slow
def test_compare_mining_reports_changed_negatives_and_paired_differences(bench, tiny_model, tmp_path, capsys):
    """--compare-mining end to end on the tiny encoder: two studies of the same corpus, fp32 and
    int8 mining; the base system's held-out rows are identical (only the mining changed)."""
    from adaptlab.models.inference import backend_installed, resolve_backend

    if not backend_installed(resolve_backend("int8")):
        pytest.skip("no int8 backend installed (pip install 'adaptlab[fast]')")
    results = bench.main(
        [
            "--sizes",
            "10",
            "--pages",
            "1",
            "--max-steps",
            "1",
            "--compare-mining",
            "--model",
            str(tiny_model),
            "--no-negative-rules",
            "--work",
            str(tmp_path),
        ]
    )
    assert [r.exit_code for r in results] == [0, 0]
    assert [r.options["adapt"] for r in results] == [{"mining_precision": "fp32"}, {"mining_precision": "int8"}]
    cost = bench.mining_cost(tmp_path / "store10-fp32", tmp_path / "store10-int8", resamples=200)
    negatives, systems = cost["negatives"], cost["systems"]
    assert negatives["questions"] > 0 and 0 <= negatives["changed_negatives"] <= negatives["negatives"]
    base = next(s for s in systems if s.endswith("-base"))
    assert systems[base]["identical"] and systems[base]["diff"] == 0.0
    assert any(s.endswith("-ft-s10") for s in systems)
    for row in systems.values():
        assert row["ci"][0] <= row["diff"] <= row["ci"][1]
    assert "negatives differ from fp32 mining" in capsys.readouterr().out
