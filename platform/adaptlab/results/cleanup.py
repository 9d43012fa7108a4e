"""A failed commit leaves no data file behind: the files it wrote are found and removed.

delta-rs writes a commit's Parquet files first and the log entry last, so a commit that fails
(no space, permission, an unreachable object store) can leave data files that no version
references. They are harmless to readers but waste space and make "nothing was written" untrue.
The files of *this* commit are told apart from a concurrent writer's in-flight files by their
content: every row of a commit carries its ``commit_id``; a file is removed only when it is new
since the commit started, referenced by no version, and all its rows carry this commit's id.
"""

from __future__ import annotations

from adaptlab.results.health import LOG_DIR, QUARANTINE_DIR, Health
from adaptlab.results.native import quiet_native, short_message

__all__ = ["remove_unreferenced"]


def _belongs_to(health: Health, path: str, commit_id: str) -> bool | None:
    """Whether every row of the Parquet file ``path`` has ``commit_id`` (None: unreadable)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        with health.fs.open_input_file(path) as f:
            ids = pq.read_table(f, columns=["commit_id"]).column("commit_id")
    except Exception:  # noqa: BLE001 - a partial file: no footer
        return None
    return len(ids) > 0 and bool(pc.all(pc.equal(ids, commit_id)).as_py())


def _live(health: Health) -> set[str] | None:
    """The data files of the latest version; None when the log cannot be read (then nothing is
    removed: a file of a commit that landed after all would be lost)."""
    from deltalake import DeltaTable

    try:
        with quiet_native("cleanup"):
            return set(health.live_files(DeltaTable(health.uri, storage_options=health._options)))
    except Exception:  # noqa: BLE001
        return None


def remove_unreferenced(health: Health, commit_id: str, before: set[str]) -> str:
    """Remove the data files commit ``commit_id`` wrote (new since ``before``, referenced by no
    version, every row of this commit); returns what happened as a clause for the error line."""
    try:
        listing = health.listing()
    except Exception as e:  # noqa: BLE001
        return f"; the data files it may have written could not be listed ({short_message(e)})"
    new = sorted(p for p in listing.files if p not in before and p.endswith(".parquet")
                 and not p.startswith((LOG_DIR + "/", QUARANTINE_DIR + "/", "_")))
    if not new:
        return "; no data file was written"
    live = _live(health)
    if live is None:
        return (f"; the {len(new)} new data file(s) were left in place (the store's log cannot be read to tell "
                "whose they are; `adaptlab results compact` deletes unreferenced ones)")
    removed, kept = [], []
    for path in (p for p in new if p not in live):
        owner = _belongs_to(health, path, commit_id)
        if owner is False:
            continue  # another writer's file
        try:
            if owner is None:
                raise OSError("unreadable: it may be another writer's file in progress")
            health.fs.delete_file(path)
            removed.append(path)
        except Exception as e:  # noqa: BLE001
            kept.append(f"{path} ({short_message(e, 120)})")
    return _summary(removed, kept)


def _summary(removed: list[str], kept: list[str]) -> str:
    out = f"; the {len(removed)} data file(s) it had written were removed" if removed else ""
    if kept:
        out += (f"; {len(kept)} unreferenced file(s) were left: {', '.join(kept[:3])}"
                f"{', ...' if len(kept) > 3 else ''} (`adaptlab results compact` deletes them)")
    return out or "; no data file of it was left"
