"""report.md: the verdict first, then the rungs, the claims and each capacity search's steps."""

from __future__ import annotations

import html

from tenk.lab.documents import Results
from tenk.lab.results.profiles import PROFILE_NOTE, changed_rows, profile_line, top_rows
from tenk.lab.results.tables import (
    RungTable,
    claim_rows,
    or_unknown,
    provenance_line,
    reset_line,
    rung_table,
    verdict_lines,
)


def md_table(rows: list[dict[str, str]]) -> str:
    if not rows:
        return "(none)\n"
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row[h].replace("|", "/") for h in head) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def md_rungs(table: RungTable) -> str:
    """The rung table, then each rung's other figures in a `<details>` of its own (GitHub and most viewers
    fold it; as plain text it is a list)."""
    parts = [md_table(table.rows), RUNG_TABLE_NOTE]
    for title, figures in table.details:
        lines = "\n".join(f"- **{name}**: {value}" for name, value in figures.items())
        parts.append(f"<details><summary>{html.escape(title)}</summary>\n\n{lines}\n\n</details>\n")
    return "\n".join(parts)


RUNG_TABLE_NOTE = (
    "value: the rung's capacity (the highest rate within the SLO) or its goodput, median [95 % interval]; "
    "≥ marks a figure the target did not set. CPU ms/req is the target's CPU time per completed request. "
    "Every other figure of a rung is in its details.\n"
)


def _escaped(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """Rows whose text is shown as it is: a frame named `<module>` is not a tag to a Markdown viewer."""
    return [{key: html.escape(value, quote=False) for key, value in row.items()} for row in rows]


def md_profiles(results: Results) -> str:
    """Each profiled rung: its flame graph, top functions, and what changed against the rung before."""
    parts = ["\n## Where the CPU went\n", PROFILE_NOTE + "\n"]
    for rung in results.rungs:
        profile = rung.profile
        if profile is None:
            continue
        parts.append(f"\n### {rung.label}\n\n{profile_line(profile)}\n")
        if profile.flame:
            parts.append(f"Flame graph: [{profile.flame}]({profile.flame})\n\n" + md_table(_escaped(top_rows(profile))))
        if profile.diff:
            parts.append(
                f"\nAgainst {profile.against}: [{profile.diff}]({profile.diff}); the functions whose share "
                "changed most:\n\n" + md_table(_escaped(changed_rows(profile)))
            )
    return "\n".join(parts)


def markdown(results: Results) -> str:
    parts = [
        f"# {results.ladder}\n",
        *([f"**Partial results: {results.partial}**\n"] if results.partial else []),
        f"{results.description}\n",
        f"Created {results.created}; took {or_unknown(results.elapsed_s)}s (bound stated up front: "
        f"{or_unknown(results.time_bound_s)}s). Source: `{results.source}`.\n",
        "## Verdict\n",
        "\n".join(verdict_lines(results)) + "\n",
        provenance_line(results),
        reset_line(results),
    ]
    # Results from before the generator's memory was recorded have no such column to explain.
    recorded = any(rung.figures.generator_peak_rss_mb for rung in results.rungs)
    generator_memory = "`gen RSS MB` is its peak memory. " if recorded else ""
    if results.merged_from:
        parts.append(f"Merged from {len(results.merged_from)} generator segments. {results.merge_note}\n")
    parts += [
        "## Rungs\n",
        md_rungs(rung_table(results)),
        "\nIn the details: `CPU cores` and `RSS MB` are the target's process tree (mean cores busy, peak RSS), "
        "sampled every second. `neighbour cores` is how busy the target's CPUs were with other processes: above "
        "0.15 the rung is marked contended. `gen CPU` is the load generator's share of its own cores; above "
        f"80 %, or with dropped iterations, a run is generator-bound and not a server figure. {generator_memory}"
        "Latencies are from the open-loop (k6) run (for capacity rungs: the highest passing step).\n",
        "\n## Claims\n",
        "Measured ratio: to/from for rps and capacity; from/to for p99_ms, errors and cpu_ms (times lower).\n\n",
        md_table(claim_rows(results)),
    ]
    if any(rung.profile is not None for rung in results.rungs):
        parts.append(md_profiles(results))
    searched = [(rung.label, search) for rung in results.rungs if (search := rung.capacity) is not None]
    steps = [(label, step) for label, search in searched for step in search.steps]
    if steps:
        parts.append("\n## Capacity search steps\n")
        for label, search in searched:
            # The precision reached, beside the one the plan asked for: a search that converged says how
            # near it bracketed the capacity, one that did not says where it stopped.
            if search.unconverged:
                outcome = f"; did not converge: {search.unconverged}"
            else:
                outcome = f"; bracketed: {search.reached}" if search.reached else ""
            parts.append(f"\n**{label}**: {search.plan}{outcome}\n\n")
        rows = [
            {
                "rung": label,
                "offered": f"{step.rate:g}",
                "achieved": f"{step.figures.rps:,.0f}",
                "p50 ms": f"{step.figures.p50_ms:.1f}",
                "p99 ms": f"{step.figures.p99_ms:.1f}",
                "errors": f"{step.figures.error_rate:.2%}",
                "dropped": str(step.figures.dropped),
                "gen CPU": f"{step.figures.generator_util:.0%}",
                "target CPU": f"{step.server.cpu_cores_mean or 0:.2f}",
                "neighbours": f"{step.server.neighbour_cores_mean or 0:.2f}",
                "result": "pass" if step.passed else "fail: " + "; ".join(step.reasons),
            }
            for label, step in steps
        ]
        parts.append(md_table(rows))
    return "\n".join(parts)
