"""A folder on an object store (artifacts, the embedding cache): one small interface over two clients.

``s3://`` (and ``s3a://``) goes through boto3 with explicit multipart uploads; every other
scheme (``gs://``, ``az://``, ``file://``, ...) through ``pyarrow.fs``. Why not pyarrow for S3
(measured with pyarrow 26.0.1, whose AWS SDK sends new-style checksums):

- pyarrow's S3 writer switches to multipart above 10 MiB and, after ``CompleteMultipartUpload``,
  requires the response's root element to be ``CompleteMultipartUploadResult``; moto 5.2.1 (fixed
  in 5.2.5, getmoto/moto#10056) answers ``CompleteMultipartUploadResponse``, so every file over
  10 MiB failed with ``INTERNAL_FAILURE`` after ~25 s of retries, although moto had stored it.
- it streams bodies as ``aws-chunked`` with a trailing checksum; S3 servers that do not decode
  that encoding (s3rver 3.7.1) store the framing as the object: a silent corruption, caught
  only by the manifest's hashes (unless ``AWS_REQUEST_CHECKSUM_CALCULATION=when_required``).
- its time-outs and retries are not bounded per artifact: a dead endpoint mid-upload stalls.

The boto3 path uploads a file over one part in parts of ``ADAPTLAB_S3_PART_SIZE`` bytes, read
one at a time (memory is one part, never the file), each with a ``Content-MD5`` the server
checks, the file's SHA-256 computed on the way and compared with the manifest's before the
upload is completed; any failure aborts the multipart upload, so nothing half-written stays
visible. Checksums are sent only where S3 requires them (no ``aws-chunked`` bodies).
Downloads stream to disk and return the SHA-256 of what was written.

Settings (environment variables, read when a folder is opened):

============================  =========  =====================================================
``ADAPTLAB_S3_CONNECT_TIMEOUT``  5        seconds to open a connection
``ADAPTLAB_S3_READ_TIMEOUT``     30       seconds without a byte from the server
``ADAPTLAB_S3_MAX_ATTEMPTS``     3        attempts per request (boto3's standard retry mode)
``ADAPTLAB_S3_PART_SIZE``        16 MiB   multipart part size in bytes (at least 5 MiB)
============================  =========  =====================================================

A dead endpoint therefore fails within about ``attempts x connect timeout`` plus backoff (~20 s
with the defaults); a server that stops answering mid-request within ``attempts x read timeout``.
The endpoint, region and credentials come from the usual AWS environment (``AWS_ENDPOINT_URL``,
``AWS_REGION``/``AWS_DEFAULT_REGION``, ``AWS_ACCESS_KEY_ID``, ...); with an endpoint set,
path-style addressing is used (MinIO, moto, s3rver). I/O failures raise :class:`OSError` with a
short reason (no credentials); callers turn it into their one-line :class:`StoreError`.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import os
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from adaptlab.errors import AdaptlabError, ConfigError, StoreError, mask_url, require_extra
from adaptlab.storage.env import env_number

__all__ = ["RemoteDir", "TransferSettings", "check_remote_support", "open_remote"]

MIN_PART = 5 << 20
"""S3's smallest part (all but the last)."""

_BLOCK = 1 << 20
_S3_SCHEMES = ("s3", "s3a")


@dataclass(frozen=True)
class TransferSettings:
    """Time-outs, retries and part size of S3 transfers (see the module docstring)."""

    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    max_attempts: int = 3
    part_size: int = 16 << 20

    @classmethod
    def from_env(cls) -> TransferSettings:
        """Settings from ``ADAPTLAB_S3_*``; a bad value raises :class:`ConfigError` naming it."""
        base = cls()
        out = cls(
            connect_timeout=env_number("ADAPTLAB_S3_CONNECT_TIMEOUT", base.connect_timeout, unit="seconds"),
            read_timeout=env_number("ADAPTLAB_S3_READ_TIMEOUT", base.read_timeout, unit="seconds"),
            max_attempts=int(env_number("ADAPTLAB_S3_MAX_ATTEMPTS", base.max_attempts, kind=int)),
            part_size=int(env_number("ADAPTLAB_S3_PART_SIZE", base.part_size, kind=int, unit="bytes")),
        )
        if out.part_size < MIN_PART:
            raise ConfigError(f"ADAPTLAB_S3_PART_SIZE={out.part_size}: expected at least {MIN_PART} bytes (5 MiB)")
        return out


