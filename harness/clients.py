"""The suite's API credentials: the key every stack accepts, and its Authorization header."""

from __future__ import annotations

import uuid

from tenk.ingest.writers import scoped_id
from tenk.ops.api_keys import digest

TEST_API_KEY = "tk_test_key_for_the_suite"
AUTH = {"Authorization": f"Bearer {TEST_API_KEY}"}
TEST_CURSOR_SECRET = "cursor-secret-for-the-suite"
# Anonymous search's two limits off (tenk.search.budget): for load from one keyless client that measures
# capacity or shares, not the limits.
SEARCH_LIMITS_OFF = {"TENK_SEARCH_CLIENT_RATE": "0", "TENK_SEARCH_ANONYMOUS_DB_SHARE": "0"}


def stored_id(client_id: str) -> str:
    """The id tenk stores for an event id a client chose and sent with the suite's key: ids are scoped to
    their writer key (`tenk.ingest.writers`), and every stack of the suite configures TENK_API_KEYS."""
    return scoped_id(digest(TEST_API_KEY).encode(), uuid.UUID(client_id))
