"""A minimal client for OpenAI-compatible chat completions, with retries and a persistent cache.

Standard library only (``urllib``): ``POST {base_url}/chat/completions`` with a JSON body
``{"model", "messages", "temperature", ...}`` and, when an API key is configured, the header
``Authorization: Bearer <key>``. The key is read from the environment variable whose *name*
is configured (``api_key_env``), never passed or stored as a value.

Retries: HTTP 429, any 5xx, time-outs and connection errors are retried up to ``max_retries``
times; the wait before retry ``i`` (0-based) is the server's ``Retry-After`` seconds when given,
else ``backoff * 2**i``, capped at ``max_backoff``. Other HTTP errors (400, 401, 404, ...) fail
at once with :class:`LLMError` naming the URL, the status and the start of the response body.

Transport safety: redirects are never followed (a 3xx answer is an :class:`LLMError` naming
only the other origin), so the key is sent to the configured origin alone; a plain ``http://``
endpoint is refused unless it is on the loopback interface or ``allow_http=True``; a URL with
``user:password@`` is refused, and URLs in messages and logs never carry credentials.

Cache: :class:`ResponseCache` is an SQLite file keyed by the SHA-256 of the canonical JSON of
the request (model, messages, sampling parameters), so the prompt template and the chunk text
are both part of the key. A rerun answers from the cache and costs nothing; a changed prompt,
chunk or model misses.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import logging
import os
import socket
import sqlite3
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adaptlab.errors import AdaptlabError, ConfigError, StoreError

__all__ = ["ChatClient", "ClientStats", "LLMError", "ResponseCache", "request_key"]

log = logging.getLogger(__name__)

Message = Mapping[str, str]


class LLMError(AdaptlabError):
    """The chat-completions endpoint refused a request or kept failing after all retries."""


def request_key(payload: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of a request body: the cache key."""
    canon = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()


class ResponseCache:
    """Persistent map request key -> response text, in an SQLite file (thread-safe)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT, "
                "content TEXT NOT NULL, created REAL)"
            )
            self._db.commit()
        except (OSError, sqlite3.Error) as e:
            raise StoreError(f"{self.path}: cannot open the LLM response cache ({e})") from e
        self._lock = threading.Lock()

    def get(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT content FROM responses WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def put(self, key: str, content: str, model: str = "") -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO responses (key, model, content, created) VALUES (?, ?, ?, ?)",
                (key, model, content, time.time()),
            )
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


@dataclass
class ClientStats:
    """Counters of one client: HTTP requests sent, retries, cache hits."""

    requests: int = 0
    retries: int = 0
    cache_hits: int = 0


_RETRY_STATUS = frozenset({408, 409, 425, 429})
_LOOPBACK_HOSTS = frozenset({"localhost", "::1"})


def _origin(url: str) -> str:
    """``scheme://host[:port]`` of ``url``, without credentials, path or query."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")


