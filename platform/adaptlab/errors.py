"""Errors meant for the user: each says what was wrong and what is expected.

The CLI turns an :class:`AdaptlabError` into one line on stderr and exit status 2;
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

__all__ = ["AdaptlabError", "ConfigError", "DataError", "StoreError"]


class AdaptlabError(Exception):
    """Base class for errors caused by user input (files, options, configs)."""


class DataError(AdaptlabError, ValueError):
    """A data file is malformed; the message names the file and line."""


class ConfigError(AdaptlabError, ValueError):
    """A study file, option or argument is invalid; the message names the key."""


class StoreError(AdaptlabError):
    """The results store cannot be read or written as asked."""
