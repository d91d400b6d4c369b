"""Naive baselines that exist only to be measured against; never deploy them.

`naive_sync` and `naive_async` serve the same routes, paths and status codes as tenk, written the way
the studies in shared/seeds started: sync or async handlers, a new database connection per request,
pydantic response models, an access log, no cache, one INSERT and commit per event. The knobs in
`config.py` switch on, one at a time, the fixes the studies made, so a ladder can change one thing per rung.
"""

# Baselines that are WSGI apps: the lab serves them with gunicorn's sync workers, never an ASGI server.
WSGI_BASELINES = frozenset({"baseline:wsgi_sync"})
