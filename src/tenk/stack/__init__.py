"""Embedded PostgreSQL and Redis for development and tests, plus migrations."""

from tenk.stack._ports import PortTakenError, free_port, port_is_open
from tenk.stack.postgres import EmbeddedPostgres
from tenk.stack.redis import EmbeddedRedis

__all__ = ["EmbeddedPostgres", "EmbeddedRedis", "PortTakenError", "free_port", "port_is_open"]
