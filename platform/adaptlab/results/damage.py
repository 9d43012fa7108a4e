"""Damage checks of a results store: a damaged store is an error naming the file and the version,
never read as an empty or shorter store.

Delta Lake's own reader skips an emptied commit file (the commit is lost without a word) and
reports a truncated or garbled one as a kernel error that names no file. So on open and before
every commit the store lists its own files once (the log, the checksums and the ``kind=`` folders;
on S3 one LIST request per folder and 1000 objects) and checks:

- every commit file of the log ``_delta_log/<version>.json``: a file, versions contiguous (from 0,
  or from a checkpoint), non-empty, every line one Delta action of the protocol's shape
  (:mod:`adaptlab.results.delta_protocol`), and as many ``add``/``remove`` actions as the
  commit's own ``operationMetrics`` recorded (a file cut at a line boundary still parses);
- ``_delta_log/_last_checkpoint``, when present: the protocol's JSON object;
- every data file the snapshot references: present, with the size the log recorded.

Commit files never change once written, so a file checked once (same name and size) is not
parsed again by the same store object. Damage raises :class:`StoreDamagedError` (one line: the
file, the version, what is wrong, and the command that repairs it); commits are refused while
it lasts. :mod:`adaptlab.results.health.repair` fixes it and says what it moved where.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from adaptlab.errors import StoreError
from adaptlab.results.delta_protocol import action_problem, last_checkpoint_problem, log_checksums
from adaptlab.results.delta_table import COMMIT_KEY
from adaptlab.results.native import TIMEOUT_ENV, quiet_native, short_message, store_timeout, timed_out

__all__ = [
    "CHECKSUM_DIR",
    "LAST_CHECKPOINT",
    "LOG_DIR",
    "QUARANTINE_DIR",
    "Health",
    "Listing",
    "LogState",
    "StoreDamagedError",
    "commit_version",
    "relative_path",
    "store_filesystem",
]

LOG_DIR = "_delta_log"
CHECKSUM_DIR = "_adaptlab_checksums"
QUARANTINE_DIR = "_adaptlab_quarantine"
_COMMIT_RE = re.compile(r"^_delta_log/(\d{20})\.json$")
_CHECKPOINT_RE = re.compile(r"^_delta_log/(\d{20})\.checkpoint(?:\.\d+\.\d+)?\.parquet$")
LAST_CHECKPOINT = f"{LOG_DIR}/_last_checkpoint"


class StoreDamagedError(StoreError):
    """A file of the store is missing or damaged: reads and new commits are refused until
    ``adaptlab results repair --store URI`` (:func:`adaptlab.results.health.repair.repair_store`)."""

    def __init__(self, uri: str, path: str, version: int | None, problem: str) -> None:
        self.uri, self.path, self.version, self.problem = uri, path, version, problem
        at = f"version {version}" if version is not None else "an unknown version"
        super().__init__(
            f"{uri}: damaged store: {path} ({at}) {problem}; reads and new commits are refused "
            f"until `adaptlab results repair --store {uri}`"
        )


def store_filesystem(uri: str, options: dict[str, str] | None) -> Any:
    """A pyarrow file system rooted at the store (delta-rs' object store: local, S3, GCS, Azure),
    addressed with store-relative paths such as ``_delta_log/00000000000000000000.json``."""
    import pyarrow.fs as pafs
    from deltalake.fs import DeltaStorageHandler

    return pafs.PyFileSystem(DeltaStorageHandler(uri, options))


@dataclass
class Listing:
    """Every file of the store (store-relative path -> size), with the log's files apart."""

    commits: dict[int, tuple[str, int]] = field(default_factory=dict)
    checkpoints: dict[int, str] = field(default_factory=dict)
    files: dict[str, int] = field(default_factory=dict)
    not_files: list[str] = field(default_factory=list)
    """Log entries that are not files (a directory where a commit file should be)."""


@dataclass
class LogState:
    """What the checked log says: the version of each data file's ``add``, each commit's
    adaptlab commit id and time (ms), and the first version with a commit file."""

    first: int = 0
    last: int = -1
    complete: bool = True
    added: dict[str, int] = field(default_factory=dict)
    commit_ids: dict[str, int] = field(default_factory=dict)
    times: dict[int, int] = field(default_factory=dict)
    checksums: dict[str, dict[str, Any]] = field(default_factory=dict)
    """``{relative path: {"sha256", "size"}}`` recorded in the commits' own log entries."""


def _store_folders(fs: Any) -> list[str]:
    """The folders of the store's own files: the log, the checksums and the ``kind=`` partitions
    (a scale study's artifacts or caches under the same root are not listed)."""
    import pyarrow.fs as pafs

    top = fs.get_file_info(pafs.FileSelector("", recursive=False, allow_not_found=True))
    names = [i.path.strip("/").rsplit("/", 1)[-1] for i in top if i.type == pafs.FileType.Directory]
    return sorted(n for n in names if n in (LOG_DIR, CHECKSUM_DIR) or n.startswith("kind="))


def list_store(fs: Any) -> Listing:
    """The store's files (one recursive listing per folder of :func:`_store_folders`)."""
    import pyarrow.fs as pafs

    out = Listing()
    infos = [
        i
        for folder in _store_folders(fs)
        for i in fs.get_file_info(pafs.FileSelector(folder, recursive=True, allow_not_found=True))
    ]
    for info in infos:
        path, size = info.path.lstrip("/"), int(info.size or 0)
        if info.type != pafs.FileType.File:
            if _COMMIT_RE.match(path) or path == LAST_CHECKPOINT:
                out.not_files.append(path)
            continue
        m = _COMMIT_RE.match(path)
        c = _CHECKPOINT_RE.match(path)
        if m:
            out.commits[int(m.group(1))] = (path, size)
        elif c:
            out.checkpoints[int(c.group(1))] = path
        out.files[path] = size
    return out


def parse_commit(uri: str, path: str, version: int, raw: bytes) -> list[dict[str, Any]]:
    """The actions of one commit file; :class:`StoreDamagedError` when it is empty, not UTF-8,
    not JSON lines, or holds fewer ``add``/``remove`` actions than its commit recorded."""
    if not raw.strip():
        raise StoreDamagedError(uri, path, version, "is empty: the commit is lost")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise StoreDamagedError(uri, path, version, f"is garbled (not UTF-8 at byte {e.start})") from e
    actions = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            action = json.loads(line)
        except ValueError as e:
            raise StoreDamagedError(uri, path, version, f"is truncated or garbled (line {n} is not JSON)") from e
        problem = action_problem(action)
        if problem is not None:
            raise StoreDamagedError(uri, path, version, f"is garbled: line {n} {problem}")
        actions.append(action)
    _check_counts(uri, path, version, actions)
    return actions


def _check_counts(uri: str, path: str, version: int, actions: list[dict[str, Any]]) -> None:
    info = next((a["commitInfo"] for a in actions if isinstance(a.get("commitInfo"), dict)), None)
    metrics = (info or {}).get("operationMetrics") or {}
    for kind, key in (("add", "num_added_files"), ("remove", "num_removed_files")):
        want = metrics.get(key)
        got = sum(1 for a in actions if kind in a)
        if isinstance(want, int) and got < want:
            raise StoreDamagedError(
                uri, path, version, f"is truncated ({got} of the {want} '{kind}' actions its commit recorded)"
            )
    if version == 0 and not any("metaData" in a for a in actions):
        raise StoreDamagedError(uri, path, version, "is truncated or garbled (no table metadata)")


def commit_version(path: str) -> int | None:
    """The version of a commit file's store-relative path (None: not a commit file)."""
    m = _COMMIT_RE.match(path)
    return int(m.group(1)) if m else None


def relative_path(uri: str, path: str) -> str:
    """A data file path of the log as a store-relative path (the log percent-encodes paths)."""
    text = urllib.parse.unquote(path)
    for prefix in (uri.rstrip("/") + "/", "file://" + uri.rstrip("/") + "/"):
        if text.startswith(prefix):
            return text[len(prefix) :]
    return text.lstrip("/")


class Health:
    """The damage checks of one store object (commit files parsed once, then cached)."""

    def __init__(self, uri: str, options: dict[str, str] | None) -> None:
        self.uri = uri
        self._options = options
        self._fs: Any = None
        self._parsed: dict[tuple[str, int], tuple[list[str], str | None, int, dict[str, dict[str, Any]]]] = {}

    @property
    def fs(self) -> Any:
        if self._fs is None:
            self._fs = store_filesystem(self.uri, self._options)
        return self._fs

    def listing(self) -> Listing:
        try:
            with quiet_native("list"):
                return list_store(self.fs)
        except Exception as e:  # noqa: BLE001 - storage errors of any backend
            hint = f"; no answer within the time-out (${TIMEOUT_ENV}={store_timeout():g} s)" if timed_out(e) else ""
            raise StoreError(f"{self.uri}: cannot list the store's files: {short_message(e)}{hint}") from e

    def check_log(self, listing: Listing, upto: int | None = None) -> LogState:
        """Check every commit file up to ``upto`` (default: all); returns what the log says."""
        self._check_entries(listing, upto)
        versions = sorted(v for v in listing.commits if upto is None or v <= upto)
        if not versions:
            raise StoreDamagedError(self.uri, f"{LOG_DIR}/{0:020d}.json", 0, "is missing: the log has no commit")
        state = LogState(first=versions[0], last=versions[-1], complete=versions[-1] == max(listing.commits))
        if state.first > 0 and not any(c >= state.first - 1 for c in listing.checkpoints):
            missing = state.first - 1
            raise StoreDamagedError(
                self.uri, f"{LOG_DIR}/{missing:020d}.json", missing, "is missing (and no checkpoint covers it)"
            )
        for v in range(state.first, state.last + 1):
            if v not in listing.commits:
                raise StoreDamagedError(
                    self.uri,
                    f"{LOG_DIR}/{v:020d}.json",
                    v,
                    f"is missing: the log jumps from version {v - 1} to a later one",
                )
        raw = self._fetch([listing.commits[v] for v in range(state.first, state.last + 1)])
        for v in range(state.first, state.last + 1):
            self._read_commit(v, *listing.commits[v], state, raw)
        return state

    def _check_entries(self, listing: Listing, upto: int | None) -> None:
        """A directory where a commit file should be, and a malformed ``_last_checkpoint``."""
        for path in sorted(listing.not_files):
            version = commit_version(path)
            if version is None or upto is None or version <= upto:
                raise StoreDamagedError(
                    self.uri,
                    path,
                    version,
                    "is a directory, expected a JSON file"
                    if version is None
                    else "is a directory, expected a commit file (one JSON action per line)",
                )
        if LAST_CHECKPOINT not in listing.files:
            return
        try:
            with self.fs.open_input_stream(LAST_CHECKPOINT) as f:
                problem = last_checkpoint_problem(f.read())
        except Exception as e:  # noqa: BLE001 - any storage error: the file cannot be used
            problem = f"cannot be read ({short_message(e)})"
        if problem is None:
            problem = self._stale_checkpoint(listing)
        if problem is None:
            return
        raise StoreDamagedError(self.uri, LAST_CHECKPOINT, None, f"{problem}; it names the log's latest checkpoint")

    def _stale_checkpoint(self, listing: Listing) -> str | None:
        """What is wrong with a well-formed ``_last_checkpoint`` whose checkpoint is not there
        (delta-rs stops with "Invalid Checkpoint"); None when it names one that exists."""
        try:
            with self.fs.open_input_stream(LAST_CHECKPOINT) as f:
                version = int(json.loads(f.read())["version"])
        except Exception:  # noqa: BLE001 - read and checked just before
            return None
        if version in listing.checkpoints:
            return None
        return (
            f"names the checkpoint of version {version}, which does not exist (no "
            f"{LOG_DIR}/{version:020d}.checkpoint.parquet)"
        )

    def _fetch(self, files: list[tuple[str, int]]) -> dict[tuple[str, int], bytes | Exception]:
        """The bytes of the commit files not parsed yet, read in parallel on object stores."""
        todo = [f for f in files if f not in self._parsed]

        def read(item: tuple[str, int]) -> bytes | Exception:
            try:
                with self.fs.open_input_stream(item[0]) as f:
                    return f.read()
            except Exception as e:  # noqa: BLE001 - reported with the file's version by the caller
                return e

        if len(todo) < 4 or "://" not in self.uri:
            return {f: read(f) for f in todo}
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=8) as pool:
            return dict(zip(todo, pool.map(read, todo)))

    def _read_commit(
        self, version: int, path: str, size: int, state: LogState, fetched: dict[tuple[str, int], bytes | Exception]
    ) -> None:
        key = (path, size)
        summary = self._parsed.get(key)
        if summary is None:
            raw = fetched[key]
            if isinstance(raw, Exception):
                raise StoreDamagedError(self.uri, path, version, f"cannot be read ({short_message(raw)})") from raw
            summary = self._parsed[key] = self._summary(parse_commit(self.uri, path, version, raw))
        adds, commit_id, when, sums = summary
        state.added.update(dict.fromkeys(adds, version))
        state.checksums.update(sums)
        state.times[version] = when
        if commit_id is not None:
            state.commit_ids[commit_id] = version

    def _summary(self, actions: list[dict[str, Any]]) -> tuple[list[str], str | None, int, dict[str, dict[str, Any]]]:
        """What the checks keep of a commit: its added files, adaptlab commit id, time (ms) and the
        checksums of its files that its log entry recorded (of the files it added only)."""
        adds = [
            relative_path(self.uri, a["add"]["path"])
            for a in actions
            if isinstance(a.get("add"), dict) and isinstance(a["add"].get("path"), str)
        ]
        info: dict[str, Any] = next((a["commitInfo"] for a in actions if isinstance(a.get("commitInfo"), dict)), {})
        commit_id = info.get(COMMIT_KEY) if isinstance(info.get(COMMIT_KEY), str) else None
        sums = {k: v for k, v in log_checksums(info).items() if k in set(adds)}
        return adds, commit_id, int(info.get("timestamp") or 0), sums

    def check_data(self, dt: Any, listing: Listing, state: LogState) -> dict[str, int]:
        """Check every data file the snapshot ``dt`` references; returns them (relative path -> size)."""
        live = self.live_files(dt)
        absent = [p for p in live if listing.files.get(p) != live[p]]
        if absent:  # listed before a concurrent writer's files appeared: look at those again
            import pyarrow.fs as pafs

            infos = self.fs.get_file_info(absent)
            for p, info in zip(absent, infos):
                size = int(info.size or 0) if info.type == pafs.FileType.File else None
                if size != live[p]:
                    v = state.added.get(p)
                    problem = "is missing" if size is None else f"has {size} bytes, the log recorded {live[p]}"
                    raise StoreDamagedError(
                        self.uri, p, v, f"{problem} (a data file of the store's version {dt.version()})"
                    )
        return live

    def live_files(self, dt: Any) -> dict[str, int]:
        """The data files of the snapshot ``dt``: store-relative path -> size in bytes."""
        import pyarrow as pa

        try:
            actions = pa.table(dt.get_add_actions(flatten=True))
        except Exception as e:  # noqa: BLE001
            raise StoreError(f"{self.uri}: cannot list the store's data files: {short_message(e)}") from e
        paths = actions.column("path").to_pylist()
        sizes = actions.column("size_bytes").to_pylist()
        return {relative_path(self.uri, p): int(s) for p, s in zip(paths, sizes)}
