"""One test per row of issue 11 fixed here (9, 10, 11, 12, 15 in the corpus, 16, 17, 18 in the
docs), the Python API entry points under hostile input, and property tests of the parsers."""

from __future__ import annotations

import errno
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adaptlab import results
from adaptlab.data.trec import read_trec_qrels, read_trec_run
from adaptlab.errors import AdaptlabError, ConfigError, DataError, StoreError
from adaptlab.metrics import parse_measures
from adaptlab.stats import bootstrap_ci
from adaptlab.study import load_study
from robustness.hostile import HOSTILE_BYTES, STUDY, assert_one_line_error, build_store, cli, digest

# -- row 9: a study is validated whole; the per-dataset unit is named ------------------------------


def test_second_dataset_missing_fails_before_anything_is_stored(work):
    (work / "two.toml").write_text(STUDY + '\n[[datasets]]\nname = "two"\nspec = "beir:missing-two"\n')
    rc, out, err = cli(["run", "two.toml", "--store", "st", "--no-ray"])
    assert_one_line_error(rc, err, ("missing-two", "[[datasets]] entry 2", "nothing was run"))
    assert not (work / "st").exists()


def test_a_bad_colbert_search_option_fails_before_anything_is_stored(work):
    (work / "cb.toml").write_text(
        STUDY + '\n[[models]]\nname = "cb"\nref = "hash:16"\nbackend = "colbert"\noptions = { search = "bogus" }\n'
    )
    rc, out, err = cli(["run", "cb.toml", "--store", "st", "--no-ray"])
    assert_one_line_error(rc, err, ("[[models]] entry 2", "search = 'bogus'", "nothing was run"))
    assert not (work / "st").exists()


def test_a_late_failure_names_the_datasets_already_committed(work):
    bad = work / "bad-beir"
    (bad / "qrels").mkdir(parents=True)
    (bad / "corpus.jsonl").write_bytes(b"\xff\xfe not json")
    (bad / "queries.jsonl").write_text("")
    (bad / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n")
    (work / "late.toml").write_text(STUDY + '\n[[datasets]]\nname = "late"\nspec = "beir:bad-beir"\n')
    rc, out, err = cli(["run", "late.toml", "--store", "st", "--no-ray"])
    line = assert_one_line_error(rc, err, ("already committed", "syn (version"))
    assert "late" not in line.split("already committed")[1]
    assert results.open(work / "st").runs().column("dataset").to_pylist() == ["syn"]


# -- row 10: a byte flip inside a committed Parquet file is an error naming the file ---------------


def _read_everything(root: Path) -> list:
    with results.open(root) as s:
        return [
            s.runs().to_pylist(),
            s.metrics(kind="all").to_pylist(),
            s.per_query().to_pylist(),
            s.sql("SELECT count(*) AS n FROM metrics_all").to_dict("records"),
        ]


def test_byte_flips_are_always_detected(tmp_path):
    pristine = tmp_path / "pristine"
    build_store(pristine).close()
    expected = repr(_read_everything(pristine))
    files = sorted(p for p in pristine.rglob("*.parquet"))
    rng = random.Random(11)
    for trial in range(40):
        root = tmp_path / f"t{trial}"
        shutil.copytree(pristine, root)
        target = root / rng.choice(files).relative_to(pristine)
        data = bytearray(target.read_bytes())
        for _ in range(rng.randint(1, 16)):
            data[rng.randrange(len(data))] ^= rng.randint(1, 255)
        if bytes(data) == target.read_bytes():  # pragma: no cover - flips that cancel out
            continue
        target.write_bytes(bytes(data))
        with pytest.raises(StoreError) as e:
            got = repr(_read_everything(root))
            assert got == expected  # never silently different
        assert target.name in str(e.value) and "corrupted" in str(e.value)
        shutil.rmtree(root)


def test_a_corrupted_store_is_one_line_on_the_command_line(tmp_path):
    root = tmp_path / "s"
    build_store(root).close()
    f = next(root.rglob("kind=scores/*.parquet"))
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0x40
    f.write_bytes(bytes(data))
    rc, out, err = cli(["results", "--store", str(root)])
    assert_one_line_error(rc, err, (f.name, "corrupted"))


# -- row 11: the same run id, or (run id, query id), committed twice is refused --------------------


def test_run_id_and_query_unique_across_commits(tmp_path):
    store = build_store(tmp_path / "s")
    before = digest(tmp_path / "s")
    run = store.runs().to_pylist()[0]
    with pytest.raises(StoreError, match="already in the store"):
        store.commit([run])
    pq = store.per_query(run_id=run["run_id"]).slice(0, 1)
    with pytest.raises(StoreError, match=r"\(run_id, query_id\) is unique"):
        store.commit([], None, pq)
    assert digest(tmp_path / "s") == before


# -- row 12: directories, bad names and a full disk are one line, exit 2 ---------------------------


def test_report_out_is_a_file(work, store_dir):
    (work / "out.txt").write_text("keep me")
    rc, out, err = cli(["report", "--store", str(store_dir), "--out", "out.txt"])
    assert_one_line_error(rc, err, ("out.txt",))
    assert (work / "out.txt").read_text() == "keep me"


def test_export_run_with_slashes_in_names_stays_in_its_folder(work):
    study = STUDY.replace('name = "h"', 'name = "../../evil/h"')
    study += '\n[[models]]\nname = "a/b"\nref = "hash:8"\n'
    (work / "names.toml").write_text(study)
    (work / "exp").mkdir()
    rc, out, err = cli(["run", "names.toml", "--no-ray", "--no-store", "--export-run", "exp/run.trec"])
    assert rc == 0, err
    written = sorted(p.name for p in (work / "exp").iterdir())
    assert len(written) == 2 and all(n.startswith("run.syn.") for n in written), written
    assert not (work.parent / "evil").exists()


def test_disk_full_while_writing_is_one_line(work, monkeypatch):
    import adaptlab.data.trec as trec

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", str(work / "run.trec"))

    monkeypatch.setattr(trec, "write_trec_run", full)
    monkeypatch.setattr("adaptlab.study.runner.write_trec_run", full)
    rc, out, err = cli(["run", "study.toml", "--no-ray", "--no-store", "--export-run", "run.trec"])
    assert_one_line_error(rc, err, ("run.trec", "No space left on device"))


def test_disk_full_while_writing_a_report(work, store_dir, monkeypatch):
    real = Path.write_text

    def full(self, *a, **k):
        if self.name.startswith("report"):
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "write_text", full)
    rc, out, err = cli(["report", "--store", str(store_dir), "--out", "rep", "--bootstrap", "20"])
    assert_one_line_error(rc, err, ("No space left on device",))
    assert not (work / "rep" / "report.md").exists()
    assert [p for p in work.iterdir() if p.name.startswith(".rep.")] == []


