"""Training checkpoints shared across nodes (issue 22): with the artifacts on a URI (file:// through
pyarrow, s3:// on a moto server and on s3rver, tests/s3servers.py), each complete checkpoint is
published next to the artifacts, so a run killed on "node 1" resumes on "node 2" (another local
cache folder) where it stopped and ends with the uninterrupted run's weights, bit for bit. A
tampered or unreachable checkpoint never fails training: one warning line, and the run goes on
from what it has. Uploads run in the background: a slow store does not slow the training steps.
Checkpoints left behind by a task that died after publishing its artifact are deleted by the
next look-up that finds the artifact."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("sentence_transformers")

from adaptlab.adapt.train import checkpoints as checkpoints_module  # noqa: E402
from adaptlab.adapt.train.artifacts import find_artifact  # noqa: E402
from adaptlab.adapt.train.checkpoints import CHECKPOINTS, SharedCheckpoints  # noqa: E402
from adaptlab.adapt.train.ft import FTConfig, train_ft  # noqa: E402
from adaptlab.adapt.train.pt import PTConfig, train_pt  # noqa: E402
from adaptlab.storage.objects import open_remote  # noqa: E402
from s3servers import running  # noqa: E402

FT = FTConfig(learning_rate=1e-3, epochs=2, batch_size=4, num_negatives=1, warmup_ratio=0.0, min_steps=0)  # 4 steps
PT = PTConfig(learning_rate=1e-3, epochs=2, batch_size=4, warmup_ratio=0.0, min_steps=0)  # 16 chunks: 8 steps


class _Killed(RuntimeError):
    """Stands for the node's death right after a checkpoint (the local state stays as a kill leaves it)."""


def _kill_at(step: int):
    def hook(done: int) -> None:
        if done == step:
            raise _Killed(done)

    return hook


@pytest.fixture(scope="module")
def s3rver_s3(tmp_path_factory) -> Iterator[tuple[dict[str, str], object, str]]:
    """An s3rver server of the module's own (npm; skipped with the reason without npm), like moto_s3."""
    with running("s3rver", tmp_path_factory.mktemp("s3rver"), "adaptlab-checkpoints") as server:
        yield server.env, server.client(), server.bucket


@pytest.fixture(params=["file", "moto", "s3rver"])
def shared_root(request, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An artifact root every "node" reaches: a file:// folder, or a bucket on moto or s3rver."""
    if request.param == "file":
        return f"file://{tmp_path}/shared/artifacts"
    env, _, bucket = request.getfixturevalue("moto_s3" if request.param == "moto" else "s3rver_s3")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return f"s3://{bucket}/{tmp_path.name}/artifacts"


@pytest.fixture
def on_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``on_node(name)``: this process now stages and checkpoints in node ``name``'s cache folder."""

    def switch(name: str) -> Path:
        monkeypatch.setenv("ADAPTLAB_CACHE", str(tmp_path / name))
        return tmp_path / name

    return switch


@pytest.fixture(scope="module")
def clean_ft(tiny_model, triplets, tmp_path_factory):
    """The uninterrupted FT run (local root, no checkpoints)."""
    return train_ft(
        tiny_model, triplets, artifact_root=tmp_path_factory.mktemp("clean"), config=FT, seed=3, checkpoint_every=None
    )


def _published(root: str) -> list[str]:
    """Every file under the root's checkpoint folder."""
    return open_remote(f"{root}/{CHECKPOINTS}").list_files()


def _pointer(root: str) -> dict:
    rels = [r for r in _published(root) if r.endswith("/latest.json")]
    assert len(rels) == 1, rels
    return json.loads(open_remote(f"{root}/{CHECKPOINTS}").read_bytes(rels[0]))


def test_a_run_killed_on_one_node_resumes_on_another_and_matches_the_clean_run(
    shared_root, on_node, tiny_model, triplets, clean_ft, read_weights, caplog
):
    import torch

    caplog.set_level(logging.WARNING, logger="adaptlab")
    on_node("node-1")
    with pytest.raises(_Killed):
        train_ft(
            tiny_model,
            triplets,
            artifact_root=shared_root,
            config=FT,
            seed=3,
            checkpoint_every=1,
            on_checkpoint=_kill_at(2),
        )
    pointer = _pointer(shared_root)
    assert pointer["step"] == 2 and set(pointer["files"]) == {
        "step-2/model.safetensors",
        "step-2/optimizer.safetensors",
        "step-2/state.json",
    }
    assert {r.split("/")[-2] for r in _published(shared_root) if "/step-" in r} == {"step-1", "step-2"}  # keeps 2

    on_node("node-2")  # nothing local: fetches step 2, dies after step 3
    with pytest.raises(_Killed):
        train_ft(
            tiny_model,
            triplets,
            artifact_root=shared_root,
            config=FT,
            seed=3,
            checkpoint_every=1,
            on_checkpoint=_kill_at(3),
        )
    assert _pointer(shared_root)["step"] == 3

    on_node("node-1")  # its own step 2 is older than the published step 3
    art = train_ft(tiny_model, triplets, artifact_root=shared_root, config=FT, seed=3, checkpoint_every=1)
    assert art.manifest["training"]["resumed_from_step"] == 3 and not art.reused
    assert art.key == clean_ft.key
    a, b = read_weights(art.model_path), read_weights(clean_ft.model_path)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)  # bit-identical
    assert _published(shared_root) == []  # dropped once the artifact is published
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


