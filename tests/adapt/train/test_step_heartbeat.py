"""One optimizer step longer than the progress interval is not silent (issues 20 and 22): a
heartbeat line ``[adaptlab] training LABEL: step k/n running (N s), last loss X`` at the interval
while the step runs, the step's own line after it, numbers identical to an unslowed run, and
nothing at all with progress off."""

from __future__ import annotations

import re
import threading
import time

import pytest

from adaptlab.adapt.train.ft import FTConfig, fine_tune_model
from adaptlab.adapt.train.third_party import load_sentence_model
from adaptlab.runtime import progress

INTERVAL = 0.2
SLEEP = 0.25  # per forward call of the encoder; an FT step with one negative makes three: ~0.75 s
FT = FTConfig(learning_rate=1e-3, epochs=1, batch_size=4, num_negatives=1, warmup_ratio=0.0, min_steps=3, max_steps=3)
RUNNING = re.compile(r"training ft at scale 8: step (\d)/3 running \(\d+ s\)(, last loss (\d+\.\d{4}))?")


@pytest.fixture
def clocked(monkeypatch):
    """Progress on at INTERVAL s, as the CLI leaves it without --quiet, on a fresh shared clock."""
    monkeypatch.setenv("ADAPTLAB_PROGRESS_INTERVAL", str(INTERVAL))
    monkeypatch.delenv("ADAPTLAB_PROGRESS", raising=False)
    monkeypatch.setitem(progress._PROGRESS, "enabled", None)
    monkeypatch.setitem(progress._LAST_LINE, "at", None)


def _train(tiny_model, triplets, slow: bool):
    """Fine-tune a fresh copy of the tiny model for 3 steps; with ``slow``, every forward pass of
    its transformer sleeps SLEEP s first (the numbers it computes are unchanged)."""
    model = load_sentence_model(tiny_model, "cpu")
    if slow:
        word = model[0]
        forward = word.forward

        def slow_forward(*args, **kwargs):
            time.sleep(SLEEP)
            return forward(*args, **kwargs)

        word.forward = slow_forward  # an instance attribute: nn.Module.__call__ finds it first
    result = fine_tune_model(model, triplets, FT, seed=0, prefixes=("", ""), device="cpu", label="ft at scale 8")
    return result, {k: v.detach().clone() for k, v in model.state_dict().items()}


def _lines(err: str) -> list[str]:
    return [line.removeprefix("[adaptlab] ") for line in err.splitlines() if line.startswith("[adaptlab] ")]


def _no_heartbeat_thread_left() -> bool:
    return not any(t.name == "adaptlab-heartbeat" for t in threading.enumerate())


def test_a_long_step_prints_heartbeat_lines_while_it_runs(tiny_model, triplets, capsys, clocked):
    plain, plain_weights = _train(tiny_model, triplets, slow=False)
    capsys.readouterr()
    slow, slow_weights = _train(tiny_model, triplets, slow=True)
    lines = _lines(capsys.readouterr().err)
    assert slow.losses == plain.losses and len(slow.losses) == 3  # bit for bit
    assert slow_weights.keys() == plain_weights.keys()
    assert all(bool((slow_weights[k] == plain_weights[k]).all()) for k in plain_weights)
    for step in (1, 2, 3):
        running = [i for i, line in enumerate(lines) if (m := RUNNING.fullmatch(line)) and m.group(1) == str(step)]
        assert running, lines  # at least one line during a step of ~0.75 s at a 0.2 s interval
        # printed while the step ran: after the previous step's line, before this step's own line
        after = next(
            i
            for i, line in enumerate(lines)
            if line.startswith(f"ft at scale 8: step {step}/3, loss")
            or (step == 3 and line.startswith("ft at scale 8: 3/3 step(s) done"))
        )
        before = next(
            i
            for i, line in enumerate(lines)
            if line.startswith(
                "ft at scale 8: training 3 step(s)" if step == 1 else f"ft at scale 8: step {step - 1}/3, loss"
            )
        )
        assert all(before < i < after for i in running), lines
        last = {RUNNING.fullmatch(lines[i]).group(3) for i in running}
        assert last == ({None} if step == 1 else {f"{slow.losses[step - 2]:.4f}"}), lines
    assert sum(1 for line in lines if RUNNING.fullmatch(line)) >= 4, lines  # ~3 per step when the machine is idle
    assert not any(": done in" in line for line in lines), lines  # the step's own line closes it
    assert _no_heartbeat_thread_left()


def test_quiet_prints_no_heartbeat_lines(tiny_model, triplets, capsys, clocked):
    progress.set_progress(False)  # what adaptlab --quiet does (restored by the fixture)
    capsys.readouterr()
    result, _ = _train(tiny_model, triplets, slow=True)
    assert len(result.losses) == 3
    assert capsys.readouterr().err == ""
    assert _no_heartbeat_thread_left()
