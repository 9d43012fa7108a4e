"""Cleaning extracted text (:func:`clean_text`), in one streaming pass pair that also reads files.

The rules are in :func:`clean_text`'s docstring and docs/adaptation.md ("Documents"). The same
engine cleans a string (:func:`clean_pages`) and a file read line by line (:func:`clean_file`),
so a 200 MB text file is cleaned in memory bounded by about twice its text, however long its
lines: a first pass counts the candidate running headers and footers (as 64-bit hashes in a NumPy
array, not as Python strings), a second pass keeps, joins and writes the lines in blocks; each
block is let go as soon as its next form exists, and a long line's substitutions run a slice at a
time (a one-line file peaked at 5x its size before, 2.0x now).
"""

from __future__ import annotations

import re
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from adaptlab.data._io import iter_text_blocks
from adaptlab.errors import ConfigError

__all__ = ["EDGE_LINES", "CleanOptions", "clean_file", "clean_held", "clean_pages", "clean_text"]


@dataclass(frozen=True)
class CleanOptions:
    """Switches of :func:`clean_text`.

    ``repeat_min``: a short line (at most ``repeat_max_chars`` characters) that occurs at least
    this many times in one document, digits ignored, is a running header or footer and is
    removed; 0 turns the rule off. ``dehyphenate``: a word broken across lines with a hyphen
    (``environ-`` at a line end, ``mental`` starting the next kept line in lower case) is joined.
    """

    page_numbers: bool = True
    repeat_min: int = 3
    repeat_max_chars: int = 80
    dehyphenate: bool = True

    def __post_init__(self) -> None:
        if self.repeat_min < 0 or self.repeat_min == 1:
            raise ConfigError(f"CleanOptions.repeat_min={self.repeat_min}: expected 0 (off) or an integer >= 2")
        if self.repeat_max_chars < 1:
            raise ConfigError(f"CleanOptions.repeat_max_chars={self.repeat_max_chars}: expected a positive integer")


_ZERO_WIDTH = re.compile("[\u200b\u200c\u200d\u2060\ufeff\u00ad]")
_PAGE_NUMBER = re.compile(
    r"""^(?:
        (?:page|p\.|pg\.?)\s*\d+(?:\s*(?:of|/)\s*\d+)?   # Page 3, Page 3 of 10, p. 3
      | \d+\s*(?:of|/)\s*\d+                             # 3 of 10, 3/10
      | [-\u2013\u2014]\s*\d+\s*[-\u2013\u2014]          # - 3 -, -- 3 --
      | \d{1,4}                                          # a lone number
      | [\[(]\s*\d+\s*[\])]                              # [3], (3)
    )$""",
    re.IGNORECASE | re.VERBOSE,
)
_DIGITS = re.compile(r"\d+")

EDGE_LINES = 3
"""Lines at the top and at the bottom of a page where running headers and footers are sought."""


def clean_text(text: str, options: CleanOptions | None = None) -> str:
    """Normalise white space and remove page furniture from one extracted document.

    Rules, in order:

    1. Line ends ``\\r\\n`` and ``\\r`` become ``\\n``; zero-width characters and soft
       hyphens are dropped; every run of horizontal white space (tabs, no-break and other
       Unicode spaces) becomes one space; lines are stripped.
    2. Page numbers: a whole line that is ``Page 3``, ``Page 3 of 10``, ``p. 3``, ``3 of 10``,
       ``3/10``, ``- 3 -``, ``[3]``, ``(3)`` or a lone number of at most 4 digits is removed.
    3. Running headers and footers, for lines of at most ``repeat_max_chars`` characters
       compared lower-cased with every digit run replaced by ``#`` (so ``Chapter 3 - Draft`` and
       ``Chapter 4 - Draft`` are the same line):

       - paginated text (form feeds ``\\f``, as ``pdftotext`` writes them, at least
         ``repeat_min`` pages): a line among the first or last :data:`EDGE_LINES` non-empty
         lines of a page that occurs there on at least ``repeat_min`` pages is removed from
         those page edges;
       - text without page breaks: a line that occurs at least ``repeat_min`` times in the
         document and does not end like a sentence (``.``, ``!``, ``?``) is removed everywhere.

    4. De-hyphenation (``dehyphenate``): a kept line ending in a letter and ``-`` whose next
       kept line starts with a lower-case letter loses the hyphen and takes that first word
       (``environ-`` / ``mental impacts`` -> ``environmental`` / ``impacts``), across page
       breaks too (after headers and footers are gone).
    5. Removed lines vanish without leaving a blank line (a page break is not a paragraph
       break); runs of blank lines collapse to one (a paragraph break); blank lines at both
       ends go.

    Line breaks inside paragraphs are kept; the sentence splitter treats them as white space.
    """
    return clean_pages(text, options)[0]


