"""The memory estimate of training stages: shape read from files, the activation count by hand,
the cap at a node's memory, and the estimate against a measured peak RSS of a tiny model."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from adaptlab.adapt.train.colbert import ColBERTFTConfig
from adaptlab.adapt.train.ft import FTConfig
from adaptlab.adapt.train.memory import (
    PROCESS_BYTES,
    RECOMPUTED,
    SAFETY,
    EncoderShape,
    activation_bytes,
    checkpointed_bytes,
    declared_memory,
    estimate_stage_memory,
    recomputed_bytes,
)
from adaptlab.adapt.train.pt import PTConfig
from tiny_models import build_tiny_model

TESTS = Path(__file__).resolve().parents[2]


def test_shape_is_read_from_the_files_without_loading(tiny_model):
    from safetensors.torch import load_file

    shape = EncoderShape.read(tiny_model)
    counted = sum(t.numel() for t in load_file(str(tiny_model / "model.safetensors")).values() if t.is_floating_point())
    assert shape.parameters == counted
    # tiny_models.py: 2 layers, hidden 32, 2 heads, intermediate 64, max_seq_length 64
    assert (shape.layers, shape.hidden, shape.heads, shape.intermediate, shape.max_seq_length) == (2, 32, 2, 64, 64)


def test_activation_count_by_hand():
    shape = EncoderShape(parameters=10, layers=2, hidden=4, heads=2, intermediate=8, vocab=100, max_seq_length=16)
    # per layer and sequence: s * (38 h + 8 i) + 13 a s^2 = 3 * (152 + 64) + 13 * 2 * 9 = 882
    assert activation_bytes(shape, sequences=5, tokens=3) == 5 * 2 * 882


def test_estimate_parts_follow_the_settings():
    shape = EncoderShape(parameters=1000, layers=2, hidden=4, heads=2, intermediate=8, vocab=100, max_seq_length=16)
    ft = estimate_stage_memory("ft", shape, FTConfig(batch_size=4, num_negatives=2, max_seq_length=8))
    # queries at min(s, 64) = 8 tokens, passages 4 * (1 + 2) at 8 tokens: 16 sequences of 8 tokens
    assert ft.activations == int(SAFETY * activation_bytes(shape, 16, 8))
    assert ft.static == 24 * 1000 and ft.process == PROCESS_BYTES
    assert ft.total == ft.process + ft.static + ft.activations
    bigger = estimate_stage_memory("ft", shape, FTConfig(batch_size=8, num_negatives=2, max_seq_length=8))
    assert bigger.activations == 2 * ft.activations  # linear in the batch
    # max_seq_length above the model's is cut to it (the tokenizer truncates there)
    assert estimate_stage_memory("ft", shape, FTConfig(batch_size=4, max_seq_length=999)).what.endswith("x 16 tokens")
    pt = estimate_stage_memory("pt", shape, PTConfig(batch_size=4, max_seq_length=8))
    assert pt.activations == int(SAFETY * (activation_bytes(shape, 4, 8) + 4 * 8 * (12 * 100 + 12 * 4)))
    colbert = estimate_stage_memory("colbert-ft", shape, ColBERTFTConfig(batch_size=2, doc_maxlen=8, query_maxlen=4))
    assert colbert.process == 2 * PROCESS_BYTES  # colbert-ai trains in a child process
    assert estimate_stage_memory("merge", shape).activations == 0
    with pytest.raises(ValueError, match="stage 'tune'"):
        estimate_stage_memory("tune", shape)


def test_declared_memory_is_capped_at_the_largest_node(caplog):
    shape = EncoderShape(parameters=10**6, layers=2, hidden=4, heads=2, intermediate=8, vocab=100, max_seq_length=16)
    estimate = estimate_stage_memory("merge", shape)
    assert declared_memory(estimate, None, "x") == estimate.total
    assert declared_memory(estimate, estimate.total + 1, "x") == estimate.total
    with caplog.at_level(logging.WARNING, logger="adaptlab.adapt.train.memory"):
        assert declared_memory(estimate, 1e8, "adapt:merge:m") == int(1e8)
    assert "adapt:merge:m needs about" in caplog.text and "runs alone" in caplog.text


_PEAK_SCRIPT = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    import torch
    torch.set_num_threads(1)
    from adaptlab.adapt.train.ft import FTConfig, fine_tune_model
    from adaptlab.adapt.train.third_party import load_sentence_model
    from adaptlab.adapt.train.memory import EncoderShape, estimate_stage_memory

    path = Path(sys.argv[1])
    def status(key):  # this process's own figures: ru_maxrss would carry the parent's peak across exec
        return next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith(key + ":"))

    model = load_sentence_model(path, "cpu")
    rss = status("VmRSS")
    words = "antenna tilt coverage handover spectrum latency beam power paging carrier".split()
    def text(n, k):
        return " ".join(words[(i * k) % len(words)] for i in range(n))
    rows = [(text(60, i), text(80, i + 1), tuple(text(80, i + j + 2) for j in range(3))) for i in range(64)]
    out = {"before": rss}
    for name, ckpt in (("checkpointed", True), ("plain", False)):  # the smaller step first: VmHWM only grows
        cfg = FTConfig(learning_rate=1e-4, epochs=1, batch_size=64, num_negatives=3, min_steps=0,
                       min_weight_change=0, gradient_checkpointing=ckpt)
        fine_tune_model(model, rows, cfg, seed=0, prefixes=("", ""), device="cpu")
        est = estimate_stage_memory("ft", EncoderShape.read(path), cfg)
        out[name] = {"peak": status("VmHWM"), "total": est.total, "training": est.static + est.activations}
    print(json.dumps(out))
""")