class RemoteDir(ABC):
    """A folder of an object store; ``rel`` paths are ``/``-separated, relative to it."""

    where: str  # the folder's URI for messages, credentials masked

    @abstractmethod
    def read_bytes(self, rel: str) -> bytes | None:
        """The whole (small) file ``rel``, or None when it does not exist."""

    @abstractmethod
    def put_bytes(self, rel: str, data: bytes) -> None:
        """Write the small file ``rel`` in one request."""

    @abstractmethod
    def upload(self, rel: str, src: Path, sha256: str | None = None) -> None:
        """Stream the local file ``src`` to ``rel``; when ``sha256`` is given, what was sent must
        hash to it (else :class:`StoreError`, and nothing is left at ``rel`` by a multipart upload)."""

    @abstractmethod
    def download(self, rel: str, dst: Path) -> str:
        """Stream ``rel`` into the local file ``dst``; returns the SHA-256 of what was written."""

    @abstractmethod
    def list_files(self, rel: str = "") -> list[str]:
        """Every file under the folder ``rel`` (``""``: this folder; recursive), relative to this
        folder, sorted. Recursive on purpose: delimiter ("folder") listings differ between S3
        servers (s3rver 3.7.1 returns no common prefixes two levels up)."""

    @abstractmethod
    def delete_tree(self, rel: str = "") -> int:
        """Delete every file under the folder ``rel`` (``""``: this folder); returns how many.
        Nothing there is not an error."""


def open_remote(uri: str, settings: TransferSettings | None = None) -> RemoteDir:
    """The folder at ``uri``: boto3 for ``s3://``, ``pyarrow.fs`` for any other scheme."""
    if uri.split("://", 1)[0].lower() in _S3_SCHEMES:
        return _S3Dir(uri, settings or TransferSettings.from_env())
    return _ArrowDir(uri)


def check_remote_support(uri: str) -> None:
    """Raise :class:`ConfigError` now (before any training) when ``uri`` needs a client that is
    not installed, or its settings are invalid."""
    if uri.split("://", 1)[0].lower() in _S3_SCHEMES:
        _boto3()
        TransferSettings.from_env()


def _boto3() -> Any:
    return require_extra("boto3", "s3", "s3:// artifacts and embedding caches")


def _chunks(stream: Any) -> Iterator[bytes]:
    yield from iter(lambda: stream.read(_BLOCK), b"")


