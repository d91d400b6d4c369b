"""The lab's stack: a run that cannot begin leaves none of the servers it started behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenk.lab.errors import LabError
from tenk.lab.measuring.processes import ensure_stack
from tenk.stack import EmbeddedRedis, free_port


def test_a_database_that_cannot_be_migrated_stops_the_redis_the_lab_started(stack_root: Path) -> None:
    redis_port = free_port()
    env = {
        "TENK_DATA_DIR": str(stack_root),
        "TENK_REDIS_EMBEDDED_PORT": str(redis_port),
        # Nobody listens here: the migration fails after the embedded Redis is up.
        "TENK_DATABASE_URL": f"postgresql://tenk:tenk@127.0.0.1:{free_port()}/tenk",
    }
    redis = EmbeddedRedis(stack_root / "redis", redis_port)
    try:
        with pytest.raises(LabError, match="could not migrate/seed"):
            ensure_stack(env, None)
        assert not redis.running()
    finally:
        redis.stop()
