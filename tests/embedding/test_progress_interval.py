"""``ADAPTLAB_PROGRESS_INTERVAL`` for embedding progress: read through storage.env.env_number, so a
bad value is one line naming the variable, while 0 (a line at every update) stays allowed."""

from __future__ import annotations

import io

import pytest

from adaptlab.errors import ConfigError
from adaptlab.runtime.progress import PROGRESS_INTERVAL, PROGRESS_INTERVAL_ENV, Progress


@pytest.mark.parametrize(("raw", "expected"), [("2.5", 2.5), ("0", 0.0), (" ", PROGRESS_INTERVAL)])
def test_interval_from_the_environment(monkeypatch, raw, expected):
    monkeypatch.setenv(PROGRESS_INTERVAL_ENV, raw)
    with Progress(10, "embedding", stream=io.StringIO(), enabled=False) as bar:
        assert bar.interval == expected


@pytest.mark.parametrize("raw", ["soon", "-1", "nan"])
def test_a_bad_interval_is_one_line_naming_the_variable(monkeypatch, raw):
    monkeypatch.setenv(PROGRESS_INTERVAL_ENV, raw)
    with pytest.raises(ConfigError) as info:
        Progress(10, "embedding", stream=io.StringIO(), enabled=False)
    message = str(info.value)
    assert message.startswith(f"${PROGRESS_INTERVAL_ENV}={raw!r}") and "non-negative number" in message
    assert "\n" not in message


def test_zero_gives_a_line_at_every_update(monkeypatch):
    monkeypatch.setenv(PROGRESS_INTERVAL_ENV, "0")
    out = io.StringIO()
    with Progress(3, "embedding 3 documents", stream=out, enabled=True) as bar:
        bar.update(1)
        bar.update(1)
    lines = out.getvalue().splitlines()
    assert all(line.startswith("[adaptlab] embedding 3 documents: ") for line in lines), lines
    assert [ln.split(": ", 1)[1].split(" ")[0] for ln in lines] == ["1/3", "2/3", "2/3"]
