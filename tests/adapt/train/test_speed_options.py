"""Training at the speed of its math (issue 32): the options reach the code that uses them.

- ``precision = "bf16"``: the loss is computed under bfloat16 autocast, on a CPU that has it;
- ``fused_attention``: attention dropout is 0 while training (the fused SDPA kernel), restored after;
- both are study keys (shared by PT and FT like gradient_checkpointing) and enter artifact keys
  only when set, so the keys of models trained before stay the same;
- a stage's torch threads follow the CPUs it declares, never the load; a stage that runs alone
  declares its node's CPUs (``[adapt].lone_stage_all_cpus``);
- the stage graph starts the longest chain first (PT before FT stages that do not need it)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from adaptlab.adapt.train.checks import TrainingCheckError
from adaptlab.adapt.train.ft import FTConfig
from adaptlab.adapt.train.jobs import _critical_depth, _StageRunner, stage_threads
from adaptlab.adapt.train.knobs import check_precision
from adaptlab.adapt.train.loop import Examples, run_loop
from adaptlab.adapt.train.optimizer import OptimConfig
from adaptlab.adapt.train.pt import PTConfig
from adaptlab.errors import ConfigError
from adaptlab.runtime import hardware
from adaptlab.runtime.hardware import bf16_support


def _bf16_cpu() -> bool:
    return bf16_support("cpu").native


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_precision_sets_the_autocast_of_the_loss(precision):
    import torch

    if precision == "bf16" and not _bf16_cpu():
        pytest.skip("this CPU computes no bfloat16 natively")
    torch.manual_seed(0)
    model, x = torch.nn.Linear(4, 1), torch.randn(8, 4)
    seen = []

    def loss(idx):
        seen.append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")))
        out = model(x[torch.as_tensor(np.asarray(idx))])
        seen.append(out.dtype)
        return out.float().pow(2).mean()

    optim = OptimConfig(learning_rate=0.1, epochs=1, batch_size=4, warmup_ratio=0.0, precision=precision)
    run_loop(model, examples=Examples(8, loss), optim=optim, seed=0, device=torch.device("cpu"))
    expected = (True, torch.bfloat16) if precision == "bf16" else (False, torch.bfloat16)
    assert seen[0] == expected and seen[1] == (torch.bfloat16 if precision == "bf16" else torch.float32)
    assert model.weight.dtype == torch.float32  # weights and optimizer stay fp32


def test_bf16_is_refused_where_the_cpu_has_none(monkeypatch):
    import torch

    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"sse4_2", "avx", "avx2", "fma"}))
    with pytest.raises(
        TrainingCheckError,
        match="run x: precision = 'bf16' needs a device that computes bfloat16"
        r".*lacks AVX512-BF16 and AMX-BF16 \(it has avx2\)",
    ):
        check_precision("bf16", torch.device("cpu"), "run x")
    check_precision("fp32", torch.device("cpu"), "run x")


def test_fused_attention_trains_without_attention_dropout_and_restores_it(tiny_model: Path, triplets):
    from adaptlab.adapt.train.ft import fine_tune_model
    from adaptlab.adapt.train.third_party import load_sentence_model

    def train(fused: bool) -> tuple[list[float], list[float], float]:
        model = load_sentence_model(tiny_model, "cpu")
        attention = model[0].auto_model.encoder.layer[0].attention.self
        seen: list[float] = []
        attention.register_forward_pre_hook(lambda m, *_: seen.append(m.dropout_prob) if m.training else None)
        cfg = FTConfig(
            learning_rate=1e-3, epochs=1, batch_size=4, num_negatives=1, max_steps=2, min_steps=0, fused_attention=fused
        )
        losses = fine_tune_model(model, triplets, cfg, seed=0, prefixes=("", ""), device="cpu").losses
        return losses, seen, attention.dropout_prob

    losses, seen, after = train(False)
    fused_losses, fused_seen, fused_after = train(True)
    assert set(seen) == {after} and after > 0  # the tiny model has attention dropout
    assert set(fused_seen) == {0.0} and fused_after == after  # off while training, restored after
    assert fused_losses[0] != losses[0]  # a different computation: dropout masks are gone


def test_the_study_sets_precision_and_fused_attention_for_pt_and_ft(tmp_path):
    from test_memory import _adapt_settings

    s = _adapt_settings(tmp_path, precision="bf16", fused_attention=True)
    assert (s.pt.precision, s.ft.precision, s.pt.fused_attention, s.ft.fused_attention) == ("bf16", "bf16", True, True)
    only_ft = _adapt_settings(tmp_path, ft={"precision": "bf16"})
    assert (only_ft.ft.precision, only_ft.pt.precision) == ("bf16", "fp32")
    default = _adapt_settings(tmp_path)
    assert (default.ft.precision, default.ft.fused_attention) == ("fp32", False)
    with pytest.raises(ConfigError, match=r"\[adapt.pt\]: PTConfig.precision = 'fp16': expected one of 'fp32', 'bf16'"):
        _adapt_settings(tmp_path, precision="fp16")
    with pytest.raises(ConfigError, match=r"\[adapt\].fused_attention: expected it in \[adapt\] or in \[adapt.ft\]"):
        _adapt_settings(tmp_path, fused_attention=True, ft={"fused_attention": False})


def test_length_buckets_batch_neighbours_in_length_in_a_seeded_order():
    """Hand-checkable: 10 examples of lengths 0, 10, ..., 90 at batch 2 fit one window (16
    batches), so the batches are the length-sorted pairs, in an order the seed shuffles."""
    from adaptlab.adapt.train.loop import epoch_order

    lengths = np.arange(10) * 10
    plain = epoch_order(10, 3, 1, 2)
    assert plain.tolist() == np.random.default_rng([3, 1]).permutation(10).tolist()  # the default is unchanged
    order = epoch_order(10, 3, 1, 2, lengths)
    assert sorted(order.tolist()) == list(range(10))
    assert sorted(sorted(pair) for pair in order.reshape(5, 2).tolist()) == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]
    assert order.tolist() == epoch_order(10, 3, 1, 2, lengths).tolist()  # deterministic
    assert order.tolist() != epoch_order(10, 3, 2, 2, lengths).tolist()  # each epoch its own order
    odd = epoch_order(7, 0, 0, 2, np.arange(7))
    assert odd[-1] == 0 and sorted(odd.tolist()) == list(range(7))  # the short batch is last: the shortest
    long = epoch_order(100, 0, 0, 2, np.arange(100))  # windows of 32: a batch never spans two windows
    perm = np.random.default_rng([0, 0]).permutation(100)
    window = {int(i): w for w in range(4) for i in perm[32 * w : 32 * (w + 1)]}
    assert all(window[int(a)] == window[int(b)] for a, b in long.reshape(50, 2))


def test_length_buckets_reach_the_loop_from_the_study(tmp_path, tiny_model: Path, triplets, monkeypatch):
    from test_memory import _adapt_settings

    from adaptlab.adapt.train import loop
    from adaptlab.adapt.train.ft import fine_tune_model
    from adaptlab.adapt.train.third_party import load_sentence_model

    s = _adapt_settings(tmp_path, length_buckets=True)
    assert s.pt.length_buckets and s.ft.length_buckets and not _adapt_settings(tmp_path).ft.length_buckets
    seen: list = []
    original = loop.epoch_order
    monkeypatch.setattr(loop, "epoch_order", lambda *a: seen.append(a[-1]) or original(*a))
    for on in (False, True):
        cfg = FTConfig(
            learning_rate=1e-3, epochs=1, batch_size=4, num_negatives=1, max_steps=1, min_steps=0, length_buckets=on
        )
        fine_tune_model(load_sentence_model(tiny_model, "cpu"), triplets, cfg, seed=0, prefixes=("", ""), device="cpu")
    assert seen[0] is None and len(seen[1]) == len(triplets) and min(seen[1]) > 0


def test_set_options_enter_the_artifact_key_and_defaults_do_not():
    assert "length_buckets" not in FTConfig().key_dict() and PTConfig(length_buckets=True).key_dict()["length_buckets"]
    assert "precision" not in FTConfig().key_dict() and "fused_attention" not in PTConfig().key_dict()
    assert FTConfig(precision="bf16").key_dict()["precision"] == "bf16"
    assert PTConfig(fused_attention=True).key_dict()["fused_attention"] is True


@pytest.mark.parametrize(
    ("declared", "node_cpus", "cores", "threads"),
    [
        (1, 4, 2, 1),  # the embedded runtime on 2 cores (4 CPUs): the default stage has one thread
        (2, 4, 2, 1),
        (4, 4, 2, 2),  # all the node's CPUs: its cores
        (8, 16, 8, 4),
        (16, 16, 8, 8),
        (0.5, 4, 2, 1),  # never below one
        (6, 4, 2, 2),  # never above the cores
        (1, 0, 2, 1),  # a node that reports no CPUs
    ],
)
def test_threads_follow_the_declared_cpus(declared, node_cpus, cores, threads):
    assert stage_threads(declared, node_cpus, cores) == threads


def test_the_longest_chain_starts_first():
    """The runner submits the ready stages PT first (it has two stages after it), then the FT
    stages in plan order."""

    def stage(key, upstream=None):
        return SimpleNamespace(key=key, upstream=upstream, job=SimpleNamespace(base_model="m"))

    stages = [stage("ft10"), stage("pt10"), stage("ptft10", "pt10"), stage("merge10", "ptft10"), stage("ft60")]
    assert _critical_depth(stages) == {"ft10": 1, "pt10": 3, "ptft10": 2, "merge10": 1, "ft60": 1}
    submitted: list[str] = []
    runner = _StageRunner(None, lambda st, _up: submitted.append(st.key) or st.key, stages, max_retries=0)
    runner._submit_ready()
    assert submitted == ["pt10", "ft10", "ft60"]


def test_a_stage_alone_declares_the_whole_node():
    """The runner marks a training stage for the whole node only when nothing runs and nothing
    else can start before it ends; never a merge, never with the option off."""

    def stage(key, upstream=None, kind="ft"):
        return SimpleNamespace(
            key=key, upstream=upstream, stage=kind, whole_node=False, job=SimpleNamespace(base_model="m")
        )

    def graph():
        return [stage("pt10", kind="pt"), stage("ptft10", "pt10"), stage("merge10", "ptft10", "merge"), stage("ft10")]

    def ladder(whole_node: bool, ends_first: str) -> list[tuple[str, bool]]:
        stages = graph()
        submitted: list = []
        runner = _StageRunner(None, lambda st, _up: submitted.append(st) or st.key, stages, 0, whole_node)
        runner._submit_ready()  # pt10 and ft10: side by side
        for key in (ends_first, *({"pt10", "ft10"} - {ends_first}), "ptft10", "merge10"):
            runner.running.pop(key, None)
            runner.done[key] = key
            runner._submit_ready()
        return [(st.key, st.whole_node) for st in submitted]

    assert ladder(True, "ft10") == [("pt10", False), ("ft10", False), ("ptft10", True), ("merge10", False)]
    # PT ends while FT still runs: its PT-FT starts beside FT, on the declared CPUs
    assert ladder(True, "pt10") == [("pt10", False), ("ft10", False), ("ptft10", False), ("merge10", False)]
    assert not any(whole for _, whole in ladder(False, "ft10"))
    chain = [stage("pt10", kind="pt"), stage("ptft10", "pt10")]  # one pt-ft job: both stages alone
    runner = _StageRunner(None, lambda st, _up: st.key, chain, 0, True)
    runner._submit_ready()
    assert chain[0].whole_node


def test_a_stage_whose_memory_leaves_no_room_for_a_second_declares_the_whole_node():
    """A stage declaring more than half the largest node's memory runs alone on its node whatever
    else is ready (the pdf study's FT stages ran one after another on one thread while the second
    core idled), decided by its memory and the node's, never a merge, never with the option off."""

    def stage(key, memory, kind="ft"):
        return SimpleNamespace(
            key=key, upstream=None, stage=kind, whole_node=False, memory=memory, job=SimpleNamespace(base_model="m")
        )

    def submitted(whole_node: bool, node_memory: float | None) -> dict[str, bool]:
        stages = [
            stage("pt20", 3e9, "pt"),
            stage("ft20", 10.4e9),
            stage("ft60", 10.4e9),
            stage("half", 7.8e9),
            stage("merge", 9e9, "merge"),
        ]
        runner = _StageRunner(None, lambda st, _up: st.key, stages, 0, whole_node, node_memory)
        runner._submit_ready()
        return {st.key: st.whole_node for st in stages}

    assert submitted(True, 15.6e9) == {"pt20": False, "ft20": True, "ft60": True, "half": False, "merge": False}
    assert not any(submitted(False, 15.6e9).values())
    assert not any(submitted(True, None).values())  # Ray did not say: as before
    assert not any(submitted(True, 64e9).values())  # two fit side by side: one CPU each


