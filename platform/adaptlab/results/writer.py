"""Writing the results store: atomic commits of (runs, metrics, per_query) rows, the checksums
recorded after each, and compaction. :class:`ResultsStore` is :class:`~adaptlab.results.reader.StoreReader`
(opening and queries) plus these.

Concurrency: a commit's data files are written and hashed first
(:mod:`~adaptlab.results.staging`); its log entry is then created for the version after the one
this writer read, only if that entry does not exist yet (``max_commit_retries=0``: delta-rs
reports the existing version instead of rebasing; on S3 a conditional put, ``If-None-Match``,
no locking provider needed). When another writer took the version, this one reads the store
again, looks whether its transaction landed meanwhile (an identical commit), and tries the next
version, up to :data:`MAX_COMMIT_RETRIES` times; transient storage errors are retried
:data:`COMMIT_ATTEMPTS` times. Nothing is ever committed on a version the writer did not read.

Idempotency (issue 28): every commit carries a key, :func:`commit_key` of its run ids, as a Delta
application transaction (``txn`` action, ``Transaction(app_id, 1)``; Delta protocol, "Transaction
Identifiers") and in its ``commitInfo`` (``adaptlab.commit_key``). A commit whose key the store
already holds has landed: committing the same runs again adds nothing and returns the landed
commit's id and version, and a failed attempt is looked up by its key before it is retried or
reported. When the store cannot be read after a failure, the outcome is reported as unknown
(never "nothing was committed"), with the run ids to look up (``adaptlab results --has-run``).

This module imports pyarrow and deltalake; ``adaptlab.results`` loads it on first use.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.compute as pc
from deltalake.exceptions import SchemaMismatchError

from adaptlab.errors import StoreError
from adaptlab.results.compaction import compact_table
from adaptlab.results.delta_table import COMMIT_KEY, CommitId, native_line
from adaptlab.results.layout import new_commit_id
from adaptlab.results.native import is_permanent, quiet_native, retried_already, store_timeout, timed_out
from adaptlab.results.reader import StoreReader, delta_schema
from adaptlab.results.schema import SCALING, SCHEMA_VERSION
from adaptlab.results.staging import CHECKSUMS_KEY, Staged, discard, stage
from adaptlab.results.vacuum import vacuum_table, vacuumed_since
from adaptlab.results.validate import prepare_commit, prepare_rows, referenced_run_ids

__all__ = ["COMMIT_ATTEMPTS", "KEY_METADATA", "MAX_COMMIT_RETRIES", "ResultsStore", "commit_key", "rows_for_delta"]

MAX_COMMIT_RETRIES = 100  # log entries tried after another writer took the version
COMMIT_ATTEMPTS = 4  # our retries around it (transient storage errors)
_HISTORY_SCAN = 200
_RESTAGES = 5  # times a commit writes its files again after a concurrent vacuum announced them
_VACUUMED = StoreError("a concurrent vacuum deleted this commit's data files before its log entry landed")
KEY_METADATA = "adaptlab.commit_key"
"""The ``commitInfo`` key of a commit's idempotency key (:func:`commit_key`)."""


def commit_key(run_ids: list[str]) -> str | None:
    """The idempotency key of a commit of ``run_ids``: ``run-<id>`` for one run, else ``runs-`` and
    the first 32 hex digits of the SHA-256 of the sorted ids (one per line); None without runs."""
    ids = sorted(set(run_ids))
    if not ids:
        return None
    if len(ids) == 1:
        return f"run-{ids[0]}"
    return "runs-" + hashlib.sha256("\n".join(ids).encode("utf-8")).hexdigest()[:32]


