"""The lab's stack: a run that cannot begin leaves none of the servers it started behind, nor its lock."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenk.lab.errors import LabError
from tenk.lab.processes.servers import LAB_REDIS, DataLock, ensure_stack
from tenk.stack import EmbeddedRedis, free_port
from tenk.stack._reachable import servers_home


def test_a_database_that_cannot_be_migrated_stops_the_redis_the_lab_started(stack_root: Path) -> None:
    env = {
        "TENK_DATA_DIR": str(stack_root),
        # Nobody listens here: the migration fails after the lab's own Redis is up.
        "TENK_DATABASE_URL": f"postgresql://tenk:tenk@127.0.0.1:{free_port()}/tenk",
    }
    with pytest.raises(LabError, match="could not migrate/seed"):
        ensure_stack(env, None)
    redis = EmbeddedRedis(servers_home(stack_root) / LAB_REDIS, 0)
    try:
        assert redis.log_path.exists(), "the lab's Redis was started before the migration failed"
        assert not redis.running()
        DataLock.take(stack_root).stop()  # and the next run may begin
    finally:
        redis.stop()