def test_the_study_passes_lone_stage_all_cpus_to_the_stage_graph(tmp_path, monkeypatch):
    from test_memory import _adapt_settings

    from adaptlab.study import adaptation

    seen: list[bool] = []
    monkeypatch.setattr(
        adaptation, "run_adaptation_jobs", lambda jobs, root, settings, **kw: seen.append(settings.lone_stage_all_cpus)
    )
    for value in (False, True):
        adaptation._train(_adapt_settings(tmp_path, use_ray=True, lone_stage_all_cpus=value), [("ft", 4, None)], None)
    assert seen == [False, True] and _adapt_settings(tmp_path).lone_stage_all_cpus is True
    with pytest.raises(ConfigError, match=r"lone_stage_all_cpus"):
        _adapt_settings(tmp_path, lone_stage_all_cpus="yes")


@pytest.mark.slow  # 6 s on 2 loaded cores: a one-stage graph on the shared Ray
def test_a_ray_stage_trains_on_the_threads_its_cpus_give(ray_local, tiny_model: Path, triplets, tmp_path: Path):
    """``cpus_per_job`` reaches the worker: on the shared Ray (4 CPUs) a stage declaring 1 CPU
    trains on one thread, also alone when ``lone_stage_all_cpus`` is off (a stage alone with it on:
    test_room_for_training)."""
    from adaptlab.adapt.train.jobs import AdaptJob, JobSettings, run_adaptation_jobs
    from adaptlab.runtime import available_cores

    seen = tmp_path / "threads"
    seen.mkdir()

    def record(step: int) -> None:  # runs in the worker (Ray pickles it by value)
        import os

        import torch

        (seen / f"{os.getpid()}-{step}").write_text(str(torch.get_num_threads()))

    # 2 steps: the checkpoint after step 1 calls the hook (the last step's state is the model)
    cfg = FTConfig(learning_rate=1e-3, epochs=1, batch_size=4, num_negatives=1, max_steps=2, min_steps=0)
    job = AdaptJob("ft", str(tiny_model), scale=4, triplets=triplets, ft_config=cfg, seed=11)
    (art,) = run_adaptation_jobs(
        [job],
        tmp_path / "store",
        JobSettings(cpus_per_job=1, checkpoint_every=1, lone_stage_all_cpus=False),
        on_checkpoint=record,
    )
    threads = {f.read_text() for f in seen.iterdir()}
    assert threads == {"1"} == {str(stage_threads(1, 4, available_cores()))}
    assert art.manifest["training"]["torch_threads"] == 1
