"""What a TENK_REDIS_URL names: one server, a Redis Cluster, or the master that sentinels name.

A leaf, parsing text only: the settings check the URL with it at load time, and `tenk.platform.connections`
builds the client from the same parse.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

# `redis+cluster://[:password@]host:port[,host:port...]`: a Redis Cluster (or Valkey cluster) reached
# through any of the listed nodes; `rediss+cluster://` for TLS. Every other URL is one server.
CLUSTER_SCHEMES = {"redis+cluster": False, "rediss+cluster": True}


def is_cluster_url(url: str) -> bool:
    return urlsplit(url).scheme in CLUSTER_SCHEMES


def split_netloc(netloc: str, default_port: int) -> tuple[str | None, str | None, list[tuple[str, int]]]:
    """(username, password, [(host, port), ...]) of `[user:password@]host:port[,host:port...]`.

    urlsplit cannot parse "h1:p1,h2:p2" as one netloc's host and port: we split it ourselves.
    """
    credentials, _, hosts = netloc.rpartition("@")
    username, _, password = credentials.partition(":")
    addresses = []
    for node in hosts.split(","):
        host, colon, port = node.strip().rpartition(":")
        if not colon:
            host, port = port, ""
        if port and not (port.isdigit() and 0 < int(port) < 65_536):
            raise ValueError(f"TENK_REDIS_URL: port {port!r} of host {host!r} is not a port number")
        addresses.append((host.strip("[]") or "127.0.0.1", int(port or default_port)))
    return unquote(username) or None, unquote(password) or None, addresses


# `redis+sentinel://[[user]:password@]host:port[,host:port...]/<service>[?db=N]`: the master that the
# listed sentinels name for <service>. The password is the master's (and its replicas'); the sentinels
# are asked without one, as redis-py's Sentinel does unless told otherwise.
SENTINEL_SCHEME = "redis+sentinel"
SENTINEL_PORT = 26379


def is_sentinel_url(url: str) -> bool:
    return urlsplit(url).scheme == SENTINEL_SCHEME


@dataclass(frozen=True)
class SentinelAddress:
    sentinels: list[tuple[str, int]]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None


def parse_sentinel_url(url: str) -> SentinelAddress:
    """The parts of a `redis+sentinel://` URL; a ValueError naming TENK_REDIS_URL when one is missing or wrong.

    The URL itself is never in the message: it may carry the password.
    """
    form = "redis+sentinel://[:password@]host:port[,host:port...]/<service>[?db=N]"
    parts = urlsplit(url)
    if not parts.netloc.rpartition("@")[2].strip(", "):
        raise ValueError(f"TENK_REDIS_URL: a sentinel URL names at least one sentinel: {form}")
    username, password, sentinels = split_netloc(parts.netloc, SENTINEL_PORT)
    service = unquote(parts.path.strip("/"))
    if not service or "/" in service:
        raise ValueError(f"TENK_REDIS_URL: a sentinel URL ends with one service name (SENTINEL MASTERS): {form}")
    query = parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(query) - {"db"})
    if unknown:
        raise ValueError(f"TENK_REDIS_URL: unknown sentinel URL parameters {unknown}: {form}")
    db = query.get("db", ["0"])[-1]
    if not db.isdigit():
        raise ValueError(f"TENK_REDIS_URL: db={db!r} is not a database number: {form}")
    return SentinelAddress(sentinels, service, int(db), username, password)
