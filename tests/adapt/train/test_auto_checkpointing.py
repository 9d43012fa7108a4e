"""Gradient checkpointing switched on by the stage scheduler when it lets two stages share a node
(issue 32): ``gradient_checkpointing = "auto"`` (opt-in; false is the default) is on for a PT / FT
stage exactly when ``2 * E(off) > M`` and ``2 * E(on) <= M``, or ``E(off) > M >= E(on)`` (estimates
E, the largest node's memory M); the
stage then declares the smaller estimate, and the decided bool is what its task trains with.
``true`` / ``false`` keep their meaning; other values are refused in one line."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import pytest
from test_memory import MINILM, _adapt_settings

from adaptlab.adapt.train.colbert import ColBERTFTConfig
from adaptlab.adapt.train.ft import FTConfig
from adaptlab.adapt.train.memory import EncoderShape, estimate_stage_memory
from adaptlab.adapt.train.pt import PTConfig
from adaptlab.errors import ConfigError

AUTO = "auto"
NODE = 15.6e9
"""The memory resource Ray gives a 24 GB node (the pdf study's)."""


def _estimates(stage: str, shape: EncoderShape, config) -> tuple[int, int]:  # noqa: ANN001
    """The stage's estimates without and with gradient checkpointing."""
    return (
        estimate_stage_memory(stage, shape, _with(config, False)).total,
        estimate_stage_memory(stage, shape, _with(config, True)).total,
    )


def _with(config, on: bool):  # noqa: ANN001, ANN202
    return replace(config, gradient_checkpointing=on)


def _decided(stage: str, config, node: float | None, shape: EncoderShape = MINILM):  # noqa: ANN001, ANN202
    from adaptlab.adapt.train.memory import decide_checkpointing

    return decide_checkpointing(stage, shape, config, node, f"adapt:{stage}:m").gradient_checkpointing


def test_auto_is_on_exactly_when_one_stage_fills_more_than_half_a_node_and_two_fit_with_it():
    ft = FTConfig(batch_size=32, gradient_checkpointing=AUTO)  # MiniLM at 256 tokens: ~10.4 GB without, ~3.6 GB with
    off, on = _estimates("ft", MINILM, ft)
    assert 2 * off > NODE >= 2 * on  # the measured case: one stage alone, or two with checkpointing
    assert _decided("ft", ft, NODE) is True
    assert _decided("ft", ft, 64e9) is False  # two fit side by side without it
    assert _decided("ft", ft, 6e9) is True  # too large for the node alone; checkpointed it fits
    assert _decided("ft", ft, on - 1) is False and _decided("ft", ft, on) is True  # not even checkpointed
    assert _decided("ft", ft, None) is False and _decided("ft", ft, 0) is False  # Ray did not say
    # the boundaries: "more than half" without, "at most half" with
    assert _decided("ft", ft, 2 * on) is True and _decided("ft", ft, 2 * on - 1) is True  # (the second rule)
    assert _decided("ft", ft, 2 * off) is False and _decided("ft", ft, 2 * off - 1) is True
    pt = PTConfig(gradient_checkpointing=AUTO)
    pt_off, pt_on = _estimates("pt", MINILM, pt)
    for node in (pt_off, pt_on + pt_off, 2 * pt_on, 2 * pt_off, 2 * pt_off + 1, 1e12):
        assert _decided("pt", pt, node) is (2 * pt_off > node >= 2 * pt_on or pt_off > node >= pt_on), node
    assert _decided("pt", pt, pt_on + pt_off) is True  # PT too (the masked-LM head stays)


def test_true_and_false_keep_their_meaning_and_other_stages_are_untouched():
    from adaptlab.adapt.train.memory import decide_checkpointing

    for node in (6e9, NODE, 64e9, None):
        assert _decided("ft", FTConfig(batch_size=32, gradient_checkpointing=True), node) is True
        assert _decided("ft", FTConfig(batch_size=32, gradient_checkpointing=False), node) is False
    colbert = ColBERTFTConfig()
    assert decide_checkpointing("colbert-ft", MINILM, colbert, NODE, "c") is colbert
    assert decide_checkpointing("merge", MINILM, None, NODE, "m") is None


def test_auto_on_is_logged_once_with_both_estimates_and_the_node(caplog):
    from adaptlab.adapt.train.memory import decide_checkpointing

    ft = FTConfig(batch_size=32, gradient_checkpointing=AUTO)
    off, on = _estimates("ft", MINILM, ft)
    with caplog.at_level(logging.INFO, logger="adaptlab.adapt.train.memory"):
        decide_checkpointing("ft", MINILM, ft, NODE, "adapt:ft:ft/m/scale=60")
        decide_checkpointing("ft", MINILM, ft, 64e9, "adapt:ft:ft/m/scale=20")
    lines = [r.getMessage() for r in caplog.records if "gradient checkpointing" in r.getMessage()]
    assert lines == [
        f"adapt:ft:ft/m/scale=60: gradient checkpointing on: {off / 1e9:.1f} GB -> {on / 1e9:.1f} GB, "
        "so two stages fit a 15.6 GB node"
    ]
    assert "10.4 GB -> 3.6 GB" in lines[0]


class _Ray:
    """What ``_declare_memory`` asks of Ray: one live node with ``memory`` bytes."""

    def __init__(self, memory: float) -> None:
        self.memory = memory

    def nodes(self) -> list[dict]:
        return [{"Alive": True, "Resources": {"memory": self.memory, "CPU": 4.0}}]


def _stages(tiny_model: Path, triplets, ft: FTConfig, pt: PTConfig | None = None) -> list:  # noqa: ANN001
    from adaptlab.adapt.train.jobs import AdaptJob, _plan

    job = AdaptJob(
        "merged",
        str(tiny_model),
        scale=4,
        triplets=triplets,
        chunks=[t for t, _, _ in triplets],
        ft_config=ft,
        pt_config=pt or PTConfig(),
        merge_source="pt-ft",
        seed=3,
    )
    return list(_plan([job])[0].values())  # pt, ft, merge


def test_the_scheduler_declares_the_checkpointed_estimate_so_two_stages_fit(tiny_model: Path, triplets):
    from adaptlab.adapt.train.jobs import _declare_memory, _StageRunner

    shape = EncoderShape.read(tiny_model)
    ft = FTConfig(
        learning_rate=1e-3,
        epochs=1,
        batch_size=4,
        num_negatives=1,
        max_steps=1,
        min_steps=0,
        gradient_checkpointing=AUTO,
    )
    off, on = _estimates("ft", shape, ft)
    node = off + on  # between two checkpointed stages and two plain ones
    pt_off, pt_on = _estimates("pt", shape, PTConfig())
    assert not (2 * pt_off > node >= 2 * pt_on or pt_off > node >= pt_on)  # PT stays off (its own rule)
    pt_stage, ft_stage, merge = _stages(tiny_model, triplets, ft)
    _declare_memory([pt_stage, ft_stage, merge], _Ray(node), None)
    assert ft_stage.config.gradient_checkpointing is True and ft_stage.memory == on
    assert pt_stage.config.gradient_checkpointing is False and pt_stage.memory == pt_off
    assert merge.config is None and ft_stage.config.key_dict() == ft.key_dict()  # the same artifact key
    runner = _StageRunner(None, lambda st, _up: st.key, [ft_stage], 0, True, node)
    assert not runner._memory_bound(ft_stage)  # it no longer takes the node alone: two share it
    # given memory_per_job: auto is off, the declared memory is the one given
    pt_stage, ft_stage, merge = _stages(tiny_model, triplets, ft)
    _declare_memory([pt_stage, ft_stage, merge], _Ray(node), 2 * 2**30)
    assert ft_stage.config.gradient_checkpointing is False and ft_stage.memory == 2 * 2**30
    # explicit false: off and the plain estimate, on the same node
    pt_stage, ft_stage, merge = _stages(tiny_model, triplets, _with(ft, False))
    _declare_memory([pt_stage, ft_stage, merge], _Ray(node), None)
    assert ft_stage.config.gradient_checkpointing is False and ft_stage.memory == off
    # a GPU stage: its training memory is the GPU's, not the node's, so "auto" stays off
    pt_stage, ft_stage, merge = _stages(tiny_model, triplets, ft)
    _declare_memory([pt_stage, ft_stage, merge], _Ray(node), None, gpu=True)
    assert ft_stage.config.gradient_checkpointing is False and ft_stage.memory == off


def _train_stage(stage, triplets, root: Path, monkeypatch) -> list[bool]:  # noqa: ANN001
    """Train ``stage`` as its Ray task would (``run_stage`` with the task's params), in this
    process; the values ``set_gradient_checkpointing`` was called with."""
    from adaptlab.adapt.train import loop
    from adaptlab.adapt.train.jobs import _task_params
    from adaptlab.adapt.train.stage_worker import run_stage as _run_stage

    calls: list[bool] = []
    original = loop.set_gradient_checkpointing
    monkeypatch.setattr(
        loop,
        "set_gradient_checkpointing",
        lambda model, on, label="training": calls.append(on) or original(model, on, label),
    )
    artifact = _run_stage(
        stage.stage, stage.job.base_model, triplets, _task_params(stage, cpus=1), str(root), "cpu", None, None
    )
    assert not artifact.reused
    return calls


def test_the_decided_bool_reaches_the_training_loop(tiny_model: Path, triplets, tmp_path: Path, monkeypatch):
    from adaptlab.adapt.train.jobs import _declare_memory, train_variant

    shape = EncoderShape.read(tiny_model)
    ft = FTConfig(
        learning_rate=1e-3,
        epochs=1,
        batch_size=4,
        num_negatives=1,
        max_steps=1,
        min_steps=0,
        gradient_checkpointing=AUTO,
    )
    off, on = _estimates("ft", shape, ft)
    seen = {}
    for node in (off + on, 1e12):  # decided on; two fit without it: off
        _, ft_stage, _ = _stages(tiny_model, triplets, ft)
        _declare_memory([ft_stage], _Ray(node), None)
        seen[node] = _train_stage(ft_stage, triplets, tmp_path / str(node), monkeypatch)
    assert seen == {off + on: [True, False], 1e12: []}  # switched on for training, off after
    # in this process no scheduler decides: "auto" trains without
    calls: list[bool] = []
    from adaptlab.adapt.train import loop
    from adaptlab.adapt.train.jobs import AdaptJob

    monkeypatch.setattr(loop, "set_gradient_checkpointing", lambda model, on, label="training": calls.append(on))
    train_variant(
        AdaptJob("ft", str(tiny_model), scale=4, triplets=triplets, ft_config=ft, seed=3),
        tmp_path / "in-process",
        checkpoint_every=None,
    )
    assert calls == []


def test_the_config_and_the_study_take_auto_true_false_and_refuse_the_rest(tmp_path):
    assert FTConfig().gradient_checkpointing is False and PTConfig().gradient_checkpointing is False  # the default
    assert FTConfig(gradient_checkpointing=AUTO).optim().gradient_checkpointing is False  # undecided: off
    assert FTConfig(gradient_checkpointing=True).optim().gradient_checkpointing is True
    assert FTConfig().key_dict() == FTConfig(gradient_checkpointing=True).key_dict()
    for bad in ("yes", 1, 0, "Auto", None):
        with pytest.raises(
            ConfigError, match=r'^FTConfig.gradient_checkpointing = .*: expected "auto", true or false$'
        ):
            FTConfig(gradient_checkpointing=bad)
    s = _adapt_settings(tmp_path)
    assert s.pt.gradient_checkpointing is False and s.ft.gradient_checkpointing is False
    s = _adapt_settings(tmp_path, gradient_checkpointing="auto")
    assert s.pt.gradient_checkpointing == AUTO and s.ft.gradient_checkpointing == AUTO
    s = _adapt_settings(tmp_path, ft={"gradient_checkpointing": False}, pt={"gradient_checkpointing": "auto"})
    assert s.ft.gradient_checkpointing is False and s.pt.gradient_checkpointing == AUTO
    for where, kw in (
        ("adapt", {"gradient_checkpointing": "yes"}),
        ("adapt.ft", {"ft": {"gradient_checkpointing": 1}}),
        ("adapt.pt", {"pt": {"gradient_checkpointing": "on"}}),
    ):
        with pytest.raises(ConfigError) as e:
            _adapt_settings(tmp_path, **kw)
        line = str(e.value)
        assert "\n" not in line and line.startswith(f"study.toml: [{where}].gradient_checkpointing: ")
        assert 'expected "auto", true or false, got ' in line


@pytest.mark.slow  # ~15 s on 2 loaded cores: two one-step FT stages on the shared Ray
def test_the_ray_task_trains_with_the_decided_bool(ray_local, tiny_model: Path, triplets, tmp_path: Path, monkeypatch):
    """On Ray: the driver decides (a node memory where the auto stage fits twice only checkpointed)
    and the worker's loop trains with that bool, read in the worker from the loop's own frame at
    the first checkpoint; an explicit false beside it stays off."""
    from adaptlab.adapt.train import jobs

    seen = tmp_path / "seen"
    seen.mkdir()

    def record(step: int) -> None:  # runs in the worker (Ray pickles it by value)
        import sys

        frame = sys._getframe(1)
        while frame.f_code.co_name != "run_loop":
            frame = frame.f_back
        optim, model = frame.f_locals["optim"], frame.f_locals["model"]
        on = (optim.gradient_checkpointing, model[0].auto_model.is_gradient_checkpointing)
        (seen / f"{optim.learning_rate}-{step}").write_text(repr(on))

    shape = EncoderShape.read(tiny_model)
    auto = FTConfig(
        learning_rate=1e-3,
        epochs=1,
        batch_size=4,
        num_negatives=1,
        max_steps=2,
        min_steps=0,
        gradient_checkpointing=AUTO,
    )
    off, on = _estimates("ft", shape, auto)
    monkeypatch.setattr(jobs, "largest_node_memory", lambda _ray: off + on)  # what the driver decides from
    plain = replace(auto, learning_rate=2e-3, gradient_checkpointing=False)
    made = [
        jobs.AdaptJob("ft", str(tiny_model), scale=4, triplets=triplets, ft_config=cfg, seed=5) for cfg in (auto, plain)
    ]
    jobs.run_adaptation_jobs(
        made,
        tmp_path / "store",
        jobs.JobSettings(cpus_per_job=1, checkpoint_every=1, lone_stage_all_cpus=False),
        on_checkpoint=record,
    )
    assert {f.name: f.read_text() for f in seen.iterdir()} == {"0.001-1": "(True, True)", "0.002-1": "(False, False)"}
