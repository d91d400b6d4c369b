"""Each profiled rung's flame graph, and a differential one against the rung before it, next to the report.

Input: the rungs' summaries, whose repeats name the stack files py-spy wrote during their measured steps
(`measuring.profiling`). Output: `profiles/rung-NN.svg` per rung (every step and repeat merged),
`profiles/rung-NN-vs-rung-MM.svg` against the previous profiled rung, and each summary's `profile` filled
in: its samples, top functions, the functions whose share changed most, and the files.
"""

from __future__ import annotations

from pathlib import Path

from tenk.lab.documents import RungProfile, RungResult
from tenk.lab.results.flamegraph import render
from tenk.lab.results.flames import Profile, call_tree, collapse, diff_tree, merge, share_changes, top_functions

FOLDER = "profiles"


def _name(rung: RungResult) -> str:
    return f"rung-{rung.index + 1:02d}"


def rung_profile(rung: RungResult, out: Path) -> tuple[RungProfile, Profile] | None:
    """The rung's profile document with every repeat's stack files, and their samples merged; None when
    the rung was not profiled."""
    repeats = rung.repeats or [rung]
    kept = [r.profile for r in repeats if r.profile is not None]
    if not kept:
        return None
    stacks = [path for profile in kept for path in profile.stacks]
    missing = next((p.missing for p in kept if p.missing), "")
    merged = merge(collapse((out / path).read_text(errors="replace")) for path in stacks if (out / path).exists())
    samples = sum(merged.values())
    if not samples and not missing:
        missing = "py-spy saw no stack running in the target (an idle target is not sampled)"
    document = RungProfile(
        rate_hz=kept[0].rate_hz, stacks=stacks, missing=missing, samples=samples,
        sampler_cpu_s=round(sum(p.sampler_cpu_s for p in kept), 3), sampled_s=round(sum(p.sampled_s for p in kept), 3),
    )  # fmt: skip
    return document, merged


def with_profiles(rungs: list[RungResult], out: Path) -> None:
    """Write every profiled rung's graphs under `out/profiles/` and fill in its `profile`."""
    previous: tuple[RungResult, Profile] | None = None
    for rung in rungs:
        found = rung_profile(rung, out)
        if found is None:
            continue
        document, merged = found
        rung.profile = document
        if not document.samples:
            continue
        folder = out / FOLDER
        folder.mkdir(exist_ok=True)
        document.top = top_functions(merged)
        document.flame = f"{FOLDER}/{_name(rung)}.svg"
        subtitle = f"{document.samples:,} samples at {document.rate_hz} Hz over {len(document.stacks)} step(s)"
        (out / document.flame).write_text(
            render(call_tree(merged), f"{rung.label}: where the target's CPU went", subtitle)
        )
        if previous is not None:
            before_rung, before = previous
            document.against = before_rung.label
            document.changed = share_changes(before, merged)
            document.diff = f"{FOLDER}/{_name(rung)}-vs-{_name(before_rung)}.svg"
            title = f"{before_rung.label} -> {rung.label}: change in each frame's share of samples"
            note = "width: the mean of both rungs' shares; red: grew, blue: shrank"
            (out / document.diff).write_text(render(diff_tree(before, merged), title, note, differential=True))
        previous = rung, merged


def top_rows(profile: RungProfile) -> list[dict[str, str]]:
    return [
        {"function": f.function, "self": f"{f.self_share:.1%}", "total": f"{f.total_share:.1%}"} for f in profile.top
    ]


def changed_rows(profile: RungProfile) -> list[dict[str, str]]:
    return [
        {
            "function": f.function,
            profile.against: f"{f.before:.1%}",
            "this rung": f"{f.after:.1%}",
            "change (points)": f"{f.points:+.1f}",
            "noise (± points)": f"{f.noise_points:.1f}",
        }
        for f in profile.changed
    ]


def profile_line(profile: RungProfile) -> str:
    """What the rung's profile is, or why it has none."""
    if not profile.samples:
        return f"no profile: {profile.missing}"
    line = f"{profile.samples:,} stack samples at {profile.rate_hz} Hz from {len(profile.stacks)} measured step(s)"
    if profile.sampled_s:
        line += f"; py-spy used {profile.sampler_cpu_s / profile.sampled_s:.1%} of a generator core"
    return line + (f" (some steps were not sampled: {profile.missing})" if profile.missing else "")


PROFILE_NOTE = (
    "py-spy sampled the target's process tree (its workers too) during each measured step, on the "
    "generator's CPUs, keeping the threads that held the GIL: Python running, not waiting, and not the "
    "server's native work done without the GIL (CPU ms/req counts that). self: the share of samples "
    "where the function was running; total: where it was anywhere on the stack. The changes are in self "
    "share, in percentage points, against the rung before; noise is two standard errors of a change from "
    "sampling alone, so a change within it is not evidence of one. In a differential graph a frame is as "
    "wide as the mean of its two shares, red where it grew, blue where it shrank."
)