def test_pt_resumes_on_another_node_too(on_node, tiny_model, chunks, tmp_path, read_weights):
    import torch

    root = f"file://{tmp_path}/shared/artifacts"
    on_node("node-1")
    with pytest.raises(_Killed):
        train_pt(
            tiny_model, chunks, artifact_root=root, config=PT, seed=1, checkpoint_every=3, on_checkpoint=_kill_at(3)
        )
    on_node("node-2")
    art = train_pt(tiny_model, chunks, artifact_root=root, config=PT, seed=1, checkpoint_every=3)
    clean = train_pt(tiny_model, chunks, artifact_root=tmp_path / "clean", config=PT, seed=1, checkpoint_every=None)
    assert art.manifest["training"]["resumed_from_step"] == 3
    a, b = read_weights(art.model_path), read_weights(clean.model_path)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_tampered_checkpoint_is_refused_with_one_warning_and_training_starts_over(
    on_node, tiny_model, triplets, tmp_path, clean_ft, read_weights, caplog
):
    import torch

    root = f"file://{tmp_path}/shared/artifacts"
    on_node("node-1")
    with pytest.raises(_Killed):
        train_ft(
            tiny_model, triplets, artifact_root=root, config=FT, seed=3, checkpoint_every=1, on_checkpoint=_kill_at(2)
        )
    model = next((tmp_path / "shared" / "artifacts" / CHECKPOINTS).rglob("step-2/model.safetensors"))
    model.write_bytes(model.read_bytes()[:-8] + b"tampered")
    on_node("node-2")
    caplog.set_level(logging.WARNING, logger="adaptlab")
    art = train_ft(tiny_model, triplets, artifact_root=root, config=FT, seed=3, checkpoint_every=1)
    assert art.manifest["training"]["resumed_from_step"] == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "cannot fetch the published checkpoint" in warnings[0], warnings
    assert "does not match the hash in latest.json" in warnings[0] and "\n" not in warnings[0]
    assert not list((tmp_path / "node-2").rglob("*.fetch-*"))  # no half-fetched folder left
    a, b = read_weights(art.model_path), read_weights(clean_ft.model_path)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_store_that_refuses_checkpoints_warns_once_and_training_goes_on(
    on_node, tiny_model, triplets, tmp_path, clean_ft, read_weights, monkeypatch, caplog
):
    import torch

    real = checkpoints_module.open_remote

    class Refusing:
        """The store, except that checkpoint uploads fail (a full bucket, a dropped connection)."""

        def __init__(self, uri: str) -> None:
            self.inner, self.checkpoints = real(uri), f"/{CHECKPOINTS}/" in uri

        def upload(self, rel, src, sha256=None):
            if self.checkpoints:
                raise OSError(f"{rel}: connection reset by peer")
            return self.inner.upload(rel, src, sha256)

        def __getattr__(self, name):
            return getattr(self.inner, name)

    monkeypatch.setattr(checkpoints_module, "open_remote", Refusing)
    root = f"file://{tmp_path}/shared/artifacts"
    on_node("node-1")
    caplog.set_level(logging.DEBUG, logger="adaptlab.adapt.train.checkpoints")
    art = train_ft(tiny_model, triplets, artifact_root=root, config=FT, seed=3, checkpoint_every=1)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings  # the later failures go to DEBUG
    assert "cannot publish the checkpoint of step 1" in warnings[0] and "connection reset" in warnings[0]
    failures = sum("cannot publish the checkpoint" in r.getMessage() for r in caplog.records)
    skipped = sum("not published" in r.getMessage() for r in caplog.records)  # a newer one came first
    assert failures + skipped == art.manifest["training"]["steps"] - 1 == 3  # after every step but the last
    assert failures >= 1
    assert art.uri is not None and not art.reused  # the artifact itself is published
    a, b = read_weights(art.model_path), read_weights(clean_ft.model_path)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_local_root_keeps_its_checkpoints_inside_the_root(tmp_path, tiny_model, triplets, on_node):
    """No publishing on a local root: the staging folder with its checkpoints is in the root."""
    on_node("node-1")
    with pytest.raises(_Killed):
        train_ft(
            tiny_model,
            triplets,
            artifact_root=tmp_path / "store",
            config=FT,
            seed=3,
            checkpoint_every=1,
            on_checkpoint=_kill_at(2),
        )
    assert not (tmp_path / "store" / CHECKPOINTS).exists() and not (tmp_path / "node-1").exists()
    assert list((tmp_path / "store").rglob("checkpoints/step-2/state.json"))


