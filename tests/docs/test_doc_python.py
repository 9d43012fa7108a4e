"""The docs' Python snippets (```python blocks of README.md and docs/*.md) run too: each block runs
in the docs' working folder (``results/quickstart`` and ``results/study``, where a block names them,
are copies of the test's store) with the few names the docs leave to the reader (``ds``, ``records``, per-query arrays, the
qrels and run DataFrames) bound to small stand-ins, or is in PY_SKIP with its reason."""

from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_doc_commands import DOCS, FENCE, ROOT

# Snippets that cannot run here, keyed by their first line, with the reason.
PY_SKIP: dict[str, str] = {
    "from adaptlab.data import load_dataset": "loads the reader's files (/data/scifact, faq.csv); tests/data load each format",
    "from transformers import AutoTokenizer": "reads the reader's corpus folder and mines negatives with the real MiniLM weights (about 40 s on a "
    "folder of 24 documents); tests/adapt/prep/test_adapt_prepare.py runs the same call on the synthetic domain",
    "from adaptlab import load_study, run_study": "runs the quickstart study (the real MiniLM weights, minutes on 2 cores)",
    "# Read an MLflow export back with MLflow's own API (SQLite: no environment variable needed)": "creates an MLflow SQLite database (~20 s); tests/results/test_mlflow_sqlite.py and test_interop.py "
    "export and read back with mlflow.search_runs",
}


def python_blocks() -> list[tuple[str, str]]:
    """(where, code) of every ```python block of the docs (dedented: a block inside a list item is
    indented as a whole)."""
    found = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            if m.group(1) == "python":
                line = text[: m.start()].count("\n") + 1
                found.append((f"{path.relative_to(ROOT).as_posix()}:{line}", textwrap.dedent(m.group(2))))
    return found


BLOCKS = python_blocks()


def _first_line(code: str) -> str:
    return next(ln.strip() for ln in code.splitlines() if ln.strip())


def _stand_ins(store: Path, cwd: Path) -> dict[str, Any]:
    """The names the docs' snippets take as given."""
    import pandas as pd

    from adaptlab import results
    from adaptlab.data import load_dataset
    from adaptlab.retrieval import PerQueryRecords

    rng = np.random.default_rng(0)
    table = results.open(store).per_query(system="minilm", dataset="scifact", latest=True)
    qrels = pd.read_csv(cwd / "qrels.txt", sep=" ", names=["query_id", "iter", "doc_id", "relevance"], dtype=str)
    run = pd.read_csv(cwd / "A.trec", sep=" ", names=["query_id", "q0", "doc_id", "rank", "score", "tag"], dtype=str)
    return {
        "ds": load_dataset("synthetic:n_documents=3,seed=0"),
        "records": PerQueryRecords.from_arrow(table.drop_columns(["run_id"]), system="minilm", dataset="scifact"),
        "store": results.open(store),  # a block that continues the one before it
        "ndcg": rng.random((3, 120)),
        "acc5": (rng.random(120) < 0.6).astype(float),  # the paper's l=100 fits
        "per_query_values": rng.random(40),
        "values_2d": rng.random((2, 40)),
        "qrels_df": qrels.assign(relevance=qrels.relevance.astype(int))[["query_id", "doc_id", "relevance"]],
        "run_df": run.assign(score=run.score.astype(float))[["query_id", "doc_id", "score"]],
    }


@pytest.mark.parametrize("where,code", [pytest.param(w, c, id=w) for w, c in BLOCKS if _first_line(c) not in PY_SKIP])
def test_docs_python_block_runs(where: str, code: str, docs_store, docs_workdir):
    for name in ("quickstart", "study"):
        if f"results/{name}" in code:
            shutil.copytree(docs_store, docs_workdir / "results" / name)
    namespace = _stand_ins(docs_store, docs_workdir)
    exec(compile(code, where, "exec"), namespace)  # noqa: S102 - the docs' own code
    for figure in _figures_named(code):  # a figure a snippet saves is there
        assert (docs_workdir / figure).stat().st_size > 0, f"{where}: {figure} not written"


def _figures_named(code: str) -> list[str]:
    """The figure files a snippet's code (not its comments) names."""
    lines = [re.sub(r"\s#.*$", "", ln) for ln in code.splitlines()]
    return re.findall(r"[\"']([\w.-]+\.(?:pdf|svg|png))[\"']", "\n".join(lines))


def test_the_figures_of_the_plot_snippet_are_found():
    code = next(c for _, c in BLOCKS if "plot_paired_differences" in c)
    assert _figures_named(code) == ["forest.pdf", "paired.svg"]


def test_py_skip_names_blocks_the_docs_still_have():
    firsts = {_first_line(c) for _, c in BLOCKS}
    assert not set(PY_SKIP) - firsts, f"stale PY_SKIP entries: {sorted(set(PY_SKIP) - firsts)}"
