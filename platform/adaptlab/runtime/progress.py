"""Progress lines of long work, for every layer above this one (embedding, training, the study).

:class:`Progress` counts items: on a terminal a tqdm bar; when stderr is not a terminal (a log
file, a Ray job's logs) a line at least every :data:`PROGRESS_INTERVAL` seconds with done/total,
the rate and the time left (a heartbeat line "still working" while a block runs longer than
that), and a last line when the work took longer than that. A step with nothing to count (an
encoder loading, one long optimizer step) gets :class:`Heartbeat` lines at the same interval
instead. The clock is shared by the whole process: a line that follows a step within the
interval is due one interval after the previous step's last line (:func:`note_line` records a
line printed elsewhere, e.g. a training step line), so the promise holds across steps too.
``adaptlab --quiet`` (:func:`set_progress`) or ``ADAPTLAB_PROGRESS=0`` turns all of it off;
``ADAPTLAB_PROGRESS_INTERVAL`` sets the interval (:func:`progress_interval`).

The heartbeat threads only print (and read the clock): they never touch the work's objects, so
the numbers of the work are those of a run without them.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

from adaptlab.storage.env import env_number

__all__ = [
    "PROGRESS_INTERVAL",
    "PROGRESS_INTERVAL_ENV",
    "Heartbeat",
    "Progress",
    "note_line",
    "progress_enabled",
    "progress_interval",
    "set_progress",
]

PROGRESS_INTERVAL = 5.0
"""Seconds between progress lines when stderr is not a terminal (``ADAPTLAB_PROGRESS_INTERVAL``)."""

PROGRESS_INTERVAL_ENV = "ADAPTLAB_PROGRESS_INTERVAL"

_PROGRESS: dict[str, bool | None] = {"enabled": None}


def set_progress(enabled: bool | None) -> None:
    """Turn progress output on or off for this process (None: the default, on unless
    ``ADAPTLAB_PROGRESS=0``)."""
    _PROGRESS["enabled"] = enabled


def progress_enabled() -> bool:
    """Whether progress lines and bars are shown (see :func:`set_progress`)."""
    if _PROGRESS["enabled"] is not None:
        return bool(_PROGRESS["enabled"])
    return os.environ.get("ADAPTLAB_PROGRESS", "1").strip().lower() not in ("0", "false", "no", "off")


_LAST_LINE: dict[str, float | None] = {"at": None}


def note_line(at: float | None = None) -> None:
    """Record that a progress line was printed at ``at`` (``time.perf_counter()``, default now) by
    code outside this module, so the next :class:`Progress` or :class:`Heartbeat` line is due one
    interval after it."""
    _LAST_LINE["at"] = time.perf_counter() if at is None else at


def _clock_start(t0: float, interval: float) -> float:
    """Where a new progress clock starts: the last progress line of this process when it came less
    than ``interval`` before ``t0`` (the next line is then due one interval after it, across steps),
    else ``t0`` (a short step after a quiet spell prints nothing)."""
    last = _LAST_LINE["at"]
    return last if last is not None and 0 <= t0 - last < interval else t0


def _until_due(last: float, interval: float) -> float:
    """Seconds a heartbeat sleeps: until the next line is due (``last + interval``), at least 50 ms."""
    return max(0.05, last + interval - time.perf_counter())


def _seconds(t: float) -> str:
    t = max(0.0, t)
    if t < 90:
        return f"{t:.0f} s"
    if t < 5400:
        return f"{t / 60:.1f} min"
    return f"{t / 3600:.1f} h"


class Progress:
    """Progress of ``total`` items: a tqdm bar on a terminal, else a line at least every
    ``interval`` seconds (``[adaptlab] WHAT: done/total (pct), rate/s, about T left``) on
    ``stream`` (default ``sys.stderr``, looked up when created), whatever the size of the steps.

    Lines come from :meth:`update` when work finishes, and from a heartbeat thread when nothing
    finished for ``interval`` seconds (a long block, an actor loading its model):
    ``[adaptlab] WHAT: done/total (pct), still working, N s since the last progress``, or what it
    waits for instead of "still working" (:meth:`set_state`, e.g. "waiting for capacity"). The
    heartbeat stops at :meth:`close` (or when everything is done)."""

    def __init__(
        self,
        total: int,
        what: str,
        *,
        unit: str = "texts",
        interval: float | None = None,
        stream: Any = None,
        enabled: bool | None = None,
    ) -> None:
        self.total, self.what, self.unit = int(total), what, unit
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.interval = progress_interval(interval)
        self.enabled = progress_enabled() if enabled is None else enabled
        self.t0 = self.moved = time.perf_counter()
        self.last = _clock_start(self.t0, self.interval)
        self.printed = False
        self.state: str | None = None
        """What the work waits for, shown in heartbeat lines instead of "still working"."""
        self.bar: Any = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        if self.enabled and self.total > 0 and _isatty(self.stream):
            try:
                from tqdm.auto import tqdm

                self.bar = tqdm(total=self.total, desc=what, unit=unit, file=self.stream, leave=False)
            except ImportError:  # pragma: no cover - tqdm is a dependency
                self.bar = None
        if self.enabled and self.total > 0 and self.bar is None and self.interval > 0:
            self._beat = threading.Thread(target=self._heartbeat, name="adaptlab-progress", daemon=True)
            self._beat.start()

    def update(self, n: int) -> None:
        with self._lock:
            self.done += int(n)
            self.moved = time.perf_counter()
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(int(n))
            return
        now = time.perf_counter()
        if now - self.last >= self.interval and self.done < self.total:
            self._line(now)

    def set_state(self, state: str | None) -> None:
        """Say what the work waits for (``"waiting for capacity"``) in the heartbeat lines while
        nothing moves; ``None``: back to "still working"."""
        self.state = state

    def _heartbeat(self) -> None:
        """Print a line whenever ``interval`` seconds passed without one (runs in a daemon thread)."""
        while not self._stop.wait(_until_due(self.last, self.interval)):
            now = time.perf_counter()
            if self.done >= self.total or not self.enabled:
                return
            if now - self.last >= self.interval:
                self._line(now, waiting=now - self.moved)

    def _text(self, now: float, final: bool, waiting: float | None) -> str:
        elapsed = now - self.t0
        rate = self.done / elapsed if elapsed > 0 else 0.0
        if final:
            return f"[adaptlab] {self.what}: {self.done}/{self.total} {self.unit} in {_seconds(elapsed)} ({rate:.1f}/s)"
        pct = 100.0 * self.done / self.total if self.total else 100.0
        head = f"[adaptlab] {self.what}: {self.done}/{self.total} {self.unit} ({pct:.0f}%)"
        if waiting is not None and waiting >= self.interval:
            since = "since the start" if self.done == 0 else "since the last progress"
            return f"{head}, {self.state or 'still working'}, {_seconds(waiting)} {since}"
        left = (self.total - self.done) / rate if rate > 0 else float("nan")
        eta = f"about {_seconds(left)} left" if rate > 0 else "time left unknown"
        return f"{head}, {rate:.1f}/s, {eta}"

    def _line(self, now: float, final: bool = False, waiting: float | None = None) -> None:
        with self._lock:
            self.last = _LAST_LINE["at"] = now
            text = self._text(now, final, waiting)
            try:
                print(text, file=self.stream, flush=True)
            except (OSError, ValueError):  # a closed stream must not break the work
                self.enabled = False
            self.printed = True

    def close(self) -> None:
        self._stop.set()
        if self._beat is not None and self._beat is not threading.current_thread():
            self._beat.join(timeout=2.0)
        if self.bar is not None:
            self.bar.close()
            self.bar = None
            return
        if self.enabled and (self.printed or time.perf_counter() - self.t0 >= self.interval):
            self._line(time.perf_counter(), final=True)
        self.enabled = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Heartbeat:
    """Lines while a step with nothing to count runs (an encoder loading in this process, one
    optimizer step): ``[adaptlab] WHAT (N s)DETAIL`` every ``interval`` seconds on ``stream``
    (default ``sys.stderr``), on the clock :class:`Progress` uses, and, with ``done_line``,
    ``[adaptlab] WHAT: done in N s`` at the end if it printed anything (a caller that reports the
    step's end itself passes ``done_line=False``). A step shorter than the interval prints
    nothing, unless the last progress line came less than an interval before it started (the next
    line is due then). Use it as a context manager."""

    def __init__(
        self,
        what: str,
        *,
        interval: float | None = None,
        stream: Any = None,
        enabled: bool | None = None,
        detail: str = "",
        done_line: bool = True,
    ) -> None:
        self.what, self.detail, self.done_line = what, detail, done_line
        self.stream = stream if stream is not None else sys.stderr
        self.interval = progress_interval(interval)
        self.enabled = progress_enabled() if enabled is None else enabled
        self.t0 = self.last = time.perf_counter()
        self.printed = False
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def __enter__(self) -> Heartbeat:
        self.t0 = time.perf_counter()
        self.last = _clock_start(self.t0, self.interval)
        if self.enabled and self.interval > 0:
            self._beat = threading.Thread(target=self._run, name="adaptlab-heartbeat", daemon=True)
            self._beat.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(_until_due(self.last, self.interval)):
            now = time.perf_counter()
            if now - self.last >= self.interval:
                self._line(now, f"{self.what} ({_seconds(now - self.t0)}){self.detail}")

    def _line(self, now: float, text: str) -> None:
        self.last = _LAST_LINE["at"] = now
        try:
            print(f"[adaptlab] {text}", file=self.stream, flush=True)
        except (OSError, ValueError):  # a closed stream must not break the work
            self._stop.set()
        self.printed = True

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=2.0)
            self._beat = None
        if self.printed and self.done_line and exc[0] is None:
            now = time.perf_counter()
            self._line(now, f"{self.what}: done in {_seconds(now - self.t0)}")


def progress_interval(interval: float | None = None) -> float:
    """The seconds between progress lines: ``interval``, else ``ADAPTLAB_PROGRESS_INTERVAL`` (0: a line at every update; anything but a
    number >= 0 is one ConfigError line), else :data:`PROGRESS_INTERVAL` seconds."""
    if interval is not None:
        return float(interval)
    return env_number(PROGRESS_INTERVAL_ENV, PROGRESS_INTERVAL, unit="seconds", allow_zero=True)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
