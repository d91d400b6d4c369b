"""What a step keeps of the target's gauges (the last value and the peak), the private Redis a rung gets
when it asks for io-threads, and how a step's backlog is judged. Real processes: a uvicorn app, a
redis-server."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import httpx
import psutil
import pytest
import redis

from harness.deadlines import deadline_s
from tenk.lab.definition.ladder import RungConfig
from tenk.lab.errors import LabError
from tenk.lab.measuring.sampling import GaugeWatcher
from tenk.lab.measuring.state import backlog_failures, ingest_figures, reset_upstream
from tenk.lab.processes.servers import process_set, start_redis, start_upstream, wait_ready
from tenk.stack import free_port
from tests.lab.test_capacity import lab_env
from tests.support.waiting import eventually_blocking

PARKED = "lab_test_parked"


def test_a_gauge_keeps_its_last_value_and_its_peak_during_the_step(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    uvicorn = str(Path(sys.executable).parent / "uvicorn")
    with process_set(tmp_path) as processes:
        item = processes.start("gauges", [uvicorn, "tests.lab.gauge_app:app", "--port", str(port)], lab_env(), None)
        wait_ready(item, base + "/health")
        with GaugeWatcher(base, interval_s=0.05) as watcher:
            httpx.post(base + "/set/7")
            eventually_blocking(
                lambda: watcher.max.get(PARKED) == 7, deadline_s(), "the watcher to see the peak", every=0.05
            )
            httpx.post(base + "/set/2")
    gauges = watcher.to_json()
    assert gauges[PARKED] == {"last": 2.0, "max": 7.0}
    assert not any(key.startswith("lab_test_sets") for key in gauges), "counters are deltas, not gauges"


def test_a_rung_asking_for_io_threads_gets_a_private_redis_started_with_them(tmp_path: Path) -> None:
    with process_set(tmp_path) as processes:
        url = start_redis(processes, 2, None, dict(os.environ))
        with redis.Redis.from_url(url, decode_responses=True) as client:
            assert client.config_get("io-threads") == {"io-threads": "2"}
            assert client.dbsize() == 0
        # Reached as the stack's Redis is, on a socket nobody else may reach, and on no port.
        server = psutil.Process(processes.started[-1].pid)
        assert [c for c in server.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN] == []
        socket_dir = Path(unquote(urlsplit(url).path)).resolve().parent
        assert stat.S_IMODE(socket_dir.stat().st_mode) == 0o700


def test_a_backlog_stable_step_whose_backlog_could_not_be_read_fails_rather_than_passes() -> None:
    # /ingest/stats timed out at the step's end (a stalled machine): no backlog figures, so no evidence.
    figures = ingest_figures({"rows_written": 0, "backlog": 0}, {}, {"rows_landed": 0}, 1.0)
    assert "backlog_grew" not in figures
    assert backlog_failures(figures) == ["backlog unknown: /ingest/stats did not answer at the step's start or end"]
    kept_up = ingest_figures({"backlog": 5}, {"backlog": 5}, {"rows_landed": 300}, 1.0)
    assert backlog_failures(kept_up) == []
    grew = ingest_figures({"backlog": 0}, {"backlog": 302}, {"rows_landed": 0}, 1.0)
    assert backlog_failures(grew) == ["backlog grew 0 -> 302 (accepted faster than landed)"]


def test_a_rung_zeroes_its_mock_vendor_with_the_token_the_mock_was_started_with(tmp_path: Path) -> None:
    with process_set(tmp_path) as processes:
        url, token = start_upstream(processes, RungConfig(), None, dict(os.environ))
        assert httpx.get(f"{url}/v1/quotes/RUNG").status_code == 200
        with pytest.raises(LabError, match="refused to reset"):
            reset_upstream(url, "not-the-token")
        assert httpx.get(f"{url}/stats").json()["quotes"] == 1
        reset_upstream(url, token)
        assert httpx.get(f"{url}/stats").json()["quotes"] == 0
