"""Writing one artifact atomically: the temp directory ``.<name>.partial`` (which also holds the
resumable training checkpoints), a per-artifact file lock, the manifest, and the rename into
place; on a URI root the artifact is also published (:mod:`.publish`). :func:`claim` is the
protocol trainers follow.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from adaptlab.adapt.train.addressing import artifact_key, sanitize_name
from adaptlab.adapt.train.artifacts import (
    ARTIFACT_SCHEMA_VERSION,
    MANIFEST,
    MODEL_DIR,
    Artifact,
    artifact_cache_dir,
    artifact_root_text,
    is_artifact_uri,
    open_artifact,
    read_local_manifest,
    remote_manifest,
)
from adaptlab.adapt.train.checkpoints import SharedCheckpoints, checkpoint_uri, drop_leftover_checkpoints
from adaptlab.adapt.train.publish import file_hashes, publish_artifact
from adaptlab.errors import StoreError, mask_url
from adaptlab.storage.objects import check_remote_support

__all__ = ["ArtifactWriter", "claim"]


class ArtifactWriter:
    """Creates one artifact atomically (the protocol, in outline)::

        w = ArtifactWriter(root, label="minilm", variant="ft", scale=100, inputs={...})
        with claim(w) as done:
            if done is not None: return done   # finished before, or by someone else meanwhile
            train into w.model_dir (checkpoints in w.checkpoint_dir)
            return w.commit(training={...})

    ``inputs`` decide the key (``info``, such as local paths, is recorded but not hashed);
    ``commit`` writes ``manifest.json`` (inputs + key + training
    record) into the temp directory, removes the checkpoints and renames it into place.

    With a URI ``root`` the temp and final directories lie in this node's artifact cache,
    ``existing`` looks for the manifest at :attr:`uri`, and ``commit`` also publishes there.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        label: str,
        variant: str,
        scale: object,
        inputs: Mapping[str, Any],
        info: Mapping[str, Any] | None = None,
    ) -> None:
        self.uri_root = artifact_root_text(root) if is_artifact_uri(os.fspath(root)) else None
        if self.uri_root is not None:
            check_remote_support(self.uri_root)  # a missing client fails now, not after training
        self.root = artifact_cache_dir() if self.uri_root else Path(root)
        self.inputs = dict(inputs)
        self.info = dict(info or {})
        self.key = artifact_key(self.inputs)
        self.label = sanitize_name(label)
        self.variant = str(variant)
        scale_text = "all" if scale is None else sanitize_name(scale, max_len=24)
        self.name = f"{sanitize_name(variant, max_len=24)}-{scale_text}-{self.key[:16]}"
        self.final_dir = self.root / self.label / self.name
        self.partial_dir = self.root / self.label / f".{self.name}.partial"
        self._lock_file = self.root / self.label / f".{self.name}.lock"
        self.uri = f"{self.uri_root}/{self.label}/{self.name}" if self.uri_root else None
        self.checkpoint_uri = checkpoint_uri(self.uri_root, self.label, self.name) if self.uri_root else None
        self._shared = (
            None if self.checkpoint_uri is None else SharedCheckpoints(self.checkpoint_uri, self.checkpoint_dir)
        )

    @property
    def model_dir(self) -> Path:
        return self.partial_dir / MODEL_DIR

    @property
    def checkpoint_dir(self) -> Path:
        return self.partial_dir / "checkpoints"

    def fetch_checkpoint(self) -> int | None:
        """On a URI root: fetch the published checkpoint of an interrupted run (on any node) into
        :attr:`checkpoint_dir` when it is newer than the one there; its step, else None."""
        return None if self._shared is None else self._shared.fetch()

    def checkpoint_hook(self, then: Callable[[int], None] | None = None) -> Callable[[int], None] | None:
        """The loop's ``on_checkpoint``: on a URI root, queue the checkpoint of ``step`` for
        publishing in the background (:meth:`SharedCheckpoints.submit`; never fails, returns at
        once), then call ``then(step)``."""
        shared = self._shared
        if shared is None:
            return then

        def hook(step: int) -> None:
            shared.submit(step)
            if then is not None:
                then(step)

        return hook

    def finish_checkpoints(self, *, pending: bool = True, timeout: float | None = None) -> None:
        """On a URI root: the bounded wait for the checkpoint uploads of this run
        (:meth:`SharedCheckpoints.finish`; ``pending=False`` drops the one not yet started)."""
        if self._shared is not None:
            self._shared.finish(pending=pending, timeout=timeout)

    def _drop_leftovers(self) -> None:
        """Delete the checkpoints still published for this artifact (a task died before deleting them)."""
        if self.uri_root is not None:
            drop_leftover_checkpoints(self.uri_root, self.label, self.name)

    def existing(self) -> Artifact | None:
        """The finished artifact with this key, if any. On a URI: published there (a manifest at
        :attr:`uri`), or committed here but not yet published (it is published now). Either way
        the checkpoints still published for it (a task that died before deleting them) are deleted."""
        if self.uri is not None:
            manifest = remote_manifest(self.uri)
            if manifest is not None:
                self._check_key(manifest, mask_url(self.uri))
                self._drop_leftovers()
                return Artifact(self.final_dir, manifest, reused=True, uri=self.uri)
        if (self.final_dir / MANIFEST).is_file():
            art = open_artifact(self.final_dir)
            self._check_key(art.manifest, str(self.final_dir))
            if self.uri is None:
                return art
            publish_artifact(self.final_dir, self.uri)  # a publish cut short: finish it
            self._drop_leftovers()
            return Artifact(self.final_dir, read_local_manifest(self.final_dir), reused=True, uri=self.uri)
        return None

    def _check_key(self, manifest: Mapping[str, Any], where: str) -> None:
        if manifest.get("key") != self.key:
            raise StoreError(
                f"{where}: manifest key {manifest.get('key')!r} does not match the "
                f"directory's inputs ({self.key}); delete the directory to retrain"
            )

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Exclusive lock for this key (``fcntl.flock``; released if the process dies)."""
        try:
            self.partial_dir.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"cannot create the artifact directory {self.partial_dir.parent}: {e}") from e
        try:
            import fcntl
        except ImportError:  # pragma: no cover - non-POSIX
            yield
            return
        with open(self._lock_file, "a+") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def prepare(self) -> None:
        """Create the temp directory (keeping checkpoints of an interrupted run)."""
        self.partial_dir.mkdir(parents=True, exist_ok=True)
        if self.model_dir.exists():  # a half-saved model from a crash after training
            shutil.rmtree(self.model_dir)

    def commit(self, *, training: Mapping[str, Any] | None = None) -> Artifact:
        """Write the manifest, drop checkpoints, and rename the temp directory into place; on a URI
        root, publish the artifact there."""
        if not self.model_dir.is_dir():
            raise StoreError(f"{self.model_dir}: no model was saved; cannot commit the artifact")
        _check_no_pickles(self.model_dir)
        manifest = self._manifest(training)
        self._write_manifest(manifest)
        if self.final_dir.exists():  # a concurrent writer on another machine won the race
            shutil.rmtree(self.partial_dir, ignore_errors=True)
            if self.uri is not None:
                return self.existing() or open_artifact(self.final_dir)
            return open_artifact(self.final_dir)
        return self._move_into_place(manifest)

    def _manifest(self, training: Mapping[str, Any] | None) -> dict[str, Any]:
        """What went in (the key's inputs, the key, the unhashed info) and the training record."""
        return {
            "schema_version": ARTIFACT_SCHEMA_VERSION,
            "key": self.key,
            "label": self.label,
            "variant": self.variant,
            **self.inputs,
            "info": self.info,
            "training": {"created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **dict(training or {})},
        }

    def _write_manifest(self, manifest: dict[str, Any]) -> None:
        """The manifest written atomically into the temp directory, the checkpoints dropped; on a URI
        root with the hash of every file first, so any node can verify its materialised copy."""
        if self.uri is not None:
            self.finish_checkpoints(pending=False)  # the upload in flight ends before its files go
            shutil.rmtree(self.checkpoint_dir, ignore_errors=True)
            manifest["files"] = file_hashes(self.partial_dir)
        tmp = self.partial_dir / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True, default=str))
        os.replace(tmp, self.partial_dir / MANIFEST)
        shutil.rmtree(self.checkpoint_dir, ignore_errors=True)

    def _move_into_place(self, manifest: dict[str, Any]) -> Artifact:
        """The temp directory renamed to the final one, the lock file removed; on a URI root the
        artifact published and its shared checkpoints dropped."""
        os.rename(self.partial_dir, self.final_dir)
        with contextlib.suppress(OSError):
            self._lock_file.unlink()
        if self.uri is not None:
            publish_artifact(self.final_dir, self.uri)
        if self._shared is not None:
            self._shared.drop()
        return Artifact(self.final_dir, manifest, reused=False, uri=self.uri)


