"""The hostile-input corpus (issue 11): every row is one hostile input through one entry point.

Each CLI case asserts exit status 2, one error line naming the file, line, option or key and
what is expected, no traceback, and the results store byte-for-byte unchanged. A new command
joins by adding rows to these tables. Files are generated here (conftest.HOSTILE_BYTES)."""

from __future__ import annotations

from pathlib import Path

import pytest

from robustness.hostile import HOSTILE_BYTES, STUDY, assert_one_line_error, cli, digest

# -- evaluate: hostile qrels and run files ---------------------------------------------------------

FILE_KINDS = sorted(HOSTILE_BYTES)


@pytest.mark.parametrize("kind", FILE_KINDS)
def test_evaluate_hostile_qrels(work, kind):
    (work / "bad.qrels").write_bytes(HOSTILE_BYTES[kind])
    rc, out, err = cli(["evaluate", "--qrels", "bad.qrels", "--run", "run.txt", "--bootstrap", "50"])
    assert_one_line_error(rc, err, ("bad.qrels",))


@pytest.mark.parametrize("kind", FILE_KINDS)
def test_evaluate_hostile_run(work, kind):
    (work / "bad.run").write_bytes(HOSTILE_BYTES[kind])
    rc, out, err = cli(["evaluate", "--qrels", "qrels.txt", "--run", "bad.run", "--bootstrap", "50"])
    assert_one_line_error(rc, err, ("bad.run",))


RUN_LINES = {
    "score_nan": "q1 Q0 d1 1 nan sys\n",
    "score_inf": "q1 Q0 d1 1 inf sys\n",
    "score_word": "q1 Q0 d1 1 high sys\n",
    "seven_columns": "q1 Q0 d1 1 0.5 sys extra\n",
    "duplicate_doc": "q1 Q0 d1 1 0.5 sys\nq1 Q0 d1 2 0.4 sys\n",
    "no_shared_query": "zz Q0 d1 1 0.5 sys\n",
    "score_huge": "q1 Q0 d1 1 1e999 sys\n",
}
QREL_LINES = {
    "rel_word": "q1 0 d1 yes\n",
    "rel_float": "q1 0 d1 0.5\n",
    "conflicting": "q1 0 d1 1\nq1 0 d1 2\n",
    "five_columns": "q1 0 d1 1 extra\n",
    "no_relevant": "q1 0 d1 0\n",
}


@pytest.mark.parametrize("case", sorted(RUN_LINES))
def test_evaluate_malformed_run_lines(work, case):
    (work / "bad.run").write_text(RUN_LINES[case])
    rc, out, err = cli(["evaluate", "--qrels", "qrels.txt", "--run", "bad.run", "--bootstrap", "50"])
    assert_one_line_error(rc, err, ("bad.run",))


@pytest.mark.parametrize("case", sorted(QREL_LINES))
def test_evaluate_malformed_qrels_lines(work, case):
    (work / "bad.qrels").write_text(QREL_LINES[case])
    rc, out, err = cli(["evaluate", "--qrels", "bad.qrels", "--run", "run.txt", "--bootstrap", "50"])
    assert_one_line_error(rc, err, ("bad.qrels",))


EVALUATE_OPTIONS = [
    (["--metrics", "ndcg@0"], "ndcg@0"),
    (["--metrics", "ndcg@-1"], "ndcg@-1"),
    (["--metrics", "ndcg@1000000000"], "ndcg@1000000000"),
    (["--metrics", "ndcg@99999999999999999999999"], "ndcg@"),
    (["--metrics", "ndgc@10"], "ndgc@10"),
    (["--metrics", ""], "measures"),
    (["--metrics", "ndcg@ten"], "ndcg@ten"),
    (["--metrics", "ndcg@10;rm -rf /"], "ndcg@10;rm"),
    (["--metrics", "../../etc/passwd"], "passwd"),
    (["--bootstrap", "0"], "--bootstrap"),
    (["--bootstrap", "-5"], "-5"),
    (["--bootstrap", "ten"], "--bootstrap"),
    (["--bootstrap", "99999999999999"], "99999999999999"),
    (["--confidence", "1.5"], "1.5"),
    (["--confidence", "0"], "confidence"),
    (["--confidence", "nan"], "confidence"),
    (["--sample-size", "999999999999"], "--sample-size"),
    (["--sample-size", "-3"], "-3"),
    (["--baseline", "nope"], "nope"),
    (["--interval", "magic"], "magic"),
    (["--seed", "x"], "--seed"),
    (["--store", "st"], "--dataset"),
    (["--format", "xml"], "xml"),
    (["--run", "missing.run"], "missing.run"),
    (["--qrels", "."], "--qrels"),
    (["--run", "."], "."),
    (["--run", "run.txt"], "run"),  # the same run twice: two runs named 'run'
    (["--no-such-option"], "--no-such-option"),
]


