"""URLs as the CLI prints them: every secret replaced by `***`, so that a terminal or a CI log keeps none.

A DSN carries secrets in two places: the userinfo (`postgresql://user:secret@host/db`) and the query
string, where libpq and redis-py read `password=`, `sslpassword=` and the like
(`postgresql://host/db?user=app&password=secret`). Both are redacted; what is left (user, hosts,
ports, database) is what an operator needs to tell which server is meant.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

REDACTED = "***"
# A query parameter whose name contains one of these holds a secret (password, sslpassword, auth_token, ...).
_SECRET_PARAMETER = re.compile(r"(^|[&;])([^=&;]*(?:pass|secret|token|key|auth)[^=&;]*)=([^&;#]*)", re.IGNORECASE)


def redacted_url(url: str) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc
    userinfo, at, hosts = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = f"{userinfo.partition(':')[0]}:{REDACTED}@{hosts}"
    query = _SECRET_PARAMETER.sub(lambda m: f"{m.group(1)}{m.group(2)}={REDACTED}", parts.query)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
