"""Training checkpoints: their layout on disk, the latest pointer, writing one, resuming from
one, and sharing them between the nodes of a cluster.

Layout (``checkpoint_dir/step-<s>/``): ``model.safetensors`` (``safetensors.torch.save_model``,
shared tensors handled), ``optimizer.safetensors`` (AdamW moments) and ``state.json`` (step,
losses, optimizer hyperparameters); ``checkpoint_dir/latest.json`` is replaced atomically after
a checkpoint is complete, so a crash while writing leaves the previous one usable. No pickles.
The training loop (:mod:`.loop`) writes them (:func:`write_checkpoint`) and resumes from the
latest one (:func:`resume_checkpoint`); with the same seed a resumed run continues exactly as the
uninterrupted run would (on the same device and thread count).

Sharing on a URI root (:class:`SharedCheckpoints`). A stage's checkpoints live in its node's
staging folder (:class:`~adaptlab.adapt.train.writer.ArtifactWriter`), so a stage retried on
another node (its node was lost) would start over. So each complete checkpoint is also published
at ``<root>/_checkpoints/<label>/<name>/step-<s>/`` (:func:`checkpoint_uri`; every file
hash-recorded) with ``latest.json`` written last, keeping the latest one or two. Publishing runs
in a background thread from a hard-linked snapshot of the checkpoint, so training never waits for
the store: one upload at a time, the newest checkpoint waiting behind it, older waiting ones
skipped; the artifact's commit and the task's end wait for the upload in flight (at most
``SharedCheckpoints.WAIT_S``; a failed task also publishes its newest checkpoint). A stage
starting on any node first fetches the published checkpoint when it is newer than its local one
(hash-checked; a mismatch or a failure falls back to the local state), and the published
checkpoints are deleted once the artifact is published, or, when a task died in between, by the
next look-up that finds the artifact (:func:`drop_leftover_checkpoints`). A checkpoint that cannot
be published or fetched logs one warning line and training goes on: sharing checkpoints never
fails a study. A local root needs none of this: the staging folder, checkpoints included, is
inside the root.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from adaptlab.errors import StoreError, mask_url
from adaptlab.storage.files import safe_relpath, sha256_file
from adaptlab.storage.objects import open_remote

__all__ = [
    "CHECKPOINTS",
    "LATEST",
    "SharedCheckpoints",
    "checkpoint_name",
    "checkpoint_uri",
    "drop_leftover_checkpoints",
    "latest_checkpoint",
    "latest_step",
    "point_latest",
    "resume_checkpoint",
    "write_checkpoint",
]

LATEST = "latest.json"
"""The pointer to the latest complete checkpoint in a checkpoint folder."""
CHECKPOINTS = "_checkpoints"
"""The folder under a URI root holding the published checkpoints of unfinished artifacts."""

_log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- one folder on this node


def checkpoint_name(step: int) -> str:
    """The folder of the checkpoint after ``step`` optimizer steps: ``step-<step>``."""
    return f"step-{int(step)}"


def point_latest(directory: Path, step: int) -> None:
    """Make ``directory/step-<step>`` the latest checkpoint (``latest.json``, replaced
    atomically) and delete the others."""
    target = directory / checkpoint_name(step)
    pointer = directory / (LATEST + ".tmp")
    pointer.write_text(json.dumps({"step": int(step), "dir": target.name}))
    os.replace(pointer, directory / LATEST)
    for old in directory.glob("step-*"):
        if old != target:
            shutil.rmtree(old, ignore_errors=True)


def _latest(directory: Path | None) -> tuple[int, Path] | None:
    """The step and folder of the latest complete checkpoint in ``directory``, or None."""
    if directory is None or not (directory / LATEST).is_file():
        return None
    try:
        pointer = json.loads((directory / LATEST).read_text())
        step = int(pointer.get("step", -1))
    except (OSError, ValueError, TypeError, AttributeError):  # a torn or foreign pointer: none
        return None
    target = directory / checkpoint_name(step)
    return (step, target) if step >= 0 and (target / "state.json").is_file() else None


def latest_checkpoint(directory: Path | None) -> Path | None:
    """The folder of the latest complete checkpoint in ``directory``, or None."""
    found = _latest(directory)
    return None if found is None else found[1]


def latest_step(directory: Path | None) -> int:
    """The step of the latest complete checkpoint in ``directory``; 0 when there is none."""
    found = _latest(directory)
    return 0 if found is None else found[0]


def _save_optimizer(optimizer: Any, directory: Path) -> dict[str, Any]:
    import torch
    from safetensors.torch import save_file

    sd = optimizer.state_dict()
    tensors, scalars = {}, {}
    for pid, state in sd["state"].items():
        for name, value in state.items():
            if torch.is_tensor(value):
                tensors[f"{pid}/{name}"] = value.detach().to("cpu").contiguous()
            else:
                scalars[f"{pid}/{name}"] = value
    save_file(tensors, str(directory / "optimizer.safetensors"))
    return {"param_groups": sd["param_groups"], "scalars": scalars}


def _load_optimizer(optimizer: Any, directory: Path, meta: dict[str, Any], device: Any) -> None:
    from safetensors.torch import load_file

    tensors = load_file(str(directory / "optimizer.safetensors"))
    state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        pid, name = key.split("/", 1)
        # AdamW keeps 'step' on the CPU unless capturable/fused; moments live with the params
        state.setdefault(int(pid), {})[name] = value if name == "step" else value.to(device)
    for key, value in meta.get("scalars", {}).items():
        pid, name = key.split("/", 1)
        state.setdefault(int(pid), {})[name] = value
    groups = meta["param_groups"]
    for g in groups:
        if isinstance(g.get("betas"), list):
            g["betas"] = tuple(g["betas"])
    optimizer.load_state_dict({"state": state, "param_groups": groups})


def write_checkpoint(model: Any, optimizer: Any, directory: Path, step: int, losses: list[float]) -> Path:
    """Write the checkpoint of ``step`` (model, optimizer, losses) into ``directory/step-<step>``
    through a temp folder renamed into place, then point ``latest.json`` at it; its folder."""
    from safetensors.torch import save_model

    directory.mkdir(parents=True, exist_ok=True)
    target = directory / checkpoint_name(step)
    if target.exists():
        shutil.rmtree(target)
    work = directory / f".step-{step}.tmp"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir()
    save_model(model, str(work / "model.safetensors"))
    opt_meta = _save_optimizer(optimizer, work)
    (work / "state.json").write_text(json.dumps({"step": step, "losses": losses, "optimizer": opt_meta}))
    os.rename(work, target)
    point_latest(directory, step)
    return target


def resume_checkpoint(
    model: Any, optimizer: Any, directory: Path | None, device: Any
) -> tuple[int, list[float]] | None:
    """Load the latest checkpoint in ``directory`` into ``model`` and ``optimizer`` when there is
    one: its step and the losses of the steps before it; None when there is none."""
    ckpt = latest_checkpoint(directory)
    if ckpt is None:
        return None
    from safetensors.torch import load_model

    state = json.loads((ckpt / "state.json").read_text())
    load_model(model, str(ckpt / "model.safetensors"), strict=True, device=str(device))
    _load_optimizer(optimizer, ckpt, state["optimizer"], device)
    return int(state["step"]), [float(x) for x in state["losses"]]


# --------------------------------------------------------------------------- shared on a URI root


def checkpoint_uri(root: str, label: str, name: str) -> str:
    """Where the checkpoints of the artifact ``<root>/<label>/<name>`` are published:
    ``<root>/_checkpoints/<label>/<name>``."""
    return f"{root}/{CHECKPOINTS}/{label}/{name}"


class SharedCheckpoints:
    """The checkpoints of one unfinished artifact published at ``uri`` (a folder next to the
    artifacts, see the module docstring) from and into the local checkpoint folder ``local``.
    Every failure logs one warning line (later ones at DEBUG) and leaves training as it is.

    Publishing runs in one background thread, so an upload never holds up a training step:
    :meth:`submit` hard-links the step's files into a snapshot folder (the loop deletes a step's
    folder once the next checkpoint is written; it never rewrites a file in place, so the links
    keep the submitted bytes) and returns. At most one upload is in flight; a checkpoint submitted
    meanwhile waits, and replaces (skips) an older one still waiting. :meth:`finish` is the
    bounded join (:data:`WAIT_S`) of the artifact's commit and of a task's end."""

    KEEP = 2
    """Published checkpoints kept: the latest and the one before (a reader may be fetching it)."""
    WAIT_S = 600.0
    """Seconds :meth:`finish` waits for the uploads; past it training goes on (one warning) and
    the upload, if it ever ends, is cleaned up with the artifact's leftovers."""

    def __init__(self, uri: str, local: Path) -> None:
        self.uri, self.local = uri.rstrip("/"), Path(local)
        self.published: list[str] = []  # folders this process published, oldest first
        self.warned = False
        self._cond = threading.Condition()
        self._pending: tuple[int, Path] | None = None  # the checkpoint waiting for the uploader
        self._thread: threading.Thread | None = None  # the uploader, while it has work
        self._snapshots = itertools.count()

    def submit(self, step: int) -> None:
        """Queue the checkpoint of ``step`` for publishing and return at once (class docstring)."""
        try:
            snapshot = self._snapshot(step)
        except Exception as e:  # noqa: BLE001 - publishing a checkpoint never fails training
            self._warn(f"cannot publish the checkpoint of step {step}", e)
            return
        with self._cond:
            skipped, self._pending = self._pending, (step, snapshot)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._upload_all, name=f"adaptlab-checkpoints-{step}", daemon=True
                )  # a dying process does not wait for it
                self._thread.start()
        if skipped is not None:
            _log.debug("checkpoint of step %d not published: step %d is newer", skipped[0], step)
            shutil.rmtree(skipped[1], ignore_errors=True)

    def _snapshot(self, step: int) -> Path:
        """A folder holding the files of ``local/step-<step>`` as they are now: hard links
        (copies where linking fails), out of the loop's reach (it deletes ``step-*`` only)."""
        source = self.local / checkpoint_name(step)
        files = sorted(p for p in source.rglob("*") if p.is_file())
        if not files:
            raise StoreError(f"{source}: no checkpoint there")
        snapshot = self.local / f".upload-{checkpoint_name(step)}-{os.getpid()}-{next(self._snapshots)}"
        shutil.rmtree(snapshot, ignore_errors=True)
        for file in files:
            out = snapshot / file.relative_to(source)
            out.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(file, out)
            except OSError:
                shutil.copy2(file, out)
        return snapshot

    def _upload_all(self) -> None:
        """The uploader: publish the waiting checkpoint until none waits, then end."""
        while True:
            with self._cond:
                job, self._pending = self._pending, None
                if job is None:
                    self._thread = None
                    self._cond.notify_all()
                    return
            try:
                self.publish(*job)  # never raises an Exception
            except BaseException:  # the thread is ending anyway: a later submit starts another
                with self._cond:
                    self._thread = None
                    self._cond.notify_all()
                raise
            finally:
                shutil.rmtree(job[1], ignore_errors=True)

    def finish(self, *, pending: bool = True, timeout: float | None = None) -> bool:
        """Wait for the upload in flight and, with ``pending``, for the checkpoint waiting after it
        (without, that one is dropped): at most ``timeout`` seconds (:data:`WAIT_S`). Whether
        the uploads ended (a time-out logs one warning)."""
        started = time.monotonic()
        limit = self.WAIT_S if timeout is None else timeout
        with self._cond:
            dropped = None if pending else self._pending
            if dropped is not None:
                self._pending = None
            while self._thread is not None and time.monotonic() - started < limit:
                self._cond.wait(min(1.0, max(0.0, limit - (time.monotonic() - started))))
            ended = self._thread is None
        if dropped is not None:
            _log.debug("checkpoint of step %d not published: training is done", dropped[0])
            shutil.rmtree(dropped[1], ignore_errors=True)
        if not ended and limit > 0:
            self._warn(
                f"checkpoint upload still running after {limit:g} s; going on without it",
                TimeoutError("the store is slow or stalled"),
            )
        return ended

    def publish(self, step: int, source: Path | None = None) -> None:
        """Publish the checkpoint of ``step`` (its files in ``source``, default
        ``local/step-<step>/``) at once: its files (hashes recorded), ``latest.json`` last, then
        delete the published folders older than the latest :data:`KEEP`."""
        folder = checkpoint_name(step)
        source = self.local / folder if source is None else Path(source)
        try:
            started, remote = time.monotonic(), open_remote(self.uri)
            local = {
                f"{folder}/{p.relative_to(source).as_posix()}": p for p in sorted(source.rglob("*")) if p.is_file()
            }
            if not local:
                raise StoreError(f"{source}: no checkpoint there")
            files = {rel: sha256_file(path) for rel, path in local.items()}
            for rel, digest in files.items():
                remote.upload(rel, local[rel], digest)
            remote.put_bytes(LATEST, json.dumps({"step": int(step), "dir": folder, "files": files}).encode())
            self.published = ([d for d in self.published if d != folder] + [folder])[-self.KEEP :]
            self._prune(remote)
        except Exception as e:  # noqa: BLE001 - publishing a checkpoint never fails training
            self._warn(f"cannot publish the checkpoint of step {step}", e)
            return
        _log.debug("published checkpoint %s/%s in %.1f s", mask_url(self.uri), folder, time.monotonic() - started)

    def _prune(self, remote: Any) -> None:
        folders = {rel.split("/", 1)[0] for rel in remote.list_files() if "/" in rel}
        for old in sorted(folders - set(self.published)):
            remote.delete_tree(old)

    def fetch(self) -> int | None:
        """Download the published checkpoint into ``local`` when it is newer than the local one
        (every file checked against its recorded SHA-256) and make it the latest; its step, else None."""
        try:
            remote = open_remote(self.uri)
            raw = remote.read_bytes(LATEST)
            if raw is None:
                return None
            step, folder, files = _checkpoint_pointer(raw, f"{mask_url(self.uri)}/{LATEST}")
            if step <= latest_step(self.local):
                return None
            self._download(remote, folder, files)
            point_latest(self.local, step)
        except Exception as e:  # noqa: BLE001 - without it, training starts from the local state
            self._warn("cannot fetch the published checkpoint; training starts from this node's state", e)
            return None
        _log.info("fetched the checkpoint of step %d from %s", step, mask_url(self.uri))
        return step

    def _download(self, remote: Any, folder: str, files: Mapping[str, str]) -> None:
        tmp = self.local / f".{folder}.fetch-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            for rel, digest in files.items():
                out = tmp / rel.split("/", 1)[1]
                out.parent.mkdir(parents=True, exist_ok=True)
                if remote.download(rel, out) != digest:
                    raise StoreError(f"{mask_url(self.uri)}/{rel}: content does not match the hash in {LATEST}")
            shutil.rmtree(self.local / folder, ignore_errors=True)
            os.rename(tmp, self.local / folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def drop(self) -> None:
        """Delete every published checkpoint of this artifact (it is published now)."""
        try:
            open_remote(self.uri).delete_tree("")
        except Exception as e:  # noqa: BLE001 - leftovers cost space, not correctness
            self._warn("cannot delete the published checkpoints (they can be deleted by hand)", e)

    def _warn(self, what: str, error: BaseException) -> None:
        reason = (mask_url(str(error)).strip().splitlines() or [""])[0][:240]
        (_log.debug if self.warned else _log.warning)(
            "%s: %s (%s: %s)", mask_url(self.uri), what, type(error).__name__, reason
        )
        self.warned = True


def _checkpoint_pointer(raw: bytes, where: str) -> tuple[int, str, dict[str, str]]:
    """``(step, folder, {relative path: SHA-256})`` of a published ``latest.json``; StoreError if malformed."""
    try:
        data = json.loads(raw.decode())
        step, files = int(data["step"]), {str(k): str(v) for k, v in dict(data["files"]).items()}
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise StoreError(f"{where}: not a checkpoint pointer ({type(e).__name__})") from None
    folder = checkpoint_name(step)
    for rel in files:
        safe_relpath(rel, under=folder, source=where)
    if not files:
        raise StoreError(f"{where}: lists no files")
    return step, folder, files


def drop_leftover_checkpoints(root: str, label: str, name: str) -> None:
    """Delete ``<root>/_checkpoints/<label>/<name>/``, the checkpoints still published for an
    artifact that is published now (its task died between the two): one INFO line when there
    were any; a failure is one DEBUG line (leftovers cost space, not correctness)."""
    uri = checkpoint_uri(root, label, name)
    try:
        removed = open_remote(uri).delete_tree("")
    except Exception as e:  # noqa: BLE001 - the artifact is there; the clean-up can wait for the next look-up
        _log.debug(
            "%s: cannot delete leftover checkpoints (%s: %s)",
            mask_url(uri),
            type(e).__name__,
            (mask_url(str(e)).strip().splitlines() or [""])[0][:240],
        )
        return
    if removed:
        _log.info(
            "deleted %d leftover checkpoint file(s) of the published artifact %s/%s at %s",
            removed,
            label,
            name,
            mask_url(uri),
        )