@pytest.mark.parametrize("extra,needle", EVALUATE_OPTIONS, ids=[" ".join(a) for a, _ in EVALUATE_OPTIONS])
def test_evaluate_hostile_options(work, extra, needle):
    argv = ["evaluate", "--qrels", "qrels.txt", "--run", "run.txt", "--bootstrap", "50", *extra]
    if extra[0] in ("--qrels",):
        argv = ["evaluate", "--run", "run.txt", "--bootstrap", "50", *extra]
    rc, out, err = cli(argv)
    assert_one_line_error(rc, err, (needle,))


def test_evaluate_store_refuses_an_unrelated_folder(work):
    """Row 15: --store on an existing folder holding other files is refused, not turned into a store."""
    other = work / "photos"
    other.mkdir()
    (other / "holiday.jpg").write_bytes(b"\xff\xd8\xff" * 10)
    before = digest(other)
    rc, out, err = cli(
        [
            "evaluate",
            "--qrels",
            "qrels.txt",
            "--run",
            "run.txt",
            "--bootstrap",
            "50",
            "--store",
            str(other),
            "--dataset",
            "toy",
        ]
    )
    assert_one_line_error(rc, err, ("photos", "holiday.jpg", "empty folder"))
    assert digest(other) == before


# -- evaluate / results / report / inspect against an existing store: the store stays unchanged ----

STORE_CASES = [
    (["results", "--filter", "measure=ndgc@10"], ("ndgc@10", "ndcg@10")),
    (["results", "--filter", "system=minlm"], ("minlm", "minilm")),
    (["results", "--filter", "nosuchcolumn=1"], ("nosuchcolumn",)),
    (["results", "--filter", "justtext"], ("justtext", "KEY=VALUE")),
    (["results", "--filter", "=x"], ("KEY=VALUE",)),
    (["results", "--filter", "seed=notanumber"], ("seed",)),
    (["results", "--table", "per_query", "--filter", "topk_ids=d1"], ("topk_ids",)),
    (["results", "--version", "999"], ("999",)),
    (["results", "--version", "-1"], ("-1",)),
    (["results", "--as-of", "yesterday"], ("yesterday",)),
    (["results", "--sql", "SELEC * FROM metrics"], ("SQL",)),
    (["results", "--sql", "COPY (SELECT * FROM runs) TO 'leak.csv'"], ("SQL",)),
    (["results", "--sql", "SELECT * FROM read_csv('/etc/passwd')"], ("SQL",)),
    (["results", "--sql", "ATTACH 'other.db' AS o"], ("SQL",)),
    (["results", "--sql", "INSTALL httpfs"], ("SQL",)),
    (["results", "--sql", ""], ("SQL",)),
    (["results", "--sql", "SELECT 1", "--latest"], ("--sql",)),
    (["results", "bogus"], ("bogus",)),
    (["results", "migrate", "only-one"], ("migrate",)),
    (["results", "compact", "--retention-hours", "-1"], ("retention_hours",)),
    (["results", "--format", "yaml"], ("yaml",)),
    (["results", "--table", "secrets"], ("secrets",)),
    (["report", "--system", "minlm"], ("minlm", "minilm")),
    (["report", "--dataset", "tyo"], ("tyo", "toy")),
    (["report", "--k", "0"], ("k",)),
    (["report", "--k", "-3"], ("-3",)),
    (["report", "--bootstrap", "many"], ("--bootstrap",)),
    (["inspect", "--system", "minlm"], ("minlm",)),
    (["inspect", "--system", "minilm", "--against", "bgee"], ("bgee",)),
    (["inspect", "--system", "minilm", "--limit", "-1"], ("limit",)),
    (["inspect", "--system", "minilm", "--limit", "0"], ("limit",)),
    (["inspect", "--system", "minilm", "--data", "nosuchformat:x"], ("nosuchformat",)),
    (["inspect", "--system", "minilm", "--data", "beir:/no/such/dir"], ("/no/such/dir",)),
    (["inspect", "--system", "minilm", "--dataset", "tyo"], ("tyo",)),
]