SLOW_S = 2.0
"""Seconds each checkpoint file takes to upload in the slow-store test (3 files a checkpoint)."""


def test_a_slow_store_does_not_delay_the_training_steps(
    on_node, tiny_model, triplets, tmp_path, clean_ft, read_weights, monkeypatch, caplog
):
    """Uploads run in the background from a snapshot: the steps go on while the store takes 6 s a
    checkpoint, the checkpoint of step 2 (superseded while step 1 uploads) is skipped, the loop
    deletes step-1/ while it uploads, and the killed run still leaves a complete step 3."""
    import torch

    real = checkpoints_module.open_remote
    uploads: list[str] = []

    class Slow:
        """The store, except that a checkpoint file waits ``SLOW_S`` before it is read and sent."""

        def __init__(self, uri: str) -> None:
            self.inner, self.checkpoints = real(uri), f"/{CHECKPOINTS}/" in uri

        def upload(self, rel, src, sha256=None):
            if self.checkpoints:
                time.sleep(SLOW_S)
                uploads.append(rel)
            return self.inner.upload(rel, src, sha256)

        def __getattr__(self, name):
            return getattr(self.inner, name)

    stamps: dict[int, float] = {}

    def clock_then_kill(step: int) -> None:
        stamps[step] = time.monotonic()
        _kill_at(3)(step)

    monkeypatch.setattr(checkpoints_module, "open_remote", Slow)
    root = f"file://{tmp_path}/shared/artifacts"
    caplog.set_level(logging.WARNING, logger="adaptlab")
    on_node("node-1")
    with pytest.raises(_Killed):
        train_ft(
            tiny_model,
            triplets,
            artifact_root=root,
            config=FT,
            seed=3,
            checkpoint_every=1,
            on_checkpoint=clock_then_kill,
        )
    ended = time.monotonic()
    gaps = [stamps[s + 1] - stamps[s] for s in (1, 2)]
    assert max(gaps) < SLOW_S, gaps  # publishing in the loop: >= 3 * SLOW_S between checkpoints
    assert ended - stamps[3] >= 3 * SLOW_S  # the task's end waited for the newest checkpoint
    assert sorted({rel.split("/")[0] for rel in uploads}) == ["step-1", "step-3"]  # step 2 was skipped
    pointer = _pointer(root)
    assert pointer["step"] == 3 and len(pointer["files"]) == 3
    remote = open_remote(f"{root}/{CHECKPOINTS}")
    prefix = next(r for r in _published(root) if r.endswith("/latest.json"))[: -len("latest.json")]
    for i, (rel, digest) in enumerate(sorted(pointer["files"].items())):  # complete and as hashed
        assert remote.download(prefix + rel, tmp_path / f"got-{i}") == digest, rel
    assert not list((tmp_path / "node-1").rglob(".upload-*"))  # snapshots are removed

    on_node("node-2")
    art = train_ft(tiny_model, triplets, artifact_root=root, config=FT, seed=3, checkpoint_every=1)
    assert art.manifest["training"]["resumed_from_step"] == 3
    a, b = read_weights(art.model_path), read_weights(clean_ft.model_path)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)  # bit-identical
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


