"""Download the pinned apps from PyPI and unpack them into .tenk/doctor-eval/apps/ (git-ignored).

    python -m benchmarks.doctor_eval.fetch [--set development|heldout|heldout2|heldout3|heldout4] [--app NAME ...]

Each artifact is fetched with `pip download --no-deps` by its exact version, then checked against
the sha256 its set pins (apps.toml, heldout.toml): a file that does not match is refused, so every
label is read against the code it was made on. An app already unpacked from a matching artifact is left as it is.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from benchmarks.doctor_eval.apps import CACHE, SETS, App, load_set, select

# Wheels are pure Python or carry compiled parts doctor never reads; these tags let pip pick the
# pinned file whatever this machine is.
_PLATFORMS = ["manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64", "any"]


def _pip() -> list[str]:
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    uv = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    return [uv, "tool", "run", "pip"]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download(app: App) -> Path:
    downloads = CACHE / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    artifact = downloads / app.file
    if not artifact.exists():
        with tempfile.TemporaryDirectory(dir=downloads) as scratch:
            platforms = [arg for p in _PLATFORMS for arg in ("--platform", p)]
            subprocess.run(
                [*_pip(), "download", "--no-deps", "--quiet", "--disable-pip-version-check", "--only-binary", ":all:",
                 "--python-version", app.python, *platforms, "--dest", scratch, app.requirement],
                check=True,
            )  # fmt: skip
            got = Path(scratch) / app.file
            if not got.exists():
                names = ", ".join(p.name for p in Path(scratch).iterdir())
                raise SystemExit(f"{app.name}: pip fetched {names}, not the pinned {app.file}")
            got.rename(artifact)
    actual = _sha256(artifact)
    if actual != app.sha256:
        artifact.unlink()
        raise SystemExit(f"{app.name}: {app.file} has sha256 {actual}, its set pins {app.sha256}")
    return artifact


def unpack(app: App, artifact: Path) -> None:
    stamp = app.root / ".sha256"
    if stamp.exists() and stamp.read_text().strip() == app.sha256:
        return
    if app.root.exists():
        shutil.rmtree(app.root)
    app.root.mkdir(parents=True)
    with zipfile.ZipFile(artifact) as wheel:
        # ZipFile.extractall drops absolute paths and `..` segments, so a member cannot land outside root.
        wheel.extractall(app.root)
    stamp.write_text(app.sha256 + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=sorted(SETS), default="development", help="which set of apps")
    parser.add_argument("--app", action="append", help="only this app (repeatable)")
    args = parser.parse_args(argv)
    for app in select(load_set(args.set), args.app):
        unpack(app, download(app))
        sys.stdout.write(f"{app.name} {app.version}: {app.root}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
