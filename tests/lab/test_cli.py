"""`tenk lab` from the command line: bad input is refused before anything starts, with a clear error."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest
from click.testing import CliRunner

from tenk.cli import main
from tenk.lab.definition.ladder import load_ladder
from tenk.lab.errors import NotReadyError
from tenk.lab.measuring.options import RunOptions
from tenk.lab.results.record import run_ladder


def test_mixes_lists_the_builtins() -> None:
    result = CliRunner().invoke(main, ["lab", "mixes"])
    assert result.exit_code == 0
    for name in ("realistic", "ping", "product", "tasks-list", "search", "ingest", "quotes"):
        assert f"{name}:" in result.output


def test_a_malformed_ladder_fails_with_file_line_and_key_before_starting(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('name = "bad"\n[defaults]\nmix = "ping"\n[[rung]]\nlabel = "a"\nworkers = 0\n')
    result = CliRunner().invoke(main, ["lab", "run", str(path), "--results", str(tmp_path / "out"), "--quiet"])
    assert result.exit_code != 0
    assert f"{path}:6: rung[1].workers: expected an integer >= 1" in result.output
    assert not (tmp_path / "out").exists()


def test_an_unknown_preset_names_the_known_ones() -> None:
    result = CliRunner().invoke(main, ["lab", "run", "--preset", "no-such-preset"])
    assert result.exit_code != 0
    assert "no preset 'no-such-preset'" in result.output


def test_a_target_that_never_gets_ready_is_reported_with_its_log_tail(tmp_path: Path) -> None:
    path = tmp_path / "ladder.toml"
    path.write_text(
        'name = "broken"\n[defaults]\ntarget = "no_such_module_here:app"\nserver = "uvicorn"\nmix = "ping"\n'
        'rate = 10\nduration_s = 1\nwarmup_s = 0\n[[rung]]\nlabel = "a"\n'
    )
    with pytest.raises(NotReadyError) as caught:
        run_ladder(load_ladder(path), RunOptions(results_root=tmp_path / "out", base_env=dict(os.environ)))
    message = str(caught.value)
    assert "target exited with code" in message
    assert "no_such_module_here" in message  # from the server's own log


EXAMPLE = Path(__file__).parents[2] / "src/tenk/lab/examples/local-cache.toml"


def test_dry_run_prints_the_plan_and_starts_nothing(tmp_path: Path) -> None:
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    result = CliRunner().invoke(
        main,
        ["lab", "run", str(EXAMPLE), "--dry-run", "--repeats", "2",
         "--results", str(tmp_path / "results")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "2 rungs x 2 repeats" in result.output
    assert "local cache off: env.TENK_CATALOG_LOCAL_CACHE: (unset) -> false" in result.output
    assert "time bound:" in result.output
    assert not (tmp_path / "results").exists()
    assert {child.pid for child in psutil.Process().children(recursive=True)} <= before


def test_a_lab_error_is_a_command_line_error_never_an_http_one(tmp_path: Path) -> None:
    from tenk.lab.errors import LabError
    from tenk.platform.errors import TenkError

    assert not issubclass(LabError, TenkError)
    result = CliRunner().invoke(main, ["lab", "compare", str(tmp_path), str(tmp_path)])
    assert result.exit_code == 1
    assert result.output.startswith("Error: ")
    assert "Traceback" not in result.output