def _check_no_pickles(model_dir: Path) -> None:
    bad = [p.name for p in model_dir.rglob("*") if p.suffix in (".bin", ".pkl", ".pt", ".pth")]
    if bad:
        raise StoreError(
            f"{model_dir}: pickled weight files {sorted(bad)} were written; adapted models must be saved as safetensors"
        )


@contextlib.contextmanager
def claim(writer: ArtifactWriter) -> Iterator[Artifact | None]:
    """Claim ``writer``'s artifact for building: yields the finished artifact when one with the
    same key exists (nothing to do), else ``None`` while holding the key's lock with the temp
    directory prepared (checkpoints of an interrupted run kept), so the caller builds into
    :attr:`ArtifactWriter.model_dir` and commits. The existence check is repeated under the lock:
    a concurrent builder that finished meanwhile is reused, never trained twice. On leaving, the
    checkpoint uploads of the run end (bounded, :meth:`ArtifactWriter.finish_checkpoints`): after a
    failure the newest checkpoint is still published for a retry, after an interrupt nothing waits."""
    done = writer.existing()
    if done is not None:
        yield done
        return
    with writer.lock():
        done = writer.existing()
        if done is None:
            writer.prepare()
        try:
            yield done
        except Exception:
            writer.finish_checkpoints()  # a failed run leaves its newest checkpoint for a retry
            raise
        except BaseException:  # interrupted: no waiting (the uploader thread dies with the process)
            writer.finish_checkpoints(pending=False, timeout=0)
            raise
        writer.finish_checkpoints(pending=False)
