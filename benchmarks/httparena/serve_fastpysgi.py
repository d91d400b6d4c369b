"""HttpArena's fastpysgi-asgi entry as its `app.py` runs itself, on the port the lab gives it.

The entry's `__main__` binds 0.0.0.0:8080 and a TLS port from /certs; this does what it does with one
plain bind on loopback instead, and the same server settings. Run from the entry's environment:
`python serve_fastpysgi.py ENTRY_DIR PORT WORKERS`.
"""

from __future__ import annotations

import importlib
import sys


def main(entry_dir: str, port: int, workers: int) -> None:
    sys.path.insert(0, entry_dir)
    fastpysgi = importlib.import_module("fastpysgi")
    app = importlib.import_module("app")
    server = fastpysgi.server
    server.delete_all_binds()
    server.add_bind("127.0.0.1", port)
    server.read_buffer_size = 256 * 1024
    server.max_content_length = 31_000_000
    server.backlog = 16 * 1024
    server.loop_timeout = 1
    fastpysgi.run(app.app, workers=workers, loglevel=0)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
