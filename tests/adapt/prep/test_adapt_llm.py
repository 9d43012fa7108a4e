"""The chat-completions client and LLM question generator against a local HTTP server.

The server (a thread on 127.0.0.1, port chosen by the OS) speaks the OpenAI chat-completions
protocol, can fail the first N requests with a given status or stall past the client's
time-out, and records what it received. Every wait is bounded: client time-outs are under a
second and retry back-off sleeps are recorded instead of slept.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from adaptlab.adapt.prep.chunking import Chunk
from adaptlab.adapt.prep.llm import ChatClient, LLMError, ResponseCache
from adaptlab.adapt.prep.questions import LLMQuestionGenerator
from adaptlab.errors import ConfigError


class FakeChatServer:
    def __init__(self) -> None:
        self.fail_first = 0
        self.fail_status = 503
        self.stall_first = 0
        self.stall_seconds = 0.0
        self.retry_after: str | None = None
        self.status_always: int | None = None
        self.reply: str | None = None
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    server.requests.append(body)
                    server.headers.append(dict(self.headers))
                    n = len(server.requests)
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": "no such path"})
                if server.status_always is not None:
                    return self._send(server.status_always, {"error": {"message": "bad model"}})
                if n <= server.stall_first:
                    time.sleep(server.stall_seconds)
                    return self._send(200, {"late": True})
                if n <= server.stall_first + server.fail_first:
                    extra = {"Retry-After": server.retry_after} if server.retry_after else {}
                    return self._send(server.fail_status, {"error": "busy"}, extra)
                chunk = body["messages"][-1]["content"].rsplit("Passage:\n", 1)[-1].strip()
                word = chunk.split()[0]
                content = (
                    server.reply
                    if server.reply is not None
                    else json.dumps(
                        {
                            "questions": [
                                f"What about {word}?",
                                f"Why {word}?",
                                f"Where is {word}?",
                                f"Who said {word}?",
                            ],
                            "answers": ["a1", "a2", "a3", "a4"],
                        }
                    )
                )
                message = {"role": "assistant", "content": content}
                self._send(200, {"choices": [{"message": message}]})

            def _send(self, status, obj, headers=None):
                data = json.dumps(obj).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def server():
    s = FakeChatServer()
    yield s
    s.close()


def _client(server, tmp_path=None, **kw):
    sleeps: list[float] = []
    kw.setdefault("api_key_env", None)
    kw.setdefault("timeout", 2.0)
    client = ChatClient(
        server.url,
        "fake-model",
        backoff=0.5,
        max_backoff=4.0,
        sleep=sleeps.append,
        cache=None if tmp_path is None else tmp_path / "cache.sqlite",
        **kw,
    )
    return client, sleeps


CHUNKS = [Chunk(f"d{i}#c0", f"d{i}", 0, f"Topic{i} is described in this chunk.", 0, 10, 9) for i in range(3)]


def test_generator_parses_questions_and_caches(server, tmp_path):
    client, _ = _client(server, tmp_path)
    gen = LLMQuestionGenerator(client, n_per_chunk=2)
    qs = gen.generate(CHUNKS)
    assert [q.id for q in qs] == [f"d{i}#c0#q{j}" for i in range(3) for j in range(2)]
    assert qs[0].text == "What about Topic0?" and qs[0].answer == "a1"
    assert qs[0].generator == "llm:fake-model" and qs[0].doc_id == "d0" and qs[0].removed is None
    assert len(server.requests) == 3
    body = server.requests[0]
    assert body["model"] == "fake-model" and body["temperature"] == 0.0
    assert body["messages"][0]["role"] == "system"
    assert "Topic0 is described in this chunk." in body["messages"][1]["content"]
    assert "up to 2 different questions" in body["messages"][1]["content"]
    # a rerun, even with a new client on the same cache file, sends nothing
    client2, _ = _client(server, tmp_path)
    assert LLMQuestionGenerator(client2, n_per_chunk=2).generate(CHUNKS) == qs
    assert len(server.requests) == 3
    assert client2.stats.cache_hits == 3 and client2.stats.requests == 0
    # a different prompt is a different request
    other = LLMQuestionGenerator(client2, n_per_chunk=2, prompt="Ask about: {chunk}")
    other.generate(CHUNKS[:1])
    assert len(server.requests) == 4


def test_retries_on_5xx_and_429_with_backoff(server):
    server.fail_first = 3
    client, sleeps = _client(server)
    reply = client.complete([{"role": "user", "content": "Passage:\nHello there"}])
    assert "Hello" in reply
    assert len(server.requests) == 4 and client.stats.retries == 3
    assert sleeps == [0.5, 1.0, 2.0]

    server.requests.clear()
    server.fail_first, server.fail_status, server.retry_after = 1, 429, "3"
    client, sleeps = _client(server)
    client.complete([{"role": "user", "content": "Passage:\nAgain"}])
    assert sleeps == [3.0] and len(server.requests) == 2


def test_gives_up_after_max_retries(server):
    server.fail_first = 100
    client, sleeps = _client(server, max_retries=2)
    with pytest.raises(LLMError, match="HTTP 503.*gave up after 3 attempts"):
        client.complete([{"role": "user", "content": "x"}])
    assert len(server.requests) == 3 and sleeps == [0.5, 1.0]


def test_timeout_is_retried(server):
    server.stall_first, server.stall_seconds = 1, 1.0
    client, sleeps = _client(server, timeout=0.2)
    t0 = time.monotonic()
    reply = client.complete([{"role": "user", "content": "Passage:\nLate"}])
    assert "Late" in reply
    assert client.stats.retries == 1 and len(sleeps) == 1
    assert time.monotonic() - t0 < 5


def test_client_errors_are_not_retried(server):
    server.status_always = 400
    client, sleeps = _client(server)
    with pytest.raises(LLMError, match="HTTP 400.*bad model.*not retried"):
        client.complete([{"role": "user", "content": "x"}])
    assert len(server.requests) == 1 and sleeps == []


def test_connection_refused_is_retried_then_fails():
    client = ChatClient(
        "http://127.0.0.1:9/v1", "m", api_key_env=None, max_retries=1, timeout=1.0, sleep=lambda s: None
    )
    with pytest.raises(LLMError, match="connection failed"):
        client.complete([{"role": "user", "content": "x"}])
    assert client.stats.requests == 2


def test_api_key_from_named_environment_variable(server, monkeypatch):
    monkeypatch.setenv("ADAPTLAB_TEST_KEY", "sk-test-123")
    client, _ = _client(server, api_key_env="ADAPTLAB_TEST_KEY")
    client.complete([{"role": "user", "content": "Passage:\nKey"}])
    assert server.headers[0]["Authorization"] == "Bearer sk-test-123"
    monkeypatch.delenv("ADAPTLAB_TEST_KEY")
    with pytest.raises(ConfigError, match="ADAPTLAB_TEST_KEY is not set"):
        client.complete([{"role": "user", "content": "Passage:\nOther"}])


def test_unparseable_and_malformed_replies(server):
    server.reply = "I cannot help with that."
    client, _ = _client(server)
    assert LLMQuestionGenerator(client).generate(CHUNKS[:1]) == []
    server.reply = "1. First question?\n2) Second question?\nSome remark."
    assert [q.text for q in LLMQuestionGenerator(client).generate(CHUNKS[1:2])] == [
        "First question?",
        "Second question?",
    ]


def test_configuration_errors(tmp_path):
    with pytest.raises(ConfigError, match="base_url"):
        ChatClient("localhost:8000", "m")
    with pytest.raises(ConfigError, match=r"\{chunk\}"):
        LLMQuestionGenerator(ChatClient("https://x/v1", "m"), prompt="no placeholder")
    cache = ResponseCache(tmp_path / "c.sqlite")
    cache.put("k", "v", "m")
    assert cache.get("k") == "v" and cache.get("other") is None and len(cache) == 1
