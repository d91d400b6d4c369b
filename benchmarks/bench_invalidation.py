"""How long after a write's response another API process first serves the new value.

Two `tenk serve` processes on a private embedded stack, local TTL 300 s (so only the pub/sub
invalidation can explain a fresh read): read a product twice in process B (now in its local cache),
PATCH it in process A, then poll B until it serves the new value. Prints the median and the worst,
the PATCH's own latency, and how many first reads after a write were stale. `--ack-timeout-s 0`
turns off the write's wait for every process's confirmation, for the before/after comparison.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

from harness.clients import AUTH
from harness.stack import VENV_BIN, start_stack
from tenk.stack import free_port, wait_http_ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument(
        "--ack-timeout-s", default="0.25", help="TENK_CATALOG_INVALIDATION_ACK_TIMEOUT_S; 0 answers without waiting"
    )
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="tenk-inval-"))
    stack = start_stack(root)
    processes: list[subprocess.Popen[bytes]] = []
    try:
        urls = []
        for _ in range(2):
            port = free_port()
            process = subprocess.Popen(
                [str(VENV_BIN / "tenk"), "serve", "--port", str(port)],
                env=stack.env(
                    TENK_CATALOG_LOCAL_TTL_S="300", TENK_CATALOG_INVALIDATION_ACK_TIMEOUT_S=args.ack_timeout_s
                ),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            processes.append(process)
            urls.append(f"http://127.0.0.1:{port}")
            wait_http_ok(urls[-1] + "/health", 30, process)
        writer, reader = urls
        delays_ms, writes_ms = [], []
        stale_first_reads = 0
        with httpx.Client(timeout=5) as http:
            for i in range(args.writes):
                product_id = 1 + i % 1000
                http.get(f"{reader}/products/{product_id}")
                http.get(f"{reader}/products/{product_id}")
                sent = time.perf_counter()
                http.patch(f"{writer}/products/{product_id}", json={"stock": 10_000 + i}, headers=AUTH)
                answered = time.perf_counter()
                writes_ms.append((answered - sent) * 1000)
                reads = 1
                while http.get(f"{reader}/products/{product_id}").json()["stock"] != 10_000 + i:
                    reads += 1
                stale_first_reads += reads > 1
                delays_ms.append((time.perf_counter() - answered) * 1000)
        delays_ms.sort()
        print(
            f"write answered -> other process serves the new value: median {statistics.median(delays_ms):.2f} ms, "
            f"p99 {delays_ms[int(len(delays_ms) * 0.99) - 1]:.2f} ms, max {delays_ms[-1]:.2f} ms "
            f"({len(delays_ms)} writes; includes one HTTP round trip)"
        )
        print(
            f"PATCH latency: median {statistics.median(writes_ms):.2f} ms, max {max(writes_ms):.2f} ms; "
            f"stale first reads after a write: {stale_first_reads} of {len(delays_ms)}"
        )
    finally:
        for process in processes:
            process.terminate()
        stack.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