# -- row 16: a typo in report --system is an error; no stale figures -------------------------------


def test_report_typo_and_no_stale_figures(work, store_dir):
    rc, out, err = cli(["report", "--store", str(store_dir), "--out", "rep", "--bootstrap", "20"])
    assert rc == 0, err
    stale = work / "rep" / "figures" / "old-figure.png"
    stale.write_bytes(b"png")
    rc, out, err = cli(["report", "--store", str(store_dir), "--out", "rep", "--system", "minlm"])
    assert_one_line_error(rc, err, ("minlm", "did you mean 'minilm'"))
    rc, out, err = cli(["report", "--store", str(store_dir), "--out", "rep", "--system", "minilm", "--bootstrap", "20"])
    assert rc == 0, err
    assert not stale.exists()


def test_results_filter_typo_suggests(work, store_dir):
    rc, out, err = cli(["results", "--store", str(store_dir), "--filter", "measure=ndgc@10"])
    assert_one_line_error(rc, err, ("did you mean 'ndcg@10'",))
    rc, out, err = cli(["results", "--store", str(store_dir), "--filter", "system=minilm", "--filter", "measure=acc@1"])
    assert rc == 0 and "(1 rows)" in out


# -- row 17: results | head ends quietly ------------------------------------------------------------


def test_results_json_into_a_closed_pipe(store_dir):
    cmd = (
        f"{sys.executable} -m adaptlab results --store {store_dir} --format json "
        "--sql 'SELECT range AS n FROM range(300000)' | head -c 20"
    )  # far more than a pipe buffer
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert proc.stdout.startswith("[")


