"""SIGTERM with TENK_DRAIN_S: readiness goes false first, the node serves on, and only then closes."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

import httpx
import pytest

from harness.stack import Stack
from tenk.stack import port_is_open
from tests.support.servers import ServerProcess
from tests.support.waiting import eventually_blocking

pytestmark = pytest.mark.cluster

# Long enough that the few requests below fit in it even on a starved machine.
DRAIN_S = 6.0
# Generous: the drain itself is measured from our side, and a busy machine can stall any step.
WAIT_S = 60.0


def test_on_sigterm_ready_fails_first_then_the_node_serves_on_then_closes(
    stack: Stack, spawn_api: Callable[..., ServerProcess]
) -> None:
    api = spawn_api(stack, server="granian", TENK_DRAIN_S=str(DRAIN_S))
    port = httpx.URL(api.base_url).port
    assert port is not None
    with httpx.Client(timeout=5) as http:
        assert http.get(f"{api.base_url}/ready").status_code == 200
        api.process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        eventually_blocking(
            lambda: http.get(f"{api.base_url}/ready").status_code == 503, WAIT_S, "/ready to answer 503", every=0.02
        )
        assert http.get(f"{api.base_url}/ready").json()["status"] == "draining"
        # Out of rotation, yet every request that still arrives is served: readiness went false first.
        assert http.get(f"{api.base_url}/products/1").status_code == 200
        assert http.get(f"{api.base_url}/health").status_code == 200
    code = api.process.wait(WAIT_S)
    exited = time.monotonic()
    assert code == 0, api.log_tail()
    assert exited - signalled >= DRAIN_S, "the node closed before its drain period was over"
    assert not port_is_open(port), "the server outlived `tenk serve`"
