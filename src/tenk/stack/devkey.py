"""The development API key that `tenk up` creates, so that writes work out of the box.

The key is written to `<data_dir>/dev-api-key` (mode 0600) and its SHA-256 to `dev-api-key.sha256`.
When TENK_API_KEYS is empty, the API accepts that digest; set TENK_API_KEYS in any real deployment.
"""

from __future__ import annotations

import os
from pathlib import Path

from tenk.ops.api_keys import digest, new_api_key

KEY_FILE = "dev-api-key"
DIGEST_FILE = "dev-api-key.sha256"


def ensure_dev_key(data_dir: Path) -> tuple[str, bool]:
    data_dir.mkdir(parents=True, exist_ok=True)
    key_path = data_dir / KEY_FILE
    if key_path.exists():
        key = key_path.read_text().strip()
        created = False
    else:
        key = new_api_key()
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(key + "\n")
        created = True
    (data_dir / DIGEST_FILE).write_text(digest(key) + "\n")
    return key, created


def dev_key_digest(data_dir: Path) -> str | None:
    try:
        return (data_dir / DIGEST_FILE).read_text().strip() or None
    except FileNotFoundError:
        return None
