"""What the CLI prints of a URL keeps no secret, wherever the URL carries it."""

from __future__ import annotations

import pytest

from tenk.stack._redact import redacted_url


@pytest.mark.parametrize(
    ("url", "printed"),
    [
        ("postgresql://tenk:s3cret@127.0.0.1:5432/tenk", "postgresql://tenk:***@127.0.0.1:5432/tenk"),
        ("postgresql://127.0.0.1/tenk?user=app&password=s3cret", "postgresql://127.0.0.1/tenk?user=app&password=***"),
        (
            "postgresql://db/tenk?sslmode=verify-full&sslpassword=s3cret&application_name=tenk",
            "postgresql://db/tenk?sslmode=verify-full&sslpassword=***&application_name=tenk",
        ),
        ("redis://:s3cret@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),
        ("redis://127.0.0.1:6379/0?PASSWORD=s3cret", "redis://127.0.0.1:6379/0?PASSWORD=***"),
        ("redis+sentinel://:s3cret@h1:26379,h2:26379/main?db=2", "redis+sentinel://:***@h1:26379,h2:26379/main?db=2"),
        # A password that is also a substring of the host must not take the host with it.
        ("postgresql://u:db@db:5432/db", "postgresql://u:***@db:5432/db"),
        ("postgresql://127.0.0.1:5432/tenk", "postgresql://127.0.0.1:5432/tenk"),
    ],
)
def test_printed_urls_hide_passwords_in_userinfo_and_query(url: str, printed: str) -> None:
    assert redacted_url(url) == printed
    assert "s3cret" not in redacted_url(url)
