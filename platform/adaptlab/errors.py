"""Errors meant for the user: each says what was wrong and what is expected.

The CLI turns an :class:`AdaptlabError` into one line on stderr and exit status 2;
anything else is a bug and keeps its traceback.

Messages never carry credentials: every address, store URI or endpoint that is echoed (in an
error, a log line or a result line) goes through :func:`mask_url` first. That one rule covers a
secret also where its URL no longer shows: the command line registers the credentials of every URL
it was given (:func:`remember_url_secrets`) and :func:`mask_url` hides them wherever they appear,
for example in a path built from ``file://user:<password>@host/...``.
"""

from __future__ import annotations

import errno
import importlib
import importlib.util
import re
import unicodedata
from collections.abc import Iterable
from types import ModuleType
from urllib.parse import unquote

__all__ = [
    "URI_PATTERN",
    "AdaptlabError",
    "ConfigError",
    "DataError",
    "MissingExtraError",
    "StoreError",
    "extra_installed",
    "forget_url_secrets",
    "is_uri",
    "mask_url",
    "missing_extra",
    "one_line",
    "remember_url_secrets",
    "require_extra",
    "url_secrets",
]

URI_PATTERN = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
"""What is a URI rather than a local path: a scheme (RFC 3986 section 3.1) then ``://``; group 1
is the scheme. The one pattern every layer uses (stores, caches, artifacts, study files)."""

_URL = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<rest>[^\s\"<>]*)")
_SECRET_NAME = r"[\w.-]*(?:signature|token|key|secret|password|passwd|pwd|credential|sig|auth)[\w.-]*"
_SECRET_QUERY = re.compile(rf"(?i)(?P<name>[?&;]{_SECRET_NAME}=)[^&#;\s'\"]*")

MASK = "***"
"""What a masked secret reads as."""
_REMEMBERED: set[str] = set()
_SHORTEST = 3
"""Remembered secrets shorter than this are not masked as free text (they would mangle every line)."""


def is_uri(text: object) -> bool:
    """Whether ``text`` is a URI string (``s3://...``, ``file:///...``) rather than a local path."""
    return isinstance(text, str) and URI_PATTERN.match(text) is not None


def mask_url(text: object) -> str:
    """``text`` with the credentials of every URL in it replaced by ``***``: a userinfo password
    (``http://admin:<password>@host`` -> ``http://admin:***@host``), a userinfo without a password
    (often a token: ``https://TOKEN@host`` -> ``https://***@host``) and the value of every
    query parameter whose name holds a secret word (``X-Amz-Signature``, ``X-Amz-Credential``,
    ``token``, ``api_key``, ``sig``, ``password``, ...). Works on a bare address and on a whole
    message alike; text without such parts is returned unchanged.

    A password is masked up to the last ``@`` of its URL, so every character RFC 3986 (section
    3.2.1) allows in userinfo is covered, and so are ``/``, ``?``, ``#`` and ``@`` as users type
    them unencoded (``s3://KEY:wJal/rXU@bucket/x``, ``http://admin:hun#ter2@host``): where a
    parser would read such a URL otherwise, the message hides too much rather than a secret.
    A user name holding ``@`` is masked whole. Secrets remembered by :func:`remember_url_secrets`
    are masked wherever they appear, URL or not."""
    out = _SECRET_QUERY.sub(lambda m: m["name"] + MASK, _URL.sub(_mask_userinfo, str(text)))
    for secret in sorted(_REMEMBERED, key=len, reverse=True):
        out = out.replace(secret, MASK)
    return out


def url_secrets(text: object) -> set[str]:
    """The credentials in the URLs of ``text``, as :func:`mask_url` finds them: userinfo passwords,
    tokens given as userinfo, values of secret-named query parameters; each also percent-decoded."""
    found: set[str] = set()
    for m in _URL.finditer(str(text)):
        rest = m["rest"]
        last_at = rest.rfind("@")
        if last_at >= 0:
            delim = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
            colon, first_at = rest.find(":"), rest.find("@")
            if 0 <= colon < min(delim, last_at):
                found.add(rest[colon + 1 : last_at])
            elif first_at < delim:
                found.add(rest[:first_at])
        found.update(q.group(0)[len(q["name"]) :] for q in _SECRET_QUERY.finditer(m[0]))
    found |= {unquote(f) for f in found}
    return {f for f in found if f and f != MASK}


