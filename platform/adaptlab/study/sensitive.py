"""Credentials recognised by their content, wherever they sit and whatever their file is called.

``adaptlab submit`` leaves out files whose names look like credentials
(:data:`adaptlab.study.upload.CREDENTIAL_PATTERNS`); a credential saved under an ordinary name
(``jobs/aws_credentials.txt``, ``data/my_ssh_key``) is caught here instead, by detect-secrets
(Yelp, https://github.com/Yelp/detect-secrets), a maintained secret scanner:

- every detector plugin the library ships except public IP addresses and bare hex strings
  (:data:`_NOT_CREDENTIALS` says why): private
  keys, AWS, Azure storage keys, GitHub, GitLab, npm, PyPI, Slack, Stripe, OpenAI, JWTs, Basic
  Auth in URLs (``postgresql://<user>:<password>@host``), Artifactory, Discord, Mailchimp, SendGrid,
  Twilio, Telegram, IBM, SoftLayer, Square, Cloudant, secret-named assignments
  (``password = "..."``, its keyword detector) and high-entropy quoted strings (above 4.5 bits
  per character over the base64 alphabet);
- with the library's filters against false positives (templated values, sequential strings,
  UUIDs, ids, indirect references, lock files) and its inline marker: a line holding
  ``pragma: allowlist secret`` is not reported;
- plus detectors written for formats the library lacks (:mod:`adaptlab.study.credential_formats`:
  ``.netrc``, OpenAI project keys, Anthropic keys, Docker registry auth, libpq passwords, GCP
  service-account files, kubeconfig credentials, Hugging Face tokens).

What the library does not open is opened here, bounded:

- archives (zip, tar, gzip, bzip2, xz, recognised by their first bytes, not their names) are
  unpacked in memory-bounded streams, nested up to :data:`NESTING` levels, at most
  :data:`ARCHIVE_MEMBERS` members and :data:`ARCHIVE_BYTES` unpacked bytes per file; an archive
  over a limit or one that cannot be read is reported as unchecked (the file is refused, like a
  credential: it cannot be shown to hold none);
- UTF-16 and UTF-32 text (a byte-order mark, or NUL bytes in every other position) is decoded;
- base64 runs of at least :data:`BASE64_MIN` characters (on one line, or wrapped over lines as
  ``base64`` and PEM wrap them) are decoded and their content checked the same way, nested up to
  :data:`NESTING` levels;
- a file that is not text (a PDF, model weights) is checked with the library's pattern detectors
  only (its entropy and keyword detectors assume text), block by block.

Text is read in blocks of :data:`BLOCK` bytes (cut at a line end), so a large data file costs one
block of memory; only lines that one of the detectors' patterns can match are handed to the
detectors, which keeps a corpus of prose fast. A match is reported with the kind of credential
and its line, never its value.
"""

from __future__ import annotations

import base64
import binascii
import bz2
import codecs
import gzip
import io
import lzma
import re
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import IO, Any

from adaptlab.errors import ConfigError

__all__ = [
    "ARCHIVE_BYTES",
    "ARCHIVE_MEMBERS",
    "BASE64_MIN",
    "BLOCK",
    "NESTING",
    "CredentialFinding",
    "find_credentials",
]

BLOCK = 1 << 20
"""Bytes of text read at a time (cut at the last line end; a longer line is read whole up to
:data:`_LONG_LINE`)."""
ARCHIVE_MEMBERS = 1000
"""At most this many members of the archives in one file are checked; more: refused as unchecked."""
ARCHIVE_BYTES = 256 << 20
"""At most this many unpacked bytes of the archives in one file are checked; more: refused as unchecked."""
NESTING = 3
"""How deep archives in archives and base64 in base64 are opened."""
BASE64_MIN = 40
"""Shortest base64 run that is decoded and checked (a 16-byte payload and up)."""
_LONG_LINE = 16 << 20
_WINDOW = 4096
"""Lines longer than this are looked at around each gate match only, :data:`_MARGIN` either side."""
_MARGIN = 1024
_SPOOL = 8 << 20
_NOT_CREDENTIALS = frozenset({"IPPublicDetector", "HexHighEntropyString"})
"""Library plugins left out: a public IP address is no credential, and a quoted hex string is as
often an id as a key (every question id of SQuAD, ``"56be4db0acb8001400a502ec"``, was refused);
hex keys assigned to a secret-named key are still found by the keyword detector, and random
strings by the base64 entropy detector."""
_B64_LINE = re.compile(r"^[ \t]*([A-Za-z0-9+/]{16,}={0,2})[ \t]*\r?$", re.MULTILINE)
_B64_RUN = re.compile(rf"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{{{BASE64_MIN},}}={{0,2}}")
_NEWLINE = re.compile("\n")
_PRINTABLE = re.compile(r"[^\x00-\x08\x0e-\x1f\x7f]")


