"""A short real k6 run against the service keeps the mix's weights, and wrk drives the same mix."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.clients import SEARCH_LIMITS_OFF, TEST_API_KEY
from harness.stack import Stack
from tenk.lab.definition.mixes import load_mix
from tenk.lab.driving.generator import LoadRun
from tenk.lab.driving.k6 import run_k6
from tenk.lab.driving.wrk import run_wrk
from tests.support.servers import ServerProcess


@pytest.mark.slow
def test_endpoint_shares_hold_within_two_percent_against_the_service(
    stack: Stack, spawn_api: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    # The mix's searches come without a key, 30 a second from one address: the default anonymous limits
    # would answer some of them 429 by design (tests/search/test_budget.py), which is not what this tests.
    api = spawn_api(stack, **SEARCH_LIMITS_OFF)
    mix = load_mix("realistic")
    # VU pools sized for 1 s answers, so a stall on this shared machine delays requests instead of
    # dropping them (a dropped arrival would skew the shares this test is about).
    figures, summary = run_k6(
        LoadRun(
            mix, rate=300, duration_s=4, slo_ms=1000, base_url=api.base_url, api_key=TEST_API_KEY,
            run_id="weights", workdir=tmp_path / "k6", log=tmp_path / "k6.log", cpus=None,
        )
    )  # fmt: skip
    assert figures.dropped == 0, (tmp_path / "k6.log").read_text()[-2000:]
    assert figures.requests == pytest.approx(1200, abs=len(mix.endpoints))
    assert figures.unanswered == 0  # every arrival the schedule held was answered
    for endpoint in mix.endpoints:
        measured = figures.endpoints[endpoint.name]
        assert abs(measured.share - endpoint.share) <= 0.02 * endpoint.share, (endpoint.name, measured)
    # The requests were the right ones: reads, cursor-following pages and authorised writes all succeeded.
    for name in ("ping", "product", "tasks_page", "task_create", "search"):
        assert figures.endpoints[name].error_rate == 0, (name, figures.endpoints[name])
    assert figures.p50_ms > 0
    assert figures.p99_ms >= figures.p50_ms
    assert figures.mean_ms is not None
    assert figures.mean_ms > 0
    assert figures.bytes_per_s is not None
    assert figures.bytes_per_s > 100 * figures.rps
    assert figures.generator_cpu_s > 0
    assert summary.values("http_reqs")["count"] == figures.requests


@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed (make system-deps)")
def test_wrk_runs_the_same_mix_closed_loop(
    stack: Stack, spawn_api: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    api = spawn_api(stack)
    figures, raw = run_wrk(
        LoadRun(
            load_mix("product"), connections=8, duration_s=2, base_url=api.base_url, api_key=TEST_API_KEY,
            run_id="wrk", workdir=tmp_path / "wrk", log=tmp_path / "wrk.log", cpus=None,
        )
    )  # fmt: skip
    assert figures.engine == "wrk"
    assert figures.requests > 50
    assert figures.errors == 0, raw
    assert 0 < figures.p50_ms <= figures.p99_ms
    # wrk's own average and bytes a second, as the search study compared them: a product answer is
    # well over 100 bytes with its headers, so the bytes cover every request.
    assert figures.mean_ms is not None
    assert 0 < figures.mean_ms <= figures.max_ms
    assert figures.bytes_per_s is not None
    assert figures.bytes_per_s > 100 * figures.rps
