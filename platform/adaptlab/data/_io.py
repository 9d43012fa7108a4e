"""Reading data files with errors that name the file, the line and what was expected.

Every loader reads through these helpers, so a bad byte, a malformed JSON line or a missing
key is reported the same way everywhere:

- ``read_text(path)``: the whole file as UTF-8 (a leading BOM is dropped); a non-UTF-8 byte
  raises :class:`~adaptlab.errors.DataError` with ``file:line`` and the byte offset.
- ``iter_jsonl(path)``: ``(line_number, object)`` for every non-blank line, read line by line
  (bounded memory; ``max_line_bytes`` refuses a line that is too long before reading it whole).
- ``iter_text_blocks(path)``: the text of :func:`read_text` in blocks of whole lines (about
  1 MiB each), for code that processes a large file a block at a time.
- ``iter_segments(path)``: the file's lines as ``text.split("\\n")`` of :func:`read_text` would
  give them, read line by line, with the same error messages.
- ``JsonFile``: a parsed JSON document that can turn a key path such as
  ``("data", 3, "paragraphs", 5)`` back into ``file:line`` for an error message; the line is
  located only when an error is raised (one extra pass at C speed), so valid files pay nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adaptlab.errors import DataError

__all__ = [
    "JsonFile",
    "format_key_path",
    "iter_jsonl",
    "iter_lines",
    "iter_segments",
    "iter_text_blocks",
    "read_text",
    "require_file",
    "str_id",
]

_WS = " \t\n\r"


def require_file(path: str | os.PathLike[str], what: str) -> Path:
    """``path`` as a :class:`Path` if it is a readable file, else a DataError naming it."""
    p = Path(path)
    if not p.exists():
        raise DataError(f"{p}: file not found (looked for the {what})")
    if not p.is_file():
        raise DataError(f"{p}: not a file (expected the {what})")
    return p


def read_text(path: str | Path) -> str:
    """The file decoded as strict UTF-8 (a leading byte-order mark is dropped).

    A non-UTF-8 byte raises DataError naming the file, the line, the byte offset and the byte.
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise _read_error(p, e) from e
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        raise _utf8_error(p, e, line, col, e.start) from e
    del raw  # before the BOM is cut (a copy): the bytes and two copies of the text never coexist
    return text[1:] if text.startswith("\ufeff") else text


def _utf8_error(p: Path, e: UnicodeDecodeError, line: int, col: int, offset: int) -> DataError:
    bad = e.object[e.start : e.end].hex(" ")
    return DataError(
        f"{p}:{line}: invalid UTF-8 (byte offset {offset}, column {col}, bytes {bad}: "
        f"{e.reason}); expected UTF-8 text, re-encode the file "
        f"(for example: iconv -f latin1 -t utf-8)"
    )


def iter_segments(path: str | Path, max_line_bytes: int | None = None) -> Iterator[tuple[int, str, bool]]:
    """``(line_number, segment, terminated)``: the strict-UTF-8 text of the file split on ``\\n``
    exactly as ``read_text(path).split("\\n")`` (BOM dropped, a last segment after the final
    newline included, ``terminated`` False only for it), read one line at a time. A line over
    ``max_line_bytes`` bytes is a DataError naming the file, the line and the limit, raised
    before the line is read whole."""
    p = Path(path)
    with _open(p) as f:
        number, offset, more = 0, 0, True
        while more:
            raw = f.readline(-1 if max_line_bytes is None else max_line_bytes + 1)
            number += 1
            if max_line_bytes is not None and len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                raise DataError(
                    f"{p}:{number}: line longer than the limit of {max_line_bytes:,} bytes; "
                    "expected one record per line (raise the limit, max_line_bytes, for longer ones)"
                )
            more, size, held = raw.endswith(b"\n"), len(raw), [raw]
            del raw
            yield number, *_segment(p, held, number, offset)  # no reference kept here while it is used
            offset += size


def _segment(p: Path, held: list[bytes], number: int, offset: int) -> tuple[str, bool]:
    """(segment, terminated) of line ``number`` from its bytes in ``held`` (taken out, so they go
    once decoded: a long line costs its bytes and text, then its text and the segment cut from it)."""
    raw = held.pop()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _utf8_error(p, e, number, e.start + 1, offset + e.start) from e
    del raw
    if number == 1 and text.startswith("\ufeff"):
        text = text[1:]
    end = text.endswith("\n")
    return (text[:-1] if end else text), end


