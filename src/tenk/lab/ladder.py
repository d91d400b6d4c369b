"""Ladders: a `[defaults]` configuration and `[[rung]]` steps, each changing one variable.

Each rung starts from the previous rung's full configuration (the first from `[defaults]`) and
applies its own keys, so a rung lists only what it changes. The lab expands every rung to the
full configuration, diffs it against the previous one, and refuses a rung that changes more than
one variable unless it says `allow_multi = true`. `target` and `factory` count as one variable:
`factory` only says how to load the target.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from tenk.lab._toml import Where, load
from tenk.lab._tomlpos import locate
from tenk.lab.errors import ConfigError
from tenk.lab.mixes import Mix, load_mix

SERVERS = ("granian", "uvicorn", "gunicorn")
METRICS = ("rps", "capacity", "p99_ms", "errors", "cpu_ms")
_TARGET = re.compile(r"^(tenk|baseline:[A-Za-z_][A-Za-z0-9_]*|[A-Za-z_][\w.]*:[A-Za-z_][\w.]*)$")
_CPUS = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")
UPSTREAM_DEFAULTS: dict[str, float] = {"p50_ms": 40.0, "p99_ms": 400.0, "error_rate": 0.0, "hang_rate": 0.0}


@dataclass(frozen=True)
class RungConfig:
    """Everything that decides what a rung measures. Two rungs with equal configs measure the same thing."""

    target: str = "tenk"
    factory: bool = True
    server: str = "granian"
    workers: int = 1
    loop: str = "uvloop"
    http: str = "httptools"
    access_log: bool = False
    cpus: str = "0"
    ingest_workers: int = 0
    mix: str = "realistic"
    rate: float = 500.0
    capacity: bool = False
    slo_p99_ms: float = 100.0
    duration_s: float = 20.0
    warmup_s: float = 5.0
    engine: str = "k6"
    connections: int = 64
    step_s: float = 5.0
    capacity_budget_s: float = 120.0
    start_rate: float = 200.0
    max_rate: float = 50_000.0
    env: dict[str, str] = field(default_factory=dict)
    upstream: dict[str, float] = field(default_factory=lambda: dict(UPSTREAM_DEFAULTS))

    def flat(self) -> dict[str, Any]:
        """One entry per variable, for diffing: env and upstream settings count one by one."""
        data = asdict(self)
        env = data.pop("env")
        upstream = data.pop("upstream")
        factory = data.pop("factory")
        data["target"] = (
            self.target if factory == _default_factory(self.target) else f"{self.target} (factory={factory})"
        )
        data.update({f"env.{k}": v for k, v in sorted(env.items())})
        data.update({f"upstream.{k}": v for k, v in sorted(upstream.items())})
        return data

    @property
    def is_tenk(self) -> bool:
        return self.target == "tenk"


def _default_factory(target: str) -> bool:
    return target == "tenk"


@dataclass(frozen=True)
class Change:
    key: str
    before: Any
    after: Any

    def __str__(self) -> str:
        return f"{self.key}: {_show(self.before)} -> {_show(self.after)}"


def _show(value: Any) -> str:
    return "(unset)" if value is None else str(value)


def diff(before: RungConfig, after: RungConfig) -> list[Change]:
    a, b = before.flat(), after.flat()
    return [Change(key, a.get(key), b.get(key)) for key in dict.fromkeys([*a, *b]) if a.get(key) != b.get(key)]


@dataclass(frozen=True)
class Rung:
    index: int
    label: str
    config: RungConfig
    changes: tuple[Change, ...]
    allow_multi: bool
    line: int | None

    @property
    def multi_variable(self) -> bool:
        return len(self.changes) > 1

    @property
    def changed(self) -> str:
        if self.index == 0:
            return "baseline"
        return "; ".join(str(c) for c in self.changes) or "nothing (repeat)"


@dataclass(frozen=True)
class Claim:
    text: str
    source: str
    from_rung: str
    to_rung: str
    metric: str
    claimed_ratio: float


@dataclass(frozen=True)
class Ladder:
    name: str
    description: str
    path: Path
    defaults: RungConfig
    rungs: tuple[Rung, ...]
    claims: tuple[Claim, ...]
    mixes: dict[str, Mix]


_CONFIG_KEYS = tuple(RungConfig.__dataclass_fields__)
_RUNG_KEYS = (*_CONFIG_KEYS, "label", "allow_multi")


def _apply(base: RungConfig, where: Where, data: dict[str, Any]) -> RungConfig:
    """`base` with the keys in `data` applied, each checked."""
    values: dict[str, Any] = {}
    if "target" in data:
        target = where.string(data, "target")
        if not _TARGET.match(target):
            raise where.error("target", f"expected tenk, baseline:NAME or module:attr, got {target!r}")
        values["target"] = target
        # A new target brings its own default for `factory` unless the same table sets it.
        values["factory"] = _default_factory(target)
    if "factory" in data:
        values["factory"] = where.boolean(data, "factory")
    if "server" in data:
        values["server"] = where.string(data, "server", choices=SERVERS)
    if "loop" in data:
        values["loop"] = where.string(data, "loop", choices=("asyncio", "uvloop"))
    if "http" in data:
        values["http"] = where.string(data, "http", choices=("h11", "httptools"))
    if "engine" in data:
        values["engine"] = where.string(data, "engine", choices=("k6", "wrk"))
    if "mix" in data:
        values["mix"] = where.string(data, "mix")
    if "cpus" in data:
        cpus = (
            str(data["cpus"]) if isinstance(data["cpus"], int) and not isinstance(data["cpus"], bool) else data["cpus"]
        )
        if not isinstance(cpus, str) or not _CPUS.match(cpus):
            raise where.error("cpus", f'expected a CPU list like "0" or "0-1", got {data["cpus"]!r}')
        values["cpus"] = cpus
    for key in ("workers", "connections"):
        if key in data:
            values[key] = where.integer(data, key, minimum=1)
    if "ingest_workers" in data:
        values["ingest_workers"] = where.integer(data, "ingest_workers", minimum=0)
    for key in ("access_log", "capacity"):
        if key in data:
            values[key] = where.boolean(data, key)
    for key, minimum in (
        ("rate", 1.0),
        ("slo_p99_ms", 1.0),
        ("duration_s", 1.0),
        ("warmup_s", 0.0),
        ("step_s", 1.0),
        ("capacity_budget_s", 5.0),
        ("start_rate", 1.0),
        ("max_rate", 1.0),
    ):
        if key in data:
            values[key] = where.number(data, key, minimum=minimum)
    if "env" in data:
        table = where.table_of(data, "env")
        env = dict(base.env)
        for key, value in table.items():
            if isinstance(value, bool):
                value = "true" if value else "false"
            elif isinstance(value, int | float):
                value = str(value)
            if not isinstance(value, str):
                raise where.sub("env").error(key, f"expected a string, number or boolean, got {value!r}")
            env[key] = value
        values["env"] = env
    if "upstream" in data:
        table = where.table_of(data, "upstream")
        sub = where.sub("upstream")
        sub.check_keys(table, UPSTREAM_DEFAULTS)
        values["upstream"] = {**base.upstream, **{k: sub.number(table, k) for k in table}}
    return replace(base, **values)


def load_ladder(path: Path, overrides: dict[str, Any] | None = None) -> Ladder:
    """Parse, expand and check a ladder; every error names the file, the line and the key.

    `overrides` (from `--app` / `--mix`) apply to `[defaults]`, before the rungs.
    """
    data, text = load(path)
    root = Where(path, text)
    root.check_keys(data, ("name", "description", "defaults", "rung", "claim"))
    name = root.string(data, "name", path.stem)
    description = root.string(data, "description", "-")
    defaults_table = root.table_of(data, "defaults")
    defaults_where = Where(path, text, "defaults")
    defaults_where.check_keys(defaults_table, _CONFIG_KEYS)
    defaults = _apply(RungConfig(), defaults_where, defaults_table)
    if overrides:
        defaults = _apply(defaults, Where(Path("<command line>"), ""), overrides)
    raw_rungs = data.get("rung")
    if not isinstance(raw_rungs, list) or not raw_rungs:
        raise root.error("rung", "a ladder needs at least one [[rung]] table")
    rungs: list[Rung] = []
    previous = defaults
    labels: list[str] = []
    for index, raw in enumerate(raw_rungs):
        where = Where(path, text, "rung", index)
        if not isinstance(raw, dict):
            raise where.error("", "expected a table")
        where.check_keys(raw, _RUNG_KEYS)
        label = where.string(raw, "label", f"rung {index + 1}")
        if label in labels:
            raise where.error("label", f"{label!r} is used by an earlier rung")
        labels.append(label)
        allow_multi = where.boolean(raw, "allow_multi", False)
        config = _apply(previous, where, raw)
        changes = tuple(diff(previous, config)) if index > 0 else ()
        line = locate(text, "rung", index, "label")
        if len(changes) > 1 and not allow_multi:
            listed = "; ".join(str(c) for c in changes)
            raise ConfigError(
                path,
                line,
                where.label("label"),
                f"rung {label!r} changes {len(changes)} variables vs {labels[-2]!r} ({listed}). "
                "Change one per rung, or set allow_multi = true and the report will flag it",
            )
        if config.capacity and config.engine == "wrk":
            raise where.error("engine", "capacity search needs the open-loop engine (k6); wrk cannot hold a rate")
        rungs.append(Rung(index, label, config, changes, allow_multi, line))
        previous = config
    mixes: dict[str, Mix] = {}
    for rung in rungs:
        if rung.config.mix not in mixes:
            try:
                mixes[rung.config.mix] = load_mix(rung.config.mix, path.parent)
            except ConfigError as exc:
                raise ConfigError(
                    exc.path, exc.line, exc.key, f"{exc.message.split(': ', 2)[-1]} (mix of rung {rung.label!r})"
                ) from None
    claims = tuple(_claim(Where(path, text, "claim", i), raw, labels) for i, raw in enumerate(data.get("claim", [])))
    return Ladder(name, description, path, defaults, tuple(rungs), claims, mixes)


def _claim(where: Where, raw: Any, labels: list[str]) -> Claim:
    if not isinstance(raw, dict):
        raise where.error("", "expected a table")
    where.check_keys(raw, ("text", "source", "from_rung", "to_rung", "metric", "claimed_ratio"))
    claim = Claim(
        text=where.string(raw, "text"),
        source=where.string(raw, "source", "-"),
        from_rung=where.string(raw, "from_rung", choices=labels),
        to_rung=where.string(raw, "to_rung", choices=labels),
        metric=where.string(raw, "metric", "rps", METRICS),
        claimed_ratio=where.number(raw, "claimed_ratio"),
    )
    return claim
