"""bench_embed's backend table: the median ratio and the spread of the single rounds' ratios,
on made-up rates and vectors (the real run needs SciFact and minutes; docs/encoders-and-ray.md)."""

from __future__ import annotations

import argparse
import json
from types import SimpleNamespace

import numpy as np
import pytest

BENCHMARK = "bench_backends"  # the bench fixture (conftest) imports benchmarks.bench_backends


def test_round_ratios_pair_each_round_with_the_baselines_same_round(bench):
    rates = {"torch-fp32": [20.0, 25.0, 22.0], "openvino-fp32": [26.0, 30.0, 30.8]}
    assert bench.round_ratios(rates, "openvino-fp32", "torch-fp32") == pytest.approx([1.3, 1.2, 1.4])
    assert bench.round_ratios(rates, "torch-fp32", "torch-fp32") == [1.0, 1.0, 1.0]


class _PerQuery:
    def __init__(self, means: dict[str, float]) -> None:
        self._means = means

    def mean(self) -> dict[str, float]:
        return self._means


def test_the_table_and_json_give_the_median_ratio_and_the_rounds_spread(bench, tmp_path, capsys):
    names = ["torch-fp32", "openvino-fp32"]
    rates = {"torch-fp32": [20.0, 25.0, 22.0], "openvino-fp32": [26.0, 30.0, 30.8]}
    vectors = {n: np.eye(3, dtype=np.float32) for n in names}
    per_query = {n: _PerQuery({"ndcg@10": 0.5}) for n in names}
    diffs = {"openvino-fp32": SimpleNamespace(diff=0.0, ci_low=0.0, ci_high=0.0, p_value=1.0)}
    args = argparse.Namespace(json=False, json_out=str(tmp_path / "out.json"))
    assert bench._report_backends(args, names, rates, per_query, vectors, diffs, ["ndcg@10"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("openvino-fp32"))
    assert row.split()[1:4] == ["30.0", "1.36", "1.20-1.40"]  # median 30.0 / median 22.0; rounds 1.2 to 1.4
    got = json.loads((tmp_path / "out.json").read_text())["backends"][1]
    assert got["ratio"] == pytest.approx(30.0 / 22.0) and got["ratio_rounds"] == pytest.approx([1.3, 1.2, 1.4])


def test_an_fp32_backend_within_1e4_of_torch_is_marked_exact(bench, tmp_path, capsys):
    names = ["torch-fp32", "auto(openvino)-fp32", "onnx-int8"]
    rates = {n: [20.0, 21.0] for n in names}
    vectors = {n: np.eye(3, dtype=np.float32) for n in names}
    per_query = {
        "torch-fp32": _PerQuery({"ndcg@10": 0.5}),
        "auto(openvino)-fp32": _PerQuery({"ndcg@10": 0.50004}),
        "onnx-int8": _PerQuery({"ndcg@10": 0.503}),
    }
    diffs = {n: SimpleNamespace(diff=0.0, ci_low=0.0, ci_high=0.0, p_value=1.0) for n in names[1:]}
    args = argparse.Namespace(json=False, json_out=str(tmp_path / "out.json"))
    bench._report_backends(args, names, rates, per_query, vectors, diffs, ["ndcg@10"])
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line[:1].isalpha()}
    assert lines["auto(openvino)-fp32"].endswith("(exact)") and not lines["onnx-int8"].endswith("(exact)")
    rows = json.loads((tmp_path / "out.json").read_text())["backends"]
    assert [r["exact"] for r in rows] == [True, True, False]
    assert rows[2]["max_metric_diff"] == pytest.approx(0.003)


def test_auto_rows_name_the_backend_they_resolved_to(bench):
    from adaptlab.models.inference import resolve_backend

    assert bench.system_label("auto", "fp32") == f"auto({resolve_backend('fp32')})-fp32"
    assert bench.system_label("onnx", "int8") == "onnx-int8"
