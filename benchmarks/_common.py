"""What every `make bench-*` shares: the CPU split, starting a pinned server, and running wrk."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import httpx

from tenk.serving import server_argv
from tenk.settings import ServerName
from tenk.stack import free_port

# The API gets CPU 0 alone; load generators (and helpers) run on CPU 1.
API_CPU, LOAD_CPU = "0", "1"
REPO = Path(__file__).resolve().parent.parent


def start_process(argv: list[str], env: dict[str, str], log: Path, cpus: str | None) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            (["taskset", "-c", cpus] if cpus else []) + argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO
        )


def serve_pinned(
    app: str,
    env: dict[str, str],
    log: Path,
    *,
    factory: bool = True,
    server: ServerName = "granian",
    ready_path: str = "/health",
    timeout_s: float = 60,
) -> tuple[subprocess.Popen[bytes], str]:
    """One worker of `app` on API_CPU; returns once `ready_path` answers below 500."""
    port = free_port()
    traced = bool(env.get("TENK_OPS_OTEL_ENDPOINT"))
    argv = server_argv(app, server, host="127.0.0.1", port=port, workers=1, factory=factory, traced=traced)
    process = start_process(argv, env, log, API_CPU)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{app} exited with {process.returncode}; see {log}")
        try:
            if httpx.get(base + ready_path, timeout=0.5).status_code < 500:
                return process, base
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit(f"{app} did not start in {timeout_s}s; see {log}")


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)


def run_wrk(
    url: str,
    lua: Path | None,
    seconds: int,
    connections: int,
    *,
    timeout_s: int | None = None,
    transcript: list[str] | None = None,
) -> dict[str, float]:
    """Closed-loop wrk on LOAD_CPU. `ok_rps` counts only 2xx/3xx answers; `rps` counts every answer."""
    argv = ["taskset", "-c", LOAD_CPU, "wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency"]
    argv += [*([f"--timeout={timeout_s}s"] if timeout_s else []), *(["-s", str(lua)] if lua else []), url]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    if transcript is not None:
        transcript.append(" ".join(argv) + "\n" + out)

    def latency_ms(label: str) -> float:
        match = re.search(rf"^\s+{label}\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        return float(match.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[match.group(2)] if match else float("nan")

    total_match = re.search(r"(\d+) requests in", out)
    total = float(total_match.group(1)) if total_match else 0.0
    non2xx_match = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    non2xx = float(non2xx_match.group(1)) if non2xx_match else 0.0
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    socket_errors = float(sum(map(int, errors.groups()[:3]))) if errors else 0.0
    timeouts = float(errors.group(4)) if errors else 0.0
    rps_match = re.search(r"Requests/sec:\s+([\d.]+)", out)
    rps = float(rps_match.group(1)) if rps_match else 0.0
    bad = non2xx + socket_errors + timeouts
    return {
        "rps": rps,
        "ok_rps": rps * (total - non2xx) / total if total else 0.0,
        "p50_ms": latency_ms("50%"),
        "p99_ms": latency_ms("99%"),
        "requests": total,
        "non2xx": non2xx,
        "timeouts": timeouts,
        "socket_errors": socket_errors,
        "error_pct": 100 * bad / total if total else 100.0,
    }
