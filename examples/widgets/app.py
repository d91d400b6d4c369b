"""The widgets domain served by tenk: `tenk serve --app examples.widgets.app:create_widgets_app`."""

from __future__ import annotations

from examples.widgets.routes import WIDGETS, router
from tenk.app import Domain, create_app
from tenk.platform import TenkAPI
from tenk.settings import Settings


def create_widgets_app(settings: Settings | None = None) -> TenkAPI:
    return create_app(settings, domains=[Domain(router, WIDGETS.lifespan)])
