"""Training reports its progress (step/steps, loss) on stderr like the embedding lines, and third-party load
messages stay silent on healthy runs."""

from __future__ import annotations

import logging
import os
import re

import pytest

from adaptlab.adapt.train.ft import FTConfig, fine_tune_model
from adaptlab.adapt.train.pt import build_mlm
from adaptlab.adapt.train.stage_worker import quiet_worker as _quiet_worker
from adaptlab.adapt.train.step_progress import StepProgress
from adaptlab.adapt.train.third_party import load_sentence_model, quiet_third_party

FT = FTConfig(learning_rate=1e-3, epochs=3, batch_size=4, num_negatives=1, warmup_ratio=0.0)


@pytest.fixture
def progress_on(monkeypatch):
    """Progress as the CLI leaves it without --quiet, whatever other tests set."""
    from adaptlab.runtime import progress

    monkeypatch.setitem(progress._PROGRESS, "enabled", None)
    monkeypatch.delenv("ADAPTLAB_PROGRESS", raising=False)


def _lines(text: str) -> list[str]:
    return [line.removeprefix("[adaptlab] ") for line in text.splitlines() if line.startswith("[adaptlab] ")]


def test_progress_lines_name_step_steps_and_loss(tiny_model, triplets, capsys, monkeypatch, progress_on):
    monkeypatch.setenv("ADAPTLAB_PROGRESS_INTERVAL", "0.001")  # a line every step
    model = load_sentence_model(tiny_model, "cpu")
    capsys.readouterr()
    result = fine_tune_model(model, triplets, FT, seed=0, prefixes=("", ""), device="cpu", label="ft at scale 8")
    total = result.steps  # 8 triplets at batch 4 for 3 epochs, raised to min_steps = 10
    assert total == 10
    lines = _lines(capsys.readouterr().err)  # stderr, like the embedding progress lines
    assert "ft at scale 8: training 10 step(s)" in lines
    steps = [
        m for m in lines if re.fullmatch(r"ft at scale 8: step \d+/10, loss \d+\.\d{4}, .* s/step, about .* left", m)
    ]
    assert [int(re.search(r"step (\d+)/", m).group(1)) for m in steps] == list(range(1, total))
    assert f"loss {result.losses[0]:.4f}" in steps[0]
    assert (
        lines[-1].startswith("ft at scale 8: 10/10 step(s) done in ")
        and f"last loss {result.losses[-1]:.4f}" in lines[-1]
    )


def test_progress_lines_are_spaced_by_the_interval(tiny_model, triplets, capsys, monkeypatch, progress_on):
    monkeypatch.setenv("ADAPTLAB_PROGRESS_INTERVAL", "3600")
    model = load_sentence_model(tiny_model, "cpu")
    capsys.readouterr()
    fine_tune_model(model, triplets, FT, seed=0, prefixes=("", ""), device="cpu")
    progress = [m for m in _lines(capsys.readouterr().err) if "step(s)" in m]
    assert len(progress) == 2 and "training 10 step(s)" in progress[0] and "10/10 step(s) done" in progress[1]


def test_progress_lines_show_without_verbose_and_not_with_quiet(capsys, monkeypatch, progress_on):
    """The CLI's default logging (WARNING) hides INFO; the lines still show; --quiet turns them off."""
    from adaptlab.cli import configure_logging

    for verbosity in (0, -1):
        restore = configure_logging(verbosity)
        try:
            progress = StepProgress("pt at scale 10", total=3, start=0, interval=0.0)
            progress.update(1, 2.5)
            progress.close(2.0)
        finally:
            restore()
        err = capsys.readouterr().err
        if verbosity == 0:
            first, step, last = _lines(err)
            assert first == "pt at scale 10: training 3 step(s)" and step.startswith(
                "pt at scale 10: step 1/3, loss 2.5000"
            )
            assert last.startswith("pt at scale 10: 3/3 step(s) done in") and last.endswith("last loss 2.0000")
        else:
            assert err == ""


@pytest.mark.parametrize("value", ["soon", "-2", "nan"])
def test_a_bad_progress_interval_is_one_line_naming_the_variable(value, monkeypatch, progress_on):
    from adaptlab.errors import ConfigError

    monkeypatch.setenv("ADAPTLAB_PROGRESS_INTERVAL", value)
    with pytest.raises(ConfigError) as info:
        StepProgress("ft at scale 8", total=3, start=0)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"$ADAPTLAB_PROGRESS_INTERVAL={value!r}: expected a non-negative number of seconds")


def test_progress_interval_from_the_environment(monkeypatch, progress_on):
    monkeypatch.setenv("ADAPTLAB_PROGRESS_INTERVAL", "2.5")
    assert StepProgress("x", total=1, start=0).interval == 2.5
    monkeypatch.setenv("ADAPTLAB_PROGRESS_INTERVAL", "0")  # a line at every step, as for embedding
    assert StepProgress("x", total=1, start=0).interval == 0.0
    monkeypatch.setenv("ADAPTLAB_PROGRESS_INTERVAL", " ")
    assert StepProgress("x", total=1, start=0).interval == 5.0


