"""The suite's API credentials: the key every stack accepts, and its Authorization header."""

from __future__ import annotations

TEST_API_KEY = "tk_test_key_for_the_suite"
AUTH = {"Authorization": f"Bearer {TEST_API_KEY}"}
TEST_CURSOR_SECRET = "cursor-secret-for-the-suite"
