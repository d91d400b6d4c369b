"""The development API key that `tenk up` creates, so that writes work out of the box.

The key is written to `<data_dir>/dev-api-key` (mode 0600) and its SHA-256 to `dev-api-key.sha256`.
When TENK_API_KEYS is empty, the API accepts that digest; set TENK_API_KEYS in any real deployment.
"""

from __future__ import annotations

import os
from pathlib import Path

from tenk.ops.api_keys import digest, new_api_key
from tenk.stack._private import read_owned, write_private

KEY_FILE = "dev-api-key"
DIGEST_FILE = "dev-api-key.sha256"


def ensure_dev_key(data_dir: Path) -> tuple[str, bool]:
    data_dir.mkdir(parents=True, exist_ok=True)
    key_path = data_dir / KEY_FILE
    try:
        # Refused when another user owns it or may write it: they would know, or have chosen, the key.
        key = read_owned(key_path).strip()
        created = False
    except FileNotFoundError:
        key = new_api_key()
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(key + "\n")
        created = True
    write_private(data_dir / DIGEST_FILE, digest(key) + "\n")
    return key, created


def dev_key_digest(data_dir: Path) -> str | None:
    try:
        return read_owned(data_dir / DIGEST_FILE).strip() or None
    except FileNotFoundError:
        return None
