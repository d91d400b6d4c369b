"""Generator cost is measured on every run, and a run the generator could not keep up with is flagged."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tenk.lab.definition.ladder import RungConfig
from tenk.lab.definition.mixes import load_mix
from tenk.lab.documents import LoadFigures
from tenk.lab.driving.generator import GeneratorCost, LoadRun, generator_environment, generator_verdict, run_measured
from tenk.lab.driving.k6 import collected_inside_the_run, k6_environment, run_k6
from tenk.lab.measuring.capacity import step_failures
from tenk.lab.processes.servers import ProcessSet, start_target

REPO = Path(__file__).resolve().parents[2]
GIB = 1024**3
BUSY = "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass\n"


def test_more_than_80_percent_of_the_generator_cores_is_generator_bound() -> None:
    assert generator_verdict(GeneratorCost(cpu_s=8.5, wall_s=10, cores=1, peak_rss_mb=50), dropped=0)
    assert not generator_verdict(GeneratorCost(cpu_s=8.5, wall_s=10, cores=2, peak_rss_mb=50), dropped=0)
    assert generator_verdict(GeneratorCost(cpu_s=1, wall_s=10, cores=1, peak_rss_mb=50), dropped=3) == [
        "3 iterations dropped: k6 could not start them on schedule (VUs or CPU exhausted)"
    ]


def test_k6_collects_only_at_a_quarter_of_the_available_memory_and_streams_in_small_flushes() -> None:
    # A collection on the generator's one core puts its length on k6's own p99 (see generator_defaults).
    lab = k6_environment({"PATH": "/usr/bin"}, available_bytes=8 * GIB, TENK_LAB_BASE_URL="http://127.0.0.1:1")
    assert (lab["GOGC"], lab["GOMEMLIMIT"], lab["K6_CSV_SAVE_INTERVAL"]) == ("off", "2048MiB", "100ms")
    assert (lab["PATH"], lab["TENK_LAB_BASE_URL"]) == ("/usr/bin", "http://127.0.0.1:1")


def test_generators_get_none_of_the_callers_secrets_only_the_labs_variables() -> None:
    caller = {
        "PATH": "/usr/bin",
        "HOME": "/home/lab",
        "TENK_DATABASE_URL": "postgresql://tenk:secret@127.0.0.1/tenk",
        "TENK_API_KEYS": "digest",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "GOOGLE_APPLICATION_CREDENTIALS": "/home/lab/key.json",
        "TENK_LAB_API_KEY": "the caller's, not this run's",
        "LD_PRELOAD": "/tmp/x.so",
        "K6_NO_USAGE_REPORT": "true",
        "GODEBUG": "gctrace=1",
    }
    kept = {"PATH": "/usr/bin", "HOME": "/home/lab", "K6_NO_USAGE_REPORT": "true", "GODEBUG": "gctrace=1"}
    assert generator_environment(caller, TENK_LAB_API_KEY="run") == {**kept, "TENK_LAB_API_KEY": "run"}
    k6 = k6_environment(caller, available_bytes=8 * GIB, TENK_LAB_API_KEY="run")
    assert {name: k6[name] for name in kept} == kept
    assert set(k6) - set(kept) == {"TENK_LAB_API_KEY", "GOGC", "GOMEMLIMIT", "K6_CSV_SAVE_INTERVAL"}
    assert k6["TENK_LAB_API_KEY"] == "run"


def test_k6_on_a_small_machine_collects_at_five_times_its_live_heap_with_no_limit() -> None:
    small = k6_environment({}, available_bytes=3 * GIB)
    assert small["GOGC"] == "400"
    assert "GOMEMLIMIT" not in small


@pytest.mark.parametrize("chosen", [{"GOGC": "200"}, {"GOMEMLIMIT": "512MiB"}], ids=["GOGC", "GOMEMLIMIT"])
def test_k6_keeps_the_callers_collector_and_flush_whole(chosen: dict[str, str]) -> None:
    env = k6_environment({**chosen, "K6_CSV_SAVE_INTERVAL": "1s"}, available_bytes=8 * GIB)
    assert {name: env.get(name) for name in ("GOGC", "GOMEMLIMIT")} == {
        "GOGC": chosen.get("GOGC"),
        "GOMEMLIMIT": chosen.get("GOMEMLIMIT"),
    }
    assert env["K6_CSV_SAVE_INTERVAL"] == "1s"


@pytest.mark.parametrize(
    ("settings", "peak_rss_mb", "said"),
    [
        ({"GOGC": "off", "GOMEMLIMIT": "2048MiB"}, 1900.0, True),
        ({"GOGC": "off", "GOMEMLIMIT": "2GiB"}, 1900.0, True),
        ({"GOGC": "off", "GOMEMLIMIT": str(2 * GIB)}, 1900.0, True),
        ({"GOGC": "off", "GOMEMLIMIT": "2048MiB"}, 1600.0, False),  # room left: no collection
        ({"GOGC": "400", "GOMEMLIMIT": "2048MiB"}, 1900.0, False),  # collects on its schedule anyway
        ({"GOGC": "off", "GOMEMLIMIT": "lots"}, 1900.0, False),  # k6 would have refused it
    ],
)
def test_a_k6_that_grew_to_its_memory_limit_is_said_to_have_collected_inside_the_run(
    settings: dict[str, str], peak_rss_mb: float, said: bool
) -> None:
    figures = LoadFigures(
        engine="k6", offered_rps=100.0, duration_s=10.0, requests=1000, rps=100.0, p50_ms=1, p95_ms=2, p99_ms=3,
        max_ms=4, errors=0, error_rate=0.0, dropped=0, generator_cpu_s=1.0, generator_cores_used=0.1,
        generator_util=0.1, generator_cores=1, generator_bound=False, generator_peak_rss_mb=peak_rss_mb,
        generator_settings=settings,
    )  # fmt: skip
    note = collected_inside_the_run(figures)
    if said:
        assert note is not None
        assert note.startswith("k6 reached its memory limit (1,900 of 2,048 MiB)")
    else:
        assert note is None


def test_generator_cpu_is_measured_from_the_kernel_children_included(tmp_path: Path) -> None:
    # The child burns 0.6 s and starts a grandchild that burns another 0.6 s.
    script = BUSY.format(s=0.6) + "import subprocess, sys\n"
    script += f"subprocess.run([sys.executable, '-c', {BUSY.format(s=0.6)!r}], check=True)\n"
    code, cost = run_measured(
        [sys.executable, "-c", script], cpus=None, env=dict(os.environ), log=tmp_path / "gen.log", timeout_s=30
    )
    assert code == 0
    assert 1.15 <= cost.cpu_s <= cost.wall_s * cost.cores + 0.1
    assert cost.cores == len(os.sched_getaffinity(0))


def _semaphore_target(tmp_path: Path, permits: int, sleep_ms: int) -> Iterator[str]:
    processes = ProcessSet(tmp_path / "logs")
    config = RungConfig(
        target="tests.lab.semaphore_app:app", factory=False, server="uvicorn", cpus="0", mix="ping",
        env={"SEM_PERMITS": str(permits), "SEM_SLEEP_MS": str(sleep_ms)},
    )  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO), **config.env}
    try:
        _, base_url = start_target(processes, config, env)
        yield base_url
    finally:
        processes.stop_all()


@pytest.fixture
def one_slot_target(tmp_path: Path) -> Iterator[str]:
    yield from _semaphore_target(tmp_path, permits=1, sleep_ms=20)


@pytest.fixture
def stalled_target(tmp_path: Path) -> Iterator[str]:
    """Answers every request after 20 s: longer than a short step and k6's 5 s grace together."""
    yield from _semaphore_target(tmp_path, permits=1000, sleep_ms=20_000)