@dataclass(frozen=True)
class CredentialFinding:
    """What was found (``"Private Key"``), on which line (1-based) and where inside the file
    (``""``: the file's own text; else e.g. ``"archive member keys/id"`` or
    ``"base64-encoded text"``); never the value."""

    kind: str
    line: int
    where: str = ""

    def __str__(self) -> str:
        text = f"{self.kind} on line {self.line}"
        return f"{text} ({self.where})" if self.where else text


def find_credentials(path: Path) -> list[CredentialFinding]:
    """The credentials in the file ``path`` by content: at most one finding per kind and place
    (the first), in the order found; ``[]`` for a file without any. Needs detect-secrets."""
    scan = _Scan(_detector())
    with open(path, "rb") as f:
        scan.stream(f, Path(path).name, "", 0)
    return list(scan.found.values())


@dataclass
class _Detector:
    """detect-secrets' plugins and filters, and the patterns that pick the lines worth a look."""

    plugins: list[Any]
    filters: list[Any]
    gates: list[re.Pattern[str]]
    """Patterns of which at least one matches every line a plugin can report (none: every line)."""
    patterns: list[tuple[str, re.Pattern[str]]]
    """``(secret type, pattern)`` of the pattern plugins: what is checked in binary content."""

    def lines(self, numbered: list[tuple[int, str]], filename: str) -> Iterator[tuple[str, int]]:
        """``(secret type, line number)`` of every secret the plugins report on these lines and
        the library's filters keep."""
        from detect_secrets.util.code_snippet import get_code_snippet

        text = [line for _, line in numbered]
        for i, (number, line) in enumerate(numbered):
            line = line.rstrip()
            context = get_code_snippet(text, i + 1)
            if self._filtered(filename=filename, line=line, context=context):
                continue
            for plugin in self.plugins:
                for secret in plugin.analyze_line(filename=filename, line=line, line_number=number, context=context):
                    if not self._filtered(
                        filename=filename, line=line, context=context, plugin=plugin, secret=secret.secret_value
                    ):
                        yield plugin.secret_type, number

    def _filtered(self, **given: Any) -> bool:
        """Whether a filter of the library whose arguments are all given rejects it (a filter of
        the line alone runs before the plugins, one of a secret after)."""
        from detect_secrets.util.inject import call_function_with_arguments

        names = set(given)
        for fn in self.filters:
            wanted = fn.injectable_variables
            if wanted <= names and ("secret" in wanted) == ("secret" in names):
                if call_function_with_arguments(fn, **given):
                    return True
        return False

    def candidates(self, text: str) -> list[tuple[int, str]]:
        """``(0-based line, text)`` of the pieces of ``text`` the plugins should see: each line a
        gate pattern touches, whole when it has at most :data:`_WINDOW` characters, else the
        stretch of :data:`_MARGIN` characters either side of each match (a long line, such as a
        whole JSON file on one line, is never handed to the plugins whole)."""
        ends = [n.start() for n in _NEWLINE.finditer(text)] + [len(text)]
        spans: dict[int, list[tuple[int, int]]] = {}
        for gate in self.gates or [re.compile(r"(?m)^.*$")]:
            for m in gate.finditer(text):
                first, last = _line_of(ends, m.start()), _line_of(ends, max(m.start(), m.end() - 1))
                for line in range(first, last + 1):
                    lo, hi = (ends[line - 1] + 1 if line else 0), ends[line]
                    if hi - lo > _WINDOW:
                        lo, hi = max(lo, m.start() - _MARGIN), min(hi, m.end() + _MARGIN)
                    spans.setdefault(line, []).append((lo, hi))
        return [(line, text[lo:hi]) for line in sorted(spans) for lo, hi in _merged(spans[line])]


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping ``(start, end)`` spans joined."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _line_of(line_ends: list[int], offset: int) -> int:
    from bisect import bisect_left

    return bisect_left(line_ends, offset)


