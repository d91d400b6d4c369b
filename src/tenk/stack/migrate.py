"""Versioned SQL migrations: `NNNN_name.sql` files applied in order, each once, each in its own transaction.

An advisory lock serialises concurrent runners (two API processes starting at once), so running
`tenk migrate` twice, or from two shells, is safe. That lock belongs to the session, which a
transaction-mode pooler does not keep: migrations connect to TENK_DATABASE_DIRECT_URL (the `tenk up`
and `tenk migrate` commands pass `Settings.resolved_direct_database_url`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

import asyncpg

_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
_LOCK_KEY = 0x7E4B  # any constant; shared by every tenk migrator

CREATE_LEDGER = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def bundled_migrations() -> list[Migration]:
    found = []
    for entry in resources.files("tenk.stack.migrations").iterdir():
        match = _MIGRATION_NAME.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), entry.name, entry.read_text()))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise RuntimeError(f"duplicate migration versions: {versions}")
    return found


async def migrate(dsn: str) -> list[str]:
    """Apply pending migrations; returns the names applied by this call."""
    conn = await asyncpg.connect(dsn)
    applied: list[str] = []
    try:
        await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_KEY)
        try:
            await conn.execute(CREATE_LEDGER)
            done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
            for migration in bundled_migrations():
                if migration.version in done:
                    continue
                async with conn.transaction():
                    await conn.execute(migration.sql)
                    await conn.execute(
                        "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
                        migration.version,
                        migration.name,
                    )
                applied.append(migration.name)
        finally:
            await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY)
    finally:
        await conn.close()
    return applied