def _with_store(argv: list[str], store: Path, out: Path) -> list[str]:
    if argv[0] == "results" and argv[1:2] == ["migrate"]:
        return argv
    extra = ["--store", str(store)]
    if argv[0] == "report":
        extra += ["--out", str(out)]
    return [*argv, *extra]


@pytest.mark.parametrize("argv,needles", STORE_CASES, ids=[" ".join(a) for a, _ in STORE_CASES])
def test_store_commands_refuse_hostile_input(work, store_dir, argv, needles):
    before = digest(store_dir)
    rc, out, err = cli(_with_store(argv, store_dir, work / "report"))
    assert_one_line_error(rc, err, needles)
    assert digest(store_dir) == before
    assert not (work / "leak.csv").exists() and not (work / "other.db").exists()


BAD_STORES = {
    "missing": lambda w: str(w / "nope"),
    "a_file": lambda w: str(w / "qrels.txt"),
    "unrelated_folder": lambda w: str(w),
    "binary_file": lambda w: (w.joinpath("blob").write_bytes(b"\x00\xff" * 100), str(w / "blob"))[1],
    "bad_scheme": lambda w: "ftp://host/store",
    "credentials_in_uri": lambda w: "s3://KEY:SECRET@bucket/x",
    "empty": lambda w: " ",
}
STORE_COMMANDS = {
    "results": ["results"],
    "results_runs": ["results", "--table", "runs"],
    "results_sql": ["results", "--sql", "SELECT 1"],
    "results_compact": ["results", "compact"],
    "report": ["report", "--out", "rep"],
    "inspect": ["inspect", "--system", "minilm"],
    "export_mteb": ["export", "--to", "mteb", "--out", "exp"],
    "export_ranx": ["export", "--to", "ranx", "--out", "exp"],
    "compare": ["compare"],
    "plan": ["plan", "--system", "minilm", "--against", "bge", "--measure", "ndcg@10", "--effect", "0.02"],
}


@pytest.mark.parametrize("store", sorted(BAD_STORES))
@pytest.mark.parametrize("command", sorted(STORE_COMMANDS))
def test_commands_refuse_a_bad_store_location(work, command, store):
    where = BAD_STORES[store](work)
    before = digest(work)
    rc, out, err = cli([*STORE_COMMANDS[command], "--store", where])
    line = assert_one_line_error(rc, err)
    assert "SECRET" not in line
    if store in ("missing", "a_file", "binary_file"):
        assert Path(where).name in line
    after = digest(work)
    assert (
        after == before
        or (command == "report" and not (work / "rep" / "report.md").exists())
        or (command.startswith("export") and not any((work / "exp").rglob("*.json")))
    )


# -- run (--dry-run: nothing heavy runs) and submit (no cluster) with hostile study files ----------