_HYPHEN_END = re.compile(r"[^\W\d_]-$")
_FIRST_WORD = re.compile(r"^([^\W\d_][\w\u2019']*[.,;:!?)\]]*)\s*(.*)$")


Blocks = Callable[[], Iterable[str]]
"""A re-readable source of the text in blocks of whole lines: each block ends with ``\\n``
except the last, which never does (it may be "")."""

BLOCK_CHARS = 1 << 20


def _string_blocks(text: str) -> Iterator[str]:
    start = 0
    while True:
        j = text.find("\n", start + BLOCK_CHARS)
        if j < 0:
            if start < len(text) and text.endswith("\n"):
                yield text[start:]
                start = len(text)
            yield text[start:]
            return
        yield text[start : j + 1]
        start = j + 1


_SPACE_FIX = re.compile(r"[^\S\n]{2,}|[^\S \n]")
"""What rule 1 changes: runs of white space and single white-space characters other than " "."""

_NOT_SPACE = re.compile(r"\S")
_SLICE_CHARS = 1 << 16


def _sub_held(held: list[str], i: int, pattern: re.Pattern[str], repl: str, whole_runs: bool) -> None:
    """``held[i] = pattern.sub(repl, held[i])``; a text over two blocks is substituted a slice of
    about ``_SLICE_CHARS`` (64 Ki) at a time and the results joined. ``re.sub`` of a whole text holds
    the text, every piece between matches and the result at once (3x); here the text and the
    slices' results (2x), then, the text let go (``held`` holds the only reference), those and
    the result (2x). ``whole_runs``: the pattern matches only white space (cut after a character
    that is not: no match spans the cut); otherwise it matches single characters (cut anywhere)."""
    text = held[i]
    if len(text) <= 2 * BLOCK_CHARS or pattern.search(text) is None:
        held[i] = pattern.sub(repl, text)
        return
    out, start = [], 0
    while start < len(text):
        cut = start + _SLICE_CHARS
        if whole_runs and cut < len(text):
            cut = _cut_after(text, cut - 1)
        out.append(pattern.sub(repl, text[start:cut]))
        start = cut
    del text
    held[i] = ""
    held[i] = "".join(out)


def _cut_after(text: str, at: int) -> int:
    """The offset just after the first character from ``at`` on that is not white space (the
    end of ``text`` if none); the match object, which holds ``text``, does not outlive this."""
    m = _NOT_SPACE.search(text, at)
    return m.end() if m else len(text)


def _part_lines(parts: list[str], j: int, last: bool) -> list[str]:
    """The lines of ``parts[j]`` (taken out of ``parts``), white space collapsed; each copy of
    the text replaces the one before it in ``parts``, so a part never exists three times at once."""
    if "  " in parts[j] or _SPACE_FIX.search(parts[j]):
        _sub_held(parts, j, _SPACE_FIX, " ", whole_runs=True)
    lines = parts[j].split("\n")
    parts[j] = ""
    if last:
        lines.pop()  # the block ends with a line break: the next block starts the next line
    return lines


def _keys(lines: list[str], key_chars: int) -> list[str]:
    """The repeat keys of ``lines`` (lower case, digit runs as ``#``), computed on the whole block
    at C speed; a line longer than ``key_chars`` (it cannot be short once stripped) gets ""."""
    short = "\n".join([line if len(line) <= key_chars else "" for line in lines])
    return _DIGITS.sub("#", short.lower()).split("\n")


def _lines(blocks: Iterable[str], key_chars: int = 0) -> Iterator[tuple[str, int, str]]:
    """``(line, page, repeat key)`` as rule 1 of :func:`clean_text` sees them: ``\\r\\n`` and
    ``\\r`` end lines, form feeds start pages, zero-width characters dropped, white space
    collapsed; the substitutions run on whole blocks at C speed, the repeat keys too, for lines of
    at most ``key_chars`` characters before stripping (0: none; pass 2 needs none, and gets "").

    Memory: each block is let go as soon as its next form exists (every step rebinds the one
    name that holds it, and each line leaves its list when it is yielded), so a block that is one
    long line costs at most twice its text at any moment, not once per step."""
    page = 0
    source = iter(blocks)
    while (block := next(source, None)) is not None:
        ends = block.endswith("\n")
        held = [block.replace("\r\n", "\n")]
        del block
        held[0] = held[0].replace("\r", "\n")
        _sub_held(held, 0, _ZERO_WIDTH, "", whole_runs=False)
        parts = held.pop().split("\f")
        for j in range(len(parts)):
            page += 1 if j else 0
            lines = _part_lines(parts, j, j == len(parts) - 1 and ends)
            keys = _keys(lines, key_chars) if key_chars else None
            for k, line in enumerate(lines):
                lines[k] = ""
                line = line.strip()
                yield line, page, keys[k].strip() if keys else ""


