"""An app serves the domains it is given: their routes, and the state their lifespans open."""

from __future__ import annotations

from harness.stack import Stack
from tenk.app import DOMAINS, Domain, create_app
from tenk.tasks.routes import router as tasks_router
from tests.support.inprocess import app_in_process


async def test_an_app_serves_only_the_domains_it_is_given(stack: Stack) -> None:
    app = create_app(stack.settings(), domains=[Domain(tasks_router)])
    async with app_in_process(app) as client:
        assert (await client.get("/tasks")).status_code == 200
        assert (await client.get("/products/1")).status_code == 404
        assert (await client.get("/health")).status_code == 200
        assert not hasattr(app.state, "catalog"), "a domain it was not given opened its state"


async def test_tenk_serves_every_domain_of_the_list(stack: Stack) -> None:
    app = create_app(stack.settings())
    assert app.state.domains == DOMAINS
    async with app_in_process(app) as client:
        assert (await client.get("/products/1")).status_code == 200
        assert (await client.get("/tasks")).status_code == 200
        assert hasattr(app.state, "catalog")
