"""Training that cannot mislead: a tiny data scale either trains for real (weights move, enough
steps, the warm-up does not swallow the run) or stops with an error naming the run."""

from __future__ import annotations

import numpy as np
import pytest

from adaptlab.adapt.train.checks import TrainingCheckError
from adaptlab.adapt.train.ft import FTConfig, train_ft
from adaptlab.adapt.train.loop import Examples, run_loop
from adaptlab.adapt.train.optimizer import OptimConfig, linear_warmup_decay, warmup_steps


def _linear_problem(lr: float, **optim):
    import torch

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    x = torch.randn(12, 4)
    y = x.sum(dim=1, keepdim=True)

    def loss(idx):
        i = torch.as_tensor(np.asarray(idx))
        return torch.nn.functional.mse_loss(model(x[i]), y[i])

    cfg = OptimConfig(learning_rate=lr, epochs=1, batch_size=32, **optim)
    return model, cfg, loss


def test_warmup_never_swallows_the_run():
    assert warmup_steps(1, 0.1) == 0 and warmup_steps(2, 0.5) == 1 and warmup_steps(100, 0.1) == 10
    for total in range(1, 30):
        w = warmup_steps(total, 0.9)
        assert any(linear_warmup_decay(s, total, w) > 0 for s in range(total))
    # the old schedule trained a 1-step run at learning rate 0: now the step has the full rate
    assert linear_warmup_decay(0, 1, warmup_steps(1, 0.1)) == 1.0


def test_small_data_gets_enough_steps_and_records_them():
    model, cfg, loss = _linear_problem(0.05, min_steps=10, min_weight_change=1e-6)
    result = run_loop(
        model, examples=Examples(12, loss), optim=cfg, seed=0, device="cpu", label="variant 'ft' at scale docs2"
    )
    s = result.summary()
    assert s["steps"] == 10 and s["epochs_requested"] == 1 and s["epochs_completed"] == 10
    assert s["schedule"]["warmup_steps"] == 1 and s["schedule"]["nonzero_lr_steps"] == 9
    assert s["relative_weight_change"] > 1e-3 and s["last_loss"] < s["first_loss"]


def test_zero_learning_rate_is_an_error_naming_the_run():
    model, cfg, loss = _linear_problem(0.0)
    with pytest.raises(
        TrainingCheckError,
        match=r"variant 'ft' at scale docs2: every optimizer step "
        r"has learning rate 0, so the weights cannot change \(1 optimizer step\(s\).*linear warm-up 0 step",
    ):
        run_loop(
            model,
            examples=Examples(12, loss),
            optim=cfg,
            seed=0,
            device="cpu",
            label="variant 'ft' at scale docs2",
        )


def test_unchanged_weights_stop_the_run_or_warn_when_asked(caplog):
    model, cfg, loss = _linear_problem(1e-12, min_weight_change=1e-3)
    with pytest.raises(
        TrainingCheckError,
        match=r"weights moved by a relative .* the adapted "
        r"model is the base model .*warn_only",
    ):
        run_loop(model, examples=Examples(12, loss), optim=cfg, seed=0, device="cpu", label="x")
    model, cfg, loss = _linear_problem(1e-12, min_weight_change=1e-3, warn_only=True)
    result = run_loop(model, examples=Examples(12, loss), optim=cfg, seed=0, device="cpu", label="x")
    assert result.warnings and "TRAINING CHECK FAILED" in caplog.text


def test_explicit_max_steps_below_minimum_only_warns(caplog):
    model, cfg, loss = _linear_problem(0.05, min_steps=10, max_steps=2)
    result = run_loop(model, examples=Examples(12, loss), optim=cfg, seed=0, device="cpu", label="x")
    assert result.steps == 2 and "fewer than min_steps=10" in caplog.text


def test_tiny_scale_ft_trains_for_real(tiny_model, triplets, tmp_path, read_weights):
    few = triplets[:3]  # 3 triplets, batch 32: one step per epoch -> epochs raised to 10
    art = train_ft(
        tiny_model,
        few,
        artifact_root=tmp_path / "art",
        scale="docs1",
        config=FTConfig(batch_size=32, learning_rate=1e-3, num_negatives=1),
    )
    training = art.manifest["training"]
    assert training["steps"] == 10 and training["relative_weight_change"] > 1e-6
    assert training["schedule"]["warmup_steps"] == 1 and training["last_loss"] is not None
    base, adapted = read_weights(tiny_model), read_weights(art.model_path)
    assert any(not np.array_equal(base[k], adapted[k]) for k in base)


def test_tiny_scale_ft_that_cannot_move_stops_with_the_error(tiny_model, triplets, tmp_path):
    with pytest.raises(
        TrainingCheckError,
        match=r"variant 'ft' of .* at scale docs1 \(3 triplets\)"
        r".*10 optimizer step\(s\) = 10 epoch\(s\).*peak learning rate",
    ):
        train_ft(
            tiny_model,
            triplets[:3],
            artifact_root=tmp_path / "art",
            scale="docs1",
            config=FTConfig(batch_size=32, learning_rate=1e-12, num_negatives=1, min_weight_change=1e-3),
        )
    assert not list((tmp_path / "art").rglob("manifest.json"))