@dataclass
class _Candidates:
    """Pass 1: candidate furniture lines as (line index, key hash, page) in compact arrays."""

    flat: tuple[array, array, array]  # text without page breaks: short, not sentence-like
    edge: tuple[array, array, array]  # paginated text: short, at a page edge
    pages: int = 0


def _new_arrays() -> tuple[array, array, array]:
    return array("q"), array("q"), array("q")


def _add(arrays: tuple[array, array, array], i: int, key: str, page: int) -> None:
    arrays[0].append(i)
    arrays[1].append(hash(key))
    arrays[2].append(page)


def _kept_by_number(line: str, opts: CleanOptions) -> bool:
    return not (opts.page_numbers and _PAGE_NUMBER.match(line))


def _scan(lines: Iterable[tuple[str, int, str]], opts: CleanOptions) -> _Candidates:
    """Pass 1 of rule 3: every short kept line is a candidate of the flat rule when it does not
    end like a sentence, of the paged rule when it is among the first or last EDGE_LINES
    non-empty kept lines of its page."""
    found = _Candidates(_new_arrays(), _new_arrays())
    tail: list[tuple[int, str, int]] = []  # the last non-empty kept lines of this page
    page, seen = 0, 0  # seen: how many non-empty kept lines this page has had
    for i, (line, p, key) in enumerate(lines):
        if p != page:
            _flush_tail(found, tail, seen, page)
            page, seen, tail = p, 0, []
        if not line or not _kept_by_number(line, opts):
            continue
        short = len(line) <= opts.repeat_max_chars
        if short and not line.endswith((".", "!", "?")):
            _add(found.flat, i, key, p)
        if short and seen < EDGE_LINES:
            _add(found.edge, i, key, p)
        seen += 1
        tail = [*tail[-(EDGE_LINES - 1) :], (i, key if short else "", seen)]
    _flush_tail(found, tail, seen, page)
    found.pages = page + 1
    return found


def _flush_tail(found: _Candidates, tail: list[tuple[int, str, int]], seen: int, page: int) -> None:
    """The last EDGE_LINES non-empty lines of a finished page (those not already among its first)."""
    for i, key, rank in tail:
        if key and rank > EDGE_LINES:
            _add(found.edge, i, key, page)


def _dropped(found: _Candidates, opts: CleanOptions) -> list[int]:
    """Sorted indices of the lines rule 3 removes: candidates whose key recurs at least
    ``repeat_min`` times (flat) or on at least ``repeat_min`` pages (paged). Few candidates are
    counted in Python, many with NumPy (no Python object per candidate)."""
    paged = found.pages >= opts.repeat_min
    idx, keys, pages = found.edge if paged else found.flat
    if len(idx) < opts.repeat_min:
        return []
    if len(idx) < 4096:
        counts = Counter(k for k, _ in set(zip(keys, pages))) if paged else Counter(keys)
        furniture = {k for k, c in counts.items() if c >= opts.repeat_min}
        return [i for i, k in zip(idx, keys) if k in furniture]
    i_arr, k_arr, p_arr = (np.frombuffer(a, dtype=np.int64) for a in (idx, keys, pages))
    if paged:  # count distinct pages per key
        pairs = np.unique(np.stack([k_arr, p_arr], axis=1), axis=0)
        uniq, counts_arr = np.unique(pairs[:, 0], return_counts=True)
    else:
        uniq, counts_arr = np.unique(k_arr, return_counts=True)
    return np.sort(i_arr[np.isin(k_arr, uniq[counts_arr >= opts.repeat_min])]).tolist()


def _kept(
    lines: Iterable[tuple[str, int, str]], opts: CleanOptions, drop_list: list[int], pages: list[int]
) -> Iterator[tuple[str, int]]:
    """Pass 2, rules 2 and 3: the lines that stay; ``pages[0]`` ends as the number of pages."""
    d = 0
    for i, (line, p, _key) in enumerate(lines):
        pages[0] = p + 1
        while d < len(drop_list) and drop_list[d] < i:
            d += 1
        if d < len(drop_list) and drop_list[d] == i:
            continue
        if _kept_by_number(line, opts):
            yield line, p