def _run_work(
    tmp_path: Path, base_url: str, *, rate: float, duration_s: float, worst_ms: int, timeout_ms: int
) -> LoadFigures:
    """k6 at `rate` against one `/work` endpoint, its VU pool sized for answers within `worst_ms` (the SLO)."""
    mix_path = tmp_path / "work.toml"
    mix_path.write_text(
        f'[[endpoint]]\nname = "work"\npath = "/work"\nweight = 1\nworst_latency_ms = {worst_ms}\n'
        f"timeout_ms = {timeout_ms}\n"
    )
    figures, _ = run_k6(
        LoadRun(
            load_mix(str(mix_path)), rate=rate, duration_s=duration_s, slo_ms=worst_ms, base_url=base_url,
            api_key="", run_id="work", workdir=tmp_path / "k6", log=tmp_path / "k6.log", cpus=None,
        )
    )  # fmt: skip
    return figures


def test_dropped_iterations_mark_the_run_generator_bound(tmp_path: Path, one_slot_target: str) -> None:
    # A VU pool sized for 1 ms answers (slo_ms=1) meets a 50 req/s target at 300 req/s: k6 runs out
    # of VUs and drops arrivals, so the load it reports is not the load that was asked for.
    figures = _run_work(tmp_path, one_slot_target, rate=300, duration_s=2, worst_ms=1, timeout_ms=1000)
    assert figures.dropped > 100
    assert figures.generator_bound
    assert any("iterations dropped" in reason for reason in figures.generator_reasons)
    assert any("iterations dropped" in reason for reason in step_failures(figures, 1000))


def test_a_k6_run_records_its_peak_memory_and_the_runtime_settings_it_ran_with(
    tmp_path: Path, one_slot_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOMEMLIMIT", "1536MiB")  # the caller's: the lab sets no collector of its own
    monkeypatch.delenv("GOGC", raising=False)
    figures = _run_work(tmp_path, one_slot_target, rate=20, duration_s=1, worst_ms=1000, timeout_ms=2000)
    assert figures.generator_settings == {"GOMEMLIMIT": "1536MiB", "K6_CSV_SAVE_INTERVAL": "100ms"}
    # A k6 process holds tens of MB before it sends anything; nothing else in the test is that large.
    assert 20 < figures.generator_peak_rss_mb < 1536


@pytest.mark.slow
def test_arrivals_still_unanswered_when_k6_stops_are_counted_and_fail_the_step(
    tmp_path: Path, stalled_target: str
) -> None:
    # k6 ends them at its graceful stop: they are in neither its requests nor its drops, so without
    # this count a 1 s step at 20 req/s against a target that never answered read as a clean light load.
    figures = _run_work(tmp_path, stalled_target, rate=20, duration_s=1, worst_ms=30_000, timeout_ms=60_000)
    assert (figures.requests, figures.dropped) == (0, 0)
    assert 19 <= figures.unanswered <= 20
    assert any(reason.startswith("unanswered: ") for reason in step_failures(figures, slo_p99_ms=30000))
