"""An ASGI app tenk did not write, from PyPI: Datasette over a small SQLite file, for
`tenk lab run --preset server-config --app tests.lab.datasette_app:app --mix tests/lab/datasette.toml`.

Datasette is not a tenk dependency: install it into the environment first (`uv pip install datasette`).
The database is built once per process, in a temporary directory, with 10,000 rows.
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

from datasette.app import Datasette

ROWS = 10_000


def _database() -> Path:
    path = Path(tempfile.mkdtemp(prefix="tenk-datasette-")) / "data.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL NOT NULL)")
        db.executemany(
            "INSERT INTO items (id, name, price) VALUES (?, ?, ?)",
            ((i, f"item {i}", (i % 997) / 10) for i in range(1, ROWS + 1)),
        )
    return path


app = Datasette(files=[str(_database())]).app()