# -- the Python API under hostile input --------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(HOSTILE_BYTES))
@pytest.mark.parametrize("entry", ["load_study", "read_trec_run", "read_trec_qrels", "results.open"])
def test_api_entry_points_raise_documented_errors(tmp_path, entry, kind):
    f = tmp_path / f"hostile-{kind}"
    f.write_bytes(HOSTILE_BYTES[kind])
    fn = {
        "load_study": load_study,
        "read_trec_run": read_trec_run,
        "read_trec_qrels": read_trec_qrels,
        "results.open": results.open,
    }[entry]
    try:
        fn(f)
    except (ConfigError, DataError, StoreError) as e:
        assert f.name in str(e) and "\n" not in str(e).strip()
    else:
        assert entry == "read_trec_qrels" and kind in ("empty", "comments_only")  # an empty qrels file is empty


BOOTSTRAP_BAD = [
    dict(values=[], n_resamples=100),
    dict(values=[0.1, float("nan")], n_resamples=100),
    dict(values=[0.1, 0.2], n_resamples=0),
    dict(values=[0.1, 0.2], n_resamples=-3),
    dict(values=[0.1, 0.2], n_resamples=100, confidence=2.0),
    dict(values=[0.1, 0.2], n_resamples=100, confidence=0.0),
    dict(values=[0.1, 0.2], n_resamples=100, sample_size=-1),
    dict(values="not numbers", n_resamples=100),
]


@pytest.mark.parametrize("kw", BOOTSTRAP_BAD, ids=[str(i) for i in range(len(BOOTSTRAP_BAD))])
def test_bootstrap_ci_rejects_bad_input(kw):
    kw = dict(kw)
    values = kw.pop("values")
    with pytest.raises((ConfigError, DataError, ValueError)):
        bootstrap_ci(np.asarray(values) if not isinstance(values, str) else values, **kw)


COMMIT_BAD = [
    ([], None, None),
    ([{"system": "a"}], None, None),
    ([{"run_id": "x", "system": "a", "dataset": "d", "bogus": 1}], None, None),
    (None, [{"system": "nope", "dataset": "toy", "measure": "m", "value": 1.0}], None),
    (None, [{"run_id": "nosuchrun", "system": "a", "dataset": "d", "measure": "m", "value": "high"}], None),
    ("not rows", None, None),
]


@pytest.mark.parametrize("runs,metrics,pq", COMMIT_BAD, ids=[str(i) for i in range(len(COMMIT_BAD))])
def test_commit_rejects_bad_rows_and_writes_nothing(tmp_path_factory, runs, metrics, pq):
    root = tmp_path_factory.mktemp("c") / "s"
    store = build_store(root)
    before = digest(root)
    with pytest.raises(StoreError):
        store.commit(runs if runs is not None else [], metrics, pq)
    assert digest(root) == before


# -- property tests of the parsers ------------------------------------------------------------------

_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=200)
_FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_FAST
@given(body=st.one_of(_TEXT, st.binary(max_size=200)))
def test_trec_parsers_never_crash(tmp_path, body):
    f = tmp_path / "x.trec"
    f.write_bytes(body if isinstance(body, bytes) else body.encode("utf-8"))
    for reader in (read_trec_run, read_trec_qrels):
        try:
            reader(f)
        except AdaptlabError as e:
            assert "x.trec" in str(e)


@_FAST
@given(
    rows=st.lists(
        st.tuples(st.sampled_from(["q1", "q2", "q3"]), st.integers(0, 50), st.floats(-1e6, 1e6, allow_nan=False)),
        min_size=1,
        max_size=30,
    )
)
def test_trec_run_round_trip(tmp_path, rows):
    lines, expected = [], {}
    for qid, d, score in rows:
        if f"d{d}" in expected.get(qid, {}):
            continue
        expected.setdefault(qid, {})[f"d{d}"] = score
        lines.append(f"{qid} Q0 d{d} 1 {score!r} tag")
    f = tmp_path / "r.trec"
    f.write_text("\n".join(lines) + "\n")
    got = read_trec_run(f)
    assert {q: dict(v) for q, v in got.items()} == expected


@_FAST
@given(text=st.text(max_size=40))
def test_measure_parser_never_crashes(text):
    try:
        measures = parse_measures(text)
    except ConfigError as e:
        assert "\n" not in str(e).strip()
    else:
        for m in measures:
            assert m.k is None or 1 <= m.k <= 10**7


@_FAST
@given(k=st.integers(min_value=-(10**30), max_value=10**30), name=st.sampled_from(["ndcg", "recall", "acc", "mrr"]))
def test_measure_cutoffs_are_bounded(k, name):
    try:
        (m,) = parse_measures(f"{name}@{k}")
    except ConfigError:
        assert k < 1 or k > 1000
    else:
        assert m.k == k and k >= 1