@lru_cache(maxsize=1)
def _detector() -> _Detector:
    """detect-secrets with its plugins (less :data:`_NOT_CREDENTIALS`) and adaptlab's
    (:mod:`~adaptlab.study.credential_formats`), its default filters, and no verification (nothing
    is sent anywhere). Built once per process."""
    try:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
        from detect_secrets.plugins.base import RegexBasedDetector
        from detect_secrets.plugins.high_entropy_strings import HighEntropyStringsPlugin
        from detect_secrets.plugins.keyword import DENYLIST_REGEX, KeywordDetector
        from detect_secrets.settings import get_filters, get_plugins, transient_settings
    except ImportError as e:
        raise ConfigError(
            "adaptlab submit checks every uploaded file for credentials with detect-secrets: pip install detect-secrets"
        ) from e
    from adaptlab.study import credential_formats

    plugin_classes: dict[Any, type] = get_mapping_from_secret_type_to_class()
    names = sorted(cls.__name__ for cls in plugin_classes.values())
    used = [{"name": n} for n in names if n not in _NOT_CREDENTIALS]
    used += [{"name": n, "path": f"file://{credential_formats.__file__}"} for n in credential_formats.__all__]
    with transient_settings({"plugins_used": used}) as settings:
        # no verification (it would send the secret to its issuer); names are not paths here, and
        # content, not a name, decides what is text
        settings.disable_filters(
            "detect_secrets.filters.common.is_ignored_due_to_verification_policies",
            "detect_secrets.filters.common.is_invalid_file",
            "detect_secrets.filters.heuristic.is_non_text_file",
        )
        get_mapping_from_secret_type_to_class.cache_clear()  # load the custom plugins named by path
        try:
            plugins, filters = list(get_plugins()), list(get_filters())
        finally:
            get_mapping_from_secret_type_to_class.cache_clear()
    gates: list[re.Pattern[str]] = []
    patterns: list[tuple[str, re.Pattern[str]]] = []
    ungated = False
    for p in plugins:
        if isinstance(p, RegexBasedDetector):
            found = list(p.denylist)
            patterns += [(p.secret_type, rx) for rx in found]
        elif isinstance(p, HighEntropyStringsPlugin):  # n characters hold at most log2(n) bits each
            shortest = max(1, int(2**p.entropy_limit))
            found = [re.compile(rf"([\'\"])([{re.escape(p.charset)}]{{{shortest},}})(\1)")]
        elif isinstance(p, KeywordDetector):
            found = [re.compile(DENYLIST_REGEX, re.IGNORECASE)]
        else:  # a plugin of unknown shape: look at every line
            found, ungated = [], True
        gates += [re.compile(rx.pattern, rx.flags | re.MULTILINE) for rx in found]
    return _Detector(plugins, filters, [] if ungated else gates, patterns)


class _Budget:
    """What is left of :data:`ARCHIVE_MEMBERS` and :data:`ARCHIVE_BYTES` for one file."""

    def __init__(self) -> None:
        self.members = ARCHIVE_MEMBERS
        self.bytes = ARCHIVE_BYTES


class _Unchecked(Exception):
    """An archive that cannot be checked whole (over a limit, or unreadable)."""


