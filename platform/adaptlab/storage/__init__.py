"""Storage below every other package: files (safe names, a relative-path check, SHA-256 of a file
and of a directory; :mod:`adaptlab.storage.files`), numbers and the cache folder from the environment
(:mod:`adaptlab.storage.env`), the one rule for user-given names (:mod:`adaptlab.storage.names`) and folders on object stores (boto3 for
``s3://`` with explicit multipart parts, time-outs and abort; ``pyarrow.fs`` for other schemes;
:mod:`adaptlab.storage.objects`). It imports only :mod:`adaptlab.errors`."""

from adaptlab.storage.env import CACHE_ENV, cache_home, env_number
from adaptlab.storage.files import (
    NO_DOTS,
    PORTABLE,
    READABLE,
    NameRule,
    directory_sha256,
    safe_name,
    safe_relpath,
    sha256_file,
)
from adaptlab.storage.names import MAX_NAME_LENGTH, check_name, check_names
from adaptlab.storage.objects import RemoteDir, TransferSettings, check_remote_support, open_remote

__all__ = [
    "CACHE_ENV",
    "MAX_NAME_LENGTH",
    "NO_DOTS",
    "PORTABLE",
    "READABLE",
    "NameRule",
    "RemoteDir",
    "TransferSettings",
    "cache_home",
    "check_name",
    "check_names",
    "check_remote_support",
    "directory_sha256",
    "env_number",
    "open_remote",
    "safe_name",
    "safe_relpath",
    "sha256_file",
]