def remember_url_secrets(texts: Iterable[object]) -> None:
    """Remember the credentials in the URLs of ``texts`` (the command line's arguments) so that
    :func:`mask_url` hides them wherever they show up later (secrets shorter than 3 characters
    only inside URLs). Lasts for the process; :func:`forget_url_secrets` clears it."""
    for text in texts:
        _REMEMBERED.update(s for s in url_secrets(text) if len(s) >= _SHORTEST)


def forget_url_secrets() -> None:
    """Forget what :func:`remember_url_secrets` remembered."""
    _REMEMBERED.clear()


def _mask_userinfo(m: re.Match[str]) -> str:
    scheme, rest = m["scheme"], m["rest"]
    last_at = rest.rfind("@")
    if last_at < 0:
        return m[0]
    delim = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    colon = rest.find(":")
    if 0 <= colon < min(delim, last_at):  # user:password, the password up to the last @
        user = rest[:colon]
        return f"{scheme}{MASK if '@' in user else user + ':' + MASK}@{rest[last_at + 1 :]}"
    first_at = rest.find("@")
    if first_at < delim:  # a token alone
        return f"{scheme}{MASK}@{rest[first_at + 1 :]}"
    return m[0]


class AdaptlabError(Exception):
    """Base class for errors caused by user input (files, options, configs)."""


class DataError(AdaptlabError, ValueError):
    """A data file is malformed; the message names the file and line."""


class ConfigError(AdaptlabError, ValueError):
    """A study file, option or argument is invalid; the message names the key."""


class StoreError(AdaptlabError):
    """The results store cannot be read or written as asked."""


_EXTRA_COMMAND = re.compile(r"pip install 'adaptlab\[([\w-]+)\]'")


class MissingExtraError(ConfigError):
    """A feature needs the packages of an optional extra (``pip install 'adaptlab[EXTRA]'``) that
    are not installed: one line naming the feature, the extra and the install command, made by
    :func:`missing_extra`. Built from a message alone, as every error is (a caller may re-raise
    ``type(e)(f"{e}; more")``), :attr:`extra` is read back from the install command in it."""

    @property
    def extra(self) -> str:
        """The name of the extra to install ("" if the message names none)."""
        found = _EXTRA_COMMAND.search(str(self))
        return found.group(1) if found else ""


def missing_extra(feature: str, extra: str, reason: str = "") -> MissingExtraError:
    """The error for ``feature`` (a plural phrase) missing the ``extra``:
    ``missing_extra("ColBERT models", "colbert", "No module named 'colbert'")`` reads
    ``ColBERT models need the colbert extra: pip install 'adaptlab[colbert]' (No module named
    'colbert')``."""
    tail = f" ({reason})" if reason else ""
    return MissingExtraError(f"{feature} need the {extra} extra: pip install 'adaptlab[{extra}]'{tail}")


def require_extra(module: str, extra: str, feature: str) -> ModuleType:
    """Import ``module`` and return it, or raise :class:`MissingExtraError` (one line) when it or
    a package it imports is missing.

    ``feature`` is a plural phrase the message starts with: ``require_extra("colbert", "colbert",
    "ColBERT models")`` fails with ``ColBERT models need the colbert extra: pip install
    'adaptlab[colbert]' (No module named 'colbert')``."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise missing_extra(feature, extra, _first_line(e)) from e


def extra_installed(module: str) -> bool:
    """Whether ``module`` can be found, without importing it (its parent packages are imported);
    a cheap check before work starts, where :func:`require_extra` would import a heavy package."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a missing parent package; a module with no spec
        return False


def _first_line(e: BaseException, limit: int = 160) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


_OS_HINTS = {
    errno.ENOSPC: "; free some space and run again (nothing partial was kept as a result)",
    errno.EISDIR: "; expected a file",
    errno.ENOTDIR: "; expected a directory",
    errno.EACCES: "; check the permissions",
}


def one_line(e: BaseException) -> str:
    """An error as one line for the user; an :class:`OSError` names its file and what went wrong
    (``PATH: No space left on device``), never a traceback. Control and format characters (ESC of
    an ANSI sequence in a path or a name) are escaped, so the line prints as it reads."""
    if isinstance(e, OSError) and not isinstance(e, AdaptlabError):
        reason = e.strerror or str(e) or type(e).__name__
        paths = [str(p) for p in (e.filename, e.filename2) if p is not None]
        hint = _OS_HINTS.get(e.errno or 0, "")
        text = f"{' -> '.join(paths)}: {reason}{hint}" if paths else f"{reason}{hint}"
    else:
        text = str(e)
    text = " ".join(text.split()) or type(e).__name__
    return "".join(
        ch.encode("unicode_escape").decode("ascii") if unicodedata.category(ch)[0] == "C" else ch for ch in text
    )
