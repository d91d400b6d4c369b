"""HttpArena's material as the suite and `make bench-httparena` use it: its dataset, its request templates and
its Postgres database (the `items` table of 100,000 rows that its `generate-pgdb.py` makes).

`arena/` is HttpArena's own files at 28606ba, unchanged (MIT, `arena/LICENSE`): the data, the request
templates, the seed generator, and the three Python entries the bench measures tenk's against.
"""

from __future__ import annotations

import io
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

import asyncpg

ARENA = Path(__file__).parent / "arena"
DATASET = ARENA / "data" / "dataset.json"
REQUESTS = ARENA / "requests"
FRAMEWORKS = ARENA / "frameworks"
ROWS = 100_000
_COPY = "COPY items (id, name, category, price, quantity, active, tags, rating_score, rating_count) FROM STDIN;\n"


@cache
def seed_sql() -> str:
    """The SQL HttpArena's `generate-pgdb.py` writes (its CREATE TABLE, then COPY data), made once a process."""
    with tempfile.TemporaryDirectory(prefix="httparena-seed-") as folder:
        out = Path(folder) / "pgdb-seed.sql"
        script = ARENA / "scripts" / "generate-pgdb.py"
        subprocess.run([sys.executable, str(script), str(DATASET), str(out)], check=True, capture_output=True)
        return out.read_text()


async def load_items(dsn: str) -> None:
    """Create HttpArena's `items` table in the database at `dsn` and fill it, as its Postgres sidecar starts."""
    schema, rest = seed_sql().split(_COPY, 1)
    rows = rest.split("\\.\n", 1)[0]
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(schema)
        columns = _COPY.split("(", 1)[1].split(")", 1)[0].split(", ")
        await conn.copy_to_table("items", source=io.BytesIO(rows.encode()), columns=columns, format="text")
        await conn.execute("ANALYZE items")
    finally:
        await conn.close()