def test_driver_keeps_repeated_ray_lines(monkeypatch):
    """Two stages' identical-looking progress lines are not folded by Ray's log dedup."""
    import ray._private.ray_logging as ray_logging

    from adaptlab.runtime import cluster

    monkeypatch.setattr(ray_logging, "RAY_DEDUP_LOGS", True)  # restored afterwards
    monkeypatch.setenv("RAY_DEDUP_LOGS", "unset")  # recorded, so the variable is restored afterwards
    monkeypatch.delenv("RAY_DEDUP_LOGS")
    cluster._keep_repeated_lines()
    assert os.environ["RAY_DEDUP_LOGS"] == "0"
    assert ray_logging.RAY_DEDUP_LOGS is False
    monkeypatch.setenv("RAY_DEDUP_LOGS", "1")  # the user's choice is kept
    cluster._keep_repeated_lines()
    assert os.environ["RAY_DEDUP_LOGS"] == "1"


def test_cli_prints_training_resource_error_as_one_line(capsys, monkeypatch):
    from adaptlab import adapt, cli
    from adaptlab.cli import run_cmd

    assert "TrainingResourceError" in adapt.__all__

    def fail(_args):
        raise adapt.TrainingResourceError("ft at scale 100 was killed for memory 3 times;\nlower [adapt.ft] batch_size")

    monkeypatch.setattr(run_cmd, "build_study", fail)
    assert cli.main(["run", "study.toml"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("adaptlab run: error: ft at scale 100 was killed for memory 3 times; lower [adapt.ft] batch_size")


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_mlm_load_message_is_silenced_but_not_gone(tiny_model):
    from transformers import AutoModelForMaskedLM

    records = _Records()  # transformers' own handler does not propagate to pytest's
    hf_logger = logging.getLogger("transformers")
    hf_logger.addHandler(records)
    try:
        AutoModelForMaskedLM.from_pretrained(str(tiny_model), local_files_only=True)  # the raw load warns
        assert any("Some weights of BertForMaskedLM were not initialized" in m for m in records.messages)
        records.messages.clear()
        st = load_sentence_model(tiny_model, "cpu")
        _mlm, head = build_mlm(st, tiny_model, seed=0)
    finally:
        hf_logger.removeHandler(records)
    assert head == "initialised"  # recorded in the artifact instead of printed
    assert not [m for m in records.messages if "Some weights" in m]


def test_quiet_third_party_restores_transformers_settings():
    from transformers.utils import logging as hf_logging

    before = hf_logging.get_verbosity()
    with quiet_third_party():
        assert hf_logging.get_verbosity() == logging.ERROR
        assert not hf_logging.is_progress_bar_enabled()
    assert hf_logging.get_verbosity() == before


def test_worker_gets_one_progress_handler(monkeypatch):
    logger = logging.getLogger("adaptlab.adapt.train")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    for key in ("TRANSFORMERS_VERBOSITY", "HF_HUB_DISABLE_PROGRESS_BARS", "TQDM_DISABLE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("ADAPTLAB_PROGRESS", "1")  # restored afterwards
    try:
        _quiet_worker(True)
        _quiet_worker(True)  # a reused worker: still one handler
        ours = [h for h in logger.handlers if getattr(h, "adaptlab_progress", False)]
        assert len(ours) == 1 and logger.level == logging.INFO and not logger.propagate
        import os

        assert os.environ["TRANSFORMERS_VERBOSITY"] == "error" and os.environ["TQDM_DISABLE"] == "1"
    finally:
        logger.handlers[:] = saved[0]
        logger.setLevel(saved[1])
        logger.propagate = saved[2]


def test_quiet_worker_without_progress_adds_no_handler(monkeypatch):
    logger = logging.getLogger("adaptlab.adapt.train")
    before = list(logger.handlers)
    monkeypatch.setenv("ADAPTLAB_PROGRESS", "1")  # restored afterwards
    _quiet_worker(False)
    assert logger.handlers == before
    assert os.environ["ADAPTLAB_PROGRESS"] == "0"  # the driver's --quiet reaches the step lines


def test_worker_step_lines_follow_the_driver(capsys, monkeypatch, progress_on):
    logger = logging.getLogger("adaptlab.adapt.train")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    monkeypatch.setenv("ADAPTLAB_PROGRESS", "1")  # restored afterwards
    try:
        for progress in (False, True):
            _quiet_worker(progress)
            StepProgress("ft at scale 8", total=2, start=0).close(1.0)
            err = capsys.readouterr().err
            assert ("[adaptlab] ft at scale 8: training 2 step(s)" in err) is progress
            assert err.count("training 2 step(s)") == int(progress)  # printed once, not also logged
    finally:
        logger.handlers[:] = saved[0]
        logger.setLevel(saved[1])
        logger.propagate = saved[2]
