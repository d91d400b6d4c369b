"""On a cluster the target is every API node together: it is the bottleneck when the nodes' cores,
summed, are busy, and not when one node is busy while another idles."""

from __future__ import annotations

from tenk.lab.definition.ladder import RungConfig
from tenk.lab.documents import TARGET, LoadFigures, ServerSample
from tenk.lab.measuring.bottleneck import attribute
from tenk.lab.measuring.outcome import target_cores


def figures() -> LoadFigures:
    return LoadFigures(
        engine="k6", offered_rps=100, duration_s=5, requests=500, rps=100, p50_ms=5, p95_ms=50, p99_ms=500,
        max_ms=900, errors=0, error_rate=0, dropped=0, generator_cpu_s=0.5, generator_cores_used=0.2,
        generator_util=0.2, generator_cores=1, generator_bound=False,
    )  # fmt: skip


def nodes(**cores: float) -> ServerSample:
    return ServerSample(cpu_cores_mean=sum(cores.values()), node_cores_mean=cores, target_cpus=[0, 1])


def test_the_target_can_use_one_core_per_api_node_process_within_its_cpus() -> None:
    assert target_cores(RungConfig(cpus="0-1", apis=1)) == 1
    assert target_cores(RungConfig(cpus="0-1", apis=2)) == 2
    assert target_cores(RungConfig(cpus="0", apis=2)) == 1
    assert target_cores(RungConfig(cpus="0-3", apis=2, workers=2)) == 4


def test_two_api_nodes_with_their_cores_busy_are_the_bottleneck_and_each_is_named() -> None:
    config = RungConfig(cpus="0-1", apis=2)
    found = attribute(figures(), nodes(**{"api-1": 0.97, "api-2": 0.95}), target_cores(config))
    assert found.kind == TARGET
    assert "api-1 0.97" in found.detail
    assert "api-2 0.95" in found.detail


def test_one_busy_node_beside_an_idle_one_is_not_the_targets_ceiling() -> None:
    config = RungConfig(cpus="0-1", apis=2)
    found = attribute(figures(), nodes(**{"api-1": 0.97, "api-2": 0.05}), target_cores(config))
    assert found.kind != TARGET
