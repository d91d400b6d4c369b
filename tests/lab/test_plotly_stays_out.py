"""`tenk lab plan` and `tenk lab compare` never load plotly: only writing report.html needs it.

Each command runs for real, in a fresh interpreter, on a committed result folder; then the test looks
in `sys.modules`. Importing plotly takes about a second and tens of MB, which a command that prints a
table should not pay.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).parent / "data" / "runner-95ede7a" / "slow-upstream"
# The mix those rungs ran: plan sizes a deployment from the rung that measured it.
MIX = Path(__file__).parents[2] / "src" / "tenk" / "lab" / "presets" / "mixes" / "slow-quotes.toml"

COMMANDS = """
import sys
from click.testing import CliRunner
from tenk.cli import main

results, mix = sys.argv[1:]
for command in (
    ["lab", "plan", "--rps", "1000", "--mix", mix, "--p99-ms", "200", "--results", results],
    ["lab", "compare", results, results],
):
    outcome = CliRunner().invoke(main, command)
    assert outcome.exit_code == 0, (command, outcome.output, outcome.exception)
print("after plan and compare:", "plotly" in sys.modules)
from tenk.lab.results.report import write_reports
print("after the report:", "plotly" in sys.modules)
"""


def test_plan_and_compare_run_without_loading_plotly() -> None:
    done = subprocess.run(
        [sys.executable, "-c", COMMANDS, str(RESULTS), str(MIX)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # The second line shows the check can see plotly: the report does load it.
    assert done.stdout.splitlines()[-2:] == ["after plan and compare: False", "after the report: True"], done.stdout
