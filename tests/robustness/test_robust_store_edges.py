"""Smaller store hazards: each is one line or the right behaviour.

A quarantine folder that is a symbolic link never makes repair move files out of the store; a
filter value typed in Unicode NFD finds the NFC name the store holds; ESC and other control
characters of a path are escaped in the error line; the lines of a Rust panic that delta-rs
prints before its error never reach the terminal.
"""

from __future__ import annotations

import os
import shutil
import unicodedata

from adaptlab import results
from robustness.hostile import assert_one_line_error, build_store, cli
from robustness.test_robust_store import _log


def test_a_symlinked_quarantine_folder_is_refused_and_nothing_moves(tmp_path):
    root = tmp_path / "store"
    build_store(root).close()
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "_adaptlab_quarantine").symlink_to(outside)
    _log(root, 1).write_text('{"frobnicate":{"x":1}}\n')  # damage that repair would quarantine
    before = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    rc, out, err = cli(["results", "repair", "--store", str(root)])
    assert_one_line_error(rc, err, ("_adaptlab_quarantine is a symbolic link", str(outside), "nothing was changed"))
    assert not any(outside.iterdir())
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()) == before


def test_a_filter_in_nfd_finds_the_stored_nfc_name(tmp_path):
    store = results.open(tmp_path / "s", create=True)
    name = "caf\u00e9"  # NFC, as every stored name
    run = results.run_record(name, "toy", model_id="m", model_revision=None, dataset_fingerprint="f", seed=0, config={})
    store.commit([run], [{"system": name, "dataset": "toy", "measure": "mrr", "value": 0.5}])
    nfd = unicodedata.normalize("NFD", name)
    assert nfd != name
    rc, out, err = cli(["results", "--store", str(tmp_path / "s"), "--filter", f"system={nfd}"])
    assert rc == 0 and "(1 rows)" in out, (out, err)


def test_control_characters_of_a_path_are_escaped_in_the_error_line(tmp_path):
    bad = str(tmp_path / "a\x1b[31mred\x07b\u202e")
    rc, out, err = cli(["results", "--store", bad])
    line = assert_one_line_error(rc, err, ("\\x1b[31mred\\x07b\\u202e",))
    assert not any(unicodedata.category(c)[0] == "C" for c in line)


def test_a_rust_panic_before_the_store_error_stays_off_the_terminal(tmp_path, monkeypatch, capfd):
    import deltalake

    build_store(tmp_path / "s").close()

    def panicking(*args, **kwargs):
        os.write(
            2,
            b"thread 'tokio-runtime-worker' panicked at object_store/src/aws/client.rs:1:1:\n"
            b"called `Result::unwrap()` on an `Err` value: Generic S3 error\n"
            b"note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n"
            b"thread 'main' panicked at deltalake-core/src/lib.rs:1:1:\n",
        )
        raise OSError("Generic S3 error: Error performing list request: connection refused")

    monkeypatch.setattr(deltalake.DeltaTable, "is_deltatable", staticmethod(panicking))
    rc, out, err = cli(["results", "--store", str(tmp_path / "s")])
    assert_one_line_error(rc, err, ("cannot reach the results store", "Generic S3 error"))
    assert "panicked" not in capfd.readouterr().err


def test_the_symlink_case_leaves_a_normal_quarantine_alone(tmp_path):
    root = tmp_path / "store"
    build_store(root).close()
    (root / "_adaptlab_quarantine").mkdir()
    _log(root, 1).write_text('{"frobnicate":{"x":1}}\n')
    rc, out, err = cli(["results", "repair", "--store", str(root)])
    assert rc == 0 and "cut back to version 0" in out, err
    assert list((root / "_adaptlab_quarantine").rglob("*.parquet"))
    shutil.rmtree(root)