def _open(p: Path) -> Any:
    try:
        return p.open("rb")
    except OSError as e:
        raise _read_error(p, e) from e


def _read_error(p: Path, e: OSError) -> DataError:
    """One line for a file that cannot be read: missing, a folder, or the system's reason."""
    if isinstance(e, FileNotFoundError):
        return DataError(f"{p}: file not found")
    if isinstance(e, IsADirectoryError):
        return DataError(f"{p}: is a folder; expected a file")
    return DataError(f"{p}: cannot read the file ({e.strerror})")


def iter_text_blocks(path: str | Path, block_bytes: int = 1 << 20) -> Iterator[str]:
    """The text :func:`read_text` returns, as blocks of whole lines of about ``block_bytes``
    (each ends with ``\\n``; the last block never does: it is the text after the final line
    break, possibly ""). The same errors as :func:`read_text`, raised when their block is read.

    A line longer than ``block_bytes`` is one block. Nothing here keeps a block once it is
    yielded, nor its bytes once they are decoded: a consumer that drops a block frees it, so a
    one-line file peaks at its bytes plus its text while it is decoded, not more."""
    p = Path(path)
    with _open(p) as f:
        at = [0, 0, 1]  # lines and bytes before this block, 1 while it is the first
        while True:
            lines = f.readlines(block_bytes)
            if not lines:
                yield ""
                return
            ends = lines[-1].endswith(b"\n")
            yield _decode_block(p, lines, at)  # an expression: this frame keeps no reference to it
            if not ends:
                return


def _decode_block(p: Path, lines: list[bytes], at: list[int]) -> str:
    """The text of a block of byte lines (emptied, so its bytes go as soon as they are joined and
    decoded); ``at`` (lines and bytes before, first block) is advanced past it."""
    raw = b"".join(lines)
    lines.clear()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line_start = raw.rfind(b"\n", 0, e.start) + 1
        raise _utf8_error(
            p, e, at[0] + raw.count(b"\n", 0, e.start) + 1, e.start - line_start + 1, at[1] + e.start
        ) from e
    at[0], at[1] = at[0] + raw.count(b"\n"), at[1] + len(raw)
    del raw
    if at[2]:
        at[2] = 0
        if text.startswith("\ufeff"):
            text = text[1:]
    return text


def iter_jsonl(
    path: Path, text: str | None = None, max_line_bytes: int | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line_number, object)`` for every non-blank line of a JSON-lines file (read line by line
    unless ``text``, its content, is given; ``max_line_bytes`` as for :func:`iter_segments`).

    Raises DataError at the first line that is not valid JSON or not a JSON object.
    """
    lines = iter_segments(path, max_line_bytes) if text is None else ((n, line, True) for n, line in iter_lines(text))
    for number, line, _end in lines:
        if text is None and line.endswith("\r"):
            line = line[:-1]
        if not line or line.isspace():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(
                f"{path}:{number}: malformed JSON line ({e.msg} at column {e.colno}); expected one JSON object per line"
            ) from e
        if not isinstance(obj, dict):
            raise DataError(f"{path}:{number}: expected a JSON object {{...}} on each line, got {type(obj).__name__}")
        del line  # not kept while the object is used: a long line's text is in it already
        yield number, obj


def iter_lines(text: str) -> Iterator[tuple[int, str]]:
    """``(line_number, line)`` split on ``\\n`` only (a trailing ``\\r`` is dropped).

    Unlike ``str.splitlines`` this keeps U+2028, U+0085 and friends inside a line, as JSON
    strings may hold them unescaped, so line numbers match what an editor shows.
    """
    for number, line in enumerate(text.split("\n"), start=1):
        yield number, line[:-1] if line.endswith("\r") else line


def str_id(value: object, where: str, key: str) -> str:
    """A JSON id (string, or integer as BEIR files sometimes have) as a non-empty string."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise DataError(f"{where}: {key!r} must be a string id, got {type(value).__name__}")
    text = str(value)
    if not text.strip():
        raise DataError(f"{where}: {key!r} is empty; expected a non-empty id")
    if any(c.isspace() for c in text):
        raise DataError(
            f"{where}: {key!r} value {text!r} contains whitespace; ids must not "
            "(TREC run and qrels files separate fields by whitespace)"
        )
    return text


