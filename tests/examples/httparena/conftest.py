from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from benchmarks.httparena.arena import load_items

from harness.stack import Stack, fresh_database
from tests.examples.httparena.entries import start_tenk_entry


@pytest.fixture(scope="module")
def arena_database(stack: Stack) -> str:
    """A database of the module's own on the shared stack, holding HttpArena's `items` as its sidecar does."""
    url = asyncio.run(fresh_database(stack, "httparena_benchmark"))
    asyncio.run(load_items(url))
    return url


@pytest.fixture(scope="module")
def tenk_entry(arena_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """tenk's entry served as serve.sh serves it, on that database; its base URL."""
    server, base_url = start_tenk_entry(arena_database, tmp_path_factory.mktemp("entry"))
    try:
        yield base_url
    finally:
        server.stop()
