"""The tenk data directory and the embedded servers' secrets are readable by their owner only.

Layout: `<data dir>` (`.tenk`, mode 0700) holds `postgres/` and `redis/`, each with a generated
`password` file (0600); `postgres/` has a second one, `app-password`, for the application role.
Permissions are only ever changed on directories tenk creates inside the data directory, never on
anything above it: a checkout in a home directory must not make the home listable.

When tenk runs as root, the servers do not: Postgres refuses to, and a Redis reachable by every local
user should not hold root's rights. Both run as the system user `tenk-pg`, which then needs to traverse
the data directory: it gets that through the group (mode 0710, group `tenk-pg`), never through
"other". The directories above it must already be traversable; if they are not, tenk stops with a
message saying so instead of opening them up.
"""

from __future__ import annotations

import errno
import grp
import os
import pwd
import secrets
import stat
import subprocess
from pathlib import Path

SERVER_USER = "tenk-pg"


class UnreachableError(RuntimeError):
    """The server user cannot reach a path, and tenk will not widen permissions outside its data dir."""


def running_as_root() -> bool:
    return os.geteuid() == 0


def server_user() -> pwd.struct_passwd:
    """The system user the embedded servers run as when we are root; created on first use."""
    try:
        return pwd.getpwnam(SERVER_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", SERVER_USER], check=True, capture_output=True)
        return pwd.getpwnam(SERVER_USER)


def run_as_server_user() -> dict[str, int]:
    """`subprocess` arguments that run a server as `tenk-pg` when we are root; none otherwise."""
    if not running_as_root():
        return {}
    user = server_user()
    return {"user": user.pw_uid, "group": user.pw_gid}


def make_private(path: Path, *, server_may_enter: bool = False) -> None:
    """Create `path` if needed and make it ours alone (0700).

    With `server_may_enter` and root, the `tenk-pg` group may traverse it too (0710). A directory owned by
    someone else is left as it is.
    """
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = path.stat()
    if info.st_uid != os.geteuid():
        return
    if server_may_enter and running_as_root():
        gid = server_user().pw_gid
        if info.st_gid != gid:
            os.chown(path, -1, gid)
        wanted = 0o710
    else:
        wanted = 0o700
    if stat.S_IMODE(info.st_mode) != wanted:
        path.chmod(wanted)


def secret(path: Path) -> str:
    """The password stored at `path`, generated (URL-safe, 0600) on first use; safe to race."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    value = secrets.token_urlsafe(24)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        if exc.errno != errno.EEXIST:
            raise
        return path.read_text().strip()
    with os.fdopen(fd, "w") as out:
        out.write(value + "\n")
    return value


def write_secret(path: Path, value: str) -> None:
    """Store `value` at `path` (0600), replacing what was there; the file is never readable by others."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        os.fchmod(out.fileno(), 0o600)
        out.write(value + "\n")


def can_traverse(path: Path, user: pwd.struct_passwd) -> bool:
    """Whether `user` may search every directory from / down to `path` (inclusive)."""
    groups = {user.pw_gid} | {g.gr_gid for g in grp.getgrall() if user.pw_name in g.gr_mem}
    for directory in [path, *path.parents]:
        info = directory.stat()
        if info.st_uid == user.pw_uid:
            allowed = info.st_mode & stat.S_IXUSR
        elif info.st_gid in groups:
            allowed = info.st_mode & stat.S_IXGRP
        else:
            allowed = info.st_mode & stat.S_IXOTH
        if not allowed:
            return False
    return True


def require_traversable(path: Path, user: pwd.struct_passwd, what: str) -> None:
    if not can_traverse(path, user):
        raise UnreachableError(
            f"running as root, the embedded servers run as the user {user.pw_name}, which cannot reach {what} "
            f"({path}). "
            "tenk does not change permissions outside its data directory: run tenk as a normal user, or put "
            "the checkout (or TENK_DATA_DIR) under a directory other users may traverse (e.g. /srv or /opt)."
        )
