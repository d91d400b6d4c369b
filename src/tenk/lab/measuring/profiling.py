"""The target's stacks, sampled while a measured step runs (`tenk lab run --profile`).

py-spy reads the stacks of the target's whole process tree (`--subprocesses`: the workers too) from
outside, at a stated rate, without pausing the target (`--nonblocking`). It keeps only the samples of a
thread holding the GIL (`--gil`): an event loop waiting in `epoll_wait` has released it, so waiting is left
out, and what remains is Python running, or native code it called that holds the GIL. py-spy's own idle
detection is no substitute: without pausing the target it guesses from the stack, and with pausing it
reads a waiting loop as running, either way an idle server's wait becomes its widest frame.

It runs on the generator's CPUs, never on the target's, and writes its samples collapsed
(`--format raw`: one line per distinct stack, root first, and its count; `--nolineno`, so that a
function is one frame whatever line it was on). `results.profiles` merges each rung's files into its
flame graph.

py-spy needs ptrace on the target (root, or CAP_SYS_PTRACE, or the same user where the kernel's
`yama/ptrace_scope` allows it). When it cannot attach, the step runs all the same and the rung says why
it has no profile.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from tenk.lab.cpus import pinned

DEFAULT_RATE_HZ = 100
# How long py-spy gets to write its file once told to stop, before it is killed.
STOP_TIMEOUT_S = 15.0
STACKS_FILE = "stacks.txt"


def py_spy_binary() -> str | None:
    """py-spy beside this interpreter (the `lab` extra installs it there), else on PATH."""
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


class StackSampler:
    """py-spy recording `pid`'s process tree into `folder/stacks.txt` while the `with` block runs.

    After the block, `stacks` is the file (None without one) and `missing` says why there is none."""

    def __init__(self, pid: int, folder: Path, rate_hz: int, cpus: str | None) -> None:
        self.pid, self.rate_hz, self.cpus = pid, rate_hz, cpus
        self.out = folder / STACKS_FILE
        self.log = folder / "py-spy.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.stacks: Path | None = None
        self.missing = ""
        # py-spy's own CPU seconds (on the generator's cores) and the seconds it ran, read as it stops.
        self.cpu_s = 0.0
        self.wall_s = 0.0
        self.started = 0.0

    def argv(self, binary: str) -> list[str]:
        return pinned(
            [
                binary, "record", "--pid", str(self.pid), "--subprocesses", "--gil", "--nonblocking", "--nolineno",
                "--format", "raw", "--rate", str(self.rate_hz), "--output", str(self.out),
            ],
            self.cpus,
        )  # fmt: skip

    def __enter__(self) -> StackSampler:
        binary = py_spy_binary()
        if binary is None:
            self.missing = "py-spy is not installed (the `lab` extra installs it)"
            return self
        self.out.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(self.argv(binary), stdout=log, stderr=subprocess.STDOUT)
        self.started = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            self.wall_s = time.monotonic() - self.started
            try:
                times = psutil.Process(process.pid).cpu_times()
                self.cpu_s = times.user + times.system
            except psutil.Error:
                pass
            # py-spy writes its file on SIGINT, as on Ctrl-C.
            process.send_signal(signal.SIGINT)
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self.out.exists() and self.out.stat().st_size > 0:
            self.stacks = self.out
        else:
            self.missing = self.why_none(process.returncode)

    def why_none(self, returncode: int | None) -> str:
        """The reason py-spy gave (its last line of output), with the ptrace hint where that is the cause."""
        said = [line.strip() for line in self.log.read_text(errors="replace").splitlines() if line.strip()]
        reason = said[-1] if said else f"py-spy exited with {returncode} and wrote no samples"
        if "permission" in reason.lower() or "ptrace" in reason.lower():
            return f"py-spy could not attach to the target: {reason} (it needs ptrace: root or CAP_SYS_PTRACE)"
        return f"py-spy wrote no samples: {reason}"
