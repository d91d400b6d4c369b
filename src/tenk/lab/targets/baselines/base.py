"""What every FastAPI baseline is built from: the app with tenk's error bodies and the naive access log,
and the TLS context their per-call vendor clients share.

The vendor gets a new client, and so a new TCP connection, per call, as the naive apps did. The CA
bundle is read once: httpx reads it for every client (tens of ms of CPU each), a cost of the library
rather than of the pattern, and it would drown what the presets compare.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import httpx
from fastapi import FastAPI

from tenk.lab.targets.baselines.access_log import AccessLog, configure_access_logger
from tenk.lab.targets.baselines.config import NaiveConfig
from tenk.lab.targets.baselines.errors import install_baseline_error_handlers
from tenk.lab.targets.baselines.study_metrics import install_study_metrics

TLS = httpx.create_ssl_context()

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]


def baseline_app(title: str, lifespan: Lifespan) -> FastAPI:
    app = FastAPI(title=title, lifespan=lifespan)
    install_baseline_error_handlers(app)
    config = NaiveConfig()
    if config.study_metrics:
        install_study_metrics(app)
    if config.access_log:
        configure_access_logger()
        app.add_middleware(AccessLog)
    return app
