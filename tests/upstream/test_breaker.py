"""The quotes breaker against a real failing, then recovering, vendor."""

from __future__ import annotations

import asyncio
import re

from harness.deadlines import deadline_s
from tenk.lab.targets.mock_upstream import MockUpstreamProcess
from tests.support.waiting import eventually
from tests.upstream.vendors import QuotesClient

BREAKER_KNOBS = {"breaker_min_calls": 4, "breaker_open_s": 1, "breaker_window_s": 30, "cache_ttl_s": 0}
PROBE_HELD_MS = 4000


def _breaker_state(metrics: str) -> float:
    match = re.search(r'^tenk_breaker_state\{breaker="upstream"\} (\S+)$', metrics, re.MULTILINE)
    assert match is not None, "no upstream breaker gauge"
    return float(match.group(1))


async def test_the_breaker_opens_half_opens_with_a_single_probe_and_closes(
    quotes_client: QuotesClient, mock: MockUpstreamProcess
) -> None:
    mock.set_profile(error_rate=1.0)
    async with quotes_client(**BREAKER_KNOBS) as client:
        for i in range(4):
            assert (await client.get(f"/quotes/FAIL{i}")).status_code == 502

        # Open: answered at once, and the vendor is not called.
        opened = await client.get("/quotes/FAIL9")
        assert opened.status_code == 503
        assert opened.json()["error"]["code"] == "circuit_open"
        assert int(opened.headers["retry-after"]) >= 1
        assert mock.stats()["quotes"] == 4
        assert _breaker_state((await client.get("/metrics")).text) == 1

        # After the cool-down one probe goes; the vendor still fails, so the breaker opens again.
        await asyncio.sleep(1.1)
        assert (await client.get("/quotes/PROBE1")).status_code == 502
        assert (await client.get("/quotes/PROBE2")).status_code == 503
        assert mock.stats()["quotes"] == 5

        # The vendor recovers, slowly: exactly one probe is let through while everyone else fails fast.
        # The probe is held at the vendor far longer than 50 fast-failing calls take even on a busy machine,
        # and the calls start only once the vendor holds it (no guess at how long that takes).
        mock.set_profile(error_rate=0, p50_ms=PROBE_HELD_MS, p99_ms=PROBE_HELD_MS)
        await asyncio.sleep(1.1)
        probe = asyncio.create_task(client.get("/quotes/PROBE3"))

        async def vendor_holds_the_probe() -> bool:
            return int((await asyncio.to_thread(mock.stats, "PROBE3"))["symbol"]["quotes"]) >= 1

        await eventually(vendor_holds_the_probe, deadline_s(), "the vendor to see PROBE3", every=0.02)
        assert _breaker_state((await client.get("/metrics")).text) == 2
        waiting = await asyncio.gather(*(client.get(f"/quotes/WAIT{i}") for i in range(50)))
        assert {r.status_code for r in waiting} == {503}
        assert (await probe).status_code == 200
        assert mock.stats()["quotes"] == 6

        # Closed: calls flow again.
        mock.set_profile(p50_ms=0, p99_ms=0)
        after = await asyncio.gather(*(client.get(f"/quotes/OK{i}") for i in range(10)))
        assert {r.status_code for r in after} == {200}
        metrics = (await client.get("/metrics")).text
    assert _breaker_state(metrics) == 0
    assert mock.stats()["quotes"] == 16
    assert 'tenk_upstream_rejections_total{reason="breaker"}' in metrics
