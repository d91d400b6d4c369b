"""Embedded PostgreSQL and Redis for development and tests, plus migrations."""

from tenk.stack._ports import (
    PortTakenError,
    ServerExitedError,
    free_port,
    listens_on,
    port_is_open,
    start_on_free_port,
    wait_listening,
)
from tenk.stack._process import Spawned, log_tail, spawn_logged, start_http_server, wait_http_ok
from tenk.stack.postgres import EmbeddedPostgres
from tenk.stack.redis import EmbeddedRedis

__all__ = [
    "EmbeddedPostgres",
    "EmbeddedRedis",
    "PortTakenError",
    "ServerExitedError",
    "Spawned",
    "free_port",
    "listens_on",
    "log_tail",
    "port_is_open",
    "spawn_logged",
    "start_http_server",
    "start_on_free_port",
    "wait_http_ok",
    "wait_listening",
]
