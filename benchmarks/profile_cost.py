"""What `tenk lab run --profile` costs the target: one rung measured with and without py-spy sampling it.

`python -m benchmarks.profile_cost` (on a quiet machine; as root, py-spy needs ptrace): the first rung of
the server-config preset (`--preset`, `--ladder`, `--rung` choose another), run alone as a one-rung ladder,
`--trials` times each way, the two ways interleaved and their order alternating from one trial to the next
so drift hits both alike. Each run gives the rung's headline value (its capacity, or its goodput at a fixed
rate) and the target's CPU ms per request; the medians are printed, and the cost as the median of the
trials' paired ratios (profiled / unprofiled). `--rate` is py-spy's sampling rate (the default is
`--profile`'s). `--smoke` only checks that the harness runs: a few seconds at a fixed low rate, one trial,
figures that mean nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from tenk.lab.definition.ladder import Ladder, load_ladder
from tenk.lab.measuring.options import RunOptions
from tenk.lab.measuring.profiling import DEFAULT_RATE_HZ
from tenk.lab.results.record import run_ladder

PRESETS = Path(__file__).resolve().parents[1] / "src" / "tenk" / "lab" / "presets"


def one_rung(ladder: Ladder, label: str | None, smoke: bool) -> Ladder:
    """`ladder` cut down to its rung `label` (its first without one), alone, as its own first rung."""
    rungs = [rung for rung in ladder.rungs if label is None or rung.label == label]
    if not rungs:
        known = ", ".join(repr(rung.label) for rung in ladder.rungs)
        raise SystemExit(f"no rung {label!r} in {ladder.path} (its rungs: {known})")
    rung = replace(rungs[0], index=0, changes=())
    if smoke:
        config = replace(rung.config, capacity=False, rate=50.0, duration_s=3.0, warmup_s=0.0, cpu_budget="none")
        rung = replace(rung, config=config)
    return replace(ladder, name=f"profile-cost-{ladder.name}", rungs=(rung,), claims=(), profile=False)


def measure(ladder: Ladder, profiled: bool, rate_hz: int, root: Path) -> tuple[float, float, int]:
    """The rung's headline value, the target's CPU ms per request, and the samples py-spy took."""
    options = RunOptions(results_root=root, repeats=1, profile=profiled, profile_rate_hz=rate_hz)
    out = run_ladder(ladder, options)
    rung = json.loads((out / "results.json").read_text())["rungs"][0]
    profile = rung.get("profile") or {}
    if profiled and not profile.get("samples"):
        raise SystemExit(f"the profiled run took no samples: {profile.get('missing', 'no profile section')}")
    return float(rung["value"]), float(rung["cpu_ms"].get("target", 0.0)), int(profile.get("samples", 0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="server-config")
    parser.add_argument("--ladder", type=Path, help="a ladder file instead of a preset")
    parser.add_argument("--rung", help="the rung's label (default: the ladder's first)")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--rate", type=int, default=DEFAULT_RATE_HZ, help="py-spy's samples a second")
    parser.add_argument("--smoke", action="store_true", help="check the harness: seconds, figures meaningless")
    args = parser.parse_args()
    ladder = one_rung(load_ladder(args.ladder or PRESETS / f"{args.preset}.toml"), args.rung, args.smoke)
    trials = 1 if args.smoke else args.trials
    figures: dict[bool, list[tuple[float, float, int]]] = {False: [], True: []}
    with tempfile.TemporaryDirectory(prefix="profile-cost-") as scratch:
        for trial in range(trials):
            for profiled in (False, True) if trial % 2 == 0 else (True, False):
                figures[profiled].append(measure(ladder, profiled, args.rate, Path(scratch)))
            off, on = figures[False][-1], figures[True][-1]
            print(
                f"trial {trial + 1}: off {off[0]:,.0f} ({off[1]:.3f} CPU ms/req), "
                f"on {on[0]:,.0f} ({on[1]:.3f} CPU ms/req, {on[2]:,} samples)",
                file=sys.stderr,
            )
    pairs = list(zip(figures[False], figures[True], strict=True))
    rung = ladder.rungs[0]
    print(f"| {rung.label} at {args.rate} Hz, {trials} trial(s) | without --profile | with --profile | ratio |")
    print("|---|---:|---:|---:|")
    what = "capacity" if rung.config.capacity else "goodput"
    for name, column in ((what, 0), ("target CPU ms/req", 1)):
        without = statistics.median(run[column] for run in figures[False])
        with_profile = statistics.median(run[column] for run in figures[True])
        ratios = [b[column] / a[column] for a, b in pairs if a[column]]
        ratio = f"{statistics.median(ratios):.3f}" if ratios else "-"
        print(f"| {name} (median) | {without:,.3f} | {with_profile:,.3f} | {ratio} |")
    if args.smoke:
        print("(--smoke: the harness ran; these figures mean nothing)")


if __name__ == "__main__":
    main()
