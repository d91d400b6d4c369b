"""Run as root, `tenk up` never follows a link the servers' user (tenk-pg) planted in a directory it may write.

The attacker is tenk-pg: it runs both servers, so it owns pgdata and Redis's `data/`. Each link it plants
names a victim, a root-owned 0600 file elsewhere; after `tenk up`, no victim may have changed owner, mode
or content, or been read (its access time, set before its modification time, moves on any read under the
`relatime` mount this suite runs on; the test checks that it does before relying on it).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tenk.stack import free_port
from tenk.stack._private import SERVER_USER, running_as_root
from tests.stack.test_embedded import _tenk

pytestmark = pytest.mark.skipif(not running_as_root(), reason="the attack is on root's `tenk up`")


@dataclass(frozen=True)
class Victim:
    path: Path
    content: bytes
    stat: tuple[int, int, int, float, float]

    @classmethod
    def plant(cls, directory: Path, name: str) -> Victim:
        path = directory / name
        content = f"host all all 0.0.0.0/0 trust\nroot's secret for {name}\n".encode()
        path.write_bytes(content)
        path.chmod(0o600)
        # Access time well before modification time: relatime then records the next read.
        modified = path.stat().st_mtime
        os.utime(path, (modified - 3600, modified))
        return cls(path, content, cls._stat(path))

    @staticmethod
    def _stat(path: Path) -> tuple[int, int, int, float, float]:
        info = path.stat()
        return (info.st_uid, info.st_gid, info.st_mode, info.st_atime, info.st_mtime)

    def untouched(self) -> bool:
        # The stat first: reading the content here moves the access time too.
        return self._stat(self.path) == self.stat and self.path.read_bytes() == self.content


@pytest.fixture
def victims() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="tenk-victims-", dir="/tmp"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def _reads_are_recorded(directory: Path) -> bool:
    probe = Victim.plant(directory, "probe")
    probe.path.read_bytes()
    return probe.path.stat().st_atime != probe.stat[3]


def _as_server_user(*argv: str) -> subprocess.CompletedProcess[str]:
    user = pwd.getpwnam(SERVER_USER)
    return subprocess.run(argv, user=user.pw_uid, group=user.pw_gid, capture_output=True, text=True, timeout=30)


def _plant_links(victims: Path, places: list[Path]) -> dict[Path, Victim]:
    """As tenk-pg, a link at each place it may write, to a victim of its own; the places it may not write
    (tenk's own directories) are left, which is the point of the fix."""
    planted: dict[Path, Victim] = {}
    for place in places:
        victim = Victim.plant(victims, f"{place.parent.name}-{place.name}")
        if _as_server_user("ln", "-sfn", str(victim.path), str(place)).returncode == 0:
            planted[place] = victim
    return planted


def test_up_as_root_follows_no_link_the_servers_user_planted(stack_root: Path, victims: Path) -> None:
    if not _reads_are_recorded(victims):
        pytest.skip("this filesystem does not record reads in access times")
    data_dir = stack_root
    pg_port, redis_port = free_port(), free_port()
    try:
        first = _tenk(data_dir, pg_port, redis_port, "up", "--no-seed")
        assert first.returncode == 0, first.stderr
        redis_dir, pg_dir = data_dir / "redis", data_dir / "postgres"
        pgdata = pg_dir / "pgdata"
        names = ["password", "redis.conf", "redis.pid", "redis.log"]
        places = [redis_dir / name for name in names] + [redis_dir / "data" / name for name in names]
        places += [pg_dir / name for name in ("password", "app-password", "postgres.log")]
        places += [data_dir / "dev-api-key", pgdata / "pg_hba.conf"]
        original_pidfile, original_hba = (pgdata / "postmaster.pid").read_bytes(), (pgdata / "pg_hba.conf").read_bytes()
        planted = _plant_links(victims, places)
        assert pgdata / "pg_hba.conf" in planted, "tenk-pg owns pgdata: the attack must be possible there"

        # Both servers run: `tenk up` reuses them, reading their pidfiles and checking pg_hba.conf.
        again = _tenk(data_dir, pg_port, redis_port, "up", "--no-seed")
        touched = [str(place) for place, victim in planted.items() if not victim.untouched()]
        assert not touched, f"root followed tenk-pg's links at {touched}"
        assert again.returncode == 0, again.stderr

        # postmaster.pid too (Postgres runs on, unaware): root may fail to find it, but may not read the victim.
        pidfile, hba = pgdata / "postmaster.pid", pgdata / "pg_hba.conf"
        planted = _plant_links(victims, [pidfile])
        assert pidfile in planted
        _tenk(data_dir, pg_port, redis_port, "up", "--no-seed")
        assert planted[pidfile].untouched(), "root read postmaster.pid through tenk-pg's link"
        for link, saved in ((pidfile, original_pidfile), (hba, original_hba)):
            link.unlink()
            link.write_bytes(saved)
            shutil.chown(link, SERVER_USER, SERVER_USER)

        # Stopped, so that `tenk up` starts both again: the start hands the servers their files.
        down = _tenk(data_dir, pg_port, redis_port, "down")
        assert down.returncode == 0, down.stderr
        planted = _plant_links(victims, places[:-1])
        started = _tenk(data_dir, pg_port, redis_port, "up", "--no-seed")
        touched = [str(place) for place, victim in planted.items() if not victim.untouched()]
        assert not touched, f"root followed tenk-pg's links at {touched}"
        assert started.returncode == 0, started.stderr
    finally:
        _tenk(data_dir, pg_port, redis_port, "down")
