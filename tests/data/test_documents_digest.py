"""Loading a raw corpus gives the same documents whatever the loader's memory layout (issue 28):
SHA-256 digests of every loaded document (type, id, text, title, page starts) of a seeded corpus of
varied files, under four cleaning settings, recorded with the loader of 7532918 (before loading
was made to peak near twice a file's size)."""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict
from pathlib import Path

import pytest

from adaptlab.data.documents import CleanOptions, load_documents

VOCAB = [
    "alpha",
    "beta",
    "gamma",
    "river",
    "stone",
    "energy",
    "policy",
    "impact",
    "naïve",
    "café",
    "Ångström",
    "e\u0301cole",
    "—",
    "«quoted»",
    "3.5",
    "1998",
    "Dr.",
    "pre-",
    "environ-",
    "mental",
    "x\u200by",
    "soft\u00adhyphen",
    "tab\there",
    "nbsp\u00a0here",
    "ctl\x07bell",
    "sep\x1cfs",
    "vt\x0bvt",
    "nul\x00",
    "\u2028ls",
    "\U0001f600",
]

SPACES = [" ", " ", " ", " ", "  ", "\t", "\u3000", " \u00a0 "]
ENDS = ["\n", "\n", "\n", "\n\n", "\r\n", "\r", "\n \n", "\f", "-\n"]
FURNITURE = ["Final EIS Vol 2", "Chapter 7 - Draft", "Page 12", "- 4 -", "12 of 40", "[3]", "CONFIDENTIAL", "2019"]


def _line(rng: random.Random, lo: int, hi: int) -> str:
    words = [rng.choice(VOCAB) for _ in range(rng.randint(lo, hi))]
    return "".join(w + rng.choice(SPACES) for w in words).rstrip(" ") + rng.choice(["", ".", ".", "?", ":"])


def _paged(rng: random.Random, pages: int, lines: int) -> str:
    out = []
    for p in range(pages):
        head = [rng.choice(FURNITURE[:2]).replace("7", str(p % 9)), f"Page {p + 1}"] if rng.random() < 0.8 else []
        body = [_line(rng, 1, 25) + rng.choice(ENDS[:-1]) for _ in range(rng.randint(0, lines))]
        out.append("\n".join(head) + "\n" + "".join(body) + rng.choice(["", "CONFIDENTIAL\n", f"{p + 1} of {pages}\n"]))
    return "\f".join(out)


def _corpus(root: Path) -> None:
    """Seeded files: CRLF, lone CR, BOM, control and zero-width characters, NFD text and file name, form
    feeds (pages) with running headers and page numbers, hyphenated line ends, an empty and a blank
    file, a file of many short lines over a read block (1 MiB), lines over a block, .md and .jsonl."""
    rng = random.Random(28)
    (root / "sub dir").mkdir(parents=True)
    files: dict[str, bytes] = {
        "crlf.txt": _paged(rng, 6, 30).replace("\n", "\r\n").encode(),
        "bom.md": b"\xef\xbb\xbf" + ("# Title\n\n" + _paged(rng, 1, 60)).encode(),
        "e\u0301te\u0301.txt": ("e\u0301te\u0301 \u00e9t\u00e9\n" + _paged(rng, 2, 20)).encode(),
        "empty.txt": b"",
        "blank.md": " \n\t\n\u200b\n\f\n".encode(),
        "sub dir/Final EIS Vol 1.txt": _paged(rng, 40, 40).encode(),
        "flat.txt": "".join(
            rng.choice(FURNITURE) + "\n" + _line(rng, 3, 30) + rng.choice(ENDS) for _ in range(30_000)
        ).encode(),
        "long.txt": (
            "  "
            + " ".join(_line(rng, 5, 30) for _ in range(15_000))
            + " \t\r\n"
            + "next- \n"
            + "line " * 300_000
            + "\u200b\n\n"
            + "environ-\nmental "
            + "z" * 1_500_000
        ).encode(),
        "oneline.md": (" Page 3 of 9 " + "word " * 400_000).encode(),
    }
    for name, data in files.items():
        (root / name).write_bytes(data)
    rows = [
        {"id": f"j{i}", "text": _paged(rng, rng.randint(1, 4), 8), "title": rng.choice(["", "T\u00edtulo"])}
        for i in range(40)
    ]
    rows += [
        {"_id": 7, "text": "Page 2"},
        {"id": "one", "text": " single  line\u200b "},
        {"id": "cr", "text": "a\r\nb\rc\fd"},
    ]
    lines = [json.dumps(r, ensure_ascii=i % 2 == 0) for i, r in enumerate(rows)]
    (root / "rows.jsonl").write_text("\r\n".join(lines[:20]) + "\n\n" + "\n".join(lines[20:]), encoding="utf-8")


def _digest(docs) -> tuple[int, str]:
    h = hashlib.sha256()
    for d in docs:
        h.update(json.dumps([type(d).__name__, asdict(d)], sort_keys=True, ensure_ascii=False).encode() + b"\n")
    return len(docs), h.hexdigest()


SETTINGS = {
    "clean": True,
    "raw": False,
    "loose": CleanOptions(repeat_min=2, repeat_max_chars=5000, dehyphenate=False),
    "tight": CleanOptions(page_numbers=False, repeat_min=4, repeat_max_chars=3),
}

GOLDEN = {  # setting: (documents, SHA-256), recorded with the loader of 7532918
    "clean": (49, "81d3f7d29ba853aa4f4fee73f745ee93663a6d3d74c0340de52b0386fd762ede"),
    "raw": (51, "9ce6f77977935f902530e7a9dfa2f2a672e21ccc8289b4b08dd3af136dfd0393"),
    "loose": (49, "4b0a1a4eb7339268495490c1da668fbdc9531c4989749ceb4c2b6e48a2e0c9aa"),
    "tight": (50, "0bf686281b613185768166f8ba71a47f661c00f7923f0db3bb79138a77e38fe9"),
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    _corpus(root)
    return root


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_the_loaded_documents_are_those_of_the_loader_before(corpus, setting):
    docs = load_documents(corpus, clean=SETTINGS[setting])
    assert {d.id for d in docs} >= {"crlf", "bom", "long", "oneline", "flat", "sub_dir/Final_EIS_Vol_1", "j0", "cr"}
    assert _digest(docs) == GOLDEN[setting]


@pytest.mark.parametrize("whole_runs", [True, False])
def test_substitution_in_slices_is_the_substitution_of_the_whole(monkeypatch, whole_runs):
    """A text over two blocks is substituted slice by slice (data/clean.py, _sub_held): cut after a
    character that is not white space, no run of white space is split, whatever the slice size."""
    from adaptlab.data import clean

    rng = random.Random(5)
    pieces = ["a", "b", " ", "  ", "\t", "\u00a0", "\u3000 ", "\u200b", "\u00ad", "é", "\n"]
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 300))) for _ in range(200)]
    texts += [" " * 50, "x" + "\t " * 40 + "y", "\u200b" * 30]
    pattern, repl = (clean._SPACE_FIX, " ") if whole_runs else (clean._ZERO_WIDTH, "")
    for block, piece in [(1, 1), (2, 3), (4, 7), (8, 16)]:
        monkeypatch.setattr(clean, "BLOCK_CHARS", block)
        monkeypatch.setattr(clean, "_SLICE_CHARS", piece)
        for text in texts:
            held = ["", text]
            clean._sub_held(held, 1, pattern, repl, whole_runs)
            assert held == ["", pattern.sub(repl, text)], (block, piece, text)
