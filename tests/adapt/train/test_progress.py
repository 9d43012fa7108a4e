"""Training reports its progress (step/steps, loss) through logging, and third-party load
messages stay silent on healthy runs."""

from __future__ import annotations

import logging
import re

from adaptlab.adapt.train.ft import FTConfig, fine_tune_model
from adaptlab.adapt.train.jobs import _quiet_worker
from adaptlab.adapt.train.loop import load_sentence_model, quiet_third_party
from adaptlab.adapt.train.pt import build_mlm

FT = FTConfig(learning_rate=1e-3, epochs=3, batch_size=4, num_negatives=1, warmup_ratio=0.0)


def test_progress_lines_name_step_steps_and_loss(tiny_model, triplets, caplog, monkeypatch):
    monkeypatch.setenv("ADAPTLAB_PROGRESS_INTERVAL", "0")  # a line every step
    model = load_sentence_model(tiny_model, "cpu")
    with caplog.at_level(logging.INFO, logger="adaptlab.adapt.train.loop"):
        result = fine_tune_model(model, triplets, FT, seed=0, prefixes=("", ""), device="cpu", label="ft at scale 8")
    total = result.steps  # 8 triplets at batch 4 for 3 epochs, raised to min_steps = 10
    assert total == 10
    lines = [r.getMessage() for r in caplog.records if r.name == "adaptlab.adapt.train.loop"]
    assert "ft at scale 8: training 10 step(s)" in lines
    steps = [m for m in lines if re.fullmatch(r"ft at scale 8: step \d+/10, loss \d+\.\d{4}, .* s/step, about .* left", m)]
    assert [int(re.search(r"step (\d+)/", m).group(1)) for m in steps] == list(range(1, total))
    assert f"loss {result.losses[0]:.4f}" in steps[0]
    assert lines[-1].startswith("ft at scale 8: 10/10 step(s) done in ") and f"last loss {result.losses[-1]:.4f}" in lines[-1]


def test_progress_lines_are_spaced_by_the_interval(tiny_model, triplets, caplog, monkeypatch):
    monkeypatch.setenv("ADAPTLAB_PROGRESS_INTERVAL", "3600")
    model = load_sentence_model(tiny_model, "cpu")
    with caplog.at_level(logging.INFO, logger="adaptlab.adapt.train.loop"):
        fine_tune_model(model, triplets, FT, seed=0, prefixes=("", ""), device="cpu")
    lines = [r.getMessage() for r in caplog.records if r.name == "adaptlab.adapt.train.loop"]
    progress = [m for m in lines if "step(s)" in m and "epochs raised" not in m]
    assert len(progress) == 2 and "training 10 step(s)" in progress[0] and "10/10 step(s) done" in progress[1]


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
    _quiet_worker(False)
    assert logger.handlers == before
