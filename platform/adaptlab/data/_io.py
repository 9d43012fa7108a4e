"""Reading data files with errors that name the file, the line and what was expected.

Every loader reads through these helpers, so a bad byte, a malformed JSON line or a missing
key is reported the same way everywhere:

- ``read_text(path)``: the whole file as UTF-8 (a leading BOM is dropped); a non-UTF-8 byte
  raises :class:`~adaptlab.errors.DataError` with ``file:line`` and the byte offset.
- ``iter_jsonl(path)``: ``(line_number, object)`` for every non-blank line.
- ``JsonFile``: a parsed JSON document that can turn a key path such as
  ``("data", 3, "paragraphs", 5)`` back into ``file:line`` for an error message; the line is
  located only when an error is raised (one extra pass at C speed), so valid files pay nothing.
"""

from __future__ import annotations

import json
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
    "read_text",
    "require_file",
    "str_id",
]

_WS = " \t\n\r"


def require_file(path: str | Path, what: str) -> Path:
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
    except FileNotFoundError as e:
        raise DataError(f"{p}: file not found") from e
    except IsADirectoryError as e:
        raise DataError(f"{p}: is a folder; expected a file") from e
    except OSError as e:
        raise DataError(f"{p}: cannot read the file ({e.strerror})") from e
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        bad = raw[e.start : e.end].hex(" ")
        raise DataError(
            f"{p}:{line}: invalid UTF-8 (byte offset {e.start}, column {col}, bytes {bad}: "
            f"{e.reason}); expected UTF-8 text, re-encode the file "
            f"(for example: iconv -f latin1 -t utf-8)"
        ) from e
    return text[1:] if text.startswith("\ufeff") else text


def iter_jsonl(path: Path, text: str | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line_number, object)`` for every non-blank line of a JSON-lines file.

    Raises DataError at the first line that is not valid JSON or not a JSON object.
    """
    if text is None:
        text = read_text(path)
    for number, line in iter_lines(text):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(
                f"{path}:{number}: malformed JSON line ({e.msg} at column {e.colno}); "
                "expected one JSON object per line"
            ) from e
        if not isinstance(obj, dict):
            raise DataError(
                f"{path}:{number}: expected a JSON object {{...}} on each line, "
                f"got {type(obj).__name__}"
            )
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
            raise DataError(
                f"{p}:{e.lineno}: invalid JSON ({e.msg} at column {e.colno}); expected {what}"
            ) from e
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

    def require(
        self, obj: Any, keys: Sequence[str | int], required: Sequence[str], kind: str
    ) -> dict[str, Any]:
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
            raise self.error(
                [*keys, key], f"expected a string, got {type(value).__name__}"
            )
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
