"""HttpArena's load profiles as lab mixes: its raw request templates, rotated as its load generator rotates them.

gcannon (HttpArena's generator, `scripts/lib/tools/gcannon.sh`) gives each connection one template of the
profile's list, round-robin, for `-r` requests, then reconnects with the next: over a run every template
serves the same number of requests, and one request in `-r` is the first on a new connection. The mix
here has one endpoint per distinct template, weighted by how often the profile lists it, and splits each
into the requests that keep their connection and the one in `-r` sent with `Connection: close`, after
which the lab's k6 opens a new one. Where that departs from gcannon:

- k6 is open-loop (requests arrive at a set rate) where gcannon is closed-loop (each connection sends
  its next request when the last is answered); the lab's figures are a rate's CPU and the highest rate
  within an SLO, not a saturated throughput;
- the connections are k6's VUs, as many as the rate needs, not a fixed 256 or 4,096;
- `{RAND:lo:hi}` is drawn per request alike, but `{SEQ:n}` (crud's created ids, counting up from n each
  run) becomes a random id in [n, n + 99,999]: an insert at first, an upsert once drawn again, as
  gcannon's counter upserts from its second run on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from benchmarks.httparena.arena import REQUESTS

_RAND = re.compile(r"\{RAND:(\d+):(\d+)\}")
_SEQ = re.compile(r"\{SEQ:(\d+)\}")
SEQ_SPAN = 99_999


@dataclass(frozen=True)
class Template:
    """One raw request file: its method, path and body (placeholders in the lab's `{name}` form)."""

    name: str
    method: str
    path: str
    body: str | None
    ranges: dict[str, tuple[int, int]]

    @classmethod
    def read(cls, path: Path) -> Template:
        head, _, body = path.read_bytes().decode().partition("\r\n\r\n")
        method, target, _ = head.split("\r\n", 1)[0].split(" ")
        ranges: dict[str, tuple[int, int]] = {}

        def rand(match: re.Match[str]) -> str:
            low, high = int(match[1]), int(match[2])
            ranges[f"rand_{low}_{high}"] = (low, high)
            return f"{{rand_{low}_{high}}}"

        def seq(match: re.Match[str]) -> str:
            start = int(match[1])
            ranges[f"seq_{start}"] = (start, start + SEQ_SPAN)
            return f"{{seq_{start}}}"

        def placeholders(text: str) -> str:
            return _SEQ.sub(seq, _RAND.sub(rand, text))

        return cls(path.stem, method, placeholders(target), placeholders(body) if body else None, ranges)


@dataclass(frozen=True)
class Profile:
    """A profile as gcannon runs it: its templates, in order (repeats included), and requests per connection."""

    name: str
    templates: tuple[str, ...]
    requests_per_connection: int
    expect: dict[str, int]  # a method's expected status, where it is not 200


def _crud_templates() -> tuple[str, ...]:
    # gcannon.sh lists crud-list-*, crud-get-*, crud-create-* and crud-update-*, sorted by path.
    names = [p for prefix in ("list", "get", "create", "update") for p in REQUESTS.glob(f"crud-{prefix}-*.raw")]
    return tuple(p.stem for p in sorted(names))


PROFILES = {
    "api-4": Profile("api-4", ("get",) * 3 + ("json-get",) * 3 + ("async-db-get",) * 2, 5, {}),
    "json": Profile("json", tuple(f"json-{n}" for n in (1, 5, 10, 15, 25, 40, 50)), 25, {}),
    "async-db": Profile("async-db", tuple(f"async-db-{n}" for n in (5, 10, 20, 35, 50)), 25, {}),
    "crud": Profile("crud", _crud_templates(), 200, {"POST": 201}),
}


def _request(template: Template) -> tuple[str, str, str | None]:
    return template.method, template.path, template.body


def _toml(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def mix_toml(profile: Profile) -> str:
    """The lab mix for `profile` (see the module docstring)."""
    # Templates that send the same request (crud's fifteen crud-get-N) are one endpoint of their summed weight.
    counts: dict[str, int] = {}
    templates: dict[str, Template] = {}
    for name in profile.templates:
        template = Template.read(REQUESTS / f"{name}.raw")
        same = next((n for n, t in templates.items() if _request(t) == _request(template)), name)
        templates.setdefault(same, template)
        counts[same] = counts.get(same, 0) + 1
    ranges = {key: span for template in templates.values() for key, span in template.ranges.items()}
    lines = [
        f'name = "httparena-{profile.name}"',
        f"description = \"HttpArena's {profile.name} templates, {profile.requests_per_connection} requests a "
        'connection (benchmarks/httparena/profiles.py)"',
    ]
    for key, (low, high) in sorted(ranges.items()):
        lines += [f"[vars.{key}]", f"range = [{low}, {high}]"]
    last = profile.requests_per_connection
    for name, count in counts.items():
        template = templates[name]
        endpoint = name.replace("-", "_")
        status = profile.expect.get(template.method, 200)
        for suffix, weight, close in (("", count * (last - 1), False), ("_reconnect", count, True)):
            if weight == 0:
                continue
            lines += [
                "[[endpoint]]",
                f'name = "{endpoint}{suffix}"',
                f'kind = "{profile.name}"',
                f'method = "{template.method}"',
                f"path = {_toml(template.path)}",
                f"weight = {weight}",
                f"expect = [{status}]",
            ]
            if template.body is not None:
                lines.append(f"body = {_toml(template.body)}")
            if close:
                lines.append('headers = { Connection = "close" }')
    return "\n".join(lines) + "\n"