def _md5_b64(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode()


# --------------------------------------------------------------------------- S3 through boto3


class _S3Dir(RemoteDir):
    """An ``s3://bucket/prefix`` folder through boto3 (see the module docstring)."""

    def __init__(self, uri: str, settings: TransferSettings) -> None:
        parts = urlsplit(uri)
        self.where = mask_url(f"{parts.scheme}://{parts.netloc}{parts.path}".rstrip("/"))
        self.bucket, self.prefix = parts.netloc.rsplit("@", 1)[-1], parts.path.strip("/")
        self.settings = settings
        self._options = _query_options(uri, parts.query)
        self.client = _s3_client(settings, settings.max_attempts, **self._options)

    def _key(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def read_bytes(self, rel: str) -> bytes | None:
        with _s3_errors(f"{self.where}/{rel}"):
            try:
                body = self.client.get_object(Bucket=self.bucket, Key=self._key(rel))["Body"]
            except Exception as e:  # noqa: BLE001 - a missing key is an answer, not an error
                if _error_code(e) in ("NoSuchKey", "404", "NotFound"):
                    return None
                raise
            try:
                return body.read()
            finally:
                body.close()

    def put_bytes(self, rel: str, data: bytes) -> None:
        with _s3_errors(f"{self.where}/{rel}"):
            self.client.put_object(Bucket=self.bucket, Key=self._key(rel), Body=data, ContentMD5=_md5_b64(data))

    def upload(self, rel: str, src: Path, sha256: str | None = None) -> None:
        if src.stat().st_size <= self.settings.part_size:
            data = src.read_bytes()
            _check_hash(hashlib.sha256(data).hexdigest(), sha256, src)
            self.put_bytes(rel, data)
            return
        key = f"{self.where}/{rel}"
        with _s3_errors(key):
            upload_id = self.client.create_multipart_upload(Bucket=self.bucket, Key=self._key(rel))["UploadId"]
        try:
            with _s3_errors(key):
                parts, digest = self._send_parts(rel, src, upload_id)
            _check_hash(digest, sha256, src)
            with _s3_errors(key):
                self.client.complete_multipart_upload(
                    Bucket=self.bucket, Key=self._key(rel), UploadId=upload_id, MultipartUpload={"Parts": parts}
                )
        except BaseException:
            self._abort(rel, upload_id)
            raise

    def _send_parts(self, rel: str, src: Path, upload_id: str) -> tuple[list[dict[str, Any]], str]:
        """Upload ``src`` one part at a time; returns the parts list and the file's SHA-256."""
        h = hashlib.sha256()
        parts: list[dict[str, Any]] = []
        with src.open("rb") as f:
            for number, block in enumerate(iter(lambda: f.read(self.settings.part_size), b""), start=1):
                h.update(block)
                answer = self.client.upload_part(
                    Bucket=self.bucket,
                    Key=self._key(rel),
                    UploadId=upload_id,
                    PartNumber=number,
                    Body=block,
                    ContentMD5=_md5_b64(block),
                )
                parts.append({"PartNumber": number, "ETag": answer["ETag"]})
        return parts, h.hexdigest()

    def _abort(self, rel: str, upload_id: str) -> None:
        try:  # best effort: a dead server cannot abort; S3 lifecycle rules clear leftovers
            client = _s3_client(self.settings, 1, **self._options)  # one try: an abort must not stall
            client.abort_multipart_upload(Bucket=self.bucket, Key=self._key(rel), UploadId=upload_id)
        except Exception:  # noqa: BLE001 - the upload's own error is the one to report
            pass

    def download(self, rel: str, dst: Path) -> str:
        h = hashlib.sha256()
        with _s3_errors(f"{self.where}/{rel}"):
            body = self.client.get_object(Bucket=self.bucket, Key=self._key(rel))["Body"]
            try:
                with dst.open("wb") as out:
                    for block in _chunks(body):
                        h.update(block)
                        out.write(block)
            finally:
                body.close()
        return h.hexdigest()

    def _pages(self, prefix: str) -> Iterator[dict[str, Any]]:
        with _s3_errors(f"{self.where}/{prefix}"):
            pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self._key(prefix))
            yield from pages

    def list_files(self, rel: str = "") -> list[str]:
        skip = len(self._key("")) if self.prefix else 0
        start = rel.rstrip("/") + "/" if rel else ""
        keys = [o["Key"] for page in self._pages(start) for o in page.get("Contents", [])]
        return sorted(k[skip:] for k in keys if not k.endswith("/"))

    def delete_tree(self, rel: str = "") -> int:
        files = self.list_files(rel)
        for name in files:  # one request per key: DeleteObjects is not served alike everywhere
            with _s3_errors(f"{self.where}/{name}"):
                self.client.delete_object(Bucket=self.bucket, Key=self._key(name))
        return len(files)


def _query_options(uri: str, query: str) -> dict[str, str]:
    """``endpoint_override``, ``region`` and ``scheme`` from the URI's query (pyarrow's names)."""
    options = dict(parse_qsl(query))
    unknown = sorted(set(options) - {"endpoint_override", "region", "scheme"})
    if unknown:
        raise ConfigError(f"{mask_url(uri)}: unknown option(s) {unknown}; expected endpoint_override, region, scheme")
    out = {}
    if "endpoint_override" in options:
        endpoint = options["endpoint_override"]
        out["endpoint"] = endpoint if "://" in endpoint else f"{options.get('scheme', 'https')}://{endpoint}"
    if "region" in options:
        out["region"] = options["region"]
    return out


def _s3_client(
    settings: TransferSettings, attempts: int, endpoint: str | None = None, region: str | None = None
) -> Any:
    """A boto3 S3 client with bounded time-outs and retries, checksums only where required; one
    per settings and AWS environment (building one costs ~0.3 s; clients are thread-safe)."""
    environment = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("AWS_")))
    return _cached_client(settings, attempts, endpoint, region, environment)


