"""Integrity that does not depend on the checksum folder alone.

Every commit records the SHA-256 of the data files it adds in its own Delta log entry, so
deleting ``_adaptlab_checksums/`` cannot erase them: a bit flip that still decodes (to another
value) is an error under ``--strict`` and repair takes the file out instead of recording its new
hash. A file that nothing written at commit time can confirm is quarantined with its rows named,
never blessed. A ``_last_checkpoint`` that names a checkpoint that does not exist is named, and
repair moves it away and gets every row back.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from adaptlab import results
from robustness.hostile import assert_one_line_error, build_store, cli

_MAX_FLIPS = 4000


def _values(raw: bytes) -> list | None:
    try:
        return pq.read_table(pa.BufferReader(raw), columns=["value"]).column("value").to_pylist()
    except Exception:  # noqa: BLE001 - this flip broke the file: not the case wanted
        return None


def _flip_that_decodes(path: Path) -> tuple[list, list]:
    """Flip bits in a fixed pseudo-random order (at most ``_MAX_FLIPS`` tried) until the file still
    decodes, with other values in its ``value`` column; returns (old values, new values)."""
    raw = path.read_bytes()
    old = _values(raw)
    rng = random.Random(0)
    for _ in range(_MAX_FLIPS):
        pos, bit = rng.randrange(4, len(raw) - 8), rng.randrange(8)
        changed = bytearray(raw)
        changed[pos] ^= 1 << bit
        new = _values(bytes(changed))
        if new is not None and new != old and len(new) == len(old):
            path.write_bytes(bytes(changed))
            return old, new
    pytest.fail(f"no decoding bit flip among {_MAX_FLIPS}")


@pytest.fixture
def store(tmp_path) -> Path:
    root = tmp_path / "store"
    build_store(root).close()
    return root


def test_a_bit_flip_with_the_checksum_folder_deleted_is_caught_and_never_blessed(store):
    scores = next((store / "kind=scores").glob("*.parquet"))
    old, new = _flip_that_decodes(scores)
    shutil.rmtree(store / "_adaptlab_checksums")
    rc, out, err = cli(["results", "--store", str(store), "--strict"])
    assert_one_line_error(rc, err, ("corrupted data file", scores.name))
    rc, out, err = cli(["results", "repair", "--store", str(store)])
    assert rc == 0 and "Traceback" not in err, err
    assert f"data file kind=scores/{scores.name}" in out and "differs from its recorded SHA-256" in out, out
    assert "recorded the SHA-256" not in out
    rc, out, err = cli(["results", "--store", str(store), "--strict", "--format", "json"])
    assert rc == 0, err
    shown = sorted(r["value"] for r in json.loads(out))
    assert not (set(new) - set(old)) & set(shown)  # the altered values are not served
    manifests = list((store / "_adaptlab_checksums").glob("*.json"))
    assert all(scores.name not in m.read_text() for m in manifests)  # its new bytes were never recorded


def test_a_file_no_commit_time_record_confirms_is_quarantined_with_its_rows_named(store):
    """A commit of an adaptlab without in-log checksums (its hashes only in the folder), folder deleted."""
    log = store / "_delta_log" / f"{1:020d}.json"
    lines = [json.loads(ln) for ln in log.read_text().splitlines()]
    for a in lines:
        a.get("commitInfo", {}).pop("adaptlab.checksums", None)
    log.write_text("".join(json.dumps(a) + "\n" for a in lines))
    shutil.rmtree(store / "_adaptlab_checksums")
    rc, out, err = cli(["results", "--store", str(store), "--strict"])
    assert_one_line_error(rc, err, ("unverified",))
    rc, out, err = cli(["results", "repair", "--store", str(store)])
    assert rc == 0 and "Traceback" not in err, err
    assert "has no checksum written at commit time" in out and "moved it to _adaptlab_quarantine/" in out, out
    assert "row(s) (runs 2)" in out and "of run(s) " in out, out
    assert "recorded the SHA-256" not in out and "copied the SHA-256" not in out
    assert len(list((store / "_adaptlab_quarantine").rglob("*.parquet"))) == 4
    rc, out, err = cli(["results", "--store", str(store), "--strict", "--table", "runs"])
    assert rc == 0 and "(0 rows)" in out, err


def test_a_stale_last_checkpoint_is_quarantined_and_every_row_comes_back(store):
    rows = results.open(store).runs().num_rows
    (store / "_delta_log" / "_last_checkpoint").write_text(json.dumps({"version": 7, "size": 12}))
    rc, out, err = cli(["results", "--store", str(store), "--table", "runs"])
    assert_one_line_error(rc, err, ("_last_checkpoint", "names the checkpoint of version 7, which does not exist"))
    assert "Invalid Checkpoint" not in err
    rc, out, err = cli(["results", "repair", "--store", str(store)])
    assert rc == 0 and "moved it to _adaptlab_quarantine/" in out and "no row is lost" in out, (out, err)
    rc, out, err = cli(["results", "--store", str(store), "--strict", "--table", "runs"])
    assert rc == 0 and f"({rows} rows)" in out, err
