"""The settings tree: each TENK_* variable lands in its branch, and bad combinations are refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from tenk.settings import Settings


def _tree_read_from(env: dict[str, str]) -> dict[str, object]:
    # A process of its own with exactly this environment: the test's own is never edited.
    base = {name: os.environ[name] for name in ("PATH", "HOME") if name in os.environ}
    done = subprocess.run(
        [sys.executable, "-c", "from tenk.settings import Settings; print(Settings().model_dump_json())"],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    tree: dict[str, object] = json.loads(done.stdout)
    return tree


def test_a_domain_variable_lands_in_its_branch_and_service_wide_ones_stay_at_the_root() -> None:
    tree = _tree_read_from(
        {
            "TENK_INGEST_MAX_BACKLOG": "1234",
            "TENK_INGEST_MAX_BACKLOG_BYTES": "4000000",
            "TENK_SEARCH_CACHE": "false",
            "TENK_SEARCH_CACHE_TTL_S": "3",
            "TENK_DATABASE_URL": "postgresql://db.example/tenk",
            "TENK_DATABASE_POOL_MIN": "2",
            "TENK_REDIS_URL": "redis://cache.example/0",
            "TENK_OPS_OTEL_ENDPOINT": "http://collector.example:4318",
            "TENK_API_KEYS": "AB12, cd34",
            "TENK_CURSOR_SECRET": "shared-by-every-replica",
            "TENK_DATA_DIR": "/srv/tenk",
            "TENK_PORT": "9000",
        }
    )
    assert tree["ingest"] == {**_defaults("ingest"), "max_backlog": 1234, "max_backlog_bytes": 4_000_000}
    assert tree["search"] == {**_defaults("search"), "cache": False, "cache_ttl_s": 3.0}
    assert tree["database"] == {**_defaults("database"), "url": "postgresql://db.example/tenk", "pool_min": 2}
    assert tree["redis"] == {**_defaults("redis"), "url": "redis://cache.example/0"}
    assert tree["ops"] == {**_defaults("ops"), "otel_endpoint": "http://collector.example:4318"}
    assert (tree["api_keys"], tree["data_dir"], tree["port"]) == (["ab12", "cd34"], "/srv/tenk", 9000)


def _defaults(branch: str) -> dict[str, object]:
    model = getattr(Settings.model_construct(), branch)
    assert isinstance(model, BaseModel)
    defaults: dict[str, object] = json.loads(model.model_dump_json())
    return defaults


def test_no_service_wide_setting_is_named_like_a_branch() -> None:
    # TENK_<BRANCH>_<REST> is read as the branch's field <rest>: a root field `redis_port` could never be set.
    branches = [name for name, field in Settings.model_fields.items() if _is_branch(field.annotation)]
    clashing = [name for name in Settings.model_fields if any(name.startswith(f"{b}_") for b in branches)]
    assert clashing == []


def _is_branch(annotation: object) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def test_a_pool_that_keeps_more_open_than_it_may_hold_is_refused() -> None:
    with pytest.raises(ValidationError, match="TENK_DATABASE_POOL_MIN"):
        Settings.model_validate({"database": {"pool_min": 17, "pool_max": 16}})
    assert Settings.model_validate({"database": {"pool_min": 16, "pool_max": 16}}).database.pool_min == 16


def test_a_bad_value_in_a_branch_names_the_field() -> None:
    with pytest.raises(ValidationError, match=r"ingest\.batch"):
        Settings.model_validate({"ingest": {"batch": 0}})


@pytest.mark.parametrize(
    ("url", "names"),
    [
        ("redis+sentinel://:hunter2@/tenk", "at least one sentinel"),
        ("redis+sentinel://:hunter2@10.0.0.1:26379,10.0.0.2:port/tenk", "'port'"),
        ("redis+sentinel://:hunter2@10.0.0.1:26379", "service name"),
        ("redis+sentinel://:hunter2@10.0.0.1:26379/tenk?db=one", "db='one'"),
    ],
)
def test_a_malformed_sentinel_url_is_refused_naming_tenk_redis_url_but_not_its_password(url: str, names: str) -> None:
    with pytest.raises(ValidationError, match="TENK_REDIS_URL") as refused:
        Settings.model_validate({"redis": {"url": url}})
    assert names in str(refused.value)
    assert "hunter2" not in str(refused.value)


def test_a_sentinel_url_with_several_sentinels_a_service_and_a_db_is_accepted() -> None:
    url = "redis+sentinel://:pw@10.0.0.1:26379,10.0.0.2/tenk?db=2"
    assert Settings.model_validate({"redis": {"url": url}}).redis.url == url


def test_the_cli_refuses_a_malformed_sentinel_url_with_a_message_not_a_traceback() -> None:
    env = {name: value for name, value in os.environ.items() if not name.startswith("TENK_")}
    env["TENK_REDIS_URL"] = "redis+sentinel://:hunter2@10.0.0.1:26379"
    done = subprocess.run(
        [str(Path(sys.executable).parent / "tenk"), "serve"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert "TENK_REDIS_URL" in done.stderr
    assert "Traceback" not in done.stderr
    assert "hunter2" not in done.stderr
