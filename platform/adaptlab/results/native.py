"""The boundary to delta-rs (Rust) and object stores: one failure, one clean line.

- Rust panics print a multi-line block (and a backtrace) to file descriptor 2 from native threads,
  which Python's ``sys.stderr`` redirection does not catch. :func:`quiet_native` turns backtraces
  off (``RUST_BACKTRACE=0`` and ``RUST_LOG=off`` unless the user set them, before delta-rs
  loads) and sends fd 2 to a temporary file around a native call; what it caught is logged at
  debug level (``--verbose`` shows it), never printed raw.
- :func:`short_message` makes one line of a native error: no ANSI colour codes, no server XML
  (the S3 ``<Code>`` is kept), no backtrace frames, no secrets.
- :func:`is_permanent` tells errors that cannot succeed on retry (no space, permission denied,
  not found, read-only file system) from transient ones.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator

from adaptlab.storage.env import env_number

__all__ = [
    "STORE_TIMEOUT",
    "TIMEOUT_ENV",
    "is_permanent",
    "quiet_native",
    "remote_options",
    "retried_already",
    "short_message",
    "store_timeout",
    "timed_out",
]

STORE_TIMEOUT = 20.0
"""Seconds one object-store request may take (delta-rs ``timeout``); with ``retry_timeout`` at
1.25 times it, a dead or frozen endpoint fails within about 25-45 s instead of minutes."""
TIMEOUT_ENV = "ADAPTLAB_STORE_TIMEOUT"

_LOG = logging.getLogger(__name__)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_XML_CODE = re.compile(r"<Code>\s*([^<]+?)\s*</Code>", re.S)
_XML_MESSAGE = re.compile(r"<Message>\s*([^<]+?)\s*</Message>", re.S)
_XML = re.compile(r"<\?xml.*?(?:</Error>|$)|<Error>.*?(?:</Error>|$)", re.S)
_FRAMES = re.compile(r"\s+\d+: (?:<unknown>|\S+(?: at \S+)?)(?=\s+\d+: |\s*$)")
_SECRET = re.compile(r"(?i)(secret|token|password|key|signature|credential)[^,;)\s]*[=:]\s*\S+")
_PERMANENT_ERRNO = frozenset(
    {
        errno.ENOSPC,
        errno.EDQUOT,
        errno.EACCES,
        errno.EPERM,
        errno.ENOENT,
        errno.EROFS,
        errno.EFBIG,
        errno.ENOTDIR,
        errno.EISDIR,
    }
)
_PERMANENT_TEXT = re.compile(
    r"(?i)no space left|disk quota|permission denied|access denied|read-only file system|not found|"
    r"no such file|NoSuchBucket|AccessDenied|InvalidAccessKeyId|SignatureDoesNotMatch|file too large"
)
_TIMED_OUT = re.compile(r"(?i)\btimed out\b|deadline has elapsed")
_RETRIED = re.compile(r"(?i)\bafter \d+ retries\b")
_FD_LOCK = threading.Lock()

for _name, _value in (("RUST_BACKTRACE", "0"), ("RUST_LIB_BACKTRACE", "0"), ("RUST_LOG", "off")):
    os.environ.setdefault(_name, _value)


def short_message(e: BaseException | str | None, limit: int = 400) -> str:
    """One line of a (native) error message: ANSI codes, server XML (its S3 error code kept),
    backtrace frames and anything that looks like a secret removed."""
    if e is None:
        return "unknown error"
    text = _ANSI.sub("", e if isinstance(e, str) else str(e))
    codes = [c for c in _XML_CODE.findall(text) if c]
    messages = [m for m in _XML_MESSAGE.findall(text) if m]
    text = _XML.sub(" ", text)
    text = " ".join(text.split())
    text = _FRAMES.sub("", text)
    if codes:
        text = f"{text.rstrip(' :')} (S3 error {codes[0]}{': ' + messages[0] if messages else ''})"
    text = _SECRET.sub(r"\1=***", text).strip() or (type(e).__name__ if isinstance(e, BaseException) else "error")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_permanent(e: BaseException) -> bool:
    """Whether retrying ``e`` cannot help: no space, quota, permission, not found, read-only."""
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, OSError) and cur.errno in _PERMANENT_ERRNO:
            return True
        if _PERMANENT_TEXT.search(str(cur)):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def store_timeout() -> float:
    """The object-store request time-out in seconds: ``$ADAPTLAB_STORE_TIMEOUT`` (up to 3600) or
    :data:`STORE_TIMEOUT`."""
    from adaptlab.errors import StoreError

    return env_number(TIMEOUT_ENV, STORE_TIMEOUT, maximum=3600, error=StoreError, unit="seconds")


def remote_options(options: dict[str, str] | None) -> dict[str, str]:
    """delta-rs storage options for an object store with bounded time-outs: ``timeout`` (one
    request), ``connect_timeout``, ``retry_timeout`` (all retries of one request) and
    ``max_retries``; any of them given in ``options`` (any letter case) wins."""
    t = store_timeout()
    out = {
        "timeout": f"{t:g}s",
        "connect_timeout": f"{min(5.0, t):g}s",
        "retry_timeout": f"{1.25 * t:g}s",
        "max_retries": "2",
    }
    given = dict(options or {})
    for key in list(out):
        if any(k.lower() in (key, f"aws_{key}") for k in given):
            del out[key]
    return {**out, **given}


def timed_out(e: BaseException) -> bool:
    """Whether ``e`` is an object-store time-out (delta-rs has retried it already)."""
    return bool(_TIMED_OUT.search(str(e)))


def retried_already(e: BaseException) -> bool:
    """Whether delta-rs' object store gave up on ``e`` after its own retries (or a time-out):
    retrying the whole commit again would only multiply the wait."""
    return timed_out(e) or bool(_RETRIED.search(str(e)))


@contextlib.contextmanager
def quiet_native(what: str) -> Iterator[None]:
    """Send file descriptor 2 to a temporary file while native code runs (Rust panics print
    there from their own threads); what it caught goes to the debug log, not the terminal.
    With ``RUST_BACKTRACE`` set by the user, or where fd 2 cannot be duplicated, a no-op."""
    if os.environ.get("ADAPTLAB_NATIVE_STDERR") == "1" or not _FD_LOCK.acquire(blocking=False):
        yield
        return
    try:
        try:
            sys.stderr.flush()
            saved = os.dup(2)
        except (OSError, ValueError):
            yield
            return
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
                os.close(saved)
                sink.seek(0)
                caught = sink.read(65536).decode("utf-8", "replace").strip()
                if caught:
                    _LOG.debug("%s: native messages: %s", what, short_message(caught, 2000))
    finally:
        _FD_LOCK.release()