class ResultsStore(StoreReader):
    """The results store at a local path or object-store URI: the queries of
    :class:`~adaptlab.results.reader.StoreReader`, commits and compaction; see
    :func:`adaptlab.results.open`."""

    _seq = 0  # commits this store object has written (its Delta transaction number)

    @cached_property
    def _app_id(self) -> str:
        """This store object's own Delta application id (one per object, never shared)."""
        return f"adaptlab-writer-{secrets.token_hex(8)}"

    def commit(self, runs: Any, metrics: Any = None, per_query: Any = None) -> CommitId:
        """Write the rows of one evaluation atomically; returns the commit id (a ``str``
        whose ``.version`` is the store version the commit created).

        ``runs`` and ``metrics`` are lists of row dicts or pyarrow Tables (or DataFrames);
        ``per_query`` a pyarrow Table, a :class:`PerQueryRecords` or a list of them, or None.
        Rows of ``metrics``/``per_query`` without ``run_id`` get the id of this commit's run
        with the same (system, dataset). Every ``run_id`` they use must be defined by this
        commit's ``runs`` or by an earlier commit. Raises :class:`StoreError` naming any
        missing, unknown or mistyped column; on error nothing is written.

        Idempotent by run ids (:func:`commit_key`): committing the same ``runs`` rows again
        after a commit that landed adds nothing and returns that commit's id and version. A
        commit whose outcome cannot be told (the store unreadable after a failed attempt)
        raises :class:`StoreError` saying "outcome unknown" and naming the run ids to look up
        with :meth:`has_runs`.
        """
        if self.read_only:
            raise StoreError(f"{self!r} is a past snapshot (version=/as_of=); open the store without them to commit")
        tables = prepare_commit(runs, metrics, per_query)
        dt, listing = self._check()
        run_ids = tables["runs"].column("run_id").to_pylist()
        key = commit_key(run_ids)
        if key is not None and self._landed(_app(key), 1) and self._same_runs(tables["runs"]):
            return self._landed_commit(key, run_ids)  # a retry of a commit that landed: nothing to add
        self._check_unique(tables)
        dangling = referenced_run_ids(tables)
        if dangling:
            known = set(self.runs(columns=["run_id"], run_id=sorted(dangling)).column("run_id").to_pylist())
            if dangling - known:
                raise StoreError(
                    f"run_id(s) {', '.join(sorted(dangling - known)[:5])} used in metrics/per_query are "
                    "neither in this commit's runs nor in the store; commit their runs rows too"
                )
        commit_id = new_commit_id()
        data = rows_for_delta(tables, commit_id)
        if key is None:  # no runs rows: this store object's own transaction numbers
            self._seq += 1
            app_id, seq = self._app_id, self._seq
        else:
            app_id, seq = _app(key), 1
        attempt = _Attempt(commit_id, key, sorted(run_ids), (int(dt.version()), set(listing.files)))
        version = self._write(data, attempt, app_id, seq)
        if version is None and key is not None and self._landed(app_id, seq):
            return self._landed_commit(key, run_ids)  # an identical commit landed first: nothing added
        self._record_checksums(commit_id)
        return CommitId(commit_id, version)

    def commit_scaling(self, rows: Any) -> CommitId:
        """Write data-scaling fits (rows of the ``scaling`` table, :func:`adaptlab.analysis.scaling.
        scaling_store_rows`) in one atomic commit of their own; returns its id (``.version``: the
        store version it created). Validated as every commit is (unknown, missing or mistyped
        columns are one :class:`StoreError`; nothing is written then)."""
        if self.read_only:
            raise StoreError(f"{self!r} is a past snapshot (version=/as_of=); open the store without them to commit")
        table = prepare_rows(SCALING, rows)
        dt, listing = self._check()
        commit_id = new_commit_id()
        self._seq += 1
        attempt = _Attempt(commit_id, None, [], (int(dt.version()), set(listing.files)))
        version = self._write(rows_for_delta({SCALING: table}, commit_id), attempt, self._app_id, self._seq)
        self._record_checksums(commit_id)
        return CommitId(commit_id, version)

    def _landed_commit(self, key: str, run_ids: list[str]) -> CommitId:
        """The commit of ``key`` the store holds (a retry of a commit that landed adds nothing)."""
        for h in self._history_scan():
            if h.get(KEY_METADATA) == key:
                return CommitId(str(h.get(COMMIT_KEY)), int(h["version"]), added=False)
        ids = {r["commit_id"] for r in self._run_commits(run_ids)}
        return CommitId(ids.pop() if len(ids) == 1 else "", None, added=False)

    def _same_runs(self, runs: pa.Table) -> bool:
        """Whether the stored ``runs`` rows of these run ids are these rows (run id, system,
        dataset, timestamp): a retry of the same commit, not other runs reusing the ids."""
        cols = ["run_id", "system", "dataset", "timestamp"]
        stored = self.runs(columns=cols, run_id=runs.column("run_id").to_pylist()).to_pylist()
        return sorted(map(str, stored)) == sorted(map(str, runs.select(cols).to_pylist()))

    def _run_commits(self, run_ids: list[str]) -> list[dict[str, Any]]:
        """``{"run_id", "commit_id"}`` of the stored ``runs`` rows of ``run_ids``."""
        expr = pc.field("run_id").isin(pa.array(run_ids, pa.string()))
        try:
            with quiet_native("read"):
                return self._dataset(("runs",)).to_table(columns=["run_id", "commit_id"], filter=expr).to_pylist()
        except (pa.ArrowInvalid, OSError) as e:
            raise StoreError(f"{self.uri}: cannot read table 'runs': {native_line(e)}") from e

    def has_runs(self, run_ids: list[str]) -> dict[str, int | None]:
        """For each run id, the store version whose commit holds its ``runs`` row (the current
        version when the log no longer shows that commit; None: not in this snapshot); what tells
        whether a commit whose outcome was unknown landed."""
        stored = self._run_commits(list(run_ids))
        version_of = self._commit_versions(stored)
        found = {r["run_id"]: version_of[r["commit_id"]] for r in stored}
        return {r: found.get(r) for r in run_ids}

    def commit_of(self, run_ids: list[str]) -> CommitId | None:
        """The commit whose ``runs`` rows are exactly these run ids' (its id and ``.version``), or
        None when none of them is in the store: how a retry of an evaluation with the same run ids
        (:func:`adaptlab.evaluation.persist.commit_summary` derives them from the evaluation's
        content) finds that it landed. Raises :class:`StoreError` when the store holds only some
        of them, or holds them in different commits (one evaluation is one commit)."""
        wanted = sorted(set(run_ids))
        stored = self._run_commits(wanted)
        if not stored:
            return None
        commits = sorted({str(r["commit_id"]) for r in stored})
        missing = sorted(set(wanted) - {r["run_id"] for r in stored})
        if missing or len(commits) > 1:
            raise StoreError(
                f"{self.uri}: the runs {', '.join(wanted[:3])}{', ...' if len(wanted) > 3 else ''} of one evaluation "
                f"are in the store only in part (missing: {', '.join(missing[:3]) or 'none'}; in {len(commits)} "
                "commit(s)); `adaptlab results repair` checks the store; commit with again=True (evaluate --again) "
                "to store the evaluation as new runs"
            )
        return CommitId(commits[0], self._commit_versions(stored)[commits[0]])

    def _commit_versions(self, stored: list[dict[str, Any]]) -> dict[str, int]:
        """The store version of each ``commit_id`` in ``stored`` (the current version when the log
        no longer shows that commit: a checkpoint and log clean-up)."""
        version_of = {h.get(COMMIT_KEY): h.get("version") for h in self._table().history()}
        now = self.version()
        return {r["commit_id"]: int(version_of.get(r["commit_id"], now)) for r in stored}

    def transactions_done(self, app_id: str) -> int:
        """How many transactions of the Delta application id ``app_id`` the store holds (0: none).
        A copy that writes batch ``n`` under ``(app_id, n)`` with :meth:`append_once` resumes
        after the last one found here."""
        return int(self._table().transaction_version(app_id) or 0)

    def append_once(self, data: pa.Table, app_id: str, seq: int) -> None:
        """Append rows already in the Delta table's form (:func:`rows_for_delta`) as transaction
        ``seq`` of ``app_id``, then record the checksums of the new data files, so the rows are
        verified like any commit's (``results migrate`` writes its batches so). A transaction the
        store already holds (``seq <= transactions_done(app_id)``) is not written again. Raises
        :class:`StoreError` on a read-only snapshot or a failed write."""
        if self.read_only:
            raise StoreError(f"{self!r} is a past snapshot (version=/as_of=); open the store without them to write")
        if self._landed(app_id, seq):
            return
        self._write(data, None, app_id, seq)
        self._record_checksums(f"{app_id}-{seq}")

    def _check_unique(self, tables: dict[str, pa.Table]) -> None:
        """``run_id`` and ``(run_id, query_id)`` are unique across commits: a run committed
        again (the same id) or a query of a run stored twice is refused. Checked against the
        latest snapshot before writing (run ids are random UUIDs, so two writers racing with the
        same id means a caller reused one; that race is not detected)."""
        runs = tables["runs"]
        if runs.num_rows:
            ids = runs.column("run_id").to_pylist()
            again = self.runs(columns=["run_id"], run_id=ids).column("run_id").to_pylist()
            if again:
                raise StoreError(
                    f"runs: run_id {again[0]!r} is already in the store{_more(again)}; run ids are unique "
                    "(a new evaluation gets a new id from results.new_run_id()); nothing was written"
                )
        pq = tables["per_query"]
        if pq.num_rows:
            ids = sorted(set(pq.column("run_id").to_pylist()) - set(runs.column("run_id").to_pylist()))
            if not ids:
                return
            old = self.per_query(columns=["run_id", "query_id"], run_id=ids).to_pylist()
            stored = {(r["run_id"], r["query_id"]) for r in old}
            clash = [k for k in zip(pq.column("run_id").to_pylist(), pq.column("query_id").to_pylist()) if k in stored]
            if clash:
                raise StoreError(
                    f"per_query: (run_id {clash[0][0]!r}, query_id {clash[0][1]!r}) is already in the "
                    f"store{_more(clash)}; (run_id, query_id) is unique; nothing was written"
                )

    def _write(self, data: pa.Table, attempt: _Attempt | None, app_id: str, seq: int) -> int | None:
        """Append ``data`` in one Delta commit, at most once (transaction ``seq`` of ``app_id``);
        returns its version when found. The data files are written (and hashed) once
        (:func:`~adaptlab.results.staging.stage`), again only when a concurrent vacuum announced
        them (:func:`~adaptlab.results.vacuum.vacuumed_since`); their log entry is created only if its version
        is still free (``max_commit_retries=0``): when another writer took it, the store is read
        again (did this transaction land? is the schema current?) and the entry is tried at the next
        version. Errors that cannot succeed on retry (no space, permission, not found) are not
        retried; a commit that did not land deletes the data files it wrote."""
        meta: dict[str, Any] = {"adaptlab.schema_version": str(SCHEMA_VERSION)}
        if attempt is not None:
            meta[COMMIT_KEY] = attempt.commit_id
            if attempt.key is not None:
                meta[KEY_METADATA] = attempt.key
        label = attempt.commit_id if attempt else str(seq)
        for _ in range(_RESTAGES):
            base = int(self._table().version())  # read before the files are written (see vacuumed_since)
            staged = self._stage(data, label, attempt)
            meta[CHECKSUMS_KEY] = staged.checksums
            meta["operationMetrics"] = staged.metrics()
            props = deltalake.CommitProperties(
                custom_metadata=meta, max_commit_retries=0, app_transactions=[deltalake.Transaction(app_id, seq)]
            )
            last, transient, n = self._commit_loop(staged, props, app_id, seq, base)
            if last is not _VACUUMED:
                break
            discard(self._health.fs, staged)  # a vacuum deletes them: write the files again, under new names
        if last is not None:
            landed = self._landed(app_id, seq)
            if landed is None:
                raise self._unknown(attempt, app_id, seq, last) from last
            if not landed:
                raise self._failed(label, last, n, attempt.before if attempt else None, staged) from last
        elif n < 0 and not self._holds_any(staged):  # an identical commit landed, not this one's files
            discard(self._health.fs, staged)
        return self._find_version(attempt.commit_id) if attempt is not None else None

    def _commit_loop(
        self, staged: Staged, props: Any, app_id: str, seq: int, base: int
    ) -> tuple[Exception | None, int, int]:
        """Try the log entry until it lands: ``(last error or None, transient failures, attempts)``;
        attempts is -1 when the transaction was found landed before this object's entry did; the
        error is :data:`_VACUUMED` when a vacuum newer than version ``base`` deletes a staged file."""
        last: Exception | None = None
        transient = 0
        for n in range(MAX_COMMIT_RETRIES):
            if n:
                time.sleep(min(1.0, 0.02 * 2 ** min(n, 6)) * (0.5 + secrets.randbelow(1000) / 1000))
            try:
                dt = self._table()  # the version this attempt decides on and commits after
            except StoreError as e:
                return e, transient, n
            landed = self._landed_in(dt, app_id, seq)
            if landed is None:
                return last, transient, n  # the store cannot be read: a retry could write twice
            if landed:
                return None, transient, -1  # an earlier attempt (or an identical commit) landed: never write twice
            if vacuumed_since(dt, base, staged.paths):
                return _VACUUMED, transient, n
            last = self._attempt(dt, staged, props)
            if last is None:
                return None, transient, n + 1
            if _version_taken(last):
                continue  # another writer took the version: read again and decide again
            transient += 1
            if is_permanent(last) or retried_already(last) or transient >= COMMIT_ATTEMPTS:
                return last, transient, n + 1
        return last, transient, MAX_COMMIT_RETRIES

    def _holds_any(self, staged: Staged) -> bool:
        """Whether the latest version references a file of ``staged`` (an attempt that reported an
        error had landed); True when that cannot be read (its files are then left in place)."""
        try:
            live = self._health.live_files(self._table())
        except StoreError:
            return True
        return any(p in live for p in staged.paths)

    def _stage(self, data: pa.Table, label: str, attempt: _Attempt | None) -> Staged:
        """Write the commit's data files (nothing is committed yet); a failure is one line."""
        try:
            with quiet_native("commit"):
                return stage(self._health.fs, data)
        except Exception as e:  # noqa: BLE001 - storage errors of any backend
            at = f" (the store was at version {attempt.before[0]} before it)" if attempt is not None else ""
            raise StoreError(
                f"{self.uri}: commit {label} failed, not retried: its data files could not be written "
                f"({native_line(e)}); nothing was committed{at}; no data file of it was left"
            ) from e

    def _attempt(self, dt: Any, staged: Staged, props: Any) -> Exception | None:
        """One log entry for the staged files, at the version after ``dt``'s (created only if absent;
        Rust panics kept off the terminal); the error, if any."""
        try:
            with quiet_native("commit"):
                self._evolve_schema(dt)
                dt.create_write_transaction(staged.adds, "append", delta_schema(), ["kind"], commit_properties=props)
            return None
        except StoreError as e:
            return e
        except Exception as e:  # noqa: BLE001 - CommitFailedError, storage errors
            return e

    def _evolve_schema(self, dt: Any) -> None:
        """Add the columns of this adaptlab's schema that the store's table lacks (all nullable;
        a store written by an older adaptlab), in a commit of no rows."""
        have = {f.name for f in pa.schema(dt.schema().to_arrow())}
        if all(f.name in have for f in delta_schema()):
            return
        try:
            deltalake.write_deltalake(
                dt, delta_schema().empty_table(), mode="append", schema_mode="merge", storage_options=self._options
            )
        except SchemaMismatchError as e:
            raise StoreError(
                f"{self.uri}: the store's table schema does not accept this commit: {native_line(e)}; "
                "nothing was written"
            ) from e
        dt.update_incremental()

    def _failed(
        self, label: str, error: Exception, attempts: int, before: tuple[int, set[str]] | None, staged: Staged
    ) -> StoreError:
        """The one-line error of a commit that did not land (the store says so), after removing
        the data files it wrote."""
        tries = (
            ", not retried (it cannot succeed on retry)"
            if is_permanent(error)
            else f" (time-out: ADAPTLAB_STORE_TIMEOUT={store_timeout():g} s)"
            if timed_out(error)
            else f" after {attempts} attempts"
        )
        kept = discard(self._health.fs, staged)
        left = (
            f"; {len(kept)} data file(s) it had written could not be removed: {', '.join(kept[:3])} "
            "(`adaptlab results compact` deletes unreferenced files)"
            if kept
            else f"; the {len(staged.paths)} data file(s) it had written were removed"
            if staged.paths
            else "; no data file was written"
        )
        at = f" (the store was at version {before[0]} before it)" if before is not None else ""
        return StoreError(
            f"{self.uri}: commit {label} failed{tries}: {native_line(error)}; nothing was committed{at}"
            f"{left}; commit again"
        )

    def _unknown(self, attempt: _Attempt | None, app_id: str, seq: int, error: Exception) -> StoreError:
        """The one-line error of a commit whose outcome is unknown: it failed, and the store could
        not be read afterwards to tell whether it landed. Its data files are left as they are
        (they may be the commit's)."""
        label = attempt.commit_id if attempt else f"{app_id} #{seq}"
        runs = attempt.run_ids if attempt else []
        look = (
            f"`adaptlab results --store {self.uri} --has-run {runs[0]}` tells whether it landed; committing the "
            "same runs again adds nothing if it did"
            if runs
            else f"`transactions_done({app_id!r})` >= {seq} tells whether it landed"
        )
        shown = f" (run(s) {', '.join(runs[:3])}{', ...' if len(runs) > 3 else ''})" if runs else ""
        return StoreError(
            f"{self.uri}: commit {label}{shown}: outcome unknown: the commit failed "
            f"({native_line(error)}) and the store could not be read afterwards to tell whether it "
            f"landed; {look}"
        )

    def _landed(self, app_id: str, seq: int) -> bool | None:
        """Whether transaction ``seq`` of ``app_id`` is in the store; None when it cannot be read."""
        try:
            dt = self._table()
        except Exception:  # noqa: BLE001 - unreadable now: the outcome is unknown
            return None
        return self._landed_in(dt, app_id, seq)

    @staticmethod
    def _landed_in(dt: Any, app_id: str, seq: int) -> bool | None:
        """Whether the snapshot ``dt`` holds transaction ``seq`` of ``app_id`` (None: unreadable)."""
        try:
            got = dt.transaction_version(app_id)
        except Exception:  # noqa: BLE001 - unreadable now: the outcome is unknown
            return None
        return got is not None and int(got) >= seq

    def _find_version(self, commit_id: str) -> int | None:
        for h in self._history_scan():
            if h.get(COMMIT_KEY) == commit_id:
                return int(h["version"])
        return None

    def _history_scan(self) -> list[dict[str, Any]]:
        """The newest :data:`_HISTORY_SCAN` commits' info ([] when the log cannot be read: a
        commit's version is a convenience once it is known to have landed)."""
        try:
            return list(self._table().history(_HISTORY_SCAN))
        except Exception:  # noqa: BLE001
            return []

    # -- maintenance ------------------------------------------------------------------------
    def compact(self, *, retention_hours: float = 168.0, vacuum: bool = True) -> dict[str, Any]:
        """Merge small files (:mod:`~adaptlab.results.compaction`), delete the files no version
        younger than ``retention_hours`` needs (:meth:`vacuum`), then write a checkpoint. Never
        runs implicitly.

        Safe while writers append and while another compaction or vacuum runs: the merge commits
        only on the version it was planned on, else it is planned again (two at once never both
        merge the same files); time travel to versions older than ``retention_hours`` stops
        working after a vacuum: keep the default (7 days) to read old versions.
        """
        hours = self._maintainable("compact", retention_hours)
        try:
            with quiet_native("compact"):
                opt = compact_table(self, delta_schema())
            removed = vacuum_table(self, delta_schema(), hours)["files_vacuumed"] if vacuum else 0
            dt = self._table()
            dt.create_checkpoint()
            self._record_checksums(f"compact-{int(dt.version())}-{secrets.token_hex(4)}")
        except StoreError:
            raise
        except Exception as e:  # noqa: BLE001
            raise StoreError(
                f"{self.uri}: compaction failed: {native_line(e)}; the store is unchanged or "
                "compacted in part, and readable either way"
            ) from e
        return {
            "files_added": opt["files_added"],
            "files_removed": opt["files_removed"],
            "files_vacuumed": removed,
            "version": int(dt.version()),
        }

    def vacuum(self, *, retention_hours: float = 168.0) -> dict[str, int]:
        """Delete the data files no version younger than ``retention_hours`` references and the
        files older than that which no commit added (:mod:`~adaptlab.results.vacuum`); returns
        ``{"files_vacuumed", "version"}``. Safe beside writers, compactions and other vacuums: it
        never deletes a file that a committed version younger than ``retention_hours`` or a
        commit that will land references."""
        hours = self._maintainable("vacuum", retention_hours)
        try:
            return vacuum_table(self, delta_schema(), hours)
        except StoreError:
            raise
        except Exception as e:  # noqa: BLE001
            raise StoreError(
                f"{self.uri}: vacuum failed: {native_line(e)}; every version it announced is still "
                "readable; run it again"
            ) from e

    def _maintainable(self, what: str, retention_hours: float) -> float:
        """``retention_hours`` as a number >= 0, on a store object that may change the store."""
        if self.read_only:
            raise StoreError(f"{self!r} is a past snapshot; open the store without version=/as_of= to {what} it")
        try:
            hours = float(retention_hours)
        except (TypeError, ValueError) as e:
            raise StoreError(f"{what}(): retention_hours must be a number of hours, got {retention_hours!r}") from e
        if not hours >= 0:
            raise StoreError(f"{what}(): retention_hours must be >= 0, got {retention_hours!r}")
        return hours

    def _record_checksums(self, label: str) -> None:
        """Record the SHA-256 of every data file that has none yet."""
        try:
            uris = self._file_uris(self._table())
        except StoreError:
            return  # the commit landed; the next one records these files
        self._checksums.record(uris, label)


