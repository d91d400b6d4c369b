"""Ladders on tenk run on the lab's own data, never the dev stack's: whatever a person did through `make run`,
a ladder runs, and the dev stack's database and Redis come out byte-identical.

Real parts: `tenk up` and `tenk dev` in a private data dir, the embedded Postgres and Redis, and, in the
slow test, a real ladder (k6, a tenk target, an ingest worker).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest
import redis

from harness.stack import VENV_BIN
from tenk.lab.definition.ladder import load_ladder
from tenk.lab.errors import LabError
from tenk.lab.measuring.options import RunOptions
from tenk.lab.processes.servers import LAB_REDIS, DataLock, ensure_stack, lab_redis, seed_counts, stack_settings
from tenk.lab.results.record import run_ladder
from tenk.stack import EmbeddedRedis, free_port
from tenk.stack._reachable import servers_home
from tests.lab.dev_data import freeze_redis, snapshot
from tests.lab.test_capacity import REPO
from tests.stack.dev_runs import DevRun, start_dev
from tests.support.waiting import eventually_blocking

TARGET_CPU = sorted(os.sched_getaffinity(0))[0]
# The lab's catalogue in these tests: small, so its template is made in seconds.
LAB_SEED = {"TENK_LAB_PRODUCTS": "200", "TENK_LAB_TASKS": "20"}
# Measured here: the dev worker writes an accepted event within a second or two; room for a busy machine.
EVENT_WRITTEN_S = 60.0


def _tenk(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(VENV_BIN / "tenk"), *args], env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture
def dev_stack(stack_root: Path) -> Iterator[dict[str, str]]:
    """`tenk up` in a private data dir, as `make run` starts it: the environment that names it, and no URLs."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "TENK_DATA_DIR": str(stack_root),
        "TENK_DATABASE_EMBEDDED_PORT": str(free_port()),
        "TENK_REDIS_EMBEDDED_PORT": str(free_port()),
        "TENK_LOG_LEVEL": "WARNING",
    }
    up = _tenk(env, "up", "--products", "200", "--tasks", "20")
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        yield env
    finally:
        _tenk(env, "down")


async def _sql(url: str, *statements: str) -> list[object]:
    """Each statement's first value, in one session as the app role."""
    conn = await asyncpg.connect(url)
    try:
        return [await conn.fetchval(statement) for statement in statements]
    finally:
        await conn.close()


# What breaks a restore: the first product gone, and a new one holding its sku.
RE_USED_SKU = (
    "DELETE FROM products WHERE id = 1",
    "INSERT INTO products (sku, name, description, price_cents, stock) VALUES ('SKU-00000001', 'mine', '', 1, 1)",
)


def test_the_rungs_get_a_database_and_redis_of_the_labs_own_and_the_dev_stacks_stay_as_they_were(
    dev_stack: dict[str, str],
) -> None:
    settings = stack_settings(dev_stack)
    asyncio.run(_sql(settings.resolved_database_url, *RE_USED_SKU))
    with redis.Redis.from_url(settings.resolved_redis_url) as dev_redis:
        dev_redis.set("mine", "a person's key")
    freeze_redis(settings)
    before = snapshot(settings)
    env = {**dev_stack, **LAB_SEED}
    for _ in range(2):
        stack = ensure_stack(env, None)
        try:
            lab_db, lab_redis_url = stack.env["TENK_DATABASE_URL"], stack.env["TENK_REDIS_URL"]
            assert lab_db != settings.resolved_database_url
            assert lab_redis_url != settings.resolved_redis_url
            # Every use starts as seeded: the product the dev stack lost, and the tasks before any rung wrote.
            seeded = asyncio.run(_sql(lab_db, "SELECT sku FROM products WHERE id = 1", "SELECT count(*) FROM tasks"))
            assert seeded == ["SKU-00000001", 20]
            assert "tenk_lab" in stack.data
            assert "200 products" in stack.data
            asyncio.run(_sql(lab_db, "INSERT INTO tasks (title) VALUES ('written by a rung')"))
            with redis.Redis.from_url(lab_redis_url) as client:
                client.set("written-by-a-rung", "1")
                client.flushdb()  # what a rung repeat does before it starts
                client.set("written-by-a-rung", "1")
        finally:
            for server in reversed(stack.started):
                server.stop()
    assert snapshot(settings) == before
    assert not EmbeddedRedis(servers_home(settings.data_dir) / LAB_REDIS, 0).running()


def test_a_second_run_is_refused_while_another_uses_the_labs_data(stack_root: Path) -> None:
    held = DataLock.take(stack_root)
    try:
        with pytest.raises(LabError, match="another `tenk lab run` is using the lab's data"):
            DataLock.take(stack_root)
    finally:
        held.stop()
    DataLock.take(stack_root).stop()  # free again once the first run lets go


def test_a_lab_redis_left_running_by_a_killed_run_is_replaced_by_a_fresh_one(stack_root: Path) -> None:
    settings = stack_settings({"TENK_DATA_DIR": str(stack_root)})
    left = lab_redis(settings)
    try:
        with redis.Redis.from_url(left.url) as client:
            client.set("left-by-a-killed-run", "1")
        fresh = lab_redis(settings)
        try:
            assert not left.running() or left.pid() == fresh.pid()
            assert fresh.port != left.port
            with redis.Redis.from_url(fresh.url) as client:
                client.ping()
        finally:
            fresh.stop()
    finally:
        left.stop()


