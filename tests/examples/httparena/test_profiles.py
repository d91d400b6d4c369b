"""HttpArena's profiles as lab mixes: each template's share of requests, and one in `-r` on a new connection,
as gcannon's rotation gives them (benchmarks/httparena/profiles.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks.httparena.arena import REQUESTS
from benchmarks.httparena.profiles import PROFILES, Template, mix_toml

from tenk.lab.definition.mixes import load_mix


def _mix(tmp_path: Path, profile: str) -> dict[str, tuple[float, dict[str, str]]]:
    path = tmp_path / f"{profile}.toml"
    path.write_text(mix_toml(PROFILES[profile]))
    return {e.name: (e.share, e.headers) for e in load_mix(str(path)).endpoints}


def test_api_4_sends_its_three_endpoints_3_3_2_and_reconnects_every_fifth(tmp_path: Path) -> None:
    mix = _mix(tmp_path, "api-4")
    for name, share in (("get", 3 / 8), ("json_get", 3 / 8), ("async_db_get", 2 / 8)):
        assert mix[name][0] + mix[f"{name}_reconnect"][0] == pytest.approx(share)
        assert mix[f"{name}_reconnect"][0] == pytest.approx(share / 5)
        assert mix[f"{name}_reconnect"][1] == {"Connection": "close"}
        assert mix[name][1] == {}


def test_crud_weighs_reads_updates_lists_and_creates_75_15_5_5(tmp_path: Path) -> None:
    mix = _mix(tmp_path, "crud")
    shares = {name: mix[name][0] + mix[f"{name}_reconnect"][0] for name in mix if not name.endswith("_reconnect")}
    assert shares == pytest.approx(
        {"crud_get_1": 0.75, "crud_update_1": 0.15, "crud_list_rand_1": 0.05, "crud_create_1": 0.05}
    )
    assert mix["crud_get_1_reconnect"][0] == pytest.approx(0.75 / 200)


def test_a_template_becomes_a_request_with_its_placeholders_drawn_by_the_lab() -> None:
    create = Template.read(REQUESTS / "crud-create-1.raw")
    assert (create.method, create.path) == ("POST", "/crud/items")
    assert create.body == '{"id":{seq_100001},"name":"New Product","category":"test","price":150,"quantity":30}'
    assert create.ranges == {"seq_100001": (100_001, 200_000)}
    read = Template.read(REQUESTS / "crud-get-7.raw")
    assert (read.path, read.body, read.ranges) == ("/crud/items/{rand_1_50000}", None, {"rand_1_50000": (1, 50_000)})
