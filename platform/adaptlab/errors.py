"""Errors meant for the user: each says what was wrong and what is expected.

The CLI turns an :class:`AdaptlabError` into one line on stderr and exit status 2;
anything else is a bug and keeps its traceback.

Messages never carry credentials: every address, store URI or endpoint that is echoed (in an
error, a log line or a result line) goes through :func:`mask_url` first.
"""

from __future__ import annotations

import re

__all__ = ["AdaptlabError", "ConfigError", "DataError", "StoreError", "mask_url"]

_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^\s/?#@:]*)(?P<pw>:[^\s/?#'\"]*)?@")
_SECRET_NAME = r"[\w.-]*(?:signature|token|key|secret|password|passwd|pwd|credential|sig|auth)[\w.-]*"
_SECRET_QUERY = re.compile(rf"(?i)(?P<name>[?&;]{_SECRET_NAME}=)[^&#;\s'\"]*")

MASK = "***"
"""What a masked secret reads as."""


def mask_url(text: str) -> str:
    """``text`` with the credentials of every URL in it replaced by ``***``: a userinfo password
    (``http://admin:PASS@host`` -> ``http://admin:***@host``), a userinfo without a password
    (often a token: ``https://TOKEN@host`` -> ``https://***@host``) and the value of every
    query parameter whose name holds a secret word (``X-Amz-Signature``, ``X-Amz-Credential``,
    ``token``, ``api_key``, ``sig``, ``password``, ...). Works on a bare address and on a whole
    message alike; text without such parts is returned unchanged."""

    def userinfo(m: re.Match[str]) -> str:
        if m["pw"] is not None:
            return f"{m['scheme']}{m['user']}:{MASK}@"
        return f"{m['scheme']}{MASK}@"

    return _SECRET_QUERY.sub(lambda m: m["name"] + MASK, _USERINFO.sub(userinfo, str(text)))


class AdaptlabError(Exception):
    """Base class for errors caused by user input (files, options, configs)."""


class DataError(AdaptlabError, ValueError):
    """A data file is malformed; the message names the file and line."""


class ConfigError(AdaptlabError, ValueError):
    """A study file, option or argument is invalid; the message names the key."""


class StoreError(AdaptlabError):
    """The results store cannot be read or written as asked."""
