"""The evaluated apps as apps.toml and heldout.toml pin them, and where fetch.py leaves each one on disk.

apps.toml is doctor's development set: its rules are tuned on those apps. heldout.toml is the held-out
set, labelled without doctor and never tuned on, so that a claim about doctor is measured on code it
was not fitted to. The two never share an app (a test checks it).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
# Git-ignored (.tenk/): third-party code is never committed.
CACHE = REPO / ".tenk" / "doctor-eval"
LABELS = HERE / "labels"
BASELINE = HERE / "baseline"


@dataclass(frozen=True)
class App:
    name: str
    version: str
    file: str
    sha256: str
    target: str
    entry: str
    orm: str
    kind: str
    # The distribution's name on PyPI, where it is not the app's (apache-airflow-core for airflow).
    package: str = ""
    # The Python that pip resolves the wheel for, where the app's Requires-Python excludes the default.
    python: str = "3.12"

    @property
    def requirement(self) -> str:
        return f"{self.package or self.name}=={self.version}"

    @property
    def root(self) -> Path:
        """The unpacked artifact: doctor runs from here, and label paths are relative to it."""
        return CACHE / "apps" / f"{self.name}-{self.version}"

    @property
    def target_dir(self) -> Path:
        return self.root / self.target


# heldout2 is a second held-out set, chosen and labelled after the first had informed doctor's work
# (its misses were described by cause before later recall work), so that it is unseen again.
# heldout3 is a third, chosen and labelled after the second had informed doctor's work in turn;
# heldout4 a fourth, after the third's misses had been read.
SETS = {
    "development": HERE / "apps.toml",
    "heldout": HERE / "heldout.toml",
    "heldout2": HERE / "heldout2.toml",
    "heldout3": HERE / "heldout3.toml",
    "heldout4": HERE / "heldout4.toml",
}


def load_apps(path: Path = SETS["development"]) -> list[App]:
    with path.open("rb") as f:
        document = tomllib.load(f)
    return [App(**entry) for entry in document["app"]]


def load_set(name: str) -> list[App]:
    return load_apps(SETS[name])


def select(apps: list[App], names: list[str] | None) -> list[App]:
    if not names:
        return apps
    unknown = set(names) - {a.name for a in apps}
    if unknown:
        raise SystemExit(f"no such app in the set: {', '.join(sorted(unknown))}")
    return [a for a in apps if a.name in names]
