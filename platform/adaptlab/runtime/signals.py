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

While Ray starts (:func:`sigterm_kept`, around ``ray.init``): a SIGTERM that reaches Ray's own
Python handler (``ray.init`` installs it first thing in the main thread) ends ``ray.init`` with
``SystemExit(15)``, which becomes :class:`Terminated` (before, exit status 15 and no line); and a
start in a background thread (:func:`adaptlab.runtime.start_ray`), where neither Python handler can
be set, gets the process's C-level SIGTERM action of before ``ray.init`` back with ``sigaction``
(Abseil's handler had replaced it: a native dump on the next SIGTERM). Only a SIGTERM inside
``ray.init`` after its core worker started and before it returns (well under a second) still meets
Abseil's handler.

A handler's exception can be lost: Python runs a pending signal's handler at the next bytecode
boundary, and when that is inside an at-fork callback (Ray forks its GCS and raylet; ``logging``
registers such callbacks), a weakref callback or ``__del__``, the exception is only reported as
"Exception ignored" (``sys.unraisablehook``). CI saw it once: a SIGTERM during ``ray.init`` lost
that way, and the command ran on. While :func:`catch_sigterm` is in force, our unraisable hook
takes such a :class:`Terminated` (or Ray's ``SystemExit(15)`` while Ray starts), prints nothing,
and delivers the signal to the main thread again (``_thread.interrupt_main``), where it raises at
the next ordinary boundary.
"""

from __future__ import annotations

import _thread
import ctypes
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

__all__ = [
    "TERMINATED_STATUS",
    "Terminated",
    "catch_sigterm",
    "raise_if_terminated",
    "reclaim_sigterm",
    "sigterm_kept",
    "sigterm_received",
]

TERMINATED_STATUS = 128 + signal.SIGTERM
"""Exit status of a command ended by SIGTERM (143)."""
_active = False
_received = False
_ray_starting = False  # inside sigterm_kept: Ray's handler may raise SystemExit(15)
_REDELIVER_S = 0.05
"""Delay before a swallowed SIGTERM is delivered again (:func:`_deliver_again`)."""
_SIGACTION_BYTES = 512
"""Room for the C library's ``struct sigaction`` (152 bytes with glibc on x86-64), copied as is."""


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
    hook_before = sys.unraisablehook
    _active, _received = True, False

    def unraisable(args: Any) -> None:  # sys.UnraisableHookArgs
        if _is_lost_sigterm(args.exc_value):
            _deliver_again()
        else:
            hook_before(args)

    sys.unraisablehook = unraisable

    def restore() -> None:
        global _active
        _active = False
        if sys.unraisablehook is unraisable:
            sys.unraisablehook = hook_before
        signal.signal(signal.SIGTERM, before if before is not None else signal.SIG_DFL)

    return restore


def _is_lost_sigterm(error: BaseException | None) -> bool:
    """Whether an exception Python could not raise (an at-fork callback's, a ``__del__``'s) is a
    SIGTERM: ours (:class:`Terminated`) or, while Ray starts, Ray's ``SystemExit(15)``."""
    if isinstance(error, Terminated):
        return True
    return _ray_starting and isinstance(error, SystemExit) and error.code == signal.SIGTERM


def _deliver_again() -> None:
    """A SIGTERM's exception was swallowed: record it, make our handler current (the first SIGTERM
    had set the default action) and have Python run it again in the main thread at its next
    boundary, which raises :class:`Terminated` there. The delivery comes from a short-lived thread
    after :data:`_REDELIVER_S`: from this hook the handler would run at once, inside the same
    callback; if it lands in one again, this hook runs again."""
    global _received
    _received = True
    if threading.current_thread() is threading.main_thread() and not callable(signal.getsignal(signal.SIGTERM)):
        signal.signal(signal.SIGTERM, _raise_terminated)
    timer = threading.Timer(_REDELIVER_S, _thread.interrupt_main, args=(signal.SIGTERM,))
    timer.daemon = True
    timer.start()


def raise_if_terminated() -> None:
    """Raise :class:`Terminated` if SIGTERM arrived while :func:`catch_sigterm` is in force: after
    work during which its exception may have been swallowed (see the module doc)."""
    if _active and _received:
        raise Terminated()


def reclaim_sigterm() -> None:
    """Install our SIGTERM handler again after Ray replaced it (see the module doc); a no-op
    unless :func:`catch_sigterm` is in force, no SIGTERM came yet (a second one ends the process)
    and this is the main thread."""
    if _active and not _received and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_terminated)


@contextmanager
def sigterm_kept() -> Iterator[None]:
    """Around ``ray.init``, in any thread: SIGTERM stays ours while and after Ray starts (see the
    module doc). Ray's ``SystemExit(15)`` becomes :class:`Terminated`; on the way out the C-level
    SIGTERM action of before is put back (a background start) and our handler reinstalled (the
    main thread). Does nothing unless :func:`catch_sigterm` is in force."""
    global _ray_starting
    saved = _c_sigterm_action() if _active else None
    starting, _ray_starting, received = _ray_starting, True, _received
    try:
        yield
    except SystemExit as e:
        if not (_active and e.code == signal.SIGTERM):
            raise
        _terminated_by_ray()
        raise Terminated() from None
    finally:
        _ray_starting = starting
        if saved is not None and not _received:
            _set_c_sigterm_action(saved)
        reclaim_sigterm()
    if _active and _received and not received and threading.current_thread() is threading.main_thread():
        _terminated_by_ray()  # a SIGTERM came while Ray started and its exception was swallowed
        raise Terminated()


def _terminated_by_ray() -> None:
    """Ray's handler took the SIGTERM (``sys.exit(15)``): count it as ours, and let a second one
    end the process at once."""
    global _received
    _received = True
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _libc() -> ctypes.CDLL | None:
    """The C library (``sigaction``), on Linux and macOS; None elsewhere."""
    if not sys.platform.startswith(("linux", "darwin")):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _c_sigterm_action() -> ctypes.Array | None:
    """The process's current C-level SIGTERM action (``sigaction(2)``, an opaque copy); None when
    it cannot be read."""
    libc = _libc()
    if libc is None:
        return None
    buf = ctypes.create_string_buffer(_SIGACTION_BYTES)
    return buf if libc.sigaction(int(signal.SIGTERM), None, buf) == 0 else None


def _set_c_sigterm_action(action: ctypes.Array) -> None:
    """Make ``action`` (from :func:`_c_sigterm_action`) the process's SIGTERM action again."""
    libc = _libc()
    if libc is not None:
        libc.sigaction(int(signal.SIGTERM), action, None)
