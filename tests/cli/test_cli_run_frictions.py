"""What a newcomer meets on the command line: defaults in --help, --dry-run, a mistyped model
name, where results went, announced run files, --quiet/--verbose, and progress lines when the
output is not a terminal."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from adaptlab.cli import main

_ENV_BEFORE = dict(os.environ)


def test_help_shows_defaults(capsys):
    for cmd, needle in (
        ("evaluate", "(default: table)"),
        ("report", "(default: 1000)"),
        ("report", "(default: 0)"),
        ("inspect", "(default: 10)"),
    ):
        with pytest.raises(SystemExit):
            main([cmd, "--help"])
        out = " ".join(capsys.readouterr().out.split())
        assert needle in out, (cmd, needle)
    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    assert "default ndcg@10" in " ".join(capsys.readouterr().out.split())


def test_dry_run_prints_the_plan(capsys):
    rc = main(
        [
            "run",
            "--model",
            "hash:16",
            "--dataset",
            "synthetic:n_documents=4,seed=1",
            "--dry-run",
            "--store",
            "somewhere",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert "dataset" in out and "synthetic:n_documents=4,seed=1" in out and "hash:16" in out
    assert "results store: somewhere" in out and "embedded local Ray" in out
    assert not os.path.exists("somewhere")


def test_model_typo_suggests_the_alias(capsys):
    rc = main(["run", "--model", "minlm", "--dataset", "synthetic:n_documents=4", "--dry-run"])
    err = capsys.readouterr().err
    assert rc == 2 and "did you mean 'minilm'?" in err and "\n" == err[-1] and err.count("\n") == 1


def test_run_without_store_says_so_and_announces_run_files(tmp_path, capsys):
    out_file = tmp_path / "run.trec"
    rc = main(
        [
            "--quiet",
            "run",
            "--model",
            "hash:16",
            "--model",
            "hash:8",
            "--dataset",
            "synthetic:n_documents=4,seed=1",
            "--no-ray",
            "--bootstrap",
            "50",
            "--export-run",
            str(out_file),
        ]
    )
    captured = capsys.readouterr()
    assert rc == 0
    assert os.environ.get("ADAPTLAB_PROGRESS") != "0" or "ADAPTLAB_PROGRESS" in _ENV_BEFORE  # --quiet undone
    assert "results were not stored" in captured.err and "--store DIR" in captured.err
    assert "TREC run file(s) written:" in captured.err
    after = captured.err.split("TREC run file(s) written:\n")[1].splitlines()
    written = [line.strip() for line in after if line.startswith("  ")]
    assert len(written) == 2  # one file per system, each named
    assert all(os.path.isfile(name) for name in written)


def test_quiet_and_verbose_exclude_each_other(capsys):
    with pytest.raises(SystemExit):
        main(["--quiet", "--verbose", "run", "--dry-run"])
    assert "exclude each other" in capsys.readouterr().err


def test_redirected_embedding_shows_progress_lines(tmp_path):
    """Embedding with stderr redirected to a file prints progress lines (done/total, rate, time
    left), no bar redraws. (``adaptlab run`` shows them once embedding/cache.py passes
    ``progress=True``.)"""
    script = (
        "from adaptlab.embedding.pipeline import embed_texts\n"
        "texts = [f'text number {i} about wetlands' for i in range(300)]\n"
        "emb = embed_texts(texts, 'hash:16', batch_size=2, use_ray=False, progress=True)\n"
        "assert emb.shape == (300, 16)\n"
    )
    log = tmp_path / "log.txt"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "ADAPTLAB_PROGRESS_INTERVAL": "0"}
    env.pop("ADAPTLAB_PROGRESS", None)
    with open(log, "w") as fh:  # stderr is a file, not a terminal
        res = subprocess.run([sys.executable, "-c", script], stdout=fh, stderr=subprocess.STDOUT, env=env, timeout=300)
    text = log.read_text()
    assert res.returncode == 0, text
    lines = [line for line in text.splitlines() if line.startswith("[adaptlab] embedding 300 documents")]
    assert len(lines) >= 3, text
    assert any("/s" in line and "left" in line and "%" in line for line in lines)
    assert lines[-1].endswith("/s)") and " in " in lines[-1]  # the closing line
    assert "\r" not in text  # no bar redraws in a file
    # quiet: nothing
    env["ADAPTLAB_PROGRESS"] = "0"
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0 and "[adaptlab] embedding" not in res.stderr


def test_cli_logging_is_restored_after_the_command():
    import logging

    spec = ["run", "--model", "hash:8", "--dataset", "synthetic:n_documents=4", "--dry-run"]
    logger = logging.getLogger("adaptlab")
    level = logger.level
    assert main(["--verbose", *spec]) == 0
    assert logger.level == level and not [
        h for h in logger.handlers if isinstance(h, logging.StreamHandler) and h.stream is sys.stderr
    ]


def test_evaluate_accepts_beir_qrels(tmp_path, capsys):
    qdir = tmp_path / "beir" / "qrels"
    qdir.mkdir(parents=True)
    (qdir / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n")
    run = tmp_path / "sys.trec"
    run.write_text("q1 Q0 d1 1 2.0 s\nq1 Q0 d2 2 1.0 s\nq2 Q0 d1 1 2.0 s\nq2 Q0 d2 2 1.0 s\n")
    for qrels in (qdir / "test.tsv", tmp_path / "beir"):
        assert (
            main(
                [
                    "evaluate",
                    "--qrels",
                    str(qrels),
                    "--run",
                    str(run),
                    "--metrics",
                    "acc@1",
                    "--bootstrap",
                    "20",
                    "--format",
                    "json",
                ]
            )
            == 0
        )
        assert '"acc@1"' in capsys.readouterr().out


# -- the store is checked before any work (issue 19) -------------------------------------------------
_ADHOC = ["run", "--model", "hash:16", "--dataset", "synthetic:n_documents=4,seed=1", "--no-ray", "--bootstrap", "20"]


def _bad_stores(tmp_path):
    (tmp_path / "notes.txt").write_text("mine\n")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "thesis.tex").write_text("\\begin{document}\n")
    return {
        "ftp://admin:PASS@host/x": "unsupported scheme 'ftp'",
        str(tmp_path / "notes.txt"): "not a directory",
        str(tmp_path / "notes.txt" / "sub"): "not a directory",
        str(tmp_path / "full"): "holds other files",
        "/proc/adaptlab-store": "not writable",
    }


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_bad_store_fails_before_any_work(tmp_path, capsys, monkeypatch, dry_run):
    """``run --store`` with an unusable location: one error line, exit 2, before the inputs are
    even checked (it failed only after the whole evaluation, ~11 s, before)."""
    import adaptlab.cli.run_cmd as run_cmd
    import adaptlab.study.runner as runner

    def started(*_a, **_k):
        raise AssertionError("work started before the store was checked")

    monkeypatch.setattr(runner, "check_inputs", started)
    monkeypatch.setattr(run_cmd, "check_inputs", started)
    for store, needle in _bad_stores(tmp_path).items():
        if store.startswith("/proc") and not os.path.isdir("/proc"):
            continue
        before = sorted(p.name for p in tmp_path.rglob("*"))
        rc = main([*_ADHOC, "--store", store, *(["--dry-run"] if dry_run else [])])
        captured = capsys.readouterr()
        lines = captured.err.strip().splitlines()
        assert rc == 2 and len(lines) == 1 and needle in lines[0], (store, captured.err)
        assert "PASS" not in captured.err + captured.out and not captured.out
        assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing created, nothing left


def test_a_good_store_passes_the_early_check_and_is_used(tmp_path, capsys):
    store = tmp_path / "new" / "store"
    rc = main(["--quiet", *_ADHOC, "--store", str(store)])
    out = capsys.readouterr().out
    assert rc == 0 and f"results stored in {store}" in out and (store / "_delta_log").is_dir()
    assert not [p for p in tmp_path.rglob(".adaptlab-write-check-*")]  # the write probe is removed


def test_dry_run_masks_the_address_and_refuses_a_store_with_credentials(capsys):
    args = [
        "run",
        "--model",
        "hash:16",
        "--dataset",
        "synthetic:n_documents=4,seed=1",
        "--dry-run",
        "--address",
        "ray://admin:PASS@127.0.0.1:10001",
    ]
    rc = main([*args, "--store", "s3://bucket/study"])
    out = capsys.readouterr().out
    assert rc == 0 and "PASS" not in out
    assert "Ray: ray://admin:***@127.0.0.1:10001" in out and "results store: s3://bucket/study" in out
    # a signed URL carries a credential: refused before any work, the signature never printed
    rc = main([*args, "--store", "s3://bucket/study?X-Amz-Signature=PASS"])
    captured = capsys.readouterr()
    assert rc == 2 and "PASS" not in captured.out + captured.err
    assert "without credentials in it" in captured.err


def test_a_lost_cluster_is_one_line_with_exit_code_2(tmp_path, capsys, monkeypatch):
    """ClusterCapacityError (exported by adaptlab.embedding) raised while a system is embedded:
    the study stops and the CLI prints its one line, status 2, no traceback."""
    import adaptlab.embedding.cache as cache
    from adaptlab.embedding import ClusterCapacityError
    from adaptlab.errors import AdaptlabError

    assert issubclass(ClusterCapacityError, AdaptlabError)

    def lost(*_a, **_k):
        raise ClusterCapacityError(
            "embedding stopped: no embedding actor was ready for 5 s, none could be "
            "placed (lost node(s) 1a2b3c (10.0.0.7)); 0/6 texts were embedded"
        )

    monkeypatch.setattr(cache, "embed_texts", lost)
    rc = main(["--quiet", *_ADHOC, "--store", str(tmp_path / "store")])
    captured = capsys.readouterr()
    lines = [ln for ln in captured.err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert lines[0].startswith("adaptlab run: error: embedding stopped") and "lost node(s) 1a2b3c" in lines[0]
    assert not (tmp_path / "store" / "_delta_log").exists()  # nothing committed
