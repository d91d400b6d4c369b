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

Root never acts on a path the server user could have replaced. That user owns its own directories
(pgdata, Redis's `data/`) and can plant symbolic links there; a root that followed one would read,
overwrite, chmod or chown any file on the machine. So every file root writes (passwords, configs,
pidfiles, logs) lives in a directory only root may change, and the few files root must read or edit
inside the server's directories (`postmaster.pid`, `pg_hba.conf`) are opened with O_NOFOLLOW and
checked on their descriptor (`open_server_file`).

A data directory, or a file tenk keeps in it, that someone else owns or may write is refused
(`UnsafeDataDirError`): its passwords and dev key could be theirs, or known to them.
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


class UnsafeDataDirError(RuntimeError):
    """A data directory, or a file tenk keeps in it, that another user owns or may write."""


# Bounds what a read of a pidfile or pg_hba.conf may pull in, whatever the server user put there.
SMALL_FILE_LIMIT = 1 << 20


def _user_name(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _private_group(gid: int, owner: int) -> bool:
    """Whether group `gid` holds `owner` alone: a user private group (Fedora's and Debian's umask 002 make
    checkouts group-writable to it), whose write bit lets no one else in."""
    try:
        members = set(grp.getgrgid(gid).gr_mem)
        owner_name = pwd.getpwuid(owner).pw_name
    except KeyError:
        return False
    others_primary = any(user.pw_gid == gid and user.pw_uid != owner for user in pwd.getpwall())
    return members <= {owner_name} and not others_primary


def others_may_write(info: os.stat_result) -> bool:
    """Whether someone besides the owner (and root) may write what `info` describes."""
    if info.st_mode & stat.S_IWOTH:
        return True
    return bool(info.st_mode & stat.S_IWGRP) and not _private_group(info.st_gid, info.st_uid)


def refuse_unless_ours(path: Path, info: os.stat_result) -> None:
    """UnsafeDataDirError unless `info` (of `path`) says the current user owns it and nobody else may write it."""
    if info.st_uid != os.geteuid():
        raise UnsafeDataDirError(
            f"{path} belongs to {_user_name(info.st_uid)}, not to the user running tenk "
            f"({_user_name(os.geteuid())}): the passwords and dev key in it could be that user's, or known to them, "
            "so tenk will not use it. Remove it, or set TENK_DATA_DIR to a directory of your own."
        )
    if others_may_write(info):
        raise UnsafeDataDirError(
            f"{path} is writable by other users (mode {stat.S_IMODE(info.st_mode):04o}): they could have replaced "
            f"the passwords or dev key in it, so tenk will not use it. If you trust what is in it, "
            f"`chmod go-w {path}`; otherwise remove it."
        )


def _refuse_replaceable_parent(path: Path) -> None:
    """Whoever may write the directory holding `path` may swap `path` for a link of their choosing; a sticky
    directory (/tmp) lets nobody but the owner rename or remove an entry, so it is safe."""
    info = path.parent.stat()
    if info.st_uid in (os.geteuid(), 0) and (not others_may_write(info) or info.st_mode & stat.S_ISVTX):
        return
    raise UnsafeDataDirError(
        f"{path.parent} (which holds {path.name}) is writable by, or belongs to, another user "
        f"({_user_name(info.st_uid)}, mode {stat.S_IMODE(info.st_mode):04o}), who could replace {path} and the "
        "passwords in it. Use a data directory (TENK_DATA_DIR) inside a directory only you may change."
    )


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

    With `server_may_enter` and root, the `tenk-pg` group may traverse it too (0710). A directory that another
    user owns or may write, or that another user could swap for their own, is refused (UnsafeDataDirError).
    """
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    _refuse_replaceable_parent(path)
    info = path.stat()
    refuse_unless_ours(path, info)
    if server_may_enter and running_as_root():
        gid = server_user().pw_gid
        if info.st_gid != gid:
            os.chown(path, -1, gid)
        wanted = 0o710
    else:
        wanted = 0o700
    if stat.S_IMODE(info.st_mode) != wanted:
        path.chmod(wanted)


def server_owned_dir(path: Path) -> None:
    """`path` made a 0700 directory of whoever runs the servers: us, or `tenk-pg` when we are root. Its name
    must be in a directory of ours that nobody else may change, so that chown and chmod act on the directory
    made here, never on a link."""
    run_as = run_as_server_user()
    path.mkdir(mode=0o700, exist_ok=True)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise RuntimeError(f"{path} is not a directory")
    if not run_as:
        refuse_unless_ours(path, info)
    elif info.st_uid != run_as["user"]:
        os.chown(path, run_as["user"], run_as["group"], follow_symlinks=False)
    if stat.S_IMODE(info.st_mode) != 0o700:
        path.chmod(0o700)


def read_owned(path: Path) -> str:
    """The text of a file tenk stored for itself (a password, the dev key): never through a symbolic link,
    and only when the current user owns it and nobody else may write it. Readable by others, it is made
    0600 (older tenk left some so). FileNotFoundError when there is none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeDataDirError(f"{path} is a symbolic link; tenk keeps its secrets in plain files only") from None
        raise
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeDataDirError(f"{path} is not a regular file")
        refuse_unless_ours(path, info)
        if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            os.fchmod(fd, 0o600)
        return file.read(SMALL_FILE_LIMIT).decode()


def secret(path: Path) -> str:
    """The password stored at `path`, generated (URL-safe, 0600) on first use; safe to race."""
    try:
        return read_owned(path).strip()
    except FileNotFoundError:
        pass
    value = secrets.token_urlsafe(24)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno != errno.EEXIST:
            raise
        return read_owned(path).strip()
    with os.fdopen(fd, "w") as out:
        out.write(value + "\n")
    return value


def write_private(path: Path, text: str, *, group: int | None = None) -> None:
    """Replace `path` with `text`, 0600 (0640 to `group` when given): written to a new file beside it and
    renamed over it, so no link at `path` is ever followed and no reader sees half a file."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            if group is not None:
                os.fchown(out.fileno(), -1, group)
                os.fchmod(out.fileno(), 0o640)
            out.write(text)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_secret(path: Path, value: str) -> None:
    """Store `value` at `path` (0600), replacing what was there; the file is never readable by others."""
    write_private(path, value + "\n")


def open_server_file(path: Path, flags: int = os.O_RDONLY) -> int | None:
    """A descriptor on a file in a directory the server user owns (`postmaster.pid`, `pg_hba.conf`), or None
    when there is no such plain file: a symbolic link is never followed, and a FIFO, a device or a file with
    other names (a hard link to someone else's file) is not ours to read or change."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ELOOP, errno.EACCES, errno.ENXIO, errno.ENOTDIR):
            return None
        raise
    info = os.fstat(fd)
    owners = {os.geteuid()} | ({server_user().pw_uid} if running_as_root() else set())
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1 or info.st_uid not in owners:
        os.close(fd)
        return None
    return fd


def read_server_file(path: Path) -> str | None:
    """The text of a small file in a server's directory (see `open_server_file`); None when there is none."""
    fd = open_server_file(path)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as file:
        return file.read(SMALL_FILE_LIMIT).decode(errors="replace")


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
