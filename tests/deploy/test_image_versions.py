"""Every image compose.yaml, the Dockerfile and deploy/ name is pinned, and none is older than the releases
that fix the CVEs listed here.

A tag names a release (`13.2.1`, `v1.25.2-p0`) or a line (`16-bookworm`, `1.30-trixie`), which floats to
the line's newest release. A release passes a fix when it is on the fix's line (its version but the last
number) and at least the fix, or on a newer line than every line the fix was released on; a line tag
passes when it is one of those lines, or newer. `latest`, a word for a tag (`stable`) or no tag at all
is unpinned and fails; a digest (`@sha256:...`) is pinned. tenk's own image is built from this
repository's Dockerfile, whose base images are checked here, so it is left out.

Add a row when an advisory names a release of an image the deployment uses.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
Version = tuple[int, ...]


@dataclass(frozen=True)
class Fix:
    """A CVE of an image's software and the releases that fix it, one per line it was fixed on."""

    repository: str
    cve: str
    releases: tuple[str, ...]
    what: str


FIXES = [
    Fix("grafana/grafana", "CVE-2025-4123", ("11.3.7", "12.0.1"), "open redirect to stored XSS through a client path"),
    Fix("grafana/grafana", "CVE-2026-14199", ("13.2.1",), "13.2.1's release notes list it, with CVE-2026-12704"),
    Fix("nginx", "CVE-2025-23419", ("1.26.3", "1.27.4"), "a TLS session resumed past another server's client cert"),
    Fix("nginx", "CVE-2026-42945", ("1.30.1", "1.31.0"), "rewrite module heap overflow, exploited from 2026-05-16"),
    Fix("nginx", "CVE-2026-9256", ("1.30.2", "1.31.1"), "a second rewrite module buffer overflow"),
    Fix("edoburu/pgbouncer", "CVE-2026-6664", ("1.25.2",), "a malformed SCRAM packet crashes it, unauthenticated"),
    Fix("prom/prometheus", "CVE-2026-42154", ("3.5.3", "3.11.3"), "unauthenticated memory exhaustion via /api/v1/read"),
    Fix("valkey/valkey", "CVE-2025-49844", ("8.1.4", "9.0.0"), "Lua use-after-free, reachable with the password"),
    Fix("postgres", "CVE-2025-1094", ("15.11", "16.7", "17.3"), "libpq quoting that lets psql input inject SQL"),
]
OWN = "tenk"
UNPINNED = "unpinned: name a release or a line"


@dataclass(frozen=True)
class Image:
    source: str
    reference: str

    @property
    def repository(self) -> str:
        name = self.reference.split("@", 1)[0]
        head, _, tail = name.rpartition("/")
        return f"{head}/{tail.split(':', 1)[0]}" if head else tail.split(":", 1)[0]

    @property
    def tag(self) -> str | None:
        name = self.reference.split("@", 1)[0]
        tail = name.rpartition("/")[2]
        return tail.split(":", 1)[1] if ":" in tail else None


def _version(text: str) -> Version:
    return tuple(int(part) for part in text.split("."))


def _tag_version(tag: str | None) -> Version | None:
    """`v1.25.2-p0` -> (1, 25, 2), `16-bookworm` -> (16,); None for `latest`, `stable-trixie` or no tag."""
    match = re.fullmatch(r"v?(\d+(?:\.\d+)*)(?:-[\w.-]+)?", tag or "")
    return _version(match.group(1)) if match else None


def _passes(tag: Version, fix: Fix) -> bool:
    releases = sorted(_version(release) for release in fix.releases)
    for release in releases:
        line = release[:-1]
        if len(tag) <= len(line) and line[: len(tag)] == tag:
            return True  # a line tag: it floats to a release at or past this fix
        if len(tag) > len(line) and tag[: len(line)] == line:
            return tag >= release
    newest_line = releases[-1][:-1]
    return tag[: len(newest_line)] > newest_line


def problems(image: Image) -> list[str]:
    """Why `image` may not ship: unpinned, or older than a fix in FIXES (naming the CVE)."""
    if image.repository == OWN or image.repository.endswith("/" + OWN):
        return []
    if "@sha256:" in image.reference:
        return []
    version = _tag_version(image.tag)
    if version is None:
        return [f"{image.source}: {image.reference}: {UNPINNED}"]
    return [
        f"{image.source}: {image.reference}: {fix.cve} ({fix.what}) is fixed in {', '.join(fix.releases)}, not here"
        for fix in FIXES
        if fix.repository == image.repository and not _passes(version, fix)
    ]


