"""`tenk lab ...`: run ladders, list mixes, compare and merge results."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from tenk.lab.errors import LabError
from tenk.lab.results.plan import plan_command

PRESET_DIR = Path(__file__).parent / "presets"


@click.group()
def lab() -> None:
    """The lab: open-loop load from weighted mixes, one-variable ladders, capacity search, reports."""


@lab.command()
@click.argument("ladder_file", required=False, type=click.Path(path_type=Path))
@click.option("--preset", help="A ladder shipped in tenk/lab/presets/ (by name, without .toml).")
@click.option("--app", "app", help="Target for every rung: module:attr (overrides [defaults] target).")
@click.option("--factory/--no-factory", default=None, help="Whether --app is a factory (default: not).")
@click.option("--mix", help="Mix for every rung: a built-in name or a mix TOML (overrides [defaults] mix).")
@click.option("--segment", default="", help="Run the i-th of n k6 execution segments (i/n), for several generators.")
@click.option("--base-url", help="Load a target that is already running there; start no processes.")
@click.option("--results", "results_root", default="results", show_default=True, type=click.Path(path_type=Path))
@click.option("--quiet", is_flag=True, help="No live progress.")
@click.option(
    "--repeats", type=click.IntRange(min=1), help="Measure each rung this many times (default: the ladder's)."
)
@click.option(
    "--no-stream",
    is_flag=True,
    help="Fixed-rate runs: no per-request stream from k6 (no latency histogram, no per-second live view).",
)
@click.option(
    "--cpu-budget",
    help='The target\'s CPU quota for rungs that set none: "300m", "1.5", "auto" or "none" '
    "(default: TENK_LAB_CPU_BUDGET, else auto below 4 cores, else none).",
)
@click.option(
    "--profile",
    is_flag=True,
    help="Sample the target's stacks during each measured step (py-spy; needs ptrace): a flame graph per rung "
    "and a differential one between consecutive rungs, next to the report. Also the ladder's `profile = true`.",
)
@click.option(
    "--profile-rate",
    type=click.IntRange(min=1, max=1000),
    default=100,
    show_default=True,
    help="Stack samples a second, with --profile.",
)
@click.option("--dry-run", is_flag=True, help="Validate the ladder, print the plan and its time bound; start nothing.")
def run(
    ladder_file: Path | None,
    preset: str | None,
    app: str | None,
    factory: bool | None,
    mix: str | None,
    segment: str,
    base_url: str | None,
    results_root: Path,
    quiet: bool,
    repeats: int | None,
    no_stream: bool,
    cpu_budget: str | None,
    profile: bool,
    profile_rate: int,
    dry_run: bool,
) -> None:
    """Run LADDER.toml (or --preset NAME): every rung, then results.json, report.md and report.html."""
    from tenk.lab.definition.ladder import load_ladder
    from tenk.lab.driving.k6 import k6_binary, parse_segment
    from tenk.lab.driving.wrk import wrk_binary
    from tenk.lab.measuring.options import RunOptions
    from tenk.lab.measuring.progress import QuietProgress, RichProgress
    from tenk.lab.results.record import run_ladder

    if (ladder_file is None) == (preset is None):
        raise click.UsageError("give a LADDER_FILE or --preset NAME (one of them)")
    path = ladder_file if ladder_file is not None else PRESET_DIR / f"{preset}.toml"
    if preset is not None and not path.exists():
        known = ", ".join(sorted(p.stem for p in PRESET_DIR.glob("*.toml"))) or "none"
        raise click.ClickException(f"no preset {preset!r} (known: {known})")
    overrides: dict[str, Any] = {}
    if app:
        overrides["target"] = app
        overrides["factory"] = bool(factory)
    elif factory is not None:
        overrides["factory"] = factory
    if mix:
        overrides["mix"] = mix
    if cpu_budget:
        overrides["cpu_budget"] = cpu_budget
    try:
        if segment:
            parse_segment(segment)
        ladder = load_ladder(path, overrides)
        if dry_run:
            from tenk.lab.measuring.runner import plan_text

            click.echo(plan_text(ladder, repeats))
            return
        k6_binary()
        if any(r.config.engine == "wrk" for r in ladder.rungs) and wrk_binary() is None:
            raise LabError('a rung uses engine = "wrk" but wrk is not installed (`make system-deps`)')
        if shutil.which("taskset") is None:
            raise LabError("taskset (util-linux) is needed to pin the target to its CPUs")
        console = Console()
        progress = QuietProgress() if quiet else RichProgress(console)
        out = run_ladder(
            ladder,
            RunOptions(
                results_root=results_root.resolve(),
                segment=segment,
                base_url=base_url,
                progress=progress,
                repeats=repeats,
                stream=not no_stream,
                profile=profile,
                profile_rate_hz=profile_rate,
            ),
        )
    except KeyboardInterrupt:
        from tenk.lab.processes.servers import stop_leftover_children

        stop_leftover_children()
        raise click.ClickException("interrupted: every process the lab started has been stopped") from None
    click.echo(f"results: {out}\n  {out / 'report.md'}\n  {out / 'report.html'}")
    click.echo((out / "report.md").read_text())


@lab.command()
def mixes() -> None:
    """List the built-in mixes and their endpoints."""
    from tenk.lab.definition.mixes import builtin_mixes, load_mix

    console = Console()
    for name in builtin_mixes():
        mix = load_mix(name)
        table = Table(title=f"{name}: {mix.description}", title_justify="left")
        for column in ("endpoint", "kind", "method", "path", "share", "expect"):
            table.add_column(column)
        for endpoint in mix.endpoints:
            table.add_row(
                endpoint.name,
                endpoint.kind,
                endpoint.method,
                endpoint.path,
                f"{endpoint.share:.0%}",
                ",".join(str(c) for c in endpoint.expect),
            )
        console.print(table)


def _percent(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip().removesuffix("%"))
    except ValueError:
        raise click.BadParameter(f"expected a percentage like 5%, got {value!r}") from None
    if not 0 < number < 100:
        raise click.BadParameter(f"expected a percentage between 0 and 100, got {value!r}")
    return number / 100


@lab.command()
@click.argument("a", type=click.Path(exists=True, path_type=Path))
@click.argument("b", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--fail-on-regression",
    "fail_on",
    metavar="PCT",
    is_flag=False,
    flag_value="10%",
    help="Exit 1 when some rung's target CPU ms per request, or its headline when both are the target's, is "
    "worse in B by at least PCT (default 10 %: above the 8 % run-to-run spread of CPU ms per request on a "
    "2-core machine), with statistical support.",
)
def compare(a: Path, b: Path, fail_on: str | None) -> None:
    """Per-rung comparison of B against A, each labelled better / worse / no detectable change / inconclusive."""
    from tenk.lab.documents import load_results
    from tenk.lab.results.compare import compare_rows, provenance_warnings, regressions

    threshold = _percent(fail_on)
    base, new = load_results(a), load_results(b)
    rows = compare_rows(base, new)
    if not rows:
        raise click.ClickException("no rung labels in common")
    for warning in provenance_warnings(base, new):
        click.echo(f"warning: the runs differ: {warning}", err=True)
    console = Console()
    if not console.is_terminal:
        # Piped or redirected: a Markdown table, whole and pasteable, instead of one cut to 80 columns.
        from tenk.lab.results.markdown import md_table

        click.echo(f"A = {a}\nB = {b}\n\n{md_table(rows)}")
    else:
        table = Table(title=f"A = {a}\nB = {b}", title_justify="left")
        for column in rows[0]:
            table.add_column(column)
        for row in rows:
            table.add_row(*row.values())
        console.print(table)
    if threshold is not None:
        found = regressions(base, new, threshold)
        for line in found:
            click.echo(f"regression >= {threshold:.0%}: {line}", err=True)
        if found:
            raise SystemExit(1)
        click.echo(f"no statistically supported regression of {threshold:.0%} or more", err=True)


@lab.command()
@click.argument("folders", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("-o", "--out", required=True, type=click.Path(path_type=Path), help="Folder for the merged result.")
@click.option(
    "--k6-summaries",
    is_flag=True,
    help="The inputs are raw k6 summaries (e.g. k6-operator runner logs), not lab result folders.",
)
@click.option("--mix", "mix_name", help="With --k6-summaries: the mix the script was generated from.")
@click.option("--rate", type=float, help="With --k6-summaries: the script's total rate, req/s.")
@click.option("--duration", "duration_s", type=float, help="With --k6-summaries: the script's duration, s.")
def merge(
    folders: tuple[Path, ...],
    out: Path,
    k6_summaries: bool,
    mix_name: str | None,
    rate: float | None,
    duration_s: float | None,
) -> None:
    """Merge results from `--segment i/n` runs on several generator machines into one."""
    from tenk.lab.definition.mixes import load_mix
    from tenk.lab.documents import load_results
    from tenk.lab.driving.k6_summaries import load_summary, result_from_summary
    from tenk.lab.results.compare import MERGE_NOTE, write_merged

    if k6_summaries:
        if mix_name is None or rate is None or duration_s is None:
            raise click.UsageError("--k6-summaries needs --mix, --rate and --duration")
        mix = load_mix(mix_name)
        parts = [result_from_summary(load_summary(path), mix, rate, duration_s) for path in folders]
    else:
        parts = [load_results(folder) for folder in folders]
    write_merged(parts, out)
    click.echo(f"merged {len(folders)} segments into {out}\n{MERGE_NOTE}")


@lab.command()
@click.argument("mix_name", metavar="MIX")
@click.option("--rate", type=float, required=True, help="Total arrival rate, req/s (split by the mix's weights).")
@click.option("--duration", "duration_s", type=float, required=True, help="Seconds of load.")
@click.option("--slo-ms", type=float, default=100.0, show_default=True, help="Sizes the VU pools.")
@click.option("-o", "--out", type=click.Path(path_type=Path), help="Write here instead of stdout.")
def script(mix_name: str, rate: float, duration_s: float, slo_ms: float, out: Path | None) -> None:
    """Print the k6 script for MIX (a built-in name or a mix TOML), to run anywhere k6 runs."""
    from tenk.lab.definition.mixes import load_mix
    from tenk.lab.driving.k6script import k6_script

    text = k6_script(load_mix(mix_name), rate, duration_s, slo_ms)
    if out is None:
        click.echo(text)
    else:
        out.write_text(text)
        click.echo(f"wrote {out}", err=True)


lab.add_command(plan_command)
