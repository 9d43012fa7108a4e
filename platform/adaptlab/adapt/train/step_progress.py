"""Progress lines of a training run: a line on stderr (``[adaptlab] ...``, like the embedding
progress lines; off with ``adaptlab --quiet`` or ``ADAPTLAB_PROGRESS=0``) when training starts, at
least every :data:`~adaptlab.runtime.progress.PROGRESS_INTERVAL` seconds
(``ADAPTLAB_PROGRESS_INTERVAL``) with step/steps, the loss and the time left, and when it ends.
One optimizer step that runs longer than that is not silent either: a
:class:`~adaptlab.runtime.progress.Heartbeat` around it prints ``training LABEL: step 12/40
running (15 s), last loss 0.4312`` at the interval (a thread that only prints; the step's numbers
are those of a run without it).
"""

from __future__ import annotations

import logging
import sys
import time

from adaptlab.runtime.progress import Heartbeat, note_line, progress_enabled, progress_interval

__all__ = ["StepProgress"]

log = logging.getLogger(__name__)


def _eta(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


class StepProgress:
    """Progress lines of one run (module docstring): ``[adaptlab] label: step 12/40, loss 1.2345,
    0.8 s/step, about 22 s left`` on stderr, the channel of the embedding progress lines
    (:class:`adaptlab.runtime.progress.Progress`, whose clock they share): shown by default, off
    with ``adaptlab --quiet`` or ``ADAPTLAB_PROGRESS=0`` (then logged at DEBUG only).
    :meth:`running` gives the heartbeat of one step."""

    def __init__(self, label: str, total: int, start: int, interval: float | None = None) -> None:
        self.label, self.total, self.start = label, int(total), int(start)
        self.interval = progress_interval(interval)
        self.enabled = progress_enabled()
        self.t0 = self.last = time.perf_counter()
        resumed = f", resumed from step {start}" if start else ""
        self._emit(f"{label}: training {total} step(s){resumed}")

    def _emit(self, text: str) -> None:
        """One line on stderr (looked up now) when progress is on, else at DEBUG."""
        if not self.enabled:
            log.debug("%s", text)
            return
        try:
            print(f"[adaptlab] {text}", file=sys.stderr, flush=True)
        except (OSError, ValueError):  # a closed stream must not break training
            self.enabled = False
        note_line()  # the next heartbeat line is due one interval after this one

    def running(self, step: int, losses: list[float]) -> Heartbeat:
        """The heartbeat of step ``step`` (0-based) while it runs: ``[adaptlab] training LABEL:
        step 12/40 running (15 s), last loss 0.4312`` every interval once the step outlasts it
        (no closing line: :meth:`update` reports the step). Its thread only prints."""
        last = f", last loss {losses[-1]:.4f}" if losses else ""
        return Heartbeat(
            f"training {self.label}: step {step + 1}/{self.total} running",
            detail=last,
            interval=self.interval,
            enabled=self.enabled,
            done_line=False,
        )

    def update(self, done: int, loss: float) -> None:
        """A line when ``interval`` seconds have passed since the last one."""
        now = time.perf_counter()
        if now - self.last < self.interval or done >= self.total:
            return
        self.last = now
        per_step = (now - self.t0) / max(1, done - self.start)
        self._emit(
            f"{self.label}: step {done}/{self.total}, loss {loss:.4f}, {per_step:.2f} s/step, "
            f"about {_eta(per_step * (self.total - done))} left"
        )

    def close(self, loss: float | None) -> None:
        """The closing line: steps, time taken and the last loss."""
        elapsed = time.perf_counter() - self.t0
        last = f", last loss {loss:.4f}" if loss is not None else ""
        self._emit(f"{self.label}: {self.total}/{self.total} step(s) done in {_eta(elapsed)}{last}")