def format_key_path(keys: Sequence[str | int]) -> str:
    """``("data", 3, "title")`` -> ``data[3].title``."""
    out = ""
    for k in keys:
        if isinstance(k, int):
            out += f"[{k}]"
        else:
            out += f".{k}" if out else str(k)
    return out or "<top level>"


@dataclass
class JsonFile:
    """A JSON document with its source text, for error messages that give ``file:line``."""

    path: Path
    text: str
    value: Any

    @classmethod
    def load(cls, path: str | Path, what: str) -> JsonFile:
        """Read and parse ``path``; ``what`` names the expected content in a not-found error."""
        p = require_file(path, what)
        text = read_text(p)
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            raise DataError(f"{p}:{e.lineno}: invalid JSON ({e.msg} at column {e.colno}); expected {what}") from e
        return cls(p, text, value)

    def where(self, keys: Sequence[str | int]) -> str:
        """``file:line (key.path)`` of the value at ``keys``."""
        offset = _locate(self.text, keys)
        if offset is None:
            return f"{self.path} ({format_key_path(keys)})"
        line = self.text.count("\n", 0, offset) + 1
        return f"{self.path}:{line} ({format_key_path(keys)})"

    def error(self, keys: Sequence[str | int], message: str) -> DataError:
        """A DataError ``file:line (key.path): message``."""
        return DataError(f"{self.where(keys)}: {message}")

    def require(self, obj: Any, keys: Sequence[str | int], required: Sequence[str], kind: str) -> dict[str, Any]:
        """``obj`` if it is an object holding every key of ``required``, else a DataError."""
        if not isinstance(obj, dict):
            raise self.error(keys, f"expected a JSON object ({kind}), got {type(obj).__name__}")
        missing = [k for k in required if k not in obj]
        if missing:
            raise self.error(
                keys,
                f"missing key {missing[0]!r}; a {kind} needs the keys {', '.join(required)}",
            )
        return obj

    def require_str(self, obj: dict[str, Any], keys: Sequence[str | int], key: str) -> str:
        """``obj[key]`` if it is a string, else a DataError at ``keys + (key,)``."""
        value = obj[key]
        if not isinstance(value, str):
            raise self.error([*keys, key], f"expected a string, got {type(value).__name__}")
        return value

    def require_list(self, obj: Any, keys: Sequence[str | int], kind: str) -> list[Any]:
        """``obj`` if it is a list, else a DataError."""
        if not isinstance(obj, list):
            raise self.error(keys, f"expected a JSON array ({kind}), got {type(obj).__name__}")
        return obj


_DECODER = json.JSONDecoder()


def _skip_ws(text: str, i: int) -> int:
    n = len(text)
    while i < n and text[i] in _WS:
        i += 1
    return i


def _locate(text: str, keys: Sequence[str | int]) -> int | None:
    """Character offset of the value at ``keys`` in the JSON ``text`` (None if absent).

    Walks the containers on the path and skips sibling values with the C decoder, so the
    cost is one parse of the part of the file before the value.
    """
    i = _skip_ws(text, 0)
    try:
        for key in keys:
            if i >= len(text):
                return None
            if text[i] == "{" and isinstance(key, str):
                i = _skip_ws(text, i + 1)
                while True:
                    if text[i] == "}":
                        return None
                    name, i = _DECODER.raw_decode(text, i)
                    i = _skip_ws(text, i)
                    i = _skip_ws(text, i + 1)  # the ':'
                    if name == key:
                        break
                    _, i = _DECODER.raw_decode(text, i)
                    i = _skip_ws(text, i)
                    if text[i] == ",":
                        i = _skip_ws(text, i + 1)
            elif text[i] == "[" and isinstance(key, int):
                i = _skip_ws(text, i + 1)
                for _ in range(key):
                    if text[i] == "]":
                        return None
                    _, i = _DECODER.raw_decode(text, i)
                    i = _skip_ws(text, i)
                    if text[i] == ",":
                        i = _skip_ws(text, i + 1)
                if text[i] == "]":
                    return None
            else:
                return None
    except (json.JSONDecodeError, IndexError):
        return None
    return i
