"""The versions of FastAPI, pydantic and Starlette an app runs on, read from what sits beside it.

A rule whose cost exists only on some versions (double-validation: pydantic 1 only) asks these. They are
read, in this order, from the first folder at or above the target that holds any of: the packages
installed there (a `site-packages` target's `*.dist-info`), `uv.lock`, `poetry.lock`, `pdm.lock`,
`Pipfile.lock`, `requirements*.txt`, `Pipfile`, `pyproject.toml`. The search stops at a repository's root
(`.git`) and at a folder another user owns: a file planted above the app does not speak for it.

A pin (`==`) or a lock gives the version; a range gives an assumption: the newest version tenk measured
that the range allows, else its lower bound. A package named nowhere is assumed at the newest version
tenk measured, unless another package's version rules it out (FastAPI before 0.100 needs pydantic 1).
Each version says which it was, and from where.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Release = tuple[int, ...]

LOCKS = ("uv.lock", "poetry.lock", "pdm.lock")
_SPEC = re.compile(r"(===|==|!=|~=|>=|<=|>|<|\^|~)?\s*v?([0-9][0-9a-zA-Z.*+!-]*)[\s,]*")
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(?:\(([^)]*)\)|([^;#@]*))")


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def release(version: str) -> Release:
    """The release numbers of a version (`2.14.3` -> (2, 14, 3)); pre-release and local parts dropped."""
    numbers = []
    for part in version.split("+")[0].split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        numbers.append(int(digits.group()))
        if digits.group() != part:
            break
    return tuple(numbers)


def _padded(a: Release, b: Release) -> tuple[Release, Release]:
    width = max(len(a), len(b))
    return a + (0,) * (width - len(a)), b + (0,) * (width - len(b))


@dataclass(frozen=True)
class Spec:
    """One clause of a range: `>=2.5`, `<3`, `==2.*`, poetry's `^2.5` and `~2.5`."""

    op: str
    version: str

    def allows(self, version: str) -> bool:
        have = release(version)
        if self.version.endswith(".*"):
            prefix = release(self.version[:-2])
            matches = have[: len(prefix)] == prefix
            return matches if self.op in ("==", "===") else not matches
        want = release(self.version)
        low, high = self.bounds()
        if low is not None or high is not None:
            a, b = _padded(have, low or ())
            c, d = _padded(have, high or ())
            return (low is None or a >= b) and (high is None or c < d)
        a, b = _padded(have, want)
        return {
            "==": a == b,
            "===": a == b,
            "!=": a != b,
            ">=": a >= b,
            "<=": a <= b,
            ">": a > b,
            "<": a < b,
        }[self.op]

    def bounds(self) -> tuple[Release | None, Release | None]:
        """For `~=`, `^` and `~`: the inclusive lower and exclusive upper bound; (None, None) otherwise."""
        want = release(self.version)
        if self.op == "~=" and len(want) > 1:
            return want, (*want[:-2], want[-2] + 1)
        if self.op == "^":
            first = next((i for i, n in enumerate(want) if n), len(want) - 1)
            return want, (*want[:first], want[first] + 1)
        if self.op == "~":
            cut = 1 if len(want) == 1 else 2
            return want, (*want[: cut - 1], want[cut - 1] + 1)
        return None, None

    @property
    def lower(self) -> str | None:
        """The least version the clause allows, where it says one."""
        if self.op in ("==", "===", ">=", "~=", "^", "~") and not self.version.endswith(".*"):
            return self.version
        return None


def parse_specs(text: str) -> list[Spec] | None:
    """`>=2.5,<3` (or poetry's `>=2.5 <3`) as clauses; [] for any version (`*`, empty); None for what
    cannot be read (a URL, `||`)."""
    text = text.strip()
    if text in ("", "*"):
        return []
    if _SPEC.sub("", text).strip(", \t"):
        return None
    return [Spec(match.group(1) or "==", match.group(2)) for match in _SPEC.finditer(text)]


@dataclass(frozen=True)
class Condition:
    """A condition a cost or a requirement is stated under: `pydantic<2`, `fastapi>=0.100,<0.126`."""

    package: str
    specs: tuple[Spec, ...]

    @classmethod
    def parse(cls, text: str) -> Condition:
        match = re.match(r"\s*([A-Za-z0-9._-]+)\s*(.*)", text)
        specs = parse_specs(match.group(2)) if match else None
        if match is None or specs is None:
            raise ValueError(f"not a condition: {text!r}")
        return cls(normalise(match.group(1)), tuple(specs))

    def allows(self, version: str) -> bool:
        return all(spec.allows(version) for spec in self.specs)


@dataclass(frozen=True)
class Version:
    package: str
    version: str
    # Where it was read ("uv.lock"), or why it was assumed.
    source: str
    assumed: bool

    def describe(self) -> str:
        return f"{self.package} {self.version} ({'assumed: ' if self.assumed else ''}{self.source})"


