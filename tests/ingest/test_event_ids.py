"""Generated event ids are time-ordered (UUIDv7) and unpredictable: their random bits come from the OS's
CSPRNG, so no writer can derive the ids to come from the ids it has seen."""

from __future__ import annotations

import random
from uuid import UUID

from tenk.ingest import codec


def _random_bits(event_id: str) -> int:
    # Everything but the 48-bit millisecond time, the version and the variant.
    value = UUID(event_id).int
    return ((value >> 64) & 0xFFF) << 62 | (value & 0x3FFF_FFFF_FFFF_FFFF)


def test_a_generated_id_is_a_version_7_uuid_in_time_order() -> None:
    ids = [codec.uuid7() for _ in range(100)]
    assert all(UUID(event_id).version == 7 for event_id in ids)
    times = [UUID(event_id).int >> 80 for event_id in ids]
    assert times == sorted(times)


def test_generated_ids_do_not_follow_from_the_state_of_the_random_module() -> None:
    state = random.getstate()
    try:
        random.seed(2026)
        first = [_random_bits(codec.uuid7()) for _ in range(50)]
        random.seed(2026)
        again = [_random_bits(codec.uuid7()) for _ in range(50)]
    finally:
        random.setstate(state)
    assert not set(first) & set(again)
