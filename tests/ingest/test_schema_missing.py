"""A database without the events table is a mistake to surface, not an outage to wait out forever."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Literal

import asyncpg
import orjson
import pytest

from harness.stack import Stack
from tenk.ingest import codec
from tenk.ingest.writer import PostgresWriter, SchemaMissing
from tests.ingest.streams import event

SCHEMA_WAIT_S = 0.5


@pytest.fixture(scope="module")
async def unmigrated(stack: Stack) -> AsyncIterator[str]:
    name = f"tenk_empty_{uuid.uuid4().hex[:8]}"
    # Creating a database is the superuser's; the app's role owns it, as it owns the application database.
    admin = await asyncpg.connect(stack.pg.superuser_url)
    await admin.execute(f'CREATE DATABASE "{name}" OWNER "{stack.pg.app_role}"')
    try:
        yield stack.pg.url_for(name)
    finally:
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        await admin.close()


@pytest.mark.parametrize("mode", ["copy", "insert"])
async def test_a_missing_events_table_stops_the_writer_after_the_schema_wait(
    unmigrated: str, mode: Literal["copy", "insert"]
) -> None:
    entry, _ = codec.parse_one(orjson.dumps(event("wk-unmigrated", str(uuid.uuid4()))))
    writer = PostgresWriter(unmigrated, mode, "w-unmigrated", schema_wait_s=SCHEMA_WAIT_S)
    started = time.monotonic()
    try:
        with pytest.raises(SchemaMissing, match="tenk migrate"):
            await writer.write([(b"1-0", entry)])
    finally:
        await writer.close()
    assert time.monotonic() - started >= SCHEMA_WAIT_S
