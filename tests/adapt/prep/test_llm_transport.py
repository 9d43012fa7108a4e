"""The LLM client never hands its key to another origin (issue 11, rows 4-5): redirects are
refused, plain http is loopback-only unless allowed, and URL credentials are refused without
being echoed. Servers are threads on 127.0.0.1 with OS-chosen ports; every wait is bounded."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from adaptlab.adapt.prep.llm import ChatClient, LLMError
from adaptlab.errors import ConfigError


class _Recorder:
    """An HTTP server that answers every request with ``status`` (and a Location for 3xx) and
    records the Authorization header it was sent."""

    def __init__(self, status: int, location: str | None = None) -> None:
        self.auth: list[str | None] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self):
                recorder.auth.append(self.headers.get("Authorization"))
                body = json.dumps({"choices": [{"message": {"content": "stolen"}}]}).encode()
                self.send_response(status)
                if location:
                    self.send_header("Location", location)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def servers():
    made: list[_Recorder] = []

    def make(status: int, location: str | None = None) -> _Recorder:
        made.append(_Recorder(status, location))
        return made[-1]

    yield make
    for s in made:
        s.close()


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_to_another_origin_is_refused_and_the_key_stays_home(servers, monkeypatch, status):
    monkeypatch.setenv("TEST_LLM_KEY", "sk-secret-value")
    other = servers(200)
    first = servers(status, location=f"{other.url}/v1/chat/completions")
    client = ChatClient(first.url + "/v1", "m", api_key_env="TEST_LLM_KEY", max_retries=0, timeout=5)
    with pytest.raises(LLMError, match="redirect") as err:
        client.complete([{"role": "user", "content": "hi"}])
    assert other.auth == []  # the second origin saw nothing, key or reply
    assert first.auth == ["Bearer sk-secret-value"]
    assert "sk-secret-value" not in str(err.value)


@pytest.mark.parametrize("url", ["http://api.example.com/v1", "http://10.0.0.5:8000/v1", "http://0.0.0.0/v1"])
def test_plain_http_off_loopback_needs_an_explicit_allow(url):
    with pytest.raises(ConfigError, match="plain http"):
        ChatClient(url, "m")
    assert ChatClient(url, "m", allow_http=True).url.startswith("http://")


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8000/v1", "http://localhost/v1", "http://[::1]:9/v1", "https://api.example.com/v1"]
)
def test_loopback_http_and_https_are_accepted(url):
    assert ChatClient(url, "m").url.endswith("/chat/completions")


@pytest.mark.parametrize(
    "url", ["https://alice:pw-123@api.example.com/v1", "http://user@127.0.0.1/v1", "https://:pw-123@h/v1"]
)
def test_credentials_in_the_url_are_refused_without_being_echoed(url):
    with pytest.raises(ConfigError, match="credentials") as err:
        ChatClient(url, "m")
    assert "pw-123" not in str(err.value) and "alice" not in str(err.value)


def test_errors_and_logs_show_no_query_string(servers, caplog):
    s = servers(503)
    client = ChatClient(s.url + "/v1?token=abc", "m", api_key_env=None, max_retries=1, timeout=5, sleep=lambda _: None)
    with caplog.at_level("WARNING"), pytest.raises(LLMError) as err:
        client.complete([{"role": "user", "content": "hi"}])
    assert "token=abc" not in str(err.value) and "token=abc" not in caplog.text
