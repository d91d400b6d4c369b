"""The widgets example (examples/widgets) on the suite's stack: its database, its apps, its counters."""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from pathlib import Path

import httpx
from prometheus_client import REGISTRY

import examples.widgets
from examples.widgets.app import create_widgets_app
from examples.widgets.routes import WIDGETS, router
from harness.clients import AUTH
from harness.stack import Stack, fresh_database
from tenk.app import Domain, create_app
from tenk.platform import TenkAPI
from tenk.platform.readthrough import CacheSettings

SCHEMA = Path(examples.widgets.__file__).parent / "schema.sql"
ROOT = Path(examples.widgets.__file__).parents[2]


async def widgets_database(stack: Stack) -> str:
    """A database of the example's own on the stack's Postgres, made as docs/building-an-api.md makes it
    (`python -m examples.widgets.migrate "$TENK_DATABASE_URL"`); its URL."""
    url = await fresh_database(stack, "widgets")
    migrate = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "examples.widgets.migrate", url, cwd=ROOT, stderr=asyncio.subprocess.PIPE
    )
    _, stderr = await migrate.communicate()
    assert migrate.returncode == 0, stderr.decode()
    return url


def widgets_app(stack: Stack, database_url: str, cache: CacheSettings | None = None, **settings: object) -> TenkAPI:
    """The example's app on the stack; with `cache`, its declaration with those settings instead."""
    tree = stack.settings(database={"url": database_url}, **settings)
    if cache is None:
        return create_widgets_app(tree)
    return create_app(tree, domains=[Domain(router, dataclasses.replace(WIDGETS, settings=cache).lifespan)])


async def create_widget(client: httpx.AsyncClient, name: str, price_cents: int = 100) -> int:
    created = await client.post("/widgets", json={"name": name, "price_cents": price_cents}, headers=AUTH)
    assert created.status_code == 201, created.text
    widget_id: int = created.json()["id"]
    return widget_id


def postgres_reads(path: str = "normal") -> float:
    """Widget reads that reached Postgres in this process so far: `normal`, or `redis_down` (the bulkhead)."""
    return REGISTRY.get_sample_value("tenk_widgets_db_reads_total", {"path": path}) or 0.0