class _Scan:
    """One file's findings, gathered over its text, archive members and base64 payloads."""

    def __init__(self, detector: _Detector) -> None:
        self.detector = detector
        self.found: dict[tuple[str, str], CredentialFinding] = {}
        self.budget = _Budget()
        self.pin: int | None = None
        """The line of the outer text a base64 payload being checked came from."""

    def add(self, kind: str, line: int, where: str) -> None:
        self.found.setdefault((kind, where), CredentialFinding(kind, self.pin or line, where))

    def stream(self, f: IO[bytes], name: str, where: str, depth: int) -> None:
        """Check the seekable binary stream ``f`` (called ``name``), at nesting ``depth``."""
        head = f.read(512)
        f.seek(0)
        packed = _archive_kind(head)
        if packed:
            try:
                self.archive(f, packed, name, where, depth)
            except _Unchecked as e:
                self.add(f"archive not checked ({e})", 1, where)
            return
        encoding = _text_encoding(head)
        if encoding is None:
            self.binary(f, where)
        else:
            self.text(f, encoding, name, where, depth)

    def text(self, f: IO[bytes], encoding: str, name: str, where: str, depth: int) -> None:
        decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
        carry, lines_before = "", 0
        while True:
            block = f.read(BLOCK)
            text = carry + decoder.decode(block, final=not block)
            cut = text.rfind("\n") + 1 if block else len(text)
            if block and cut == 0 and len(text) < _LONG_LINE:
                carry = text
                continue
            body, carry = (text[:cut], text[cut:]) if cut else (text, "")
            self.text_block(body, name, where, depth, lines_before)
            lines_before += body.count("\n")
            if not block:
                return

    def text_block(self, body: str, name: str, where: str, depth: int, lines_before: int) -> None:
        numbered = [(i + 1 + lines_before, piece) for i, piece in self.detector.candidates(body)]
        for kind, line in self.detector.lines(numbered, name):
            self.add(kind, line, where)
        if depth < NESTING:
            for line, payload in _base64_payloads(body):
                inner = f"{where}, base64-encoded" if where else "base64-encoded"
                pinned, self.pin = self.pin, self.pin or lines_before + line + 1
                try:
                    self.stream(io.BytesIO(payload), name, inner, depth + 1)
                finally:
                    self.pin = pinned

    def binary(self, f: IO[bytes], where: str) -> None:
        """The library's pattern detectors over the bytes (read as Latin-1), block by block."""
        seen = {k for k, w in self.found if w == where}
        carry, lines_before = "", 0
        while True:
            block = f.read(BLOCK)
            text = carry + block.decode("latin-1")
            for kind, rx in self.detector.patterns:
                if kind not in seen:
                    m = rx.search(text)
                    if m:
                        seen.add(kind)
                        self.add(kind, lines_before + text.count("\n", 0, m.start()) + 1, where)
            if not block:
                return
            carry = text[-4096:]
            lines_before += text.count("\n") - carry.count("\n")

    def archive(self, f: IO[bytes], packed: str, name: str, where: str, depth: int) -> None:
        if depth >= NESTING:
            raise _Unchecked(f"nested more than {NESTING} deep")
        try:
            if packed == "zip":
                self.zip_members(f, where, depth)
            elif packed == "tar":
                self.tar_members(f, where, depth)
            else:
                opener = {"gzip": gzip.GzipFile, "bzip2": bz2.BZ2File, "xz": lzma.LZMAFile}[packed]
                with opener(fileobj=f) as inner, self.spooled(inner) as plain:
                    inner_name = name.rsplit(".", 1)[0] if "." in name else name
                    self.stream(plain, inner_name, f"{where}, {packed}" if where else packed, depth + 1)
        except (
            OSError,
            EOFError,
            zipfile.BadZipFile,
            tarfile.TarError,
            lzma.LZMAError,
            ValueError,
            NotImplementedError,
            RuntimeError,
        ) as e:
            raise _Unchecked(f"cannot be unpacked: {type(e).__name__}") from None

    def zip_members(self, f: IO[bytes], where: str, depth: int) -> None:
        with zipfile.ZipFile(f) as z:
            for info in z.infolist():
                if info.is_dir():
                    continue
                self.take_member()
                with z.open(info) as member, self.spooled(member) as plain:
                    self.stream(plain, Path(info.filename).name, _member(where, info.filename), depth + 1)

    def tar_members(self, f: IO[bytes], where: str, depth: int) -> None:
        with tarfile.open(fileobj=f, mode="r:") as t:
            for info in t:
                if not info.isfile():
                    continue
                self.take_member()
                member = t.extractfile(info)
                if member is None:
                    continue
                with member, self.spooled(member) as plain:
                    self.stream(plain, Path(info.name).name, _member(where, info.name), depth + 1)

    def take_member(self) -> None:
        self.budget.members -= 1
        if self.budget.members < 0:
            raise _Unchecked(f"more than {ARCHIVE_MEMBERS} members")

    @contextmanager
    def spooled(self, source: IO[bytes]) -> Iterator[IO[bytes]]:
        """``source`` copied into a seekable spool (memory, then a temporary file), counted
        against :data:`ARCHIVE_BYTES`."""
        with tempfile.SpooledTemporaryFile(max_size=_SPOOL) as out:
            while True:
                chunk = source.read(1 << 16)
                if not chunk:
                    break
                self.budget.bytes -= len(chunk)
                if self.budget.bytes < 0:
                    raise _Unchecked(f"more than {ARCHIVE_BYTES >> 20} MiB unpacked")
                out.write(chunk)
            out.seek(0)
            yield out