@functools.lru_cache(maxsize=16)
def _cached_client(
    settings: TransferSettings,
    attempts: int,
    endpoint: str | None,
    region: str | None,
    environment: tuple[tuple[str, str], ...],
) -> Any:
    boto3 = _boto3()
    from botocore.config import Config

    endpoint = endpoint or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None
    config = Config(
        connect_timeout=settings.connect_timeout,
        read_timeout=settings.read_timeout,
        retries={"max_attempts": attempts, "mode": "standard"},
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        s3={"addressing_style": "path"} if endpoint else {},
    )
    region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None
    return boto3.session.Session().client("s3", endpoint_url=endpoint, region_name=region, config=config)


def _error_code(e: BaseException) -> str:
    response = getattr(e, "response", None)
    return str(((response or {}).get("Error") or {}).get("Code", "")) if isinstance(response, dict) else ""


@contextlib.contextmanager
def _s3_errors(where: str) -> Iterator[None]:
    """Turn botocore's exceptions into :class:`OSError` with a short reason (no credentials)."""
    try:
        yield
    except (OSError, AdaptlabError):
        raise
    except Exception as e:
        if type(e).__module__.split(".")[0] not in ("botocore", "boto3", "urllib3"):
            raise
        code = _error_code(e)
        reason = f"{type(e).__name__} {code}" if code else f"{type(e).__name__}: {str(e)[:120]}"
        raise OSError(mask_url(f"{where}: {reason}")) from None


def _check_hash(digest: str, expected: str | None, src: Path) -> None:
    if expected is not None and digest != expected:
        raise StoreError(
            f"{src}: content changed since the manifest was written (SHA-256 {digest[:12]}... "
            f"!= {expected[:12]}...); retrain or delete the artifact"
        )


# --------------------------------------------------------------------------- other schemes: pyarrow.fs


class _ArrowDir(RemoteDir):
    """A folder of any file system ``pyarrow.fs`` opens from a URI."""

    def __init__(self, uri: str) -> None:
        from pyarrow import fs as pafs  # deferred: only folders on a URI need it

        self.where = mask_url(uri.split("?", 1)[0].rstrip("/"))
        try:
            self.fs, path = pafs.FileSystem.from_uri(uri)
        except Exception as e:  # noqa: BLE001 - reported without the URI's secrets
            raise StoreError(f"{self.where}: cannot open the location ({type(e).__name__})") from None
        self.base = path.rstrip("/")
        self._pafs = pafs

    def _path(self, rel: str) -> str:
        return f"{self.base}/{rel}" if rel else self.base

    def _make_parent(self, rel: str) -> None:
        if self.fs.type_name == "local":  # object stores have no folders to create
            self.fs.create_dir(self._path(rel).rsplit("/", 1)[0], recursive=True)

    def read_bytes(self, rel: str) -> bytes | None:
        if self.fs.get_file_info(self._path(rel)).type == self._pafs.FileType.NotFound:
            return None
        with self.fs.open_input_stream(self._path(rel)) as f:
            return f.read()

    def put_bytes(self, rel: str, data: bytes) -> None:
        self._make_parent(rel)
        with self.fs.open_output_stream(self._path(rel)) as dst:
            dst.write(data)

    def upload(self, rel: str, src: Path, sha256: str | None = None) -> None:
        self._make_parent(rel)
        h = hashlib.sha256()
        with src.open("rb") as f, self.fs.open_output_stream(self._path(rel)) as dst:
            for block in _chunks(f):
                h.update(block)
                dst.write(block)
        _check_hash(h.hexdigest(), sha256, src)

    def download(self, rel: str, dst: Path) -> str:
        h = hashlib.sha256()
        with self.fs.open_input_stream(self._path(rel)) as src, dst.open("wb") as out:
            for block in _chunks(src):
                h.update(block)
                out.write(block)
        return h.hexdigest()

    def list_files(self, rel: str = "") -> list[str]:
        infos = self.fs.get_file_info(self._pafs.FileSelector(self._path(rel), recursive=True, allow_not_found=True))
        return sorted(i.path[len(self.base) + 1 :] for i in infos if i.type == self._pafs.FileType.File)

    def delete_tree(self, rel: str = "") -> int:
        files = self.list_files(rel)
        if self.fs.type_name == "local":  # the folders too
            if self.fs.get_file_info(self._path(rel)).type != self._pafs.FileType.NotFound:
                self.fs.delete_dir(self._path(rel))
            return len(files)
        for name in files:
            self.fs.delete_file(self._path(name))
        return len(files)
