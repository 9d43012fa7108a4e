"""``--address HOST:PORT`` without a scheme means the Jobs API over http, and fails fast."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from adaptlab.study.submit import jobs_address

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "given, expected",
    [
        ("127.0.0.1:8265", "http://127.0.0.1:8265"),
        (" head:8265 ", "http://head:8265"),
        ("https://ray.example.org", "https://ray.example.org"),
        ("http://127.0.0.1:8265", "http://127.0.0.1:8265"),
    ],
)
def test_jobs_address(given, expected):
    assert jobs_address(given) == expected


def test_unreachable_address_without_scheme_is_one_line_within_seconds():
    start = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "adaptlab",
            "submit",
            str(REPO / "jobs" / "quickstart.toml"),
            "--address",
            "127.0.0.1:9",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert lines[-1].startswith("adaptlab submit: error: --address http://127.0.0.1:9")
    assert "Traceback" not in done.stderr
    assert time.monotonic() - start < 25  # was ~40 s waiting for a GCS that is not there


def test_credentials_reach_the_client_but_never_a_message():
    """The address is passed to Ray's client as given (it may need the userinfo); every message
    about it is masked, the exception text Ray produces included."""
    from adaptlab.study.submit import _one_line

    address = "http://admin:S3cret-pw@head:8265"
    assert jobs_address(address) == address
    text = _one_line(RuntimeError(f"Failed to connect to Ray at address: {address}/api/version?token=abcd"))
    assert "S3cret-pw" not in text and "abcd" not in text and "admin:***@head:8265" in text
