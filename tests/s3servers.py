"""S3 servers for tests, started on 127.0.0.1 on a free port and stopped by pid: moto
(``moto[server]``) and the npm package s3rver (installed with npm into
``~/.cache/adaptlab-test/s3rver`` on first use; the test is skipped with the reason when npm or the
install is missing). Shared by the artifact, embedding-cache and storage tests."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

S3RVER_VERSION = "3.7.1"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _s3rver_exe() -> str:
    """The s3rver executable, installed with npm into the test cache on first use (bounded)."""
    folder = Path(os.environ.get("ADAPTLAB_TEST_CACHE") or Path.home() / ".cache" / "adaptlab-test") / "s3rver"
    exe = folder / "node_modules" / ".bin" / "s3rver"
    if exe.is_file():
        return str(exe)
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: the s3rver tests need Node.js and npm")
    folder.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run(
            ["npm", "install", "--prefix", str(folder), "--no-audit", "--no-fund", f"s3rver@{S3RVER_VERSION}"],
            check=True,
            timeout=300,
            capture_output=True,
        )
    except (subprocess.SubprocessError, OSError) as e:
        pytest.skip(f"npm install s3rver@{S3RVER_VERSION} failed: {type(e).__name__}")
    return str(exe)


@dataclass
class Server:
    """One S3 server process of a test (stopped and killed by pid only) holding ``bucket``."""

    kind: str
    data: Path
    bucket: str
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None

    @property
    def env(self) -> dict[str, str]:
        """The AWS environment that points boto3 and pyarrow at this server."""
        key = "S3RVER" if self.kind == "s3rver" else "big-test-id"  # s3rver checks its fixed pair
        return {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{self.port}",
            "AWS_ACCESS_KEY_ID": key,
            "AWS_SECRET_ACCESS_KEY": "S3RVER" if self.kind == "s3rver" else "big-test-secret",
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
        }

    def start(self) -> Server:
        """Start (or restart, on the same port and data folder) and wait until it answers."""
        if self.kind == "moto":
            cmd = [
                shutil.which("moto_server") or pytest.skip("moto_server not installed: pip install 'moto[server]'"),
                "-H",
                "127.0.0.1",
                "-p",
                str(self.port),
            ]
        else:
            cmd = [_s3rver_exe(), "-d", str(self.data), "-a", "127.0.0.1", "-p", str(self.port), "--silent"]
        self.data.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait_ready(deadline=time.monotonic() + 60)
        client = self.client()
        if self.bucket not in {b["Name"] for b in client.list_buckets().get("Buckets", [])}:
            client.create_bucket(Bucket=self.bucket)
        return self

    def _wait_ready(self, deadline: float) -> None:
        while True:
            try:
                urllib.request.urlopen(self.env["AWS_ENDPOINT_URL"] + "/", timeout=1).close()
                return
            except urllib.error.HTTPError:  # it answers (s3rver: 403 for anonymous requests)
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    pytest.skip(f"{self.kind} did not start on port {self.port}")
                time.sleep(0.1)

    def client(self):  # noqa: ANN201 - a boto3 client
        import boto3

        env = self.env
        return boto3.client(
            "s3",
            endpoint_url=env["AWS_ENDPOINT_URL"],
            region_name="us-east-1",
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        )

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


@contextmanager
def running(kind: str, data: Path, bucket: str) -> Iterator[Server]:
    """A started server of ``kind`` holding ``bucket``, stopped on exit."""
    pytest.importorskip("boto3")
    srv = Server(kind, data, bucket)
    try:
        yield srv.start()
    finally:
        srv.stop()
