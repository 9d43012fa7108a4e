"""Store damage is never silent and repair never hides or blesses it (issue 28).

Each case damages a copy of a small store the way the probe did: versions 0 (creation), 1 (runs
minilm and bge: 2 runs, 4 scores, 1 comparison, 6 per-query rows) and 2 (run "third" with 1
score), 15 rows in all. A commit file of the wrong shape, an unknown action or a directory where a
commit file should be is named with its version and what is expected; repair says how many rows
left the store and moves their data files to the quarantine folder; a bad ``_last_checkpoint`` is
named; a deleted checksum folder is a warning (an error under ``--strict``); a data file that no
longer decodes is never blessed with a checksum.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from adaptlab import results
from robustness.hostile import assert_one_line_error, cli
from robustness.test_robust_store import store_copy, strip_log_checksums, template  # noqa: F401 - the same small store, as fixtures

LOG = "_delta_log"
ALL_ROWS = "15 row(s) (comparisons 1, per_query 6, runs 3, scores 5)"


def _log(root: Path, version: int) -> Path:
    return root / LOG / f"{version:020d}.json"


def _append_line(path: Path, line: str) -> None:
    raw = path.read_bytes()
    path.write_bytes(raw + (b"" if raw.endswith(b"\n") else b"\n") + line.encode() + b"\n")


def _replace_adds(path: Path) -> None:
    """Every ``add`` line of the commit replaced by an action the Delta protocol does not have."""
    lines = path.read_text().splitlines()
    path.write_text("\n".join('{"frobnicate":{"x":1}}' if ln.startswith('{"add"') else ln for ln in lines) + "\n")


def _into_directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


DAMAGE = {
    "wrong shape": (
        lambda p: _append_line(p, '{"add":{"path":12345,"size":"big"}}'),
        ("'add' action whose 'path' is 12345, expected a string",),
    ),
    "unknown action": (_replace_adds, ("unknown action 'frobnicate'", "expected one of add")),
    "directory": (_into_directory, ("is a directory, expected a commit file",)),
}


def _quarantined_parquet(root: Path) -> list[Path]:
    return sorted((root / "_adaptlab_quarantine").rglob("*.parquet"))


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_malformed_commit_file_is_named_and_repair_counts_the_rows_it_moves(store_copy, damage):
    make, needles = DAMAGE[damage]
    make(_log(store_copy, 1))
    rc, out, err = cli(["results", "--store", str(store_copy), "--table", "runs"])
    assert_one_line_error(rc, err, (f"{1:020d}.json", "(version 1)", *needles))
    assert "rows)" not in out
    rc, out, err = cli(["results", "repair", "--store", str(store_copy)])
    assert rc == 0 and "Traceback" not in err, err
    assert "cut back to version 0" in out and "versions 1..2 are no longer in the store" in out
    assert f"{ALL_ROWS} that were in the store before the cut are no longer in it" in out
    assert "moved their 6 data file(s) to _adaptlab_quarantine/" in out
    moved = _quarantined_parquet(store_copy)
    assert len(moved) == 6 and {p.parent.name for p in moved} == {
        "kind=runs",
        "kind=scores",
        "kind=comparisons",
        "kind=per_query",
    }
    assert not list(store_copy.glob("kind=*/*.parquet"))
    rc, out, err = cli(["results", "--store", str(store_copy), "--table", "runs"])
    assert rc == 0 and "(0 rows)" in out, err


def test_repair_of_a_wrong_shape_at_the_last_version_keeps_the_earlier_rows(store_copy):
    _append_line(_log(store_copy, 2), '{"add":{"path":12345,"size":"big"}}')
    rc, out, err = cli(["results", "repair", "--store", str(store_copy)])
    assert rc == 0 and "Traceback" not in err, err
    assert "2 row(s) (runs 1, scores 1) that were in the store before the cut" in out
    assert len(_quarantined_parquet(store_copy)) == 2
    assert results.open(store_copy).runs().num_rows == 2


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b'{"version":"x"', "is not JSON"),
        (b'{"version":1,"size":"big"}', "'size' = \"big\", expected an integer >= 0"),
    ],
)
def test_a_bad_last_checkpoint_is_named_and_repair_moves_it_without_losing_rows(store_copy, content, needle):
    (store_copy / LOG / "_last_checkpoint").write_bytes(content)
    rc, out, err = cli(["results", "--store", str(store_copy), "--table", "runs"])
    assert_one_line_error(rc, err, ("_delta_log/_last_checkpoint", needle))
    rc, out, err = cli(["results", "repair", "--store", str(store_copy)])
    assert rc == 0 and "Traceback" not in err, err
    assert "_last_checkpoint" in out and "no version and no row is lost" in out
    assert (store_copy / "_adaptlab_quarantine").rglob("_last_checkpoint")
    rc, out, err = cli(["results", "--store", str(store_copy), "--table", "runs"])
    assert rc == 0 and "(3 rows)" in out, err


def test_a_deleted_checksum_folder_of_a_fresh_store_is_a_warning_and_an_error_under_strict(store_copy):
    strip_log_checksums(store_copy, 1)  # commits of an adaptlab that kept checksums in the folder only
    strip_log_checksums(store_copy, 2)
    shutil.rmtree(store_copy / "_adaptlab_checksums")  # the commits are seconds old: no grace for a missing folder
    rc, out, err = cli(["results", "--store", str(store_copy), "-v"])
    assert rc == 0 and "(5 rows)" in out
    warning = [ln for ln in err.splitlines() if "WARNING" in ln]
    assert len(warning) == 1 and "_adaptlab_checksums/ is missing" in warning[0]
    rc, out, err = cli(["results", "--store", str(store_copy), "--strict"])
    assert_one_line_error(rc, err, ("_adaptlab_checksums/", "is missing", "unverified", "strict"))
    assert "rows)" not in out


def test_a_new_store_has_its_checksum_folder_before_the_first_commit(tmp_path):
    results.open(tmp_path / "new", create=True).close()
    assert (tmp_path / "new" / "_adaptlab_checksums" / "created.json").read_text() == "{}"
    rc, out, err = cli(["results", "--store", str(tmp_path / "new"), "--strict", "--table", "runs"])
    assert rc == 0 and "(0 rows)" in out and "WARNING" not in err, err


def _flip(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))


def test_repair_never_blesses_a_flipped_byte_whose_checksum_was_deleted(store_copy):
    first = _log(store_copy, 1).read_text()
    victim = next(p for p in (store_copy / "kind=scores").iterdir() if p.name in first)  # version 1's scores
    shutil.rmtree(store_copy / "_adaptlab_checksums")
    _flip(victim)
    rc, out, err = cli(["results", "repair", "--store", str(store_copy)])
    assert rc == 0 and "Traceback" not in err, err
    assert victim.name in out and "added at version 1" in out and "restored the store to version 0" in out
    assert f"{ALL_ROWS} of the commits of versions 1..2 are no longer in the current version" in out
    recorded = "".join(p.read_text() for p in (store_copy / "_adaptlab_checksums").glob("*.json"))
    assert victim.name not in recorded
    rc, out, err = cli(["results", "--store", str(store_copy), "--strict"])
    assert rc == 0 and "(0 rows)" in out, err
