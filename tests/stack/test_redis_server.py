"""The embedded Redis-compatible server is a maintained one, and no client makes it buffer a huge request."""

from __future__ import annotations

import socket

import redis

from harness.stack import Stack
from tenk.stack.redis import CLIENT_QUERY_BUFFER_LIMIT, PROTO_MAX_BULK_LEN

MB = 1024 * 1024
# The server answers a refused header at once; this only bounds a server that waits for the body instead.
ANSWER_WITHIN_S = 10.0


def test_the_embedded_server_is_valkey_8_or_later(stack: Stack) -> None:
    with redis.Redis.from_url(stack.redis.url, decode_responses=True) as client:
        info = client.info("server")
    assert info.get("server_name") == "valkey", info.get("redis_version")
    assert int(str(info["valkey_version"]).split(".")[0]) >= 8, info["valkey_version"]


def test_client_buffers_are_bounded(stack: Stack) -> None:
    with redis.Redis.from_url(stack.redis.url, decode_responses=True) as client:
        config = client.config_get("proto-max-bulk-len") | client.config_get("client-query-buffer-limit")
    assert int(config["proto-max-bulk-len"]) == int(PROTO_MAX_BULK_LEN.removesuffix("mb")) * MB
    assert int(config["client-query-buffer-limit"]) == int(CLIENT_QUERY_BUFFER_LIMIT.removesuffix("mb")) * MB


def _announce_too_long_a_string(stack: Stack, password: str | None) -> bytes:
    """What the server answers a bulk string header one byte over the bound, on a raw connection."""
    too_long = int(PROTO_MAX_BULK_LEN.removesuffix("mb")) * MB + 1
    with socket.create_connection(("127.0.0.1", stack.redis.port), timeout=ANSWER_WITHIN_S) as client:
        if password is not None:
            client.sendall(f"AUTH {password}\r\n".encode())
            assert client.recv(100) == b"+OK\r\n"
        client.sendall(f"*1\r\n${too_long}\r\n".encode())
        return client.recv(200)


def test_a_client_with_the_password_cannot_announce_a_string_over_the_bound(stack: Stack) -> None:
    # Refused on its header, before anything is buffered (the server's default would wait for 16 MiB).
    answer = _announce_too_long_a_string(stack, stack.redis.password)
    assert answer.startswith(b"-ERR Protocol error: invalid bulk length"), answer


def test_a_client_without_the_password_cannot_announce_a_huge_string(stack: Stack) -> None:
    # CVE-2021-32675: Redis 6.2.5 buffered what an unauthenticated client announced.
    answer = _announce_too_long_a_string(stack, None)
    assert answer.startswith(b"-ERR Protocol error:"), answer
