"""tenk's HttpArena entry passes HttpArena's own validation checks (validate.sh, ported in
benchmarks/httparena/validation.py) for each profile it subscribes to, served as its Dockerfile serves it."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from benchmarks.httparena import validation

from tests.examples.httparena.entries import start_tenk_entry

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def client(tenk_entry: str) -> httpx.Client:
    return httpx.Client(base_url=tenk_entry, timeout=30)


def test_baseline_sums_query_and_body_of_every_shape(client: httpx.Client) -> None:
    validation.baseline_sums(client)


def test_baseline_answers_fresh_values_not_cached_ones(client: httpx.Client) -> None:
    validation.baseline_anti_cheat(client)


def test_baseline_reassembles_requests_sent_in_fragments(client: httpx.Client) -> None:
    validation.baseline_fragmented(client)


def test_json_totals_price_times_quantity_times_m(client: httpx.Client) -> None:
    validation.json_totals(client)


def test_async_db_answers_limit_rows_in_the_nested_shape(client: httpx.Client) -> None:
    validation.async_db_rows(client)


def test_async_db_empty_range_counts_zero(client: httpx.Client) -> None:
    validation.async_db_empty_range(client)


def test_crud_list_pages_a_category(client: httpx.Client) -> None:
    validation.crud_list(client)


def test_crud_read_is_a_miss_then_a_hit_and_404_when_absent(client: httpx.Client) -> None:
    validation.crud_read_and_cache(client)


def test_crud_create_reads_back_and_update_invalidates(client: httpx.Client) -> None:
    validation.crud_create_and_update(client)


@pytest.mark.parametrize("server_name", ["uvicorn", "granian"])
@pytest.mark.parametrize("profile", ["api-4", "crud"])
def test_each_profile_passes_whole_on_a_fresh_entry(
    arena_database: str, tmp_path: Path, profile: str, server_name: str
) -> None:
    # As validate.sh runs: a new container, its checks in order (the cache's MISS is the first read of 42);
    # on serve.sh's server and on the one TENK_SERVER picks instead.
    server, base_url = start_tenk_entry(arena_database, tmp_path, TENK_SERVER=server_name)
    try:
        assert validation.failures(base_url, profile) == []
    finally:
        server.stop()