STUDY_EDITS = {
    "toml_syntax": (lambda s: s + "\n[study\n", "line"),
    "seed_string": (lambda s: s.replace("seed = 0", 'seed = "zero"'), "seed"),
    "k_negative": (lambda s: s.replace("k = 10", "k = -1"), "k"),
    "k_string": (lambda s: s.replace("k = 10", 'k = "ten"'), "k"),
    "metrics_int": (lambda s: s.replace('metrics = ["ndcg@10", "acc@1"]', "metrics = 5"), "metrics"),
    "metrics_unknown": (lambda s: s.replace('"acc@1"', '"ndgc@10"'), "ndgc@10"),
    "metrics_cutoff_huge": (lambda s: s.replace('"acc@1"', '"ndcg@1000000000"'), "ndcg@1000000000"),
    "unknown_key": (lambda s: s.replace("seed = 0", "seed = 0\nsed = 1"), "sed"),
    "unknown_section": (lambda s: s + "\n[evalution]\nk = 3\n", "evalution"),
    "datasets_table": (lambda s: s.replace("[[datasets]]", "[datasets]"), "datasets"),
    "dataset_no_spec": (lambda s: s.replace('spec = "synthetic:n_documents=6,seed=0"', ""), "spec"),
    "dataset_bad_format": (lambda s: s.replace("synthetic:n_documents=6,seed=0", "zip:data.zip"), "zip"),
    "dataset_missing_path": (lambda s: s.replace("synthetic:n_documents=6,seed=0", "beir:no/such/dir"), "no/such/dir"),
    "second_dataset_missing": (
        lambda s: s + '\n[[datasets]]\nname = "two"\nspec = "beir:missing-two"\n',
        "missing-two",
    ),
    "model_missing_dir": (lambda s: s.replace('ref = "hash:16"', 'ref = "./models/nothing-here/"'), "nothing-here"),
    "model_no_ref": (lambda s: s.replace('ref = "hash:16"', ""), "ref"),
    "n_resamples_negative": (lambda s: s + "\n[bootstrap]\nn_resamples = -1\n", "n_resamples"),
    "confidence_out_of_range": (lambda s: s + "\n[bootstrap]\nconfidence = 2.0\n", "confidence"),
    "sample_size_negative": (lambda s: s + "\n[bootstrap]\nsample_size = -3\n", "sample_size"),
    "batch_size_zero": (lambda s: s.replace('ref = "hash:16"', 'ref = "hash:16"\nbatch_size = 0'), "batch_size"),
    "num_actors_negative": (lambda s: s.replace("use_ray = false", "use_ray = false\nnum_actors = -2"), "num_actors"),
    "use_ray_string": (lambda s: s.replace("use_ray = false", 'use_ray = "no"'), "use_ray"),
    "baseline_unknown": (lambda s: s.replace("k = 10", 'k = 10\nbaseline = "nope"'), "nope"),
    "name_is_table": (lambda s: s.replace('name = "robust"', "name = {a = 1}"), "name"),
    "study_missing": (lambda s: s.replace("[study]", "[stud]"), "stud"),
}


@pytest.mark.parametrize("case", sorted(STUDY_EDITS))
def test_run_dry_run_refuses_hostile_studies(work, case):
    edit, needle = STUDY_EDITS[case]
    (work / "bad.toml").write_text(edit(STUDY))
    rc, out, err = cli(["run", "bad.toml", "--dry-run"])
    assert_one_line_error(rc, err, (needle,))
    assert not out.strip()


@pytest.mark.parametrize("kind", FILE_KINDS)
@pytest.mark.parametrize("command", ["run", "submit"])
def test_study_commands_refuse_hostile_files(work, command, kind):
    (work / "bad.toml").write_bytes(HOSTILE_BYTES[kind])
    extra = ["--dry-run"] if command == "run" else ["--address", "http://127.0.0.1:9"]
    rc, out, err = cli([command, "bad.toml", *extra])
    assert_one_line_error(rc, err, ("bad.toml",))


RUN_SUBMIT_PATHS = [
    (["run", ".", "--dry-run"], "."),
    (["run", "no-such-study.toml", "--dry-run"], "no-such-study.toml"),
    (["submit", ".", "--address", "http://127.0.0.1:9"], "directory"),
    (["submit", "no-such-study.toml", "--address", "http://127.0.0.1:9"], "no-such-study.toml"),
    (["submit", "study.toml", "--address", "not a url"], "not a url"),
    (["submit", "study.toml", "--address", "ftp://127.0.0.1:9"], "ftp"),
    (["submit", "study.toml", "--address", "http://127.0.0.1:9", "--timeout", "-1"], "--timeout"),
    (["run", "--model", "minlm", "--dataset", "synthetic:n_documents=4", "--dry-run"], "minlm"),
    (["run", "--model", "hash:16", "--dataset", "nosuch:x", "--dry-run"], "nosuch"),
    (["run", "--model", "hash:16", "--dry-run"], "--dataset"),
    (["run", "study.toml", "--k", "0", "--dry-run"], "k"),
    (["run", "study.toml", "--metrics", "ndcg@-4", "--dry-run"], "ndcg@-4"),
    (["run", "study.toml", "--bootstrap", "-1", "--dry-run"], "--bootstrap"),
    (["run", "study.toml", "--split", "../../etc", "--dry-run"], "split"),
]


@pytest.mark.parametrize("argv,needle", RUN_SUBMIT_PATHS, ids=[" ".join(a) for a, _ in RUN_SUBMIT_PATHS])
def test_run_and_submit_refuse_hostile_paths_and_options(work, argv, needle):
    rc, out, err = cli(argv)
    assert_one_line_error(rc, err, (needle,))