def _images_in(document: Any) -> Iterator[str]:
    """Every `image:` value in a YAML document, and each kustomize `images:` entry as name:newTag."""
    if isinstance(document, dict):
        for key, value in document.items():
            if key == "image" and isinstance(value, str):
                yield value
            elif key == "images" and isinstance(value, list):
                for entry in value:
                    if isinstance(entry, dict) and "name" in entry:
                        name = str(entry.get("newName") or entry["name"])
                        yield f"{name}:{entry['newTag']}" if "newTag" in entry else name
            else:
                yield from _images_in(value)
    elif isinstance(document, list):
        for item in document:
            yield from _images_in(item)


def _dockerfile_images(path: Path) -> Iterator[str]:
    """The syntax directive's frontend and each FROM's image, build arguments at their defaults."""
    arguments: dict[str, str] = {}
    stages: set[str] = set()
    for line in path.read_text().splitlines():
        if syntax := re.match(r"#\s*syntax=(\S+)", line):
            yield syntax.group(1)
        elif argument := re.match(r"ARG\s+(\w+)=(\S+)", line):
            arguments[argument.group(1)] = argument.group(2)
        elif base := re.match(r"FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?", line, re.IGNORECASE):
            image = re.sub(r"\$\{?(\w+)\}?", lambda m: arguments.get(m.group(1), m.group(0)), base.group(1))
            if image not in stages:
                yield image
            if base.group(2):
                stages.add(base.group(2))


def shipped_images() -> list[Image]:
    images = [Image("compose.yaml", ref) for ref in _images_in(yaml.safe_load((ROOT / "compose.yaml").read_text()))]
    images += [Image("Dockerfile", ref) for ref in _dockerfile_images(ROOT / "Dockerfile")]
    for path in sorted((ROOT / "deploy").rglob("*.y*ml")):
        source = str(path.relative_to(ROOT))
        images += [Image(source, ref) for doc in yaml.safe_load_all(path.read_text()) for ref in _images_in(doc)]
    return images


def test_every_shipped_image_is_pinned_and_past_the_fixes_we_know_of() -> None:
    found = {image.repository for image in shipped_images()}
    # The check reads every place an image is named: a reader that missed one would pass it unread.
    assert {"grafana/grafana", "nginx", "prom/prometheus", "edoburu/pgbouncer", "valkey/valkey", "postgres"} <= found
    assert {"python", "ghcr.io/astral-sh/uv", "docker/dockerfile", OWN} <= found
    assert [problem for image in shipped_images() for problem in problems(image)] == []


@pytest.mark.parametrize(
    ("reference", "refused"),
    [
        ("grafana/grafana:11.3.0", "CVE-2025-4123"),
        ("grafana/grafana:11.3.7", "CVE-2026-14199"),
        ("grafana/grafana:12.4.2", "CVE-2026-14199"),
        ("nginx:1.27-bookworm", "CVE-2026-42945"),
        ("nginx:1.31.0", "CVE-2026-9256"),
        ("prom/prometheus:v2.55.1", "CVE-2026-42154"),
        ("prom/prometheus:v3.8.0", "CVE-2026-42154"),
        ("edoburu/pgbouncer:v1.24.1-p1", "CVE-2026-6664"),
        ("nginx:latest", UNPINNED),
        ("nginx:stable-trixie", UNPINNED),
        ("registry.example.com:5000/nginx", UNPINNED),
    ],
)
def test_an_image_older_than_a_fix_or_unpinned_is_refused_naming_why(reference: str, refused: str) -> None:
    found = problems(Image("compose.yaml", reference))
    assert found
    assert refused in found[0]


@pytest.mark.parametrize(
    "reference",
    [
        "grafana/grafana:13.2.1",
        "grafana/grafana:14.0.0",
        "nginx:1.30-trixie",
        "nginx:1.30.2",
        "nginx:1.31",
        "prom/prometheus:v3.5.3",
        "postgres:16-bookworm",
        "valkey/valkey:8-bookworm",
        "nginx@sha256:" + "0" * 64,
        "registry.example.com/tenk:latest",
    ],
)
def test_a_release_or_line_at_or_past_every_fix_passes(reference: str) -> None:
    assert problems(Image("compose.yaml", reference)) == []
