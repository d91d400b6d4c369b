"""Ladder files: every rung expands to a full configuration, and a rung may change one variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenk.lab.definition.ladder import load_ladder
from tenk.lab.errors import ConfigError


def write(tmp_path: Path, text: str, name: str = "ladder.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


HEAD = """\
name = "t"
[defaults]
target = "tenk"
mix = "product"
rate = 100
"""


def test_rungs_inherit_from_the_previous_rung_and_each_changes_one_variable(tmp_path: Path) -> None:
    ladder = load_ladder(
        write(
            tmp_path,
            HEAD
            + """
[[rung]]
label = "one worker"
[[rung]]
label = "two workers"
workers = 2
[[rung]]
label = "no local cache"
[rung.env]
TENK_CATALOG_LOCAL_CACHE = false
""",
        )
    )
    first, second, third = ladder.rungs
    assert first.changed == "baseline"
    assert [str(c) for c in second.changes] == ["workers: 1 -> 2"]
    assert third.config.workers == 2  # kept from the previous rung
    assert third.config.env == {"TENK_CATALOG_LOCAL_CACHE": "false"}
    assert [c.key for c in third.changes] == ["env.TENK_CATALOG_LOCAL_CACHE"]
    assert not any(rung.multi_variable for rung in ladder.rungs)


def test_a_rung_changing_two_variables_is_refused_with_its_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        HEAD
        + """
[[rung]]
label = "base"
[[rung]]
label = "bigger"
workers = 2
server = "uvicorn"
""",
    )
    with pytest.raises(ConfigError) as caught:
        load_ladder(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:10: rung[2].label:")
    assert "changes 2 variables" in message
    assert "server: granian -> uvicorn" in message
    assert "workers: 1 -> 2" in message
    assert "allow_multi" in message


def test_allow_multi_lets_the_rung_run_and_marks_it(tmp_path: Path) -> None:
    ladder = load_ladder(
        write(
            tmp_path,
            HEAD
            + """
[[rung]]
label = "base"
[[rung]]
label = "bigger"
workers = 2
server = "uvicorn"
allow_multi = true
""",
        )
    )
    assert ladder.rungs[1].multi_variable
    assert len(ladder.rungs[1].changes) == 2


def test_target_and_its_factory_flag_are_one_variable(tmp_path: Path) -> None:
    ladder = load_ladder(
        write(
            tmp_path,
            HEAD
            + """