def _version_taken(error: Exception) -> bool:
    """Whether a commit failed because its version's log entry exists already (another writer's
    commit; ``max_commit_retries=0`` makes delta-rs report it instead of rebasing)."""
    from deltalake.exceptions import CommitFailedError

    return isinstance(error, CommitFailedError) and not is_permanent(error)


def _app(key: str) -> str:
    """The Delta application id of a commit key."""
    return f"adaptlab-{key}"


@dataclass(frozen=True)
class _Attempt:
    """One commit being written: its id, idempotency key, run ids, and the store's version and
    files before it (to remove what a failed commit wrote)."""

    commit_id: str
    key: str | None
    run_ids: list[str]
    before: tuple[int, set[str]]


def rows_for_delta(tables: dict[str, pa.Table], commit_id: str) -> pa.Table:
    """The validated tables of one commit as rows of the Delta table (one schema, a
    ``kind`` per row, comparisons apart from scores); ``commit_row`` is the row's index
    in its logical table, so reads restore the committed order."""
    schema = delta_schema()
    out = []
    for name, t in tables.items():
        if not t.num_rows:
            continue
        index = pa.array(range(t.num_rows), pa.int64())
        if name == "metrics":
            is_cmp = pc.is_valid(t.column("compared_to"))
            split = [("scores", pc.invert(is_cmp)), ("comparisons", is_cmp)]
        else:
            split = [(name, None)]
        for kind, mask in split:
            part, rows = (t, index) if mask is None else (t.filter(mask), index.filter(mask))
            n = part.num_rows
            if not n:
                continue
            cols = []
            for f in schema:
                if f.name == "kind":
                    cols.append(pa.array([kind] * n, pa.string()))
                elif f.name == "commit_id":
                    cols.append(pa.array([commit_id] * n, pa.string()))
                elif f.name == "commit_row":
                    cols.append(rows)
                elif f.name in part.column_names:
                    cols.append(part.column(f.name).cast(f.type))
                else:
                    cols.append(pa.nulls(n, f.type))
            out.append(pa.Table.from_arrays(cols, schema=schema))
    return pa.concat_tables(out) if out else schema.empty_table()


def _more(items: list[Any]) -> str:
    """`` (and N more)`` after the first of ``items``, or nothing."""
    return f" (and {len(items) - 1} more)" if len(items) > 1 else ""