# Shown in every report, asked about or not: what a FastAPI app's findings rest on.
ALWAYS_SHOWN = ("fastapi", "pydantic")


@dataclass(frozen=True)
class Versions:
    """One version for each package doctor asks about, read or assumed."""

    packages: dict[str, Version]
    # The folder they were read from; None when nothing there named any.
    folder: Path | None = None
    # The packages a rule asked about in this run.
    consulted: set[str] = field(default_factory=set, compare=False)

    def satisfy(self, condition: Condition) -> bool:
        self.consulted.add(condition.package)
        known = self.packages.get(condition.package)
        return known is not None and condition.allows(known.version)

    def shown(self) -> list[Version]:
        """What a report says it ran on: every version read, and those assumed that mattered."""
        return [
            v
            for v in self.packages.values()
            if not v.assumed or v.package in self.consulted or v.package in ALWAYS_SHOWN
        ]

    @property
    def read(self) -> list[Version]:
        return [v for v in self.packages.values() if not v.assumed]

    @property
    def assumed(self) -> list[Version]:
        return [v for v in self.packages.values() if v.assumed]


@dataclass(frozen=True)
class _Named:
    """What one file says of a package: a version (a lock, a pin) or a range."""

    source: str
    version: str | None
    specs: tuple[Spec, ...] = ()
    text: str = ""


def read_versions(
    start: Path | None,
    packages: dict[str, list[str]],
    requires: list[tuple[Condition, Condition]],
) -> Versions:
    """The versions of `packages` (each with the versions tenk measured it on, oldest first) for an app at
    `start`. `requires` says what one package's versions need of another's."""
    folder = _folder(start) if start is not None else None
    named = _named(folder, set(packages)) if folder is not None else {}
    read = {name: said.version for name, said in named.items() if said.version is not None}
    ranges = {name: said.specs for name, said in named.items() if said.version is None}

    def possible(package: str, version: str) -> bool:
        """Whether `version` of `package` fits what the app says of the others (pydantic 1 rules out a
        FastAPI that needs pydantic 2)."""
        for when, need in requires:
            if when.package != package or not when.allows(version):
                continue
            other = need.package
            if other in read and not need.allows(read[other]):
                return False
            if other in ranges and not any(
                need.allows(v) and all(spec.allows(v) for spec in ranges[other]) for v in packages.get(other, [])
            ):
                return False
        return True

    found = {name: Version(name, version, named[name].source, assumed=False) for name, version in read.items()}
    for package, measured in packages.items():
        if package in found:
            continue
        said = named.get(package)
        # What the versions read need of this one (FastAPI 0.99 needs pydantic 1).
        needing = [
            (when, need)
            for when, need in requires
            if need.package == package and when.package in read and when.allows(read[when.package])
        ]
        specs = [*(said.specs if said else ()), *(spec for _, need in needing for spec in need.specs)]
        allowed = [v for v in reversed(measured) if all(s.allows(v) for s in specs) and possible(package, v)]
        lower = next((spec.lower for spec in specs if spec.lower), None)
        version, how = (allowed[0], "the newest tenk measured") if allowed else (lower or measured[-1], "")
        how = how or ("the range's lower bound" if lower else "the newest tenk measured")
        if said is not None:
            why = f"{how} that {said.source}'s `{said.text}` allows"
        elif needing:
            why = f"{how} that {' and '.join(found[when.package].describe() for when, _ in needing)} allows"
        elif allowed and allowed[0] != measured[-1]:
            why = f"{how} that the app's other versions allow"
        else:
            why = f"{how}; nothing beside the app names it"
        found[package] = Version(package, version, why, assumed=True)
    return Versions({name: found[name] for name in packages}, folder if named else None)


_SOURCES = (*LOCKS, "Pipfile.lock", "Pipfile", "pyproject.toml")


def _folder(start: Path) -> Path | None:
    """The first folder at or above `start` holding something that names versions, owned by whoever owns
    `start`; the search ends at a repository's root."""
    try:
        owner = start.stat().st_uid
    except OSError:
        return None
    for folder in (start, *start.parents):
        try:
            if folder.stat().st_uid != owner:
                return None
        except OSError:
            return None
        if _installed(folder) or any((folder / name).is_file() for name in _SOURCES):
            return folder
        if next(folder.glob("requirements*.txt"), None) is not None:
            return folder
        if (folder / ".git").exists():
            return None
    return None


def _installed(folder: Path) -> bool:
    return next(folder.glob("*.dist-info"), None) is not None


def _named(folder: Path, wanted: set[str]) -> dict[str, _Named]:
    """What the folder's files say of each wanted package: the first source, in order, that names it."""
    found: dict[str, _Named] = {}
    for said in _sayings(folder, wanted):
        for package, named in said.items():
            # A version beats a range found earlier (a lock after requirements never happens: locks come
            # first), and the first of each kind wins.
            if package not in found or (found[package].version is None and named.version is not None):
                found[package] = named
    return found


