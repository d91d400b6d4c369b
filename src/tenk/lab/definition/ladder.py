"""Ladders: a `[defaults]` configuration and `[[rung]]` steps, each changing one variable.

Each rung starts from the previous rung's full configuration (the first from `[defaults]`) and
applies its own keys, so a rung lists only what it changes. The lab expands every rung to the
full configuration, diffs it against the previous one, and refuses a rung that changes more than
one variable unless it says `allow_multi = true`. `target` and `factory` count as one variable:
`factory` only says how to load the target.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tenk.lab.definition import expectations
from tenk.lab.definition._toml import Where, load
from tenk.lab.definition._tomlpos import locate
from tenk.lab.definition.fields import RungFields, RungTable, explain
from tenk.lab.definition.mixes import Mix, load_mix
from tenk.lab.documents import Claim as Claim
from tenk.lab.errors import ConfigError
from tenk.stack.topology import TOPOLOGIES  # the claim a ladder states is the one results.json carries

# Five: the fewest a side at which the rank test behind every label can reach p < 0.05 with one repeat out
# of order (tenk.lab.results.stats). At three a side its least p is 0.10, so every comparison would read
# "inconclusive"; at four only a perfect split reaches it.
DEFAULT_REPEATS = 5
METRICS = ("rps", "capacity", "p99_ms", "errors", "cpu_ms")
UPSTREAM_DEFAULTS: dict[str, float] = {"p50_ms": 40.0, "p99_ms": 400.0, "error_rate": 0.0, "hang_rate": 0.0}


@dataclass(frozen=True)
class RungConfig:
    """Everything that decides what a rung measures. Two rungs with equal configs measure the same thing."""

    target: str = "tenk"
    factory: bool = True
    server: str = "granian"
    # The target's own command line instead of `server`'s (an app with a server of its own): `{port}` and
    # `{workers}` are filled in at start. Empty: `server` serves `target`.
    command: tuple[str, ...] = ()
    workers: int = 1
    # API nodes behind the load balancer (`topology = "cluster"` only), each `workers` processes.
    apis: int = 1
    loop: str = "uvloop"
    http: str = "httptools"
    access_log: bool = False
    cpus: str = "0"
    # The target's CPU quota (lab.processes.cpubudget): "300m", "1.5", "none", or "auto" (chosen by
    # measurement before the rungs). "" = not set: the run's default (`tenk lab run --cpu-budget`).
    cpu_budget: str = ""
    ingest_workers: int = 0
    # Ingest rungs: a capacity step passes only if the stream's backlog did not grow (accepted = landed).
    pass_if_backlog_stable: bool = False
    # 0: the stack's Redis. N >= 1: a private redis-server for the rung, started with `--io-threads N`
    # (Redis 6.2 refuses CONFIG SET io-threads at run time: it is a start option).
    redis_io_threads: int = 0
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

    @property
    def is_ours(self) -> bool:
        """tenk or one of the baselines: apps that serve /health and reach only the stack the lab runs
        (Postgres, Redis, the mock vendor). An app tenk did not write may need anything, and wait on it."""
        return self.is_tenk or self.target.startswith("baseline:")


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
    # What should set its capacity's ceiling (`expect_bound`): "target", or "any" (no expectation).
    expect_bound: str = "any"

    @property
    def multi_variable(self) -> bool:
        return len(self.changes) > 1

    @property
    def changed(self) -> str:
        if self.index == 0:
            return "baseline"
        return "; ".join(str(c) for c in self.changes) or "nothing (repeat)"


@dataclass(frozen=True)
class Ladder:
    name: str
    description: str
    path: Path
    defaults: RungConfig
    rungs: tuple[Rung, ...]
    claims: tuple[Claim, ...]
    mixes: dict[str, Mix]
    # Each rung is measured this many times, interleaved (A B A B ...) so drift hits every rung alike.
    repeats: int = DEFAULT_REPEATS
    # "single": one target process tree on the single stack; "cluster": `apis` nodes behind HAProxy
    # on the local cluster's stores (tenk.stack.topology), k6 aiming at HAProxy.
    topology: str = "single"
    # Sample the target's stacks during each measured step, as `tenk lab run --profile` does.
    profile: bool = False


def _apply(base: RungConfig, where: Where, data: dict[str, Any], model: type[RungFields] = RungFields) -> RungConfig:
    """`base` with the keys in `data` applied, each checked by `model` (extra keys refused)."""
    where.check_keys(data, model.model_fields)  # first, for its "did you mean" hint
    try:
        fields = model.model_validate(data)
    except ValidationError as exc:
        path, message = explain(exc)
        place = where.sub(path[0]) if len(path) > 1 else where
        raise place.error(path[-1], message) from None
    values: dict[str, Any] = fields.model_dump(
        exclude_none=True, exclude={"label", "allow_multi", "env", "upstream", "expect_bound"}
    )
    if "target" in values:
        # A new target brings its own default for `factory` unless the same table sets it.
        values.setdefault("factory", _default_factory(values["target"]))
    if "cpus" in values:
        values["cpus"] = str(values["cpus"])
    if "command" in values:
        values["command"] = tuple(values["command"])
    for key in _NUMBERS:
        if key in values:
            values[key] = float(values[key])
    if fields.env is not None:
        values["env"] = {**base.env, **{key: _env_text(value) for key, value in fields.env.items()}}
    if fields.upstream is not None:
        values["upstream"] = {**base.upstream, **{key: float(value) for key, value in fields.upstream.items()}}
    return replace(base, **values)


_NUMBERS = ("rate", "slo_p99_ms", "duration_s", "warmup_s", "step_s", "capacity_budget_s", "start_rate", "max_rate")


def _env_text(value: str | bool | int | float) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def load_ladder(path: Path, overrides: dict[str, Any] | None = None) -> Ladder:
    """Parse, expand and check a ladder; every error names the file, the line and the key.

    `overrides` (from `--app` / `--mix`) apply to `[defaults]`, before the rungs.
    """
    data, text = load(path)
    root = Where(path, text)
    root.check_keys(data, ("name", "description", "repeats", "topology", "profile", "defaults", "rung", "claim"))
    name = root.string(data, "name", path.stem)
    description = root.string(data, "description", "-")
    repeats = root.integer(data, "repeats", DEFAULT_REPEATS, minimum=1)
    topology = root.string(data, "topology", "single", TOPOLOGIES)
    profile = root.boolean(data, "profile", False)
    defaults_table = root.table_of(data, "defaults")
    defaults_where = Where(path, text, "defaults")
    defaults = _apply(RungConfig(), defaults_where, defaults_table)
    default_expectation = str(defaults_table.get("expect_bound", "any"))
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
        label = where.string(raw, "label", f"rung {index + 1}")
        if label in labels:
            raise where.error("label", f"{label!r} is used by an earlier rung")
        labels.append(label)
        allow_multi = where.boolean(raw, "allow_multi", False)
        config = _apply(previous, where, raw, RungTable)
        expect_bound = str(raw.get("expect_bound", default_expectation))
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
        check_topology(topology, config, where)
        if config.capacity and config.engine == "wrk":
            raise where.error("engine", "capacity search needs the open-loop engine (k6); wrk cannot hold a rate")
        rungs.append(Rung(index, label, config, changes, allow_multi, line, expect_bound))
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
    return Ladder(name, description, path, defaults, tuple(rungs), claims, mixes, repeats, topology, profile)


def check_topology(topology: str, config: RungConfig, where: Where) -> None:
    """What a rung may ask of its topology. A single stack has no load balancer, so one API node;
    a cluster's nodes are `tenk serve`s pointed at the cluster's stores, so the target is tenk, and
    its Redis is the cluster (a private `redis_io_threads` server would be a single Redis)."""
    if topology == "single" and config.apis != 1:
        raise where.error("apis", f'apis = {config.apis} needs topology = "cluster" (a single stack has no balancer)')
    if topology == "cluster" and not config.is_tenk:
        raise where.error("target", f'topology = "cluster" runs tenk API nodes; target {config.target!r} cannot be one')
    if topology == "cluster" and config.redis_io_threads:
        raise where.error("redis_io_threads", 'topology = "cluster" uses the Redis Cluster; no private Redis')


def _claim(where: Where, raw: Any, labels: list[str]) -> Claim:
    if not isinstance(raw, dict):
        raise where.error("", "expected a table")
    where.check_keys(raw, ("text", "source", "from_rung", "to_rung", "metric", "claimed_ratio", "expect"))
    expect = raw.get("expect", [])
    if isinstance(expect, str):
        expect = [expect]
    if not isinstance(expect, list) or not all(isinstance(item, str) for item in expect):
        raise where.error("expect", f"expected a string or a list of strings, got {expect!r}")
    for item in expect:
        try:
            expectations.parse(item)
        except expectations.ExpectationError as exc:
            raise where.error("expect", str(exc)) from None
    if "claimed_ratio" not in raw and not expect:
        raise where.error("claimed_ratio", "a claim needs a claimed_ratio, or an expect for a qualitative claim")
    claim = Claim(
        text=where.string(raw, "text"),
        source=where.string(raw, "source", "-"),
        from_rung=where.string(raw, "from_rung", choices=labels),
        to_rung=where.string(raw, "to_rung", choices=labels),
        metric=where.string(raw, "metric", "rps", METRICS),
        claimed_ratio=where.number(raw, "claimed_ratio") if "claimed_ratio" in raw else None,
        expect=tuple(expect),
    )
    return claim
