"""The `tenk` command as a shell, a script or a CI runner starts it."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from harness.stack import VENV_BIN
from tenk.stack import free_port
from tests.stack.dev_runs import ignore_sigint

# Enough rows that seeding takes seconds, so that the signal lands mid-seed: 300k took about 4 s here.
PRODUCTS = "300000"
# Generous: a busy machine's embedded Postgres start plus migrations; an interrupted run exits long before.
EXIT_WITHIN_S = 300


def _up_env(data_dir: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "TENK_DATA_DIR": str(data_dir),
        "TENK_DATABASE_EMBEDDED_PORT": str(free_port()),
        "TENK_REDIS_EMBEDDED_PORT": str(free_port()),
    }


def test_ctrl_c_interrupts_tenk_up_mid_seed_when_started_with_sigint_ignored(stack_root: Path) -> None:
    # `make run &` in a script or a nohup-style launcher starts tenk with SIGINT ignored; Ctrl-C or
    # `kill -INT` must still stop it, here during the seed, before any long-running loop of its own.
    env = _up_env(stack_root)
    up = subprocess.Popen(
        [str(VENV_BIN / "tenk"), "up", "--products", PRODUCTS, "--tasks", "10"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=ignore_sigint,
    )
    try:
        assert up.stdout is not None
        lines = []
        for line in up.stdout:
            lines.append(line)
            if line.startswith("migrations:"):
                up.send_signal(signal.SIGINT)
                break
        output = "".join(lines) + up.communicate(timeout=EXIT_WITHIN_S)[0]
        assert lines[-1].startswith("migrations:"), output
        assert "seed:" not in output, f"the seed ran to its end despite Ctrl-C:\n{output}"
        assert up.returncode != 0, output
        assert "Aborted!" in output, output
    finally:
        if up.poll() is None:
            up.kill()
        subprocess.run([str(VENV_BIN / "tenk"), "down"], env=env, capture_output=True, timeout=120)
