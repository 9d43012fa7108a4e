"""Small frictions of issue 20 on the command line: -v is INFO and -vv DEBUG, a study run suggests
``--latest``, exported TREC files get the umask's mode, "queries" in progress labels, and a typo
among several --filter values."""

from __future__ import annotations

import logging
import os
import stat

import pytest

import adaptlab.cli as cli
from adaptlab.cli import main


@pytest.mark.parametrize(
    ("flags", "level"),
    [((), logging.WARNING), (("-v",), logging.INFO), (("-vv",), logging.DEBUG), (("-v", "-v"), logging.DEBUG)],
)
def test_verbosity_levels(flags, level, monkeypatch, tmp_path):
    seen: list[int] = []
    real = cli.configure_logging

    def spy(verbosity: int):
        restore = real(verbosity)
        seen.append(logging.getLogger("adaptlab").level)
        return restore

    monkeypatch.setattr(cli, "configure_logging", spy)
    main([*flags, "results", "--store", str(tmp_path / "absent")])
    assert seen == [level]


def test_sub_command_verbosity_adds_to_the_global_one(monkeypatch, tmp_path):
    seen: list[int] = []
    monkeypatch.setattr(cli, "configure_logging", lambda v: seen.append(v) or (lambda: None))
    main(["-v", "results", "--store", str(tmp_path / "absent"), "-v"])
    assert seen == [2]


def test_progress_label_says_queries():
    from adaptlab.embedding.pipeline import _what

    assert _what(object(), "query", 3).startswith("embedding 3 queries")  # type: ignore[arg-type]
    assert _what(object(), "document", 2).startswith("embedding 2 documents")  # type: ignore[arg-type]


def test_progress_label_names_an_adapted_model_by_its_folder():
    from types import SimpleNamespace

    from adaptlab.embedding.pipeline import _what

    def factory(name: str) -> SimpleNamespace:
        return SimpleNamespace(ref=SimpleNamespace(name=name))

    adapted = factory("/store/artifacts/minilm/ft-700-4ad60a576367b914/model")
    assert _what(adapted, "document", 5) == "embedding 5 documents with ft-700-4ad60a576367b914"
    assert _what(factory("sentence-transformers/all-MiniLM-L6-v2"), "query", 1).endswith("with all-MiniLM-L6-v2")
    assert _what(factory("minilm"), "query", 1).endswith("with minilm")


def test_run_suggests_latest_and_exports_shareable_run_files(tmp_path, capsys):
    store, run_file = tmp_path / "store", tmp_path / "run.trec"
    old = os.umask(0o022)
    try:
        rc = main(
            [
                "--quiet",
                "run",
                "--model",
                "hash:8",
                "--dataset",
                "synthetic:n_documents=4,seed=1",
                "--no-ray",
                "--bootstrap",
                "20",
                "--store",
                str(store),
                "--export-run",
                str(run_file),
            ]
        )
    finally:
        os.umask(old)
    out = capsys.readouterr().out
    assert rc == 0
    assert f"(adaptlab results --store {store} --latest)" in out
    assert stat.S_IMODE(run_file.stat().st_mode) == 0o644