def _is_loopback(host: str) -> bool:
    return host in _LOOPBACK_HOSTS or host.startswith("127.")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuses every redirect: following one would resend the request (and its key) elsewhere."""

    def redirect_request(
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> urllib.request.Request | None:
        raise LLMError(
            f"{_origin(req.full_url)}: HTTP {code} redirect to {_origin(newurl)} refused (the API key is "
            "sent only to the configured origin); set base_url to the final endpoint"
        )


_OPENER = urllib.request.build_opener(_NoRedirect)


@dataclass
class ChatClient:
    """OpenAI-compatible chat completions over HTTP (see the module docstring).

    ``base_url``: e.g. ``https://api.openai.com/v1`` or ``http://127.0.0.1:8000/v1``; the path
    ``/chat/completions`` is appended unless already there. ``api_key_env``: name of the
    environment variable holding the key; None sends no key (local servers). ``cache``: a
    :class:`ResponseCache` or a path to one; None disables caching.
    """

    base_url: str
    model: str
    api_key_env: str | None = "OPENAI_API_KEY"
    temperature: float | None = 0.0
    max_tokens: int | None = None
    timeout: float = 120.0
    max_retries: int = 5
    backoff: float = 1.0
    max_backoff: float = 60.0
    cache: ResponseCache | str | Path | None = None
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    sleep: Callable[[float], None] = time.sleep
    stats: ClientStats = field(default_factory=ClientStats)
    allow_http: bool = False

    def __post_init__(self) -> None:
        self._check_url()
        if not isinstance(self.model, str) or not self.model:
            raise ConfigError("model: expected the non-empty name of the chat model")
        if self.max_retries < 0 or self.backoff < 0 or self.max_backoff < 0 or self.timeout <= 0:
            raise ConfigError(
                "max_retries, backoff, max_backoff must be >= 0 and timeout > 0 "
                f"(got {self.max_retries}, {self.backoff}, {self.max_backoff}, {self.timeout})"
            )
        if self.cache is not None and not isinstance(self.cache, ResponseCache):
            self.cache = ResponseCache(self.cache)

    def _check_url(self) -> None:
        """https anywhere; http only on loopback or with ``allow_http``; never credentials."""
        url = self.base_url
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            shown = _origin(url) if isinstance(url, str) else type(url).__name__
            raise ConfigError(f"base_url={shown!r}: expected an http:// or https:// URL")
        parts = urllib.parse.urlsplit(url)
        if parts.username is not None or parts.password is not None:
            raise ConfigError(
                f"base_url for {_origin(url)}: credentials in the URL (user:password@) are not accepted; "
                "put the key in the environment variable named by api_key_env"
            )
        if parts.scheme == "http" and not self.allow_http and not _is_loopback(parts.hostname or ""):
            raise ConfigError(
                f"base_url={_origin(url)!r}: plain http to a non-loopback host would send prompts (and the "
                "API key) unencrypted; use https, or pass allow_http=True for a trusted private network"
            )

    @property
    def url(self) -> str:
        base = self.base_url.rstrip("/")
        return base if base.endswith("/chat/completions") else base + "/chat/completions"

    @property
    def display_url(self) -> str:
        """The endpoint for messages and logs: origin and path, no query string."""
        return _origin(self.url) + urllib.parse.urlsplit(self.url).path

    def payload(self, messages: Sequence[Message]) -> dict[str, Any]:
        """The JSON request body for ``messages``."""
        body: dict[str, Any] = {"model": self.model, "messages": [dict(m) for m in messages]}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        body.update(self.extra_body)
        return body

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise ConfigError(
                    f"the API key environment variable {self.api_key_env} is not set; export it "
                    "or set api_key_env to None for a server that needs no key"
                )
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def complete(self, messages: Sequence[Message]) -> str:
        """The assistant message text for ``messages`` (from the cache when present)."""
        body = self.payload(messages)
        key = request_key(body)
        cache = self.cache if isinstance(self.cache, ResponseCache) else None
        if cache is not None:
            hit = cache.get(key)
            if hit is not None:
                self.stats.cache_hits += 1
                return hit
        content = self._post(body)
        if cache is not None:
            cache.put(key, content, self.model)
        return content

    def _wait(self, attempt: int, retry_after: str | None) -> float:
        if retry_after:
            try:
                return min(self.max_backoff, max(0.0, float(retry_after)))
            except ValueError:
                pass
        return min(self.max_backoff, self.backoff * (2**attempt))

    def _post(self, body: dict[str, Any]) -> str:
        data = json.dumps(body).encode()
        headers = self._headers()
        last = ""
        for attempt in range(self.max_retries + 1):
            retry_after = None
            req = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            self.stats.requests += 1
            try:
                with _OPENER.open(req, timeout=self.timeout) as resp:
                    raw = resp.read()
                return self._content(raw)
            except urllib.error.HTTPError as e:
                detail = e.read()[:300].decode("utf-8", "replace") if e.fp else ""
                if e.code not in _RETRY_STATUS and e.code < 500:
                    raise LLMError(
                        f"{self.display_url}: HTTP {e.code} {e.reason}: {detail.strip()!r} (not retried; "
                        "check the model name, the API key and the request)"
                    ) from e
                retry_after = e.headers.get("Retry-After") if e.headers else None
                last = f"HTTP {e.code} {e.reason}"
            except TimeoutError as e:
                last = f"timed out after {self.timeout} s ({e})"
            except urllib.error.URLError as e:
                if isinstance(e.reason, (TimeoutError, socket.timeout)):
                    last = f"timed out after {self.timeout} s"
                else:
                    last = f"connection failed ({e.reason})"
            except (ConnectionError, http.client.HTTPException) as e:
                last = f"connection failed ({type(e).__name__}: {e})"
            if attempt < self.max_retries:
                wait = self._wait(attempt, retry_after)
                self.stats.retries += 1
                log.warning(
                    "%s: %s; retry %d/%d in %.2f s", self.display_url, last, attempt + 1, self.max_retries, wait
                )
                self.sleep(wait)
        raise LLMError(f"{self.display_url}: {last}; gave up after {self.max_retries + 1} attempts")

    def _content(self, raw: bytes) -> str:
        try:
            obj = json.loads(raw)
            content = obj["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise LLMError(
                f"{self.display_url}: the response is not a chat completion (expected JSON with "
                f"choices[0].message.content): {raw[:200]!r}"
            ) from e
        if not isinstance(content, str):
            raise LLMError(f"{self.display_url}: choices[0].message.content is not a string: {content!r}")
        return content
