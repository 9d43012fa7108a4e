"""The training loop's AdamW: PyTorch's fused kernel on CPU (issue 32), the same update as the
per-tensor loop to float rounding, named in the run's summary (and so in the artifact manifest)."""

from __future__ import annotations

import numpy as np
import pytest

from adaptlab.adapt.train.loop import Examples, run_loop
from adaptlab.adapt.train.optimizer import OptimConfig, adamw_kind, make_adamw

SHAPES = [(64, 16), (16, 16), (16,), (48, 16), (16,)]


def _params(torch, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(s, generator=g) * 0.02) for s in SHAPES]


def _train(torch, make, steps: int = 6):
    """Parameters after ``steps`` AdamW steps on seeded gradients, two groups as the loop has."""
    params = _params(torch)
    opt = make([{"params": params[:3], "weight_decay": 0.01}, {"params": params[3:], "weight_decay": 0.0}])
    g = torch.Generator().manual_seed(2)
    for _ in range(steps):
        for p in params:
            p.grad = torch.randn(p.shape, generator=g) * 1e-3
        opt.step()
    return [p.detach().clone() for p in params]


def test_cpu_parameters_get_the_fused_kernel_and_the_same_update_as_the_loop():
    torch = pytest.importorskip("torch")

    ours = make_adamw([{"params": _params(torch), "weight_decay": 0.0}], 2e-5)
    assert ours.defaults["fused"] is True and not ours.defaults["foreach"]
    fused = _train(torch, lambda groups: make_adamw(groups, 2e-5))
    loop = _train(torch, lambda groups: torch.optim.AdamW(groups, lr=2e-5, betas=(0.9, 0.999), eps=1e-8, foreach=False))
    start = _params(torch)
    moved = max((a - s).abs().max().item() for a, s in zip(loop, start))
    diff = max((a - b).abs().max().item() for a, b in zip(fused, loop))
    assert moved > 1e-5  # the steps did move the weights
    assert diff <= 1e-7 * 5  # the same update, to float rounding of weights of size ~0.05


def test_parameters_the_fused_kernel_cannot_take_get_the_foreach_form():
    torch = pytest.importorskip("torch")

    assert adamw_kind(_params(torch)) == "fused"
    assert adamw_kind([torch.nn.Parameter(torch.zeros(3, device="meta"))]) == "foreach"
    assert adamw_kind([torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))]) == "fused"
    assert adamw_kind([]) == "foreach"


def test_the_loop_names_its_optimizer_in_the_summary():
    torch = pytest.importorskip("torch")

    torch.manual_seed(0)
    model, x = torch.nn.Linear(4, 1), torch.randn(8, 4)

    def loss(idx):
        return model(x[torch.as_tensor(np.asarray(idx))]).pow(2).mean()

    optim = OptimConfig(learning_rate=0.1, epochs=1, batch_size=4, warmup_ratio=0.0)
    result = run_loop(model, examples=Examples(8, loss), optim=optim, seed=0, device=torch.device("cpu"))
    assert result.optimizer == "adamw-fused"
    assert result.summary()["optimizer"] == "adamw-fused"