def test_the_labs_seed_counts_are_whole_numbers_of_rows(stack_root: Path) -> None:
    assert seed_counts({}) == (100_000, 10_000)
    assert seed_counts({"TENK_LAB_PRODUCTS": "2000", "TENK_LAB_TASKS": " 30 "}) == (2000, 30)
    for bad in ("0", "-5", "1e5", "many"):
        with pytest.raises(LabError, match=f"TENK_LAB_PRODUCTS={bad!r}: a whole number of rows"):
            seed_counts({"TENK_LAB_PRODUCTS": bad})


LADDER = f"""
name = "lab-data"
repeats = 1
[defaults]
target = "tenk"
server = "uvicorn"
cpus = "{TARGET_CPU}"
mix = "mix.toml"
rate = 30
duration_s = 3
warmup_s = 1
slo_p99_ms = 5000
ingest_workers = 1
[[rung]]
label = "on the lab's data"
"""
# Product 1 is the one the person deleted in the dev stack: in the lab's data it is as seeded.
MIX = """
name = "lab-data"
[[endpoint]]
name = "deleted_in_dev"
path = "/products/1"
check_json = { sku = "SKU-00000001" }
weight = 3
[[endpoint]]
name = "task"
method = "POST"
path = "/tasks"
auth = true
body = { title = "lab task {uid}" }
expect = [201]
weight = 1
[[endpoint]]
name = "event"
method = "POST"
path = "/events"
auth = true
body = { event_id = "{uuid}", source = "lab", ts = "{now}", payload = { n = 1 } }
expect = [202]
weight = 1
"""


def _mutate_every_way(run: DevRun) -> None:
    """What a person does through the API: deletes, a re-used sku, changed and added rows, tasks, events."""
    auth = {"Authorization": f"Bearer {run.key()}"}
    with httpx.Client(base_url=run.base_url, headers=auth, timeout=10) as client:
        for product_id in (1, 2, 3, 7):
            client.get(f"/products/{product_id}")  # cached in the dev Redis
        assert client.delete("/products/1").status_code == 204
        assert client.get("/products/1").status_code == 404  # "no such product", cached too
        product = {"name": "mine", "description": "a product a person added", "price_cents": 5, "stock": 1}
        created = client.post("/products", json={**product, "sku": "SKU-00000001"})
        assert created.status_code == 201, created.text
        assert client.post("/products", json={**product, "sku": "MINE-2"}).status_code == 201
        assert client.put("/products/2", json={**product, "sku": "SKU-00000002"}).status_code == 200
        assert client.patch("/products/3", json={"price_cents": 1}).status_code == 200
        assert client.delete("/products/4").status_code == 204
        task = client.post("/tasks", json={"title": "mine", "notes": "", "done": False})
        assert task.status_code == 201, task.text
        assert client.patch(f"/tasks/{task.json()['id']}", json={"done": True}).status_code == 200
        assert client.patch("/tasks/1", json={"title": "renamed"}).status_code == 200
        assert client.delete("/tasks/2").status_code == 204
        event_ids = [str(uuid.uuid4()) for _ in range(3)]
        events = [
            {"event_id": e, "source": "mine", "ts": "2026-01-02T03:04:05Z", "payload": {"n": 1}} for e in event_ids
        ]
        assert client.post("/events", json=events[0]).status_code == 202
        assert client.post("/events/batch", json=events[1:]).status_code == 202
        for event_id in event_ids:
            eventually_blocking(
                lambda event_id=event_id: client.get(f"/events/{event_id}").status_code == 200,  # type: ignore[misc]
                EVENT_WRITTEN_S,
                lambda: f"the dev worker to write the events:\n{run.log_text()[-3000:]}",
            )


@pytest.mark.slow
def test_a_ladder_runs_after_a_person_changed_the_dev_data_every_way_and_leaves_it_byte_identical(
    stack_root: Path, tmp_path: Path
) -> None:
    run = start_dev(VENV_BIN / "tenk", stack_root)
    try:
        _mutate_every_way(run)
        assert run.stop() == 0  # Ctrl-C: the API and its worker stop, the dev Postgres and Redis stay up
        settings = stack_settings(run.env)
        freeze_redis(settings)
        before = snapshot(settings)
        (tmp_path / "mix.toml").write_text(MIX)
        (tmp_path / "ladder.toml").write_text(LADDER)
        env = {**run.env, **LAB_SEED, "PYTHONPATH": str(REPO), "TENK_LAB_CPU_BUDGET": "none"}
        out = run_ladder(load_ladder(tmp_path / "ladder.toml"), RunOptions(results_root=tmp_path, base_env=env))
        results = json.loads((out / "results.json").read_text())
        rung = results["rungs"][0]
        assert rung["figures"]["requests"] > 0, rung["figures"]
        assert rung["figures"]["error_rate"] == 0, rung["figures"]["errors_by_reason"]
        assert any("the lab's own database (tenk_lab" in reset for reset in rung["reset"]), rung["reset"]
        assert snapshot(settings) == before
    finally:
        run.stop()
        run.down(VENV_BIN / "tenk")