def test_checkpoints_left_by_a_task_that_died_after_publishing_are_deleted_by_the_next_look_up(
    shared_root, on_node, tiny_model, triplets, monkeypatch, caplog
):
    def die(self) -> None:
        raise _Killed("after publishing the artifact, before deleting its checkpoints")

    on_node("node-1")
    with monkeypatch.context() as m:
        m.setattr(SharedCheckpoints, "drop", die)
        with pytest.raises(_Killed):
            train_ft(tiny_model, triplets, artifact_root=shared_root, config=FT, seed=3, checkpoint_every=1)
    left = _published(shared_root)
    assert left, "the dead task left no checkpoints: nothing to test"
    other = "tiny-bert/ft-all-0123456789abcdef/latest.json"  # another artifact's: must stay
    open_remote(f"{shared_root}/{CHECKPOINTS}").put_bytes(other, b"{}")

    caplog.set_level(logging.INFO, logger="adaptlab.adapt.train.checkpoints")
    on_node("node-2")
    art = train_ft(tiny_model, triplets, artifact_root=shared_root, config=FT, seed=3, checkpoint_every=1)
    assert art.reused and _published(shared_root) == [other]
    lines = [r.getMessage() for r in caplog.records if "leftover checkpoint" in r.getMessage()]
    assert len(lines) == 1 and f"deleted {len(left)} leftover checkpoint file(s)" in lines[0], lines

    label, name = art.uri.rsplit("/", 2)[1:]
    open_remote(f"{shared_root}/{CHECKPOINTS}/{label}/{name}").put_bytes("step-9/state.json", b"{}")
    found = find_artifact(shared_root, art.key)
    assert found is not None and found.uri == art.uri
    assert _published(shared_root) == [other]


def test_a_stalled_store_holds_the_end_of_a_task_no_longer_than_the_bound(tmp_path, monkeypatch, caplog):
    """``finish`` returns after its bound with one warning while an upload hangs; once the store
    answers, the waiting checkpoint follows (or was dropped with ``pending=False``)."""
    real = checkpoints_module.open_remote
    entered, release = threading.Event(), threading.Event()

    class Stalled:
        """The store, except that an upload hangs until ``release`` (at most 30 s)."""

        def __init__(self, uri: str) -> None:
            self.inner = real(uri)

        def upload(self, rel, src, sha256=None):
            entered.set()
            release.wait(30)
            return self.inner.upload(rel, src, sha256)

        def __getattr__(self, name):
            return getattr(self.inner, name)

    monkeypatch.setattr(checkpoints_module, "open_remote", Stalled)
    local = tmp_path / "checkpoints"
    for step in (1, 2, 3):
        (local / f"step-{step}").mkdir(parents=True)
        (local / f"step-{step}" / "state.json").write_text(json.dumps({"step": step}))
    shared = SharedCheckpoints(f"file://{tmp_path}/remote/{CHECKPOINTS}/m/ft", local)
    caplog.set_level(logging.DEBUG, logger="adaptlab.adapt.train.checkpoints")

    def latest() -> int:
        return json.loads(open_remote(shared.uri).read_bytes("latest.json"))["step"]

    shared.submit(1)
    assert entered.wait(10)  # step 1 is in flight
    shared.submit(2)
    shared.submit(3)  # step 2 is skipped
    started = time.monotonic()
    assert shared.finish(timeout=0.5) is False
    assert 0.5 <= time.monotonic() - started < 3.0
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "still running after 0.5 s" in warnings[0], warnings
    release.set()
    assert shared.finish(timeout=20) is True and latest() == 3
    assert any("step 2 not published: step 3 is newer" in r.getMessage() for r in caplog.records)

    entered.clear()
    release.clear()
    shared.submit(2)
    assert entered.wait(10)
    shared.submit(3)
    assert shared.finish(pending=False, timeout=0.2) is False  # step 3 dropped, step 2 still in flight
    release.set()
    assert shared.finish(timeout=20) is True and latest() == 2
    assert not list(local.glob(".upload-*")) and sorted(p.name for p in local.iterdir()) == [
        "step-1",
        "step-2",
        "step-3",
    ]