def _dehyphenate(kept: Iterable[tuple[str, int]]) -> Iterator[tuple[str, int]]:
    """Rule 4 on a stream: a line ending in ``letter-`` takes the first word of the next kept line
    when that starts in lower case; a line left empty by it vanishes."""
    pending: tuple[str, int, bool] | None = None
    for nxt, q in kept:
        emptied = False
        if pending is not None:
            line, p, gone = pending
            if line.endswith("-") and nxt and _HYPHEN_END.search(line[-2:]) and nxt[0].islower():
                m = _FIRST_WORD.match(nxt)
                if m is not None:
                    line, nxt, emptied = line[:-1] + m.group(1), m.group(2), not m.group(2)
            if not gone:
                yield line, p
        pending = (nxt, q, emptied)
    if pending is not None and not pending[2]:
        yield pending[0], pending[1]


class _Writer:
    """Rule 5 and the page starts: blank runs collapse to one, none at either end; lines are
    joined in blocks so no per-line object outlives its block."""

    BLOCK = 4096

    def __init__(self) -> None:
        self.blocks: list[str] = []
        self.block: list[str] = []
        self.offset, self.last_nonempty, self.blank = 0, False, False
        self.starts: dict[int, int] = {}

    def write(self, line: str, page: int) -> None:
        if not line:
            self.blank = self.blank or self.last_nonempty
            self.last_nonempty = False
            return
        if self.blank:
            self._put("")
            self.blank = False
        self.starts.setdefault(page, self.offset)
        self._put(line)
        self.last_nonempty = True

    def _put(self, line: str) -> None:
        self.block.append(line)
        self.offset += len(line) + 1
        if len(self.block) >= self.BLOCK:
            self.blocks.append("\n".join(self.block))
            self.block = []

    def result(self, pages: int) -> tuple[str, tuple[int, ...]]:
        if self.block:
            self.blocks.append("\n".join(self.block))
        text = "\n".join(self.blocks)
        self.blocks = []
        starts, nxt = [0] * pages, len(text)
        for p in range(pages - 1, -1, -1):  # empty pages start where the next one does
            nxt = starts[p] = self.starts.get(p, nxt)
        return text, tuple(starts)


def _clean(
    blocks: Blocks, opts: CleanOptions, small: bool = False, release: Callable[[], object] | None = None
) -> tuple[str, tuple[int, ...]]:
    """The two passes over ``blocks()`` (called twice; once when ``small``: its lines are kept);
    ``release`` lets the source text go before the cleaned text is joined."""
    key_chars = opts.repeat_max_chars + 2  # a line is stripped of at most one space at each end
    if small:
        cached = list(_lines(blocks(), key_chars))
        lines: Callable[[], Iterable[tuple[str, int, str]]] = lambda: cached  # noqa: E731
        drop = _dropped(_scan(lines(), opts), opts) if opts.repeat_min else []
    else:
        lines = lambda: _lines(blocks())  # noqa: E731
        drop = _dropped(_scan(_lines(blocks(), key_chars), opts), opts) if opts.repeat_min else []
    pages = [1]
    kept = _kept(lines(), opts, drop, pages)
    writer = _Writer()
    for line, p in _dehyphenate(kept) if opts.dehyphenate else kept:
        writer.write(line, p)
    if release is not None:
        release()
    return writer.result(pages[0])


def clean_pages(text: str, options: CleanOptions | None = None) -> tuple[str, tuple[int, ...]]:
    """:func:`clean_text` and, for each page of ``text`` (split at form feeds), the offset in
    the cleaned text where that page starts (see :class:`~adaptlab.data.documents.PagedDocument`)."""
    return clean_held([text], options)


def clean_held(held: list[str], options: CleanOptions | None = None) -> tuple[str, tuple[int, ...]]:
    """:func:`clean_pages` of ``held[0]``, taken out of ``held``: when the caller keeps no other
    reference, the text goes before the cleaned one is joined (a long text of many lines costs
    about twice its size, not three times)."""
    opts = options or CleanOptions()
    text = held[0]
    if "\n" not in text and "\r" not in text and "\f" not in text:  # one line (a paragraph): rules 1 and 2
        del text
        _sub_held(held, 0, _ZERO_WIDTH, "", whole_runs=False)
        _sub_held(held, 0, _SPACE_FIX, " ", whole_runs=True)
        line = held.pop().strip()
        return ("" if opts.page_numbers and _PAGE_NUMBER.match(line) else line), (0,)
    small = len(text) <= BLOCK_CHARS
    del text
    return _clean(lambda: _string_blocks(held[0]), opts, small, release=held.clear)


def clean_file(path: str | Path, options: CleanOptions | None = None) -> tuple[str, tuple[int, ...]]:
    """:func:`clean_pages` of a UTF-8 text file, read twice a block of lines at a time (memory:
    about twice the cleaned text, not the file's lines as Python objects); errors as
    :func:`~adaptlab.data._io.read_text` gives them."""
    return _clean(lambda: iter_text_blocks(path), options or CleanOptions())
