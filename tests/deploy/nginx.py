"""The shipped nginx (`deploy/nginx/nginx.conf`), run for real in front of `tenk serve` processes.

The config is the committed one, with only what compose gives it changed: its upstream servers are the
test's API processes, it listens on a free loopback port, and its pid file and temporary directories are
in a directory of the test's own. nginx comes from Debian (`make system-deps` installs it as root).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.deadlines import deadline_s
from tenk.stack import Spawned, spawn_logged, start_on_free_port, wait_listening

NGINX_CONF = Path(__file__).resolve().parents[2] / "deploy" / "nginx" / "nginx.conf"
_TEMP_DIRS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")


def nginx_path() -> str | None:
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if Path(p).exists()), None)


def shipped_config(port: int, apis: list[str], directory: Path) -> str:
    """nginx.conf as committed, with `apis` (host:port) for its upstream servers, listening on `port`."""
    text = NGINX_CONF.read_text()
    servers = re.findall(r"^ *server api-\d+:\d+[^;]*;\n", text, re.M)
    assert servers, "nginx.conf names no api-N upstream server"
    text = text.replace(servers[0], "".join(f"        server {api};\n" for api in apis), 1)
    for server in servers[1:]:
        text = text.replace(server, "", 1)
    assert text.count("listen 80;") == 1
    text = text.replace("listen 80;", f"listen 127.0.0.1:{port};")
    temp = "".join(f"    {name}_temp_path {directory / name};\n" for name in _TEMP_DIRS)
    return text.replace("http {\n", "http {\n" + temp, 1)


@dataclass
class LocalNginx:
    directory: Path
    port: int
    apis: list[str]
    spawned: Spawned | None = field(default=None, init=False)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> bool:
        binary = nginx_path()
        assert binary is not None
        config = self.directory / f"nginx-{self.port}.conf"
        config.write_text(shipped_config(self.port, self.apis, self.directory))
        # In the foreground (its pid is the master's), its errors on stderr, into the log.
        globals_ = f"daemon off; pid {self.directory / f'nginx-{self.port}.pid'};"
        argv = [binary, "-e", "stderr", "-p", str(self.directory), "-c", str(config), "-g", globals_]
        self.spawned = spawn_logged("nginx", argv, self.directory / f"nginx-{self.port}.log")
        try:
            wait_listening(self.spawned.process, self.port, deadline_s(), "nginx")
        except Exception:
            self.stop()
            raise
        return True

    def stop(self) -> None:
        if self.spawned is not None:
            self.spawned.stop()


@contextmanager
def nginx_in_front(apis: list[str]) -> Iterator[LocalNginx]:
    """The shipped nginx in front of these API addresses (host:port), stopped on exit."""
    if nginx_path() is None:
        pytest.skip("nginx is not installed (`make system-deps` as root installs Debian's)")
    # Its own directory; traversable by nginx's workers, which leave root for `nobody` when it starts as root.
    directory = Path(tempfile.mkdtemp(prefix="tenk-nginx-", dir="/tmp"))
    directory.chmod(0o711)
    nginx = start_on_free_port(lambda port: LocalNginx(directory, port, apis))
    try:
        yield nginx
    finally:
        nginx.stop()
        shutil.rmtree(directory, ignore_errors=True)
