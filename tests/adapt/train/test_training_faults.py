"""Training stages that lose their worker: the retry policy of the stage runner (on a scripted
stand-in for Ray), a crashed stage retried on Ray ending with the clean run's weights, and
stages serialised by their declared memory on a Ray node with a small memory budget."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import ray.exceptions as rex

from adaptlab.adapt.train.ft import FTConfig
from adaptlab.adapt.train.jobs import (
    AdaptJob,
    JobSettings,
    TrainingResourceError,
    _Stage,
    _StageRunner,
    run_adaptation_jobs,
)
from adaptlab.errors import ConfigError

TESTS = Path(__file__).resolve().parents[2]
FT = FTConfig(learning_rate=1e-3, epochs=2, batch_size=4, num_negatives=1, warmup_ratio=0.0)


class ScriptedRay:
    """Ray's wait/get/cancel over scripted outcomes: tasks end in submission order; the n-th
    attempt of a stage ends with ``outcomes[name][n]`` (an exception is raised, else returned)."""

    exceptions = rex

    def __init__(self, outcomes: dict[str, list[Any]]) -> None:
        self.outcomes = {k: list(v) for k, v in outcomes.items()}
        self.running: list[tuple[str, int]] = []
        self.events: list[tuple[str, str, tuple[str, ...]]] = []
        self.cancelled: list[str] = []
        self.attempts: dict[str, int] = {}

    def submit(self, stage: _Stage, upstream: Any) -> tuple[str, int]:
        name = stage.key[0]
        self.events.append(("start", name, tuple(sorted(n for n, _ in self.running))))
        ref = (name, self.attempts.get(name, 0))
        self.attempts[name] = ref[1] + 1
        self.running.append(ref)
        return ref

    def wait(self, refs: list[Any], num_returns: int, timeout: float) -> tuple[list[Any], list[Any]]:
        assert timeout is not None and timeout > 0, "every wait is bounded"
        return refs[:1], refs[1:]

    def get(self, ref: tuple[str, int]) -> Any:
        self.running.remove(ref)
        self.events.append(("end", ref[0], ()))
        outcome = self.outcomes[ref[0]][ref[1]]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def cancel(self, ref: tuple[str, int], force: bool) -> None:
        self.cancelled.append(ref[0])


def _stage(name: str, scale: int, upstream: str | None = None, stage: str = "ft") -> _Stage:
    job = AdaptJob("ft", "minilm", scale=scale, triplets=[("q", "p", ("n",))], ft_config=FTConfig(batch_size=32))
    return _Stage((name,), stage, job, (upstream,) if upstream else None, None)


def _run(outcomes: dict[str, list[Any]], stages: list[_Stage], max_retries: int = 2) -> tuple[dict, ScriptedRay]:
    fake = ScriptedRay(outcomes)
    return _StageRunner(fake, fake.submit, stages, max_retries).run(), fake


def test_a_stage_killed_for_memory_is_retried_alone_after_the_others():
    oom = rex.OutOfMemoryError("Task was killed due to the node running low on memory.")
    stages = [
        _stage("a", 20),
        _stage("b", 60),
        _stage("c", 60, upstream="b", stage="merge"),
        _stage("d", 20, upstream="a", stage="merge"),
    ]
    done, fake = _run({"a": [oom, "art-a"], "b": ["art-b"], "c": ["art-c"], "d": ["art-d"]}, stages)
    assert done == {("a",): "art-a", ("b",): "art-b", ("c",): "art-c", ("d",): "art-d"}
    assert fake.events == [
        ("start", "a", ()),
        ("start", "b", ("a",)),
        ("end", "a", ()),  # killed for memory
        ("end", "b", ()),  # the retry waits for b ...
        ("start", "a", ()),
        ("end", "a", ()),  # ... and runs alone: c (ready since b ended) waits
        ("start", "c", ()),
        ("start", "d", ("c",)),
        ("end", "c", ()),
        ("end", "d", ()),
    ]
    assert stages[0].attempts == 1 and stages[0].alone


def test_a_stage_lost_with_its_node_is_retried_at_once():
    stages = [_stage("a", 20), _stage("b", 60)]
    done, fake = _run({"a": [rex.NodeDiedError("node 1 died"), "art-a"], "b": ["art-b"]}, stages)
    assert done == {("a",): "art-a", ("b",): "art-b"}
    assert ("start", "a", ("b",)) in fake.events  # resubmitted while b still runs
    assert not stages[0].alone


def test_retries_run_out_with_one_line_naming_variant_scale_and_setting():
    crash = rex.WorkerCrashedError()
    stages = [_stage("a", 60), _stage("b", 20)]
    with pytest.raises(TrainingResourceError) as info:
        _run({"a": [crash, crash], "b": ["art-b"]}, stages, max_retries=1)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("variant 'ft' at scale 60 (stage ft of minilm): its worker was killed 2 time(s)")
    assert "the last time with no other training stage running" in message
    assert "lower [adapt.ft].batch_size (now 32) or [adapt.ft].max_seq_length" in message


def test_node_losses_run_out_with_their_own_line_and_running_stages_are_cancelled():
    lost = rex.NodeDiedError("node 1 died")
    stages = [_stage("a", 60), _stage("b", 20)]
    with pytest.raises(TrainingResourceError, match=r"lost with its node 1 time\(s\) .*ray status") as info:
        _run({"a": [lost], "b": ["art-b"]}, stages, max_retries=0)
    assert "batch_size" not in str(info.value)


def test_an_adaptlab_error_in_a_task_surfaces_as_itself_and_others_are_cancelled():
    failed = rex.RayTaskError("_remote_stage", "traceback", ConfigError("FTConfig.batch_size: bad"))
    stages = [_stage("a", 20), _stage("b", 60)]
    fake = ScriptedRay({"a": [failed], "b": ["art-b"]})
    with pytest.raises(ConfigError, match="FTConfig.batch_size: bad"):
        _StageRunner(fake, fake.submit, stages, 3).run()
    assert fake.cancelled == ["b"]


def _sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.mark.slow
def test_a_crashed_stage_is_retried_and_ends_with_the_clean_runs_artifact(ray_local, tiny_model, triplets, tmp_path):
    marker = tmp_path / "crashed-once"

    def crash_once_at_step_2(step: int) -> None:  # nested: Ray pickles it by value
        if step != 2:
            return
        try:  # atomic: only the first attempt gets here first
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
        os._exit(1)

    job = AdaptJob("ft", str(tiny_model), scale=8, triplets=triplets, ft_config=FT, seed=3)
    (clean,) = run_adaptation_jobs([job], tmp_path / "clean", JobSettings(checkpoint_every=1))
    (retried,) = run_adaptation_jobs(
        [job], tmp_path / "faulty", JobSettings(max_retries=1, checkpoint_every=1), on_checkpoint=crash_once_at_step_2
    )
    assert marker.exists(), "the first attempt never crashed"
    assert retried.manifest["training"]["resumed_from_step"] == 2
    assert clean.manifest["training"]["resumed_from_step"] == 0
    assert retried.manifest["key"] == clean.manifest["key"]
    assert _sha256(retried.model_path / "model.safetensors") == _sha256(clean.model_path / "model.safetensors")


_BUDGET_SCRIPT = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    import ray
    from adaptlab.adapt.train.ft import FTConfig
    from adaptlab.adapt.train.jobs import AdaptJob, JobSettings, run_adaptation_jobs
    from adaptlab.adapt.train.memory import EncoderShape, estimate_stage_memory

    model, triplets, out, wait_s = sys.argv[1], json.loads(sys.argv[2]), Path(sys.argv[3]), float(sys.argv[4])
    ft = FTConfig(learning_rate=1e-3, epochs=5, batch_size=4, num_negatives=1, warmup_ratio=0.0)
    need = estimate_stage_memory("ft", EncoderShape.read(model), ft).total
    ray.init(address="local", num_cpus=2, _memory=int(1.5 * need), include_dashboard=False,
             object_store_memory=100 * 2**20, log_to_driver=True)

    def writers(path):  # the task ids that stamped ``path``
        try:
            with open(path) as f:
                return {line.split()[0] for line in f if line.strip()}
        except FileNotFoundError:
            return set()

    def stamper(path):
        def stamp(step):  # runs in the worker after each checkpoint
            import time, ray
            me = ray.get_runtime_context().get_task_id()
            first = me not in writers(path)
            with open(path, "a") as f:
                f.write(f"{me} {time.time()}\\n")
            if not first:
                return
            # the task's first checkpoint waits (bounded) for the other stage's: both stamp before
            # either goes on when they run side by side; a stage that runs alone waits wait_s
            deadline = time.monotonic() + wait_s
            while not writers(path) - {me} and time.monotonic() < deadline:
                time.sleep(0.05)
            with open(path, "a") as f:
                f.write(f"{me} {time.time()}\\n")
        return stamp

    def intervals(root, memory_per_job):
        stamps = str(out / (root + ".txt"))
        jobs = [AdaptJob("ft", model, scale=8, triplets=[tuple(t[:2]) + (tuple(t[2]),) for t in triplets],
                         ft_config=ft, seed=s) for s in (1, 2)]
        arts = run_adaptation_jobs(jobs, out / root, JobSettings(checkpoint_every=1, memory_per_job=memory_per_job),
                                   on_checkpoint=stamper(stamps))
        spans = {}
        for line in open(stamps):
            task, t = line.split()
            lo, hi = spans.get(task, (float(t), float(t)))
            spans[task] = (min(lo, float(t)), max(hi, float(t)))
        return {"spans": sorted(spans.values()), "artifacts": len({a.manifest["key"] for a in arts})}

    @ray.remote(num_cpus=1)
    def warm(path):  # two workers that imported what training imports, so that start-up does not decide
        import os, time
        import sentence_transformers, torch  # noqa: F401
        with open(path, "a") as f:
            f.write(f"{os.getpid()}\\n")
        deadline = time.monotonic() + 120
        while len(set(open(path).read().split())) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)  # held until both have started, so they are two workers
        return os.getpid()

    warm_pids = ray.get([warm.remote(str(out / "warm.txt")) for _ in range(2)])
    undeclared = intervals("undeclared", 0)
    print(json.dumps({"need": need, "declared": intervals("declared", None), "undeclared": undeclared,
                      "warm_workers": len(set(warm_pids))}))
""")


