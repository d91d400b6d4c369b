"""Where tenk's own clients reach the embedded servers: Unix sockets in private directories, never TCP.

A port on 127.0.0.1 belongs to whoever binds it. Once `tenk down` stops a server, `tenk serve` and
`tenk worker` go on reconnecting, and another local user listening on the freed port would be sent the
password: asyncpg answers a request for a cleartext password, redis-py opens with `AUTH`. A socket in a
directory only the servers' owner may enter (0700; Postgres's `pgsock`, Redis's `data/`) can be neither
reached nor impersonated by anyone else. The servers still listen on their ports too, for the local
cluster's members and for a person's own tools; what tenk resolves (`EmbeddedPostgres.url`,
`EmbeddedRedis.url`) names the sockets.

A socket's address holds at most `SOCKET_PATH_MAX` bytes, and a data directory deep in a long checkout
would put the socket past that. Such a directory is reached through an alias instead: a symbolic link
`/tmp/tenk-<uid>/<digest of the directory's path>` to it, made by tenk in a directory that is tenk's
own (0700; as root, 0710 to the servers' group, whose user binds the sockets through it). Nobody else may
change that directory, so nobody can swap the link; the server binds, and the clients connect, through the
same alias, and every process that resolves the URL makes the link again should a /tmp cleaner have
removed it. A path still too long even so is refused with a message that says so.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import stat
import sys
from pathlib import Path
from urllib.parse import quote

from tenk.stack._private import UnsafeDataDirError, refuse_unless_ours, running_as_root, server_user

# sockaddr_un.sun_path: 108 bytes on Linux, 104 on macOS and the BSDs, the terminating NUL included.
SOCKET_PATH_MAX = (108 if sys.platform.startswith("linux") else 104) - 1
ALIASES_IN = Path("/tmp")


class SocketPathError(RuntimeError):
    """A socket path too long for a socket address, even through the short alias."""


def fits(path: Path) -> bool:
    return len(os.fsencode(path)) <= SOCKET_PATH_MAX


def addressable(directory: Path, socket_name: str) -> Path:
    """`directory`, or its short alias when `directory / socket_name` is too long to be a socket address."""
    if fits(directory / socket_name):
        return directory
    alias = alias_home() / hashlib.sha256(os.fsencode(directory)).hexdigest()[:16]
    if not fits(alias / socket_name):
        raise SocketPathError(
            f"{alias / socket_name} is longer than a socket address may be ({SOCKET_PATH_MAX} bytes), "
            f"so the embedded servers cannot be reached privately: set TENK_DATA_DIR to a shorter path"
        )
    _link(alias, directory)
    return alias


def alias_home(under: Path = ALIASES_IN) -> Path:
    """`/tmp/tenk-<uid>`, checked to be a directory of ours that nobody else may change."""
    home = under / f"tenk-{os.geteuid()}"
    with contextlib.suppress(FileExistsError):
        os.mkdir(home, 0o700)
    info = os.lstat(home)
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeDataDirError(f"{home} is not a directory (a link?): remove it, or use a shorter TENK_DATA_DIR")
    refuse_unless_ours(home, info)
    # Sticky /tmp: only we (or root) may rename or remove the directory once it is ours, so the name stays it.
    if running_as_root():
        group = server_user().pw_gid
        if info.st_gid != group:
            os.chown(home, -1, group, follow_symlinks=False)
        wanted = 0o710
    else:
        wanted = 0o700
    if stat.S_IMODE(info.st_mode) != wanted:
        os.chmod(home, wanted)
    return home


def _link(alias: Path, directory: Path) -> None:
    """`alias` names `directory`: a link made beside it and renamed over it, so that a race with another
    tenk process making the same link leaves one link, and what was at `alias` is replaced, never followed."""
    with contextlib.suppress(OSError):
        if os.readlink(alias) == str(directory):
            return
    staged = alias.with_name(f".{alias.name}.{secrets.token_hex(6)}")
    os.symlink(directory, staged)
    try:
        os.replace(staged, alias)
    except BaseException:
        staged.unlink(missing_ok=True)
        raise


def postgres_url(role: str, password: str, database: str, directory: Path, port: int) -> str:
    """libpq's and asyncpg's URL for the socket `directory/.s.PGSQL.<port>`."""
    return f"postgresql://{role}:{password}@/{database}?host={_quoted(directory)}&port={port}"


def redis_url(path: Path, password: str | None = None) -> str:
    """redis-py's URL for the socket at `path`, database 0."""
    credentials = "" if password is None else f":{password}@"
    return f"unix://{credentials}{_quoted(path)}?db=0"


def _quoted(path: Path) -> str:
    # Its slashes kept, anything a URL would read otherwise (a space, `&`, `?`, `#`) escaped.
    return quote(str(path), safe="/")


def conninfo_value(value: str) -> str:
    """`value` quoted for a libpq or PgBouncer `key=value` connection string, so that a path with spaces stays
    one value. The two escape a quote differently (`\\'` and `''`): a value holding one is refused."""
    if "'" in value or "\\" in value:
        raise ValueError(f"{value!r}: a connection string value here may hold no quote or backslash")
    return f"'{value}'"