def _member(where: str, name: str) -> str:
    return (
        f"{where} > {name}"
        if where.startswith("archive member")
        else (f"{where}, archive member {name}" if where else f"archive member {name}")
    )


def _archive_kind(head: bytes) -> str:
    """``zip``, ``tar``, ``gzip``, ``bzip2``, ``xz`` by the first bytes; "" for anything else."""
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return "zip"
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    if head[:3] == b"BZh" and head[3:4].isdigit():
        return "bzip2"
    if head[:6] == b"\xfd7zXZ\x00":
        return "xz"
    if head[257:262] == b"ustar":
        return "tar"
    return ""


def _text_encoding(head: bytes) -> str | None:
    """The encoding of text starting with ``head``: a byte-order mark, NULs in every other (or
    three of four) positions, else UTF-8 when it decodes; None for binary content."""
    for bom, name in (
        (codecs.BOM_UTF32_LE, "utf-32"),
        (codecs.BOM_UTF32_BE, "utf-32"),
        (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF16_LE, "utf-16"),
        (codecs.BOM_UTF16_BE, "utf-16"),
    ):
        if head.startswith(bom):
            return name
    sample = head[: len(head) // 4 * 4]
    if len(sample) >= 8:
        for offset, name in ((1, "utf-16-le"), (0, "utf-16-be")):
            if sample[offset::2].count(0) == len(sample) // 2 and sample[1 - offset :: 2].count(0) == 0:
                return name
    if b"\x00" in head:
        return None
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return None
    return "utf-8"


def _base64_payloads(text: str) -> Iterator[tuple[int, bytes]]:
    """``(0-based line, decoded bytes)`` of every base64 run of at least :data:`BASE64_MIN`
    characters in ``text``: a run of whole base64 lines (wrapped output) or a run inside a line;
    payloads that do not decode are skipped."""
    spans: list[tuple[int, str]] = []
    block: list[str] = []
    start = 0
    for i, line in enumerate(text.split("\n")):
        m = _B64_LINE.match(line)
        if m:
            if not block:
                start = i
            block.append(m.group(1))
            if not m.group(1).endswith("="):
                continue
        if block:
            spans.append((start, "".join(block)))
            block = []
        for run in _B64_RUN.finditer(line) if not m else ():
            spans.append((i, run.group(0)))
    if block:
        spans.append((start, "".join(block)))
    for row, chars in spans:
        if len(chars) < BASE64_MIN:
            continue
        payload = _decode_base64(chars)
        if payload is not None and _looks_like_content(payload):
            yield row, payload


def _decode_base64(run: str) -> bytes | None:
    run = run.rstrip("=")
    run = run[: len(run) - len(run) % 4] if len(run) % 4 == 1 else run
    try:
        return base64.b64decode(run + "=" * (-len(run) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None


def _looks_like_content(payload: bytes) -> bool:
    """Decoded base64 worth a look: an archive, or text (UTF-8/16 that is mostly printable)."""
    if _archive_kind(payload[:512]):
        return True
    encoding = _text_encoding(payload[:512])
    if encoding is None:
        return False
    text = payload[:4096].decode(encoding, errors="replace")
    return bool(text) and len(_PRINTABLE.findall(text)) >= 0.95 * len(text)
