from __future__ import annotations

from pathlib import Path

import pytest

from tenk.stack import free_port
from tenk.stack.pg_replica import LocalPgReplica
from tenk.stack.postgres import EmbeddedPostgres
from tests.stack.listeners import listening_on
from tests.support.waiting import eventually_blocking

# A replica retries its primary every wal_retrieve_retry_interval (5 s by default): with room for a busy machine.
RECONNECT_SEEN_S = 60.0


def test_the_local_replica_is_sized_by_the_setting_that_sizes_its_primary(tmp_path: Path) -> None:
    primary = EmbeddedPostgres(tmp_path / "postgres", 25432, shared_buffers="48MB")
    replica = LocalPgReplica(tmp_path / "postgres-replica", 25434, primary)
    assert replica.server.shared_buffers_at_start == "48MB"


@pytest.mark.cluster
def test_a_replica_whose_primary_is_gone_sends_no_password_to_its_freed_port(stack_root: Path) -> None:
    primary = EmbeddedPostgres(stack_root / "postgres", free_port())
    replica = LocalPgReplica(stack_root / "replica", free_port(), primary)

    def attempts() -> int:
        return replica.log_tail(10_000).count("could not connect to the primary server")

    try:
        primary.start()
        replica.start()
        primary.stop()
        # The replica streams as the superuser, whose password primary_conninfo keeps: it reconnects with it.
        with listening_on(primary.port, "postgres") as heard:
            before = attempts()
            eventually_blocking(
                lambda: heard.snapshot() or attempts() >= before + 1,
                RECONNECT_SEEN_S,
                lambda: f"the replica to try its primary again:\n{replica.log_tail()}",
            )
            assert heard.snapshot() == []
    finally:
        replica.stop()
        primary.stop()