[[rung]]
label = "tenk"
[[rung]]
label = "async baseline"
target = "baseline:naive_async"
factory = false
""",
        )
    )
    assert [c.key for c in ladder.rungs[1].changes] == ["target"]
    assert ladder.rungs[1].config.factory is False


@pytest.mark.parametrize(
    ("body", "line", "key", "fragment"),
    [
        ('\n[[rung]]\nlabel = "a"\nwrkers = 2\n', 9, "rung[1].wrkers", "did you mean 'workers'"),
        ('\n[[rung]]\nlabel = "a"\nworkers = "two"\n', 9, "rung[1].workers", "expected an integer"),
        ('\n[[rung]]\nlabel = "a"\nserver = "nginx"\n', 9, "rung[1].server", "granian, uvicorn, gunicorn"),
        ('\n[[rung]]\nlabel = "a"\nmix = "no-such-mix"\n', None, "", "no such mix file"),
        ('\n[[rung]]\nlabel = "a"\ncpus = "zero"\n', 9, "rung[1].cpus", 'expected a CPU list like "0"'),
        ('\n[[rung]]\nlabel = "a"\nrate = "fast"\n', 9, "rung[1].rate", "expected a number, got 'fast'"),
        ('\n[[rung]]\nlabel = "a"\n[rung.env]\nX = [1]\n', 10, "rung.env[1].X", "expected a string, number or boolean"),
        ('\n[[rung]]\nlabel = "a"\n[rung.upstream]\np51_ms = 3\n', 10, "rung.upstream[1].p51_ms",
         "expected one of p50_ms"),
        ('\n[[rung]]\nlabel = "a"\n[[claim]]\ntext = "x"\nfrom_rung = "a"\nto_rung = "zz"\nclaimed_ratio = 2\n',
         12, "claim[1].to_rung", "expected one of a"),
        ('\n[[rung]]\nlabel = "a"\n[[claim]]\ntext = "x"\nfrom_rung = "a"\nto_rung = "a"\n'
         'expect = "to_rung.goodput >= __import__(1)"\n', 13, "claim[1].expect", "expected 'RUNG.QUANTITY OP"),
        ('\n[[rung]]\nlabel = "a"\n[[claim]]\ntext = "x"\nfrom_rung = "a"\nto_rung = "a"\n'
         'expect = ["to_rung.speed >= 1"]\n', 13, "claim[1].expect", "unknown quantity 'speed'"),
        ('\n[[rung]]\nlabel = "a"\n[[claim]]\ntext = "x"\nfrom_rung = "a"\nto_rung = "a"\n', None, "",
         "a claim needs a claimed_ratio, or an expect"),
        ('\n[[rung]]\nlabel = "a"\nredis_io_threads = -1\n', 9, "rung[1].redis_io_threads", "expected an integer >= 0"),
        ('\n[[rung]]\nlabel = "a"\nrate = inf\n', 9, "rung[1].rate", "expected a finite number, got inf"),
        ('\n[[rung]]\nlabel = "a"\nduration_s = nan\n', 9, "rung[1].duration_s", "expected a finite number"),
    ],
)  # fmt: skip
def test_malformed_ladders_name_file_line_and_key(
    tmp_path: Path, body: str, line: int | None, key: str, fragment: str
) -> None:
    path = write(tmp_path, HEAD + body)
    with pytest.raises(ConfigError) as caught:
        load_ladder(path)
    error = caught.value
    assert fragment in str(error)
    if line is not None:
        assert (error.path, error.line, error.key) == (path, line, key)
        assert str(error).startswith(f"{path}:{line}: {key}: ")


def test_invalid_toml_reports_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, 'name = "t"\n[defaults]\nrate = = 5\n')
    with pytest.raises(ConfigError) as caught:
        load_ladder(path)
    assert str(caught.value).startswith(f"{path}:")
    assert "line 3" in str(caught.value)


def test_command_line_overrides_apply_to_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, HEAD + '\n[[rung]]\nlabel = "a"\n[[rung]]\nlabel = "b"\nserver = "uvicorn"\n')
    ladder = load_ladder(path, {"target": "myapp.main:app", "factory": False, "mix": "ping"})
    assert all(r.config.target == "myapp.main:app" and r.config.mix == "ping" for r in ladder.rungs)
    assert [c.key for c in ladder.rungs[1].changes] == ["server"]


def test_a_command_rung_starts_its_own_command_with_the_port_and_workers_filled_in(tmp_path: Path) -> None:
    from tenk.lab.processes.servers import target_argv

    ladder = load_ladder(
        write(
            tmp_path,
            HEAD
            + """
[[rung]]
label = "served by tenk"
[[rung]]
label = "its own server"
command = ["python", "serve.py", "--port={port}", "--workers", "{workers}"]
""",
        )
    )
    served, own = ladder.rungs
    assert [str(c) for c in own.changes] == [
        "command: () -> ('python', 'serve.py', '--port={port}', '--workers', '{workers}')"
    ]
    assert target_argv(own.config, 8123, {}) == ["python", "serve.py", "--port=8123", "--workers", "1"]
    assert "granian" in target_argv(served.config, 8123, {})[0]


def test_what_should_bound_a_rung_is_an_expectation_not_a_variable(tmp_path: Path) -> None:
    ladder = load_ladder(
        write(
            tmp_path,
            HEAD.replace("rate = 100\n", 'rate = 100\nexpect_bound = "target"\n')
            + """
[[rung]]
label = "one worker"
[[rung]]
label = "two workers"
workers = 2
expect_bound = "any"
[[rung]]
label = "three workers"
workers = 3
""",
        )
    )
    # A rung's own, else [defaults]': not inherited from the rung before, and never counted as a change.
    assert [rung.expect_bound for rung in ladder.rungs] == ["target", "any", "target"]
    assert [rung.changed for rung in ladder.rungs[1:]] == ["workers: 1 -> 2", "workers: 2 -> 3"]
    refused = r"bad\.toml:8: rung\[1\]\.expect_bound: expected one of target, any, got 'postgres'"
    with pytest.raises(ConfigError, match=refused):
        load_ladder(write(tmp_path, HEAD + '[[rung]]\nlabel = "a"\nexpect_bound = "postgres"\n', "bad.toml"))
