"""A streaming read replica of the embedded Postgres, from the same wheel's binaries.

`pg_basebackup -R` copies the primary's data directory over the replication protocol and writes
`standby.signal` and `primary_conninfo`; the copy then runs as an `EmbeddedPostgres` of its own,
replaying the primary's WAL as it streams in. Both go through the primary's private socket, as every
client of the embedded servers does (see `tenk.stack._sockets`). The primary needs nothing extra:
Postgres defaults to `wal_level = replica` with WAL senders, and the `pg_hba.conf` that
`initdb --auth=scram-sha-256` writes already admits local replication connections with the password. The replica streams
as the primary's superuser (replication needs it), whose password is kept in the replica's `password`
file (0600) and in `postgresql.auto.conf` inside its private data directory. Clients read from it as the
application role, which replicates like any other catalog row; its password is copied into the
replica's `app-password` file, so that `url` names the same role as the primary's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

from tenk.stack._private import make_private, run_as_server_user, server_user, write_secret
from tenk.stack._sockets import conninfo_value
from tenk.stack.postgres import EmbeddedPostgres, _bin_dir


@dataclass
class LocalPgReplica:
    """`data_dir` is the replica's own directory (e.g. `<tenk data dir>/replica`)."""

    data_dir: Path
    port: int
    primary: EmbeddedPostgres

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir).resolve()
        # The primary's server in our directory and port: its roles, database and sizing carry over.
        self.server = replace(self.primary, data_dir=self.data_dir, port=self.port)

    @property
    def url(self) -> str:
        """The application role's, for reads."""
        return self.server.url

    @property
    def superuser_url(self) -> str:
        """For administration (pausing replay, say); never hand it to the app."""
        return self.server.superuser_url

    def _copy_passwords(self) -> None:
        """The primary's passwords, which the replica's copy of its catalog checks."""
        write_secret(self.data_dir / "password", self.primary.superuser_password)
        write_secret(self.data_dir / "app-password", self.primary.app_password)

    def base_backup(self) -> None:
        """Copy the primary into our data dir, once."""
        if (self.server.pgdata / "PG_VERSION").exists():
            return
        make_private(self.data_dir.parent, server_may_enter=True)
        make_private(self.data_dir, server_may_enter=True)
        self._copy_passwords()
        run_as = run_as_server_user()
        shutil.rmtree(self.server.pgdata, ignore_errors=True)
        self.server.pgdata.mkdir(mode=0o700)
        self.server.socket_dir.mkdir(mode=0o700, exist_ok=True)
        if run_as:
            for path in (self.server.pgdata, self.server.socket_dir):
                shutil.chown(path, server_user().pw_uid, server_user().pw_gid)
        # Through the primary's socket: the replica keeps this in primary_conninfo, with the superuser's
        # password, and reconnects with it whenever the primary is away.
        host = conninfo_value(str(self.primary.socket_host))
        conninfo = f"host={host} port={self.primary.port} user={self.primary.superuser}"
        subprocess.run(
            [
                str(_bin_dir() / "pg_basebackup"),
                "-d",
                conninfo,
                "-D",
                str(self.server.pgdata),
                "-R",  # standby.signal and primary_conninfo (with the password it was given)
                "-X",
                "stream",
                "--checkpoint=fast",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            umask=0o077,
            env={**os.environ, "PGPASSWORD": self.primary.superuser_password, "PGCONNECT_TIMEOUT": "10"},
            **run_as,  # type: ignore[call-overload]
        )

    def start(self, timeout: float = 30.0) -> bool:
        self.base_backup()
        # Replicas made before the application role existed have no `app-password` yet.
        self._copy_passwords()
        return self.server.start(timeout)

    def running(self) -> bool:
        return self.server.running()

    def stop(self) -> None:
        self.server.stop()

    def kill(self) -> None:
        self.server.kill()

    def log_tail(self, lines: int = 30) -> str:
        return self.server.log_tail(lines)
