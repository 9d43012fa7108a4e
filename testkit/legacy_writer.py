"""A writer of the previous store layout (layout 1), for tests and benchmarks.bench_store only:
adaptlab reads such stores (:class:`adaptlab.results.legacy.legacy.LegacyReader`) and migrates them, but
no longer writes them. It writes what the old adaptlab wrote: a marker, then each commit's
Parquet files and manifest in ``tmp/`` and one ``os.rename`` into ``commits/`` (safe with
several writer processes). The old store's compaction, cleaning and locks are gone; a test that
needs a compacted store passes ``replaces=``."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from adaptlab.results.layout import COMMITS, LAYOUT_VERSION, MANIFEST, MARKER, TMP, Manifest, new_commit_id
from adaptlab.results.legacy.legacy import FORMAT, LegacyReader
from adaptlab.results.provenance import host_name
from adaptlab.results.schema import SCHEMA_VERSION
from adaptlab.results.validate import prepare_commit, unique_values


def _create(root: Path) -> None:
    (root / COMMITS).mkdir(parents=True, exist_ok=True)
    (root / TMP).mkdir(exist_ok=True)
    if not (root / MARKER).exists():
        part = root / TMP / f"marker.{os.getpid()}.{os.urandom(4).hex()}.part"
        part.write_text(json.dumps({"format": FORMAT, "layout": LAYOUT_VERSION}))
        os.replace(part, root / MARKER)  # concurrent creators agree


class LegacyWriter(LegacyReader):
    """A store of the previous layout that accepts commits (and reads like the reader)."""

    read_only = False

    def __init__(self, root: str | os.PathLike[str]) -> None:
        _create(Path(os.path.abspath(os.fspath(root))))
        super().__init__(root)

    def commit(
        self,
        runs: Any,
        metrics: Any = None,
        per_query: Any = None,
        *,  # type: ignore[override]
        replaces: list[str] | None = None,
    ) -> str:
        """Write one commit as the old store did (rows validated like the Delta store's); its id."""
        tables = prepare_commit(runs, metrics, per_query)
        manifest = Manifest(
            commit_id=new_commit_id(),
            schema_version=SCHEMA_VERSION,
            tables={n: t.num_rows for n, t in tables.items()},
            run_ids=sorted({v for t in tables.values() for v in unique_values(t, "run_id")}),
            systems=sorted({v for t in tables.values() for v in unique_values(t, "system")}),
            datasets=sorted({v for t in tables.values() for v in unique_values(t, "dataset")}),
            created=datetime.now(timezone.utc).isoformat(),
            host=host_name(),
            pid=os.getpid(),
            replaces=sorted(replaces or []),
        )
        tmp = self.root / TMP / f"{manifest.commit_id}.{os.getpid()}.tmp"
        tmp.mkdir()
        for name, t in tables.items():
            if t.num_rows:
                pq.write_table(t, tmp / f"{name}.parquet", compression="zstd")
        (tmp / MANIFEST).write_bytes(manifest.to_bytes())
        os.rename(tmp, self.root / COMMITS / manifest.commit_id)
        return manifest.commit_id
