"""Whose an event id is: a client-chosen id is scoped to the writer key that sent it.

A client may choose its events' ids (the safe retry), and an id is stored once: the same event again is
skipped, another event under a stored id is a conflict, dead-lettered. Were ids shared by every key, a
writer that learnt the ids another key's client will use could post under them first, and that client's
events would be dead-lettered (or, with the same content, silently counted as the other's).

So the id tenk stores for a client's id is derived from the writer and that id (`scoped_id`): one key
can never store an event under an id another key's events get. Duplicates and conflicts are decided per
writer, because only one writer can produce a given stored id. The 202 answers the stored ids; a read by
id with the writer's key finds the event under the id the client chose as well (`tenk.ingest.routes`).

The writer is the SHA-256 digest of its key, as TENK_API_KEYS lists it: stable, and not a secret. Without
TENK_API_KEYS (development, `tenk up`'s dev key) there is one writer, ANONYMOUS, whose ids are stored as sent.

Derived rather than stored beside the id (a `writer` column): the table's unique key, every lookup by id
and the worker's per-row SQL stay as they are, and the cost is one hash per client-chosen id at the API.
"""

from __future__ import annotations

import hashlib
from uuid import UUID

from tenk.ops.api_keys import bearer_key, digest

ANONYMOUS = b""
_SCOPE = b"tenk-writer-scope\0"
_TIME_BITS = 0xFFFF_FFFF_FFFF << 80


def writer_of(keys_configured: bool, authorization: bytes) -> bytes:
    """The writer of a request, from its `Authorization` header: the digest of its key, or ANONYMOUS when
    TENK_API_KEYS is empty (one writer) or the request carries no key (a public read)."""
    if not keys_configured:
        return ANONYMOUS
    key = bearer_key(authorization)
    return ANONYMOUS if key is None else digest(key).encode()


def scoped_id(writer: bytes, client_id: UUID) -> str:
    """The id stored for `client_id` sent by `writer`: the id itself for ANONYMOUS, otherwise an id no
    other writer can produce (a SHA-256 of both).

    A UUIDv7 keeps its 48-bit time and version, so that it still names its day's partition (migration
    0009) and a lookup by it reads that partition; any other id becomes a UUIDv8, as a client's v4 was
    listed in `events_elsewhere` before."""
    if writer == ANONYMOUS:
        return str(client_id)
    hashed = int.from_bytes(hashlib.sha256(_SCOPE + writer + b"\0" + client_id.bytes).digest()[:16])
    if client_id.version == 7:
        value = (client_id.int & _TIME_BITS) | (hashed & ~_TIME_BITS & ~(0xF << 76) & ~(0b11 << 62)) | (0x7 << 76)
    else:
        value = (hashed & ~(0xF << 76) & ~(0b11 << 62)) | (0x8 << 76)
    return str(UUID(int=value | (0b10 << 62)))
