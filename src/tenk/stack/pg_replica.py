"""A streaming read replica of the embedded Postgres, on 127.0.0.1, from the same wheel's binaries.

`pg_basebackup -R` copies the primary's data directory over the replication protocol and writes
`standby.signal` and `primary_conninfo`; the copy then runs as an `EmbeddedPostgres` of its own,
replaying the primary's WAL as it streams in. The primary needs nothing extra: Postgres defaults to
`wal_level = replica` with WAL senders, and the `pg_hba.conf` that `initdb --auth=scram-sha-256`
writes already admits replication connections from 127.0.0.1 with the password. The replica signs in
as the primary's own role with its password, kept in the replica's `password` file (0600) and in
`postgresql.auto.conf` inside its private data directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tenk.stack._private import make_private, run_as_server_user, server_user
from tenk.stack.postgres import EmbeddedPostgres, _bin_dir


@dataclass
class LocalPgReplica:
    """`data_dir` is the replica's own directory (e.g. `<tenk data dir>/replica`)."""

    data_dir: Path
    port: int
    primary: EmbeddedPostgres

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir).resolve()
        self.server = EmbeddedPostgres(self.data_dir, self.port, self.primary.user, self.primary.database)

    @property
    def url(self) -> str:
        return self.server.url

    def base_backup(self) -> None:
        """Copy the primary into our data dir, once."""
        if (self.server.pgdata / "PG_VERSION").exists():
            return
        make_private(self.data_dir.parent, server_may_enter=True)
        make_private(self.data_dir, server_may_enter=True)
        password_file = self.data_dir / "password"
        password_file.unlink(missing_ok=True)
        fd = os.open(password_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(self.primary.password + "\n")
        run_as = run_as_server_user()
        shutil.rmtree(self.server.pgdata, ignore_errors=True)
        self.server.pgdata.mkdir(mode=0o700)
        self.server.socket_dir.mkdir(mode=0o700, exist_ok=True)
        if run_as:
            for path in (self.server.pgdata, self.server.socket_dir):
                shutil.chown(path, server_user().pw_uid, server_user().pw_gid)
        conninfo = f"host=127.0.0.1 port={self.primary.port} user={self.primary.user}"
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
            env={**os.environ, "PGPASSWORD": self.primary.password, "PGCONNECT_TIMEOUT": "10"},
            **run_as,  # type: ignore[call-overload]
        )

    def start(self, timeout: float = 30.0) -> bool:
        self.base_backup()
        return self.server.start(timeout)

    def running(self) -> bool:
        return self.server.running()

    def stop(self) -> None:
        self.server.stop()

    def kill(self) -> None:
        self.server.kill()

    def log_tail(self, lines: int = 30) -> str:
        return self.server.log_tail(lines)