def _sayings(folder: Path, wanted: set[str]) -> Iterator[dict[str, _Named]]:
    yield _dist_info(folder, wanted)
    for name in LOCKS:
        yield _toml_lock(folder / name, wanted)
    yield _pipfile_lock(folder / "Pipfile.lock", wanted)
    for path in sorted(folder.glob("requirements*.txt")):
        yield _requirements(path, wanted)
    yield _pipfile(folder / "Pipfile", wanted)
    yield _pyproject(folder / "pyproject.toml", wanted)


def _dist_info(folder: Path, wanted: set[str]) -> dict[str, _Named]:
    found = {}
    for path in folder.glob("*.dist-info"):
        name, _, version = path.name[: -len(".dist-info")].partition("-")
        if normalise(name) in wanted and version:
            found[normalise(name)] = _Named(f"installed in {folder.name}", version)
    return found


def _load_toml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def _toml_lock(path: Path, wanted: set[str]) -> dict[str, _Named]:
    found: dict[str, _Named] = {}
    packages = _load_toml(path).get("package")
    for entry in packages if isinstance(packages, list) else []:
        if not isinstance(entry, dict):
            continue
        name, version = entry.get("name"), entry.get("version")
        if isinstance(name, str) and isinstance(version, str) and normalise(name) in wanted:
            found.setdefault(normalise(name), _Named(path.name, version))
    return found


def _pipfile_lock(path: Path, wanted: set[str]) -> dict[str, _Named]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return {}
    found: dict[str, _Named] = {}
    for section in ("default", "develop"):
        entries = data.get(section) if isinstance(data, dict) else None
        for name, entry in entries.items() if isinstance(entries, dict) else []:
            version = entry.get("version") if isinstance(entry, dict) else None
            if normalise(name) in wanted and isinstance(version, str) and version.startswith("=="):
                found.setdefault(normalise(name), _Named(path.name, version[2:]))
    return found


def _said(source: str, name: str, text: str) -> tuple[str, _Named] | None:
    """A package's range as one file writes it (`>=2.5,<3`): a version where it pins one."""
    specs = parse_specs(text)
    if specs is None:
        return None
    pinned = next((s.version for s in specs if s.op in ("==", "===") and "*" not in s.version), None)
    return normalise(name), _Named(source, pinned, tuple(specs), f"{name}{text.strip()}" if text.strip() else name)


def _requirement(source: str, line: str, wanted: set[str]) -> tuple[str, _Named] | None:
    match = _REQUIREMENT.match(line)
    if match is None or normalise(match.group(1)) not in wanted:
        return None
    return _said(source, match.group(1), match.group(2) or match.group(3) or "")


def _requirements(path: Path, wanted: set[str]) -> dict[str, _Named]:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return {}
    found: dict[str, _Named] = {}
    for line in lines:
        line = line.split(" #")[0].strip()
        if not line or line.startswith(("#", "-")):
            continue
        said = _requirement(path.name, line, wanted)
        if said is not None:
            found.setdefault(*said)
    return found


def _pipfile(path: Path, wanted: set[str]) -> dict[str, _Named]:
    return _tables(path.name, [_load_toml(path).get("packages")], wanted)


def _tables(source: str, tables: list[Any], wanted: set[str]) -> dict[str, _Named]:
    """`name = "^2.5"` or `name = { version = "^2.5" }` (poetry, Pipfile)."""
    found: dict[str, _Named] = {}
    for table in tables:
        for name, value in table.items() if isinstance(table, dict) else []:
            text = value.get("version") if isinstance(value, dict) else value
            if normalise(name) in wanted and isinstance(text, str):
                said = _said(source, name, text)
                if said is not None:
                    found.setdefault(*said)
    return found


def _pyproject(path: Path, wanted: set[str]) -> dict[str, _Named]:
    data = _load_toml(path)
    if not data:
        return {}
    found_project = data.get("project")
    project: dict[str, Any] = found_project if isinstance(found_project, dict) else {}
    lists: list[Any] = [project.get("dependencies")]
    optional = project.get("optional-dependencies")
    lists.extend(optional.values() if isinstance(optional, dict) else [])
    groups = data.get("dependency-groups")
    lists.extend(groups.values() if isinstance(groups, dict) else [])
    found: dict[str, _Named] = {}
    for items in lists:
        for item in items if isinstance(items, list) else []:
            said = _requirement(path.name, item, wanted) if isinstance(item, str) else None
            if said is not None:
                found.setdefault(*said)
    poetry = data.get("tool", {}).get("poetry", {}) if isinstance(data.get("tool"), dict) else {}
    if isinstance(poetry, dict):
        tables: list[Any] = [poetry.get("dependencies")]
        poetry_groups = poetry.get("group")
        if isinstance(poetry_groups, dict):
            tables.extend(g.get("dependencies") for g in poetry_groups.values() if isinstance(g, dict))
        for package, named in _tables(path.name, tables, wanted).items():
            found.setdefault(package, named)
    return found
