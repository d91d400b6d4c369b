from __future__ import annotations

from pathlib import Path

from tenk.stack.pg_replica import LocalPgReplica
from tenk.stack.postgres import EmbeddedPostgres


def test_the_local_replica_is_sized_by_the_setting_that_sizes_its_primary(tmp_path: Path) -> None:
    primary = EmbeddedPostgres(tmp_path / "postgres", 25432, shared_buffers="48MB")
    replica = LocalPgReplica(tmp_path / "postgres-replica", 25434, primary)
    assert replica.server.shared_buffers_at_start == "48MB"
