"""A `tenk serve` process started by a test."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from tenk.stack import Spawned


@dataclass
class ServerProcess:
    base_url: str
    server: Spawned

    @property
    def process(self) -> subprocess.Popen[bytes]:
        return self.server.process

    @property
    def pid(self) -> int:
        return self.server.pid

    def log_tail(self, lines: int = 40) -> str:
        return self.server.log_tail(lines)
