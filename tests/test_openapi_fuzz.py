"""Schemathesis against /openapi.json of a real server: no generated input may produce a 5xx."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from tenk.lab.mock_upstream import Profile, start_mock_upstream
from tenk.stack import free_port
from tests.conftest import AUTH, VENV_BIN, Stack, wait_http_ok

# Per operation; TENK_FUZZ_EXAMPLES=300 for a deeper run by hand.
EXAMPLES = int(os.environ.get("TENK_FUZZ_EXAMPLES", "40"))


@pytest.fixture(scope="module")
def live_api(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    workdir = Path(tmp_path_factory.mktemp("fuzz"))
    log = workdir / "api.log"
    # The real vendor at zero delay: /quotes must be judged on its input, not on a missing dependency.
    with start_mock_upstream(Profile(p50_ms=0, p99_ms=0), log=workdir / "mock.log", seed=1) as vendor:
        with log.open("wb") as out:
            process = subprocess.Popen(
                [str(VENV_BIN / "tenk"), "serve", "--server", "uvicorn", "--port", str(port)],
                env=stack.env(TENK_UPSTREAM_URL=vendor.url),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_http_ok(f"http://127.0.0.1:{port}/health", 30, process)
            yield f"http://127.0.0.1:{port}"
        finally:
            process.terminate()
            process.wait(15)
        internal = [line for line in log.read_text().splitlines() if '"level":"error"' in line]
        assert not internal, "the server logged errors during fuzzing:\n" + "\n".join(internal[:5])


def _operations(base_url: str) -> list[schemathesis.APIOperation]:
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json")
    return [result.ok() for result in schema.get_all_operations()]


def test_no_generated_input_produces_a_server_error(live_api: str) -> None:
    # Driven through Hypothesis directly: schemathesis's pytest plugin does not load under pytest 9.
    operations = _operations(live_api)
    assert len(operations) >= 10
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def call(case: schemathesis.Case) -> None:
            # With a valid key, so that generated bodies reach the handlers and the database, not just auth.
            case.headers = {**(case.headers or {}), **AUTH}
            case.call_and_validate(checks=[not_a_server_error])

        call()
