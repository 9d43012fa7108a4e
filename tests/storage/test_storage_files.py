"""adaptlab.storage.files: the safe-name rules, the relative-path check and the hashes, on tiny
hand-checkable inputs."""

from __future__ import annotations

import hashlib
import os

import pytest

from adaptlab.errors import ConfigError, StoreError
from adaptlab.storage.env import cache_home, env_number
from adaptlab.storage.files import NO_DOTS, PORTABLE, READABLE, directory_sha256, safe_name, safe_relpath, sha256_file


@pytest.mark.parametrize(
    ("text", "rule", "expected"),
    [
        ("BAAI/bge-large-en v1.5", PORTABLE, "BAAI_bge-large-en_v1.5"),
        ("../../etc/passwd", PORTABLE, "etc_passwd"),
        ("...", PORTABLE, "unnamed"),
        (700, PORTABLE, "700"),
        ("-opt", PORTABLE, "opt"),
        ("host.example.org", NO_DOTS, "host_example_org"),
        ("-opt", NO_DOTS, "-opt"),
        ("..", NO_DOTS, "_"),
        ("BEIR SciFact", READABLE, "BEIR SciFact"),
        ("a/b\\c:d\x01e", READABLE, "a_b_c_d_e"),
        ("a...b", READABLE, "a_.b"),
        (" .x. ", READABLE, "x"),
        ("..", READABLE, "_"),
    ],
)
def test_each_rule_on_hand_checked_names(text: object, rule, expected: str) -> None:
    assert safe_name(text, rule) == expected


def test_the_cut_and_what_it_leaves_at_the_end() -> None:
    name = "a" * 63 + "/b"  # the cut at 64 ends on the "_" that replaced "/"
    assert safe_name(name) == "a" * 63  # PORTABLE trims after the cut
    assert safe_name(name, NO_DOTS) == "a" * 63 + "_"  # NO_DOTS does not (its names are on disk)
    assert len(safe_name("x" * 500)) == 64 and len(safe_name("x" * 500, max_len=24)) == 24
    assert safe_name("x" * 500, READABLE) == "x" * 500


@pytest.mark.parametrize("rel", ["/model/a", "model/../x", "model//a", "model/./a", "other/a", "model"])
def test_a_relative_path_outside_its_folder_is_refused(rel: str) -> None:
    with pytest.raises(StoreError, match=r"manifest names the file .* outside model/; refusing it"):
        safe_relpath(rel, under="model", source="manifest")


def test_a_relative_path_inside_its_folder_passes() -> None:
    assert safe_relpath("model/1_Pooling/config.json", under="model", source="m") == "model/1_Pooling/config.json"


def test_sha256_file_streams_past_one_block(tmp_path) -> None:
    data = os.urandom((1 << 20) + 17)
    (tmp_path / "f").write_bytes(data)
    assert sha256_file(tmp_path / "f") == hashlib.sha256(data).hexdigest()


def test_directory_hash_framings_by_hand(tmp_path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "b.bin").write_bytes(b"B")
    (tmp_path / "sub" / "a.bin").write_bytes(b"A")
    (tmp_path / ".hidden").write_bytes(b"H")
    content = hashlib.sha256(b".hidden\x00H\x00b.bin\x00B\x00sub/a.bin\x00A\x00").hexdigest()
    assert directory_sha256(tmp_path) == content
    digest = hashlib.sha256(
        b"b.bin\x00" + hashlib.sha256(b"B").digest() + b"sub/a.bin\x00" + hashlib.sha256(b"A").digest()
    ).hexdigest()
    assert directory_sha256(tmp_path, framing="digest", skip_hidden=True) == digest
    assert directory_sha256(tmp_path, lambda p: p.suffix == ".txt") is None


def test_directory_hash_follows_an_edit(tmp_path) -> None:
    (tmp_path / "w.bin").write_bytes(b"one")
    before = directory_sha256(tmp_path)
    (tmp_path / "w.bin").write_bytes(b"three")  # another size: the per-process cache misses
    assert directory_sha256(tmp_path) != before


@pytest.mark.parametrize(
    "text,kind,maximum,expected",
    [
        ("", float, None, 7.0),
        ("  ", float, None, 7.0),
        ("2.5", float, None, 2.5),
        ("3", int, None, 3),
        ("3600", float, 3600, 3600.0),
    ],
)
def test_env_number_reads_positive_numbers_or_the_default(monkeypatch, text, kind, maximum, expected):
    monkeypatch.setenv("ADAPTLAB_TEST_NUMBER", text)
    assert env_number("ADAPTLAB_TEST_NUMBER", 7.0, kind=kind, maximum=maximum) == expected


@pytest.mark.parametrize(
    "text,kind,maximum",
    [
        ("0", float, None),
        ("-1", float, None),
        ("nan", float, None),
        ("inf", float, None),
        ("abc", float, None),
        ("2.5", int, None),
        ("3601", float, 3600),
    ],
)
def test_env_number_refuses_anything_else_in_one_line_naming_the_variable(monkeypatch, text, kind, maximum):
    monkeypatch.setenv("ADAPTLAB_TEST_NUMBER", text)
    with pytest.raises(ConfigError) as e:
        env_number("ADAPTLAB_TEST_NUMBER", 7.0, kind=kind, maximum=maximum, unit="seconds")
    assert "$ADAPTLAB_TEST_NUMBER" in str(e.value) and repr(text) in str(e.value) and "\n" not in str(e.value)


def test_env_number_takes_zero_only_when_allowed(monkeypatch):
    monkeypatch.setenv("ADAPTLAB_TEST_NUMBER", "0")
    assert env_number("ADAPTLAB_TEST_NUMBER", 7.0, allow_zero=True) == 0.0
    monkeypatch.setenv("ADAPTLAB_TEST_NUMBER", "-1")
    with pytest.raises(ConfigError, match="expected a non-negative number"):
        env_number("ADAPTLAB_TEST_NUMBER", 7.0, allow_zero=True)


def test_cache_home_follows_adaptlab_cache_then_xdg_then_home(monkeypatch, tmp_path):
    monkeypatch.setenv("ADAPTLAB_CACHE", str(tmp_path / "a"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert cache_home() == tmp_path / "a"
    monkeypatch.delenv("ADAPTLAB_CACHE")
    assert cache_home() == tmp_path / "x" / "adaptlab"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert cache_home() == tmp_path / "h" / ".cache" / "adaptlab"
