"""SIGTERM handled like SIGINT: the signal schedulers, ``docker stop`` and ``kill`` send.

Python turns SIGINT into :class:`KeyboardInterrupt`; :func:`catch_sigterm` makes SIGTERM raise
:class:`Terminated`, a subclass, so the same ``finally`` blocks and ``except KeyboardInterrupt``
clean-ups run, and the CLI ends with one line and status 143 (128 + 15, as a shell reports a
process ended by SIGTERM; POSIX, Shell Command Language, section 2.8.2).

Ray takes SIGTERM over when it starts (measured with Ray 2.60): ``ray.init`` in the main thread
installs a Python handler that calls ``sys.exit(15)``, and the driver's core worker installs
Abseil's failure-signal handler, which prints a native stack dump ("*** SIGTERM received at
time=...") and aborts with status 134. :func:`reclaim_sigterm` puts our handler back (at the C
level too: ``signal.signal`` replaces the process's handler); :func:`adaptlab.runtime.init_ray`
calls it once Ray is up. A second SIGTERM during the clean-up ends the process at once.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType

__all__ = ["TERMINATED_STATUS", "Terminated", "catch_sigterm", "reclaim_sigterm", "sigterm_received"]

TERMINATED_STATUS = 128 + signal.SIGTERM
"""Exit status of a command ended by SIGTERM (143)."""
_active = False
_received = False


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived; raised in the main thread where SIGINT raises KeyboardInterrupt."""


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    global _received
    _received = True
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once
    raise Terminated()


def sigterm_received() -> bool:
    """Whether SIGTERM arrived since :func:`catch_sigterm`: a ``KeyboardInterrupt`` that is not a
    :class:`Terminated` may still come from it, because ``ray.get`` replaces whatever a signal
    handler raised while it waits by a plain ``KeyboardInterrupt`` (Ray 2.60)."""
    return _received


def catch_sigterm() -> Callable[[], None]:
    """Make SIGTERM raise :class:`Terminated` in this process's main thread; returns a function
    that puts the previous handler back. Outside the main thread it does nothing (Python allows
    signal handlers only there)."""
    global _active, _received
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    before = signal.signal(signal.SIGTERM, _raise_terminated)
    _active, _received = True, False

    def restore() -> None:
        global _active
        _active = False
        signal.signal(signal.SIGTERM, before if before is not None else signal.SIG_DFL)

    return restore


def reclaim_sigterm() -> None:
    """Install our SIGTERM handler again after Ray replaced it (see the module doc); a no-op
    unless :func:`catch_sigterm` is in force and this is the main thread."""
    if _active and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_terminated)