@pytest.mark.slow  # a fresh Python process importing torch and transformers: 53 s on the loaded 2-core machine
def test_estimate_is_within_a_stated_factor_of_a_measured_peak(tmp_path):
    """One FT step of the tiny model with batch 64 and 3 negatives (320 texts filling its 64
    tokens), in a fresh process: the estimate lies in [1, 2] x the peak RSS, and its training
    part (static + activations) in [0.8, 2] x the RSS the step added (measured here: 1.20 and 0.93).
    The same step with gradient checkpointing runs first: its estimate lies in [1, 2] x its own
    peak (measured here 1.19), and both are below the plain step's.

    The peak is the process's own high-water mark (VmHWM). ``ru_maxrss`` is not: Linux keeps it
    across fork and exec, so a child of a pytest process that had reached 1.6 GB reported a 1.6 GB
    peak for a 0.8 GB step (CI, full suite)."""
    tiny_model = build_tiny_model(tmp_path / "tiny-bert")  # its own copy: the session's is shared with trainers
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1")
    out = subprocess.run(
        [sys.executable, "-c", _PEAK_SCRIPT, str(tiny_model)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=TESTS,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    m = json.loads(out.stdout.strip().splitlines()[-1])
    plain, ckpt = m["plain"], m["checkpointed"]
    assert 1.0 <= plain["total"] / plain["peak"] <= 2.0, m
    assert 0.8 <= plain["training"] / (plain["peak"] - m["before"]) <= 2.0, m
    # gradient checkpointing first: its own peak lies under its estimate too, and both are lower
    assert 1.0 <= ckpt["total"] / ckpt["peak"] <= 2.0, m
    assert ckpt["peak"] < plain["peak"] and ckpt["total"] < plain["total"], m


def test_sweep_trials_declare_the_memory_of_the_largest_batch(tiny_model):
    from adaptlab.adapt.train.space import largest_value, space_problem
    from adaptlab.adapt.train.trial import trial_memory as _trial_memory
    from adaptlab.adapt.train.trial import trial_resources as _trial_resources

    # the space language of SweepConfig.param_space (validated there), not Ray's domain objects
    space = {
        "batch_size": [4, 16, 8],
        "num_negatives": {"grid": [1, 3]},
        "epochs": {"randint": [1, 5]},
        "learning_rate": {"loguniform": [1e-5, 1e-3]},
    }
    assert space_problem(space) is None
    assert largest_value(space, "batch_size", 32) == 16
    assert largest_value(space, "num_negatives", 1) == 3
    assert largest_value(space, "epochs", 1) == 5  # randint's upper bound (exclusive: a safe side)
    assert largest_value({}, "batch_size", 32) == 32

    class NoNodes:
        @staticmethod
        def nodes() -> list:
            return []

    base = FTConfig(batch_size=4, num_negatives=1)
    expected = estimate_stage_memory("ft", EncoderShape.read(tiny_model), FTConfig(batch_size=16, num_negatives=3))
    assert _trial_memory(base, space, tiny_model, NoNodes()) == expected.total
    assert _trial_memory(base, space, tiny_model.parent / "missing", NoNodes()) == 0
    assert _trial_resources(1, 0.5, 123, NoNodes()) == {"cpu": 1.0, "gpu": 0.5, "memory": 123.0}
    assert _trial_resources(2, 0, 0, NoNodes()) == {"cpu": 2.0, "gpu": 0.0}  # unknown: none declared


MINILM = EncoderShape(
    parameters=22_713_216, layers=6, hidden=384, heads=12, intermediate=1536, vocab=30522, max_seq_length=256
)


def test_gradient_checkpointing_keeps_layer_inputs_and_one_recomputed_layer():
    shape = EncoderShape(parameters=10, layers=2, hidden=4, heads=2, intermediate=8, vocab=100, max_seq_length=16)
    assert checkpointed_bytes(shape, sequences=5, tokens=3) == 5 * 2 * (4 * 3 * 4)  # layers x 4 s h
    assert recomputed_bytes(shape, sequences=5, tokens=3) == int(RECOMPUTED * 5 * 882)  # one layer, no x layers
    ft = estimate_stage_memory("ft", MINILM, FTConfig(batch_size=32, gradient_checkpointing=True))
    # queries at 64 tokens, 64 passages at 256 kept as layer inputs; one column of 32 passages recomputed
    kept = checkpointed_bytes(MINILM, 32, 64) + checkpointed_bytes(MINILM, 64, 256)
    assert ft.activations == int(SAFETY * (kept + recomputed_bytes(MINILM, 32, 256)))
    assert ft.what.endswith(", gradient checkpointing")
    plain = estimate_stage_memory("ft", MINILM, FTConfig(batch_size=32))
    assert ft.static == plain.static and ft.process == plain.process
    assert ft.activations < plain.activations / 3  # measured peak 9.33 -> 3.10 GB
    pt = estimate_stage_memory("pt", MINILM, PTConfig(gradient_checkpointing=True))
    head = 16 * 256 * (12 * 30522 + 12 * 384)  # the masked-LM head is not checkpointed
    assert pt.activations == int(
        SAFETY * (checkpointed_bytes(MINILM, 16, 256) + head + recomputed_bytes(MINILM, 16, 256))
    )
    assert pt.total < estimate_stage_memory("pt", MINILM, PTConfig()).total


def test_gradient_checkpointing_is_a_checked_setting_outside_the_artifact_key():
    from adaptlab.errors import ConfigError

    with pytest.raises(ConfigError, match=r"FTConfig.gradient_checkpointing = 'yes': expected \"auto\", true or false"):
        FTConfig(gradient_checkpointing="yes")
    on, off = PTConfig(gradient_checkpointing=True), PTConfig(gradient_checkpointing="auto")  # undecided: without
    assert on.optim().gradient_checkpointing and not off.optim().gradient_checkpointing
    assert on.key_dict() == off.key_dict() and "gradient_checkpointing" not in on.key_dict()


def test_the_give_up_line_suggests_gradient_checkpointing():
    from adaptlab.adapt.train.jobs import _checkpointing

    assert "[adapt].gradient_checkpointing = true" in _checkpointing(FTConfig())
    assert _checkpointing(FTConfig(gradient_checkpointing=True)) == ""


def _train_tiny(tiny_model: Path, triplets: list, checkpointing: bool) -> tuple[list[float], list, int]:
    """Two FT steps of the tiny model (dropout on); losses, weights and the first layer's calls."""
    from adaptlab.adapt.train.ft import fine_tune_model
    from adaptlab.adapt.train.third_party import load_sentence_model

    model = load_sentence_model(tiny_model, "cpu")
    calls = []
    # a pre-hook: a recomputation stops once it has what the backward pass needs, before forward hooks
    model[0].auto_model.encoder.layer[0].register_forward_pre_hook(lambda *_: calls.append(1))
    cfg = FTConfig(
        learning_rate=1e-3,
        epochs=1,
        batch_size=4,
        num_negatives=1,
        max_steps=3,
        min_steps=0,
        gradient_checkpointing=checkpointing,
    )
    result = fine_tune_model(model, triplets, cfg, seed=0, prefixes=("", ""), device="cpu")
    assert not model[0].auto_model.is_gradient_checkpointing  # switched off again after training
    return result.losses, [p.detach().clone() for p in model.parameters()], len(calls)


def test_gradient_checkpointing_recomputes_and_changes_no_number(tiny_model, triplets):
    import torch

    losses, weights, calls = _train_tiny(tiny_model, triplets, False)
    losses_c, weights_c, calls_c = _train_tiny(tiny_model, triplets, True)
    assert calls_c == 2 * calls  # every layer ran again in the backward pass
    assert losses_c == pytest.approx(losses, abs=1e-5) and len(losses) == 2
    assert all(torch.allclose(a, b, atol=1e-5, rtol=0) for a, b in zip(weights, weights_c))
    assert any(not torch.equal(a, b) for a, b in zip(weights, _train_tiny(tiny_model, triplets[1:], False)[1]))


def test_a_model_without_checkpointing_support_is_refused():
    import torch

    from adaptlab.adapt.train.checks import TrainingCheckError
    from adaptlab.adapt.train.knobs import set_gradient_checkpointing

    with pytest.raises(TrainingCheckError, match="variant 'ft' of m: gradient_checkpointing = true, but the model"):
        set_gradient_checkpointing(torch.nn.Linear(2, 2), True, "variant 'ft' of m")


def _adapt_settings(tmp_path: Path, **adapt):
    from adaptlab.study import parse_adapt_section, parse_study

    study = parse_study(
        {
            "study": {"name": "m", "store": ""},
            "datasets": [{"name": "d", "spec": "synthetic:n_documents=4,seed=1"}],
            "models": [{"name": "minilm", "ref": "minilm"}],
            "embedding": {"use_ray": False},
            "adapt": {"corpus": "synthetic:n_documents=20,seed=0", **adapt},
        },
        source="study.toml",
    )
    return parse_adapt_section(study, store=tmp_path)


def test_the_study_turns_gradient_checkpointing_on_for_pt_and_ft(tmp_path):
    from adaptlab.errors import ConfigError

    s = _adapt_settings(tmp_path, gradient_checkpointing=True)
    assert s.pt.gradient_checkpointing and s.ft.gradient_checkpointing
    assert _adapt_settings(tmp_path).ft.gradient_checkpointing is False  # "auto" is opt-in: test_auto_checkpointing
    only_ft = _adapt_settings(tmp_path, ft={"gradient_checkpointing": True})
    assert only_ft.ft.gradient_checkpointing is True and only_ft.pt.gradient_checkpointing is False
    with pytest.raises(
        ConfigError, match=r"study.toml: \[adapt\].gradient_checkpointing: expected \"auto\", true or false"
    ):
        _adapt_settings(tmp_path, gradient_checkpointing="yes")
    with pytest.raises(
        ConfigError, match=r"\[adapt\].gradient_checkpointing: expected it in \[adapt\] or in \[adapt.ft\]"
    ):
        _adapt_settings(tmp_path, gradient_checkpointing=True, ft={"gradient_checkpointing": False})