@pytest.mark.slow
def test_stages_that_do_not_fit_side_by_side_run_one_after_another(tiny_model, triplets, tmp_path):
    """A Ray node with 2 CPUs and memory for 1.5 FT stages: with their memory declared the two
    stages run one after the other (run intervals do not overlap) and both finish; with none
    declared (the control) they overlap. Progress lines reach the driver's log.

    Each stage's first checkpoint waits up to 10 s for the other stage's first one: side by side
    (the control, or declared stages that Ray wrongly placed together) the two then overlap for
    certain once they start within 10 s of each other (two warmed workers start them together);
    one after the other, the first waits the 10 s alone and the second finds it done. (It slept
    0.6 s at each of 9 checkpoints before: ~18 s of sleep for a 6 s window.)"""
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        ADAPTLAB_PROGRESS_INTERVAL="0.001",
        RAY_ADDRESS="",
    )
    args = [str(tiny_model), json.dumps([[q, p, list(n)] for q, p, n in triplets]), str(tmp_path), "10"]
    out = subprocess.run(
        [sys.executable, "-c", _BUDGET_SCRIPT, *args], capture_output=True, text=True, timeout=600, env=env, cwd=TESTS
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["warm_workers"] == 2, result
    (a0, a1), (b0, b1) = result["declared"]["spans"]
    assert a1 < b0, f"declared stages overlapped: {result}"
    assert a1 - a0 >= 9.5, f"the first declared stage did not wait for a partner: {result}"
    assert result["declared"]["artifacts"] == 2
    (c0, c1), (d0, d1) = result["undeclared"]["spans"]
    assert d0 < c1, f"the control did not overlap, so the test cannot tell: {result}"
    assert re.search(
        r"\[adaptlab\] variant 'ft' of tiny-bert at scale 8 \(8 triplets\): step \d+/10, loss \d", out.stderr
    )
    assert "Some weights" not in out.stdout + out.stderr
    # no colour codes around the workers' line prefixes in a log that is not a terminal (Ray's
    # "[repeated Nx across cluster]" note stays green: RAY_DEDUP_LOGS is the driver's setting)
    ours = [line for line in out.stderr.splitlines() if "[adaptlab] variant" in line]
    assert ours and all(line.startswith("(adapt:ft:") for line in ours), ours[:3]


class _Crash(Exception):
    pass


def test_a_run_killed_after_an_epoch_resumes_from_that_epoch(tiny_model, triplets, tmp_path, read_weights):
    """No periodic checkpoint is due (checkpoint_every=1000), but each epoch ends with one: a run
    that dies after its first epoch resumes there and ends with the uninterrupted run's weights."""
    import torch

    from adaptlab.adapt.train.ft import train_ft

    def die_after_the_first_checkpoint(step: int) -> None:
        raise _Crash(step)

    with pytest.raises(_Crash) as info:
        train_ft(
            tiny_model,
            triplets,
            artifact_root=tmp_path / "a",
            config=FT,
            seed=4,
            checkpoint_every=1000,
            on_checkpoint=die_after_the_first_checkpoint,
        )
    assert info.value.args == (2,)  # 8 triplets at batch 4: the first epoch ends at step 2
    resumed = train_ft(tiny_model, triplets, artifact_root=tmp_path / "a", config=FT, seed=4, checkpoint_every=1000)
    clean = train_ft(tiny_model, triplets, artifact_root=tmp_path / "b", config=FT, seed=4, checkpoint_every=None)
    assert resumed.manifest["training"]["resumed_from_step"] == 2
    assert clean.manifest["training"]["resumed_from_step"] == 0
    a, b = read_weights(resumed.model_path), read_weights(clean.model_path)
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=0)
