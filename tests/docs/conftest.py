"""Fixtures of the docs-commands test: a small results store built once by a study run (system and
dataset names as the docs spell them), and a working folder with the TREC files, the BEIR folder
and the store paths the docs' commands name."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]

# The docs name these systems and datasets (minilm, base, ft, minilm-base, minilm-ft-s20; heldout,
# scifact) and these measures (ndcg@10, acc@5, mrr, mrr@10, ...): the store holds them, so each
# command runs as written but for its --store. Hash encoders of different sizes differ in quality.
STUDY = """[study]
name = "docs"
seed = 0

[[datasets]]
name = "heldout"
spec = "synthetic:n_documents=6,seed=0"

[[datasets]]
name = "scifact"
spec = "synthetic:n_documents=6,seed=1"
{models}
[evaluation]
metrics = ["ndcg@10", "acc@1", "acc@5", "mrr", "mrr@10", "recall@100"]
k = 100

[bootstrap]
n_resamples = 100

[embedding]
use_ray = false
cache = "off"
"""

MODELS = {"minilm": 16, "minilm-base": 20, "minilm-ft-s20": 48}
# base and ft on heldout only (so `plan --system ft --against base` needs no --dataset), close
# enough per query that planning for a 0.02 gain needs few queries (a quick simulation)
AGAIN = {"base": 512, "ft": 1024}

# file names the docs' TREC commands use: qrels files and run files (system = the file's stem)
QRELS_FILES = ("qrels.txt", "qrels.test.trec", "QRELS")
# runs share their random scores and differ in how much relevance adds (A > B, new > base)
RUN_STRENGTH = {"A": 0.9, "B": 0.6, "C": 0.3, "bm25": 0.4, "minilm": 0.7, "new": 0.8, "base": 0.5}


def _study(models: dict[str, int], scifact: bool = True) -> str:
    blocks = "".join(f'\n[[models]]\nname = "{n}"\nref = "hash:{d}"\n' for n, d in models.items())
    text = STUDY.format(models=blocks)
    if not scifact:
        text = text.replace('[[datasets]]\nname = "scifact"\nspec = "synthetic:n_documents=6,seed=1"\n', "")
    return text


def _run_study(text: str, path: Path, store: Path) -> None:
    from adaptlab.cli import main

    path.write_text(text)
    assert main(["--quiet", "run", str(path), "--store", str(store)]) == 0


@pytest.fixture(scope="session")
def docs_store(tmp_path_factory) -> Path:
    """The minilm systems on heldout and scifact (versions 1 and 2), then base and ft on heldout
    (version 3: the docs' --version 3 exists)."""
    root = tmp_path_factory.mktemp("docs-store")
    store = root / "store"
    _run_study(_study(MODELS), root / "docs.toml", store)
    _run_study(_study(AGAIN, scifact=False), root / "again.toml", store)
    return store


def _qrels_and_runs(folder: Path, n_queries: int = 30, n_docs: int = 60) -> None:
    """Graded qrels (one or two relevant documents per query) and a run per name in RUN_STRENGTH:
    random scores plus the strength times the relevance grade, so the runs differ in quality."""
    noise = np.random.default_rng(0).random((n_queries, n_docs))
    rel = {f"q{q}": {f"d{q}": 1, f"d{q + n_queries}": 2} if q % 3 == 0 else {f"d{q}": 1} for q in range(n_queries)}
    lines = [f"{q} 0 {d} {g}" for q, docs in rel.items() for d, g in docs.items()]
    for name in QRELS_FILES:
        (folder / name).write_text("\n".join(lines) + "\n")
    for name, strength in RUN_STRENGTH.items():
        rows = []
        for qi, (q, docs) in enumerate(rel.items()):
            scores = noise[qi] + strength * np.array([docs.get(f"d{i}", 0) for i in range(n_docs)])
            order = np.argsort(-scores)
            rows += [f"{q} Q0 d{i} {r + 1} {scores[i]:.6f} {name}" for r, i in enumerate(order)]
        (folder / f"{name}.trec").write_text("\n".join(rows) + "\n")


# A fenced block whose info string names a file after the language (```toml faq.toml) is that
# file: the docs' commands that use it run on the text the reader sees.
NAMED_BLOCK = re.compile(r"^```\w+ ([\w.-]+\.(?:csv|tsv|jsonl|toml))[ \t]*\n(.*?)^```", re.S | re.M)
# folders the named files point at, with one document each (the own-corpus tutorial's PDF folder)
CORPUS_FOLDERS = {"my_pdfs": "Section 1. The pump valve is inspected every two weeks.\n"}


def write_named_blocks(folder: Path) -> list[str]:
    """Write every named block of docs/**/*.md into ``folder``; returns the file names."""
    names = []
    for page in sorted((ROOT / "docs").rglob("*.md")):
        for m in NAMED_BLOCK.finditer(page.read_text(encoding="utf-8")):
            (folder / m.group(1)).write_text(m.group(2), encoding="utf-8")
            names.append(m.group(1))
    for name, text in CORPUS_FOLDERS.items():
        (folder / name).mkdir(exist_ok=True)
        (folder / name / "doc.txt").write_text(text, encoding="utf-8")
    return names


@pytest.fixture(scope="session")
def docs_data(tmp_path_factory) -> Path:
    """A folder with the TREC files and DATA_DIR/heldout (the held-out set as a BEIR folder)."""
    from adaptlab.data import load_dataset
    from adaptlab.data.beir import write_beir

    folder = tmp_path_factory.mktemp("docs-data")
    _qrels_and_runs(folder)
    write_beir(load_dataset("synthetic:n_documents=6,seed=0"), folder / "DATA_DIR" / "heldout")
    return folder


@pytest.fixture
def docs_workdir(docs_data, tmp_path, monkeypatch) -> Path:
    """The current folder of one docs command: links to the session's TREC files and data, and to
    the project's jobs/ (study files the docs name), and the files the docs show (faq.csv, ...)."""
    os.symlink(ROOT / "jobs", tmp_path / "jobs")
    for item in docs_data.iterdir():
        os.symlink(item, tmp_path / item.name)
    write_named_blocks(tmp_path)  # real files: a study's relative store then lands in this folder
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ADAPTLAB_PROGRESS", "0")
    return tmp_path


@pytest.fixture(scope="module")
def bench(request):
    """The benchmark module named by the test module's ``BENCHMARK`` (``benchmarks.<name>``)."""
    return importlib.import_module(f"benchmarks.{request.module.BENCHMARK}")
