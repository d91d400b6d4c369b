"""`topology` and `apis` in a ladder: a cluster's rungs may vary the API nodes one per rung, and
what a topology cannot run is refused naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenk.lab.definition.ladder import load_ladder
from tenk.lab.errors import ConfigError, LabError

HEAD = """\
name = "t"
{topology}
[defaults]
target = "tenk"
mix = "product"
rate = 100
"""


def write(tmp_path: Path, topology: str, rungs: str) -> Path:
    path = tmp_path / "ladder.toml"
    path.write_text(HEAD.format(topology=topology) + rungs)
    return path


def test_a_ladder_is_single_with_one_api_node_unless_it_says_otherwise(tmp_path: Path) -> None:
    ladder = load_ladder(write(tmp_path, "", '[[rung]]\nlabel = "a"\n'))
    assert ladder.topology == "single"
    assert ladder.rungs[0].config.apis == 1


def test_a_cluster_rung_adding_an_api_node_changes_one_variable(tmp_path: Path) -> None:
    rungs = '[[rung]]\nlabel = "1 node"\n[[rung]]\nlabel = "2 nodes"\napis = 2\n'
    path = write(tmp_path, 'topology = "cluster"', rungs)
    ladder = load_ladder(path)
    assert ladder.topology == "cluster"
    assert [r.config.apis for r in ladder.rungs] == [1, 2]
    assert [str(c) for c in ladder.rungs[1].changes] == ["apis: 1 -> 2"]


def test_more_than_one_api_node_on_the_single_topology_is_refused_naming_apis(tmp_path: Path) -> None:
    path = write(tmp_path, "", '[[rung]]\nlabel = "a"\n[[rung]]\nlabel = "b"\napis = 2\n')
    with pytest.raises(ConfigError) as caught:
        load_ladder(path)
    assert caught.value.key == "rung[2].apis"
    assert caught.value.line == 11
    assert 'topology = "cluster"' in str(caught.value)


@pytest.mark.parametrize(
    ("topology", "rung", "key", "fragment"),
    [
        ('topology = "ring"', "", "topology", "expected one of single, cluster"),
        ('topology = "cluster"', 'target = "myapp:app"\nfactory = false\n', "rung[1].target", "runs tenk API nodes"),
        ('topology = "cluster"', "redis_io_threads = 2\n", "rung[1].redis_io_threads", "Redis Cluster"),
        ('topology = "cluster"', "apis = 0\n", "rung[1].apis", "expected an integer >= 1, got 0"),
        ('topology = "cluster"', 'apis = "two"\n', "rung[1].apis", "integer"),
    ],
)
def test_what_a_topology_cannot_run_is_refused_naming_the_key(
    tmp_path: Path, topology: str, rung: str, key: str, fragment: str
) -> None:
    path = write(tmp_path, topology, '[[rung]]\nlabel = "a"\n' + rung)
    with pytest.raises(LabError) as caught:
        load_ladder(path)
    assert isinstance(caught.value, ConfigError)
    assert caught.value.key == key, str(caught.value)
    assert fragment in str(caught.value)


def test_the_cluster_example_ladder_loads_and_varies_only_the_api_nodes() -> None:
    ladder = load_ladder(Path("src/tenk/lab/examples/cluster-nodes.toml"))
    assert ladder.topology == "cluster"
    assert [r.config.apis for r in ladder.rungs] == [1, 2]
    assert [c.key for c in ladder.rungs[1].changes] == ["apis"]
