"""Graceful drain: on SIGTERM, leave the load balancer's rotation before closing the listener.

A load balancer learns that a node is going only from its health checks. If the server closed its
listener at SIGTERM, every request the balancer sent in the next check interval would be refused.
So with `TENK_DRAIN_S` > 0, `tenk serve` does not exec the server but supervises it:

1. SIGTERM arrives: `/ready` answers 503 from now on (the flag file below), while the server keeps
   serving in-flight and new requests as before;
2. `TENK_DRAIN_S` later (long enough for the balancer to have marked the node down), the server gets
   SIGTERM itself: it closes the listener and finishes the requests in flight (granian, uvicorn and
   gunicorn all do), then exits, and so do we, with its exit code.

Why a file: the server may run several worker processes, each with its own `/ready`; a file the
supervisor creates is seen by all of them, whatever server runs them, at the cost of one `stat` per
readiness check (the balancer's, a few per second).

With `TENK_DRAIN_S` = 0 (the default: nothing in front of a single node to tell), `tenk serve`
execs the server as before, and signals reach it directly.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import FrameType

logger = logging.getLogger("tenk.ops.drain")

# Set by the supervisor for the server it starts; never by the user.
DRAIN_FILE_ENV = "TENK_DRAIN_FILE"
_POLL_S = 0.05
_PR_SET_PDEATHSIG = 1


def draining() -> bool:
    """Whether this server's supervisor received SIGTERM (so `/ready` must send the balancer away)."""
    path = os.environ.get(DRAIN_FILE_ENV)
    return bool(path) and os.path.exists(path)  # type: ignore[arg-type]


def _die_with_parent() -> None:
    # Should the supervisor be SIGKILLed, the server must not live on holding the port (Linux only).
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def serve_draining(argv: list[str], drain_s: float) -> int:
    """Run the server `argv` until it exits; on SIGTERM, drain for `drain_s` before passing it on.

    Returns the server's exit code (128 + signal number when a signal ended it).
    """
    flag_dir = Path(tempfile.mkdtemp(prefix="tenk-drain-"))
    flag = flag_dir / "draining"
    received: list[int] = []

    def remember(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    # Before the server starts, so that a SIGTERM sent at once is not lost.
    previous = {sig: signal.signal(sig, remember) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        # Its own process group: a Ctrl-C reaches it once, through us, not twice (uvicorn quits hard
        # on a second SIGINT).
        server = subprocess.Popen(
            argv, env={**os.environ, DRAIN_FILE_ENV: str(flag)}, process_group=0, preexec_fn=_die_with_parent
        )
        drain_until: float | None = None
        passed_on = False
        while True:
            try:
                code = server.wait(_POLL_S)
            except subprocess.TimeoutExpired:
                pass
            else:
                return code if code >= 0 else 128 - code
            if signal.SIGINT in received and not passed_on:
                # Ctrl-C means now: no drain.
                server.send_signal(signal.SIGINT)
                passed_on = True
            if signal.SIGTERM in received and drain_until is None:
                flag.touch()
                drain_until = time.monotonic() + drain_s
                logger.warning("SIGTERM: /ready answers 503; serving on for %.1fs before closing", drain_s)
            if drain_until is not None and not passed_on and time.monotonic() >= drain_until:
                server.send_signal(signal.SIGTERM)
                passed_on = True
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        shutil.rmtree(flag_dir, ignore_errors=True)
