"""A rung's CPU budget: the target and all its workers held to the quota, its throttling reported, the
fallback labelled where no quota can be set, a budget the machine cannot give refused, and `auto`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tenk.lab.documents import Results, load_results
from tenk.lab.measuring.auto_budget import OperatingPoint, Probe, choose_budget
from tenk.lab.processes.cpubudget import CGROUP_ROOT, NoBudget, open_budget

REPO = Path(__file__).resolve().parents[2]
MIX = '[[endpoint]]\nname = "spin"\npath = "/spin"\nweight = 1\n'


def _cgroups_or_skip() -> None:
    budget = open_budget(100)
    if isinstance(budget, NoBudget):
        pytest.skip(budget.label)
    budget.remove()


def _lab(tmp_path: Path, defaults: str, **env: str) -> tuple[subprocess.CompletedProcess[str], int]:
    """The lab run to its end, and its pid, which names the cgroup it made."""
    (tmp_path / "spin.toml").write_text(MIX)
    ladder = tmp_path / "budget.toml"
    ladder.write_text(
        'name = "budget"\nrepeats = 1\n[defaults]\ntarget = "tests.lab.spin_app:app"\nserver = "uvicorn"\n'
        f'mix = "spin.toml"\nwarmup_s = 0\n{defaults}\n[[rung]]\nlabel = "only"\n'
    )
    with subprocess.Popen(
        [str(Path(sys.executable).parent / "tenk"), "lab", "run", str(ladder), "--quiet", "--results", str(tmp_path)],
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as lab:
        try:
            stdout, stderr = lab.communicate(timeout=300)
        finally:
            if lab.poll() is None:
                lab.kill()
    return subprocess.CompletedProcess(lab.args, lab.returncode, stdout, stderr), lab.pid


def _results(tmp_path: Path, done: subprocess.CompletedProcess[str]) -> Results:
    assert done.returncode == 0, done.stdout + done.stderr
    (found,) = tmp_path.glob("budget-*/results.json")
    return load_results(found)


def _groups_of(lab_pid: int) -> list[Path]:
    """The groups the lab that ran `done` left behind. Only its own: a group of another lab (an earlier run
    killed outright, a neighbour's CI job sharing the hierarchy) is not this run's to answer for."""
    return sorted(CGROUP_ROOT.glob(f"**/tenk-lab-{lab_pid}"))


@pytest.mark.slow
def test_a_busy_target_and_every_worker_of_it_are_held_to_the_budget(tmp_path: Path) -> None:
    _cgroups_or_skip()
    # Two workers asked for 40 x 20 ms = 0.8 cores: without the quota both would run, on CPU 0, near that.
    done, pid = _lab(tmp_path, 'workers = 2\nrate = 40\nduration_s = 4\ncpu_budget = "300m"', SPIN_MS="20")
    rung = _results(tmp_path, done).rungs[0]
    assert rung.cpu_budget is not None
    assert rung.cpu_budget.millicores == 300
    assert rung.server.processes >= 3  # uvicorn's supervisor and its two workers, all sampled
    cores = rung.server.cpu_cores_mean or 0.0
    # The quota's error is one 10 ms period overrun per reading, on a 1 s sample: well under 0.05 cores.
    assert 0.1 < cores <= 0.35, cores
    assert rung.server.throttling["throttled"] > 0
    assert rung.bottleneck is not None
    assert rung.bottleneck.kind == "target", rung.bottleneck
    assert _groups_of(pid) == []


@pytest.mark.slow
def test_without_a_cpu_controller_the_rung_runs_unbudgeted_and_says_so(tmp_path: Path) -> None:
    done, _ = _lab(
        tmp_path,
        'rate = 20\nduration_s = 2\ncpu_budget = "300m"',
        SPIN_MS="1",
        TENK_LAB_CGROUP_ROOT=str(tmp_path / "no-cgroups"),
    )
    rung = _results(tmp_path, done).rungs[0]
    assert rung.cpu_budget is not None
    assert rung.cpu_budget.millicores is None
    assert rung.cpu_budget.missing.startswith("no CPU budget: no cgroup cpu controller under ")
    assert any(note.startswith("no CPU budget") for note in rung.verdict.notes), rung.verdict.notes
    assert "not enforced: no CPU budget" in (tmp_path / next(tmp_path.glob("budget-*")).name / "report.md").read_text()


def test_a_budget_the_target_cores_cannot_give_is_refused_before_anything_starts(tmp_path: Path) -> None:
    done, _ = _lab(tmp_path, 'rate = 20\nduration_s = 2\ncpus = "0"\ncpu_budget = "1500m"')
    assert done.returncode != 0
    assert "cpu_budget 1500m exceeds the 1 core(s) left for the target" in done.stdout + done.stderr
    assert not list(tmp_path.glob("budget-*/logs"))


@pytest.mark.slow
def test_auto_probes_the_rung_and_runs_it_under_the_budget_it_chose(tmp_path: Path) -> None:
    _cgroups_or_skip()
    done, _ = _lab(tmp_path, 'rate = 20\nduration_s = 2\ncpu_budget = "auto"', SPIN_MS="2")
    rung = _results(tmp_path, done).rungs[0]
    budget = rung.cpu_budget
    assert budget is not None
    assert budget.millicores is not None
    assert budget.millicores % 50 == 0
    assert budget.auto.startswith(f'cpu_budget = "auto" chose {budget.millicores}m')
    assert "target" in budget.auto
    assert "generator" in budget.auto
    assert (tmp_path / next(tmp_path.glob("budget-*")).name / "probe" / "rung-01").is_dir()


def _probe(label: str, target_ms: float, dependencies_ms: float, generator_ms: float) -> Probe:
    return Probe.from_cpu_ms(label, {"target": target_ms, "postgres": dependencies_ms}, generator_ms)


def test_auto_takes_the_largest_budget_every_rung_allows() -> None:
    # 1 ms of target and 0.5 ms of k6 a request: k6 at 60 % of one core allows 1.2 cores; the core, 90 %.
    cheap_generator = _probe("a", target_ms=1.0, dependencies_ms=0.0, generator_ms=0.5)
    assert choose_budget([cheap_generator], generator_cores=1, target_cores=1).millicores == 900
    # 0.2 ms of target against 0.5 of k6: k6 runs out first, at 0.6 * 0.2 / 0.5 = 0.24 cores.
    dear_generator = _probe("b", target_ms=0.2, dependencies_ms=0.0, generator_ms=0.5)
    # Dependencies as dear as the target halve what the core leaves it: 0.45 cores.
    dear_dependencies = _probe("c", target_ms=1.0, dependencies_ms=1.0, generator_ms=0.1)
    chosen = choose_budget([cheap_generator, dear_generator, dear_dependencies], generator_cores=1, target_cores=1)
    assert chosen.millicores == 200  # 240m, rounded down to a step of 50m
    assert "generator under 60%" in chosen.describe()


def test_auto_parts_fixed_cpu_from_cpu_a_request_so_a_light_rate_does_not_oversize_the_budget() -> None:
    # A target with 50m of fixed work (a sampler, keep-alives) and 0.25 ms a request; k6 as dear a request,
    # and 10m fixed. At 100 req/s the target's average is 0.75 ms (three times the true cost), at 400 0.375.
    def at(rate: float) -> tuple[float, dict[str, float], float]:
        return rate, {"target": (50 + 0.25 * rate) / rate, "postgres": 0.05}, (10 + 0.25 * rate) / rate

    probe = Probe.from_two_rates("cache on", at(100), at(400))
    assert probe.target.marginal_ms == pytest.approx(0.25)
    assert probe.target.fixed_cores == pytest.approx(0.05)
    assert probe.generator.marginal_ms == pytest.approx(0.25)

    def k6_cores_at_saturation(millicores: int) -> float:
        rate = (millicores / 1000 - 0.05) / 0.25 * 1000
        return (10 + 0.25 * rate) / 1000

    # From the light rate alone: 800m, where the target saturates at 3,000 req/s and k6 needs 0.76 of a core.
    light_only = choose_budget([Probe.from_cpu_ms("cache on", *at(100)[1:])], generator_cores=1, target_cores=1)
    assert k6_cores_at_saturation(light_only.millicores) > 0.6  # the bug this guards against
    # From both: k6 reaches 60 % at (0.6 - 0.01) / 0.25 ms = 2,360 req/s, where the target needs 0.64 cores.
    two_rates = choose_budget([probe], generator_cores=1, target_cores=1)
    assert two_rates.millicores == 600
    assert k6_cores_at_saturation(two_rates.millicores) <= 0.6


def test_a_noisy_pair_of_probes_falls_back_to_the_higher_rates_average() -> None:
    # CPU a request higher at the higher rate than a straight line allows (a negative fixed cost).
    probe = Probe.from_two_rates("noisy", (100, {"target": 0.2}, 0.1), (400, {"target": 0.3}, 0.1))
    assert probe.target.marginal_ms == pytest.approx(0.3)
    assert probe.target.fixed_cores == 0


def test_auto_tries_its_choice_where_k6_works_hardest_and_lowers_it_when_k6_would_pass_its_share() -> None:
    # Two rungs: "cheap" runs fastest under the budget. The probes make it 0.4 ms a request: at 500m it
    # should saturate at 1,250 req/s.
    cheap = _probe("cheap", target_ms=0.4, dependencies_ms=0.0, generator_ms=0.2)
    dear = _probe("dear", target_ms=2.0, dependencies_ms=0.0, generator_ms=0.2)
    chosen = choose_budget([cheap, dear], generator_cores=1, target_cores=1)
    index, rate = chosen.fastest()
    assert index == 0
    assert rate == pytest.approx(chosen.millicores / 0.4)
    # Served there, the target used only half its budget (a request cheaper than the probes said: it would
    # saturate at twice the rate) and k6 was at 45 %: 90 % at the real saturation. Lowered to keep 60 %.
    point = OperatingPoint("cheap", rate, target_cores=chosen.millicores / 2000, generator_util=0.45)
    lowered = chosen.confirmed(point)
    assert chosen.millicores == 900  # the core's 90 % bound both rungs
    assert lowered.millicores == 600  # k6 scales with the budget: 90 % x 600 / 900 = 60 %
    assert f"lowered from {chosen.millicores}m" in lowered.describe()
    assert lowered.describe().startswith(f'cpu_budget = "auto" chose {lowered.millicores}m')
    # The target spent its budget and k6 stayed at 40 %: the choice holds.
    held = chosen.confirmed(OperatingPoint("cheap", rate, target_cores=chosen.millicores / 1000, generator_util=0.4))
    assert held.millicores == chosen.millicores
    assert held.describe().endswith("40% at the target's saturation: kept")
