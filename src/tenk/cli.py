"""The `tenk` command."""

from __future__ import annotations

import asyncio
import os
import sys

import click

from tenk.lab.cli import lab
from tenk.settings import Settings, get_settings
from tenk.stack import EmbeddedPostgres, EmbeddedRedis
from tenk.stack.redis import Durability


def _settings() -> Settings:
    return get_settings()


def _stack(settings: Settings) -> tuple[EmbeddedPostgres | None, EmbeddedRedis | None]:
    pg = None if settings.database_url else EmbeddedPostgres(settings.data_dir / "postgres", settings.pg_port)
    redis = (
        None
        if settings.redis_url
        else EmbeddedRedis(settings.data_dir / "redis", settings.redis_port, appendfsync=_durability())
    )
    return pg, redis


def _durability() -> Durability:
    return "always" if os.environ.get("TENK_INGEST_DURABILITY") == "always" else "everysec"


@click.group()
def main() -> None:
    """tenk: an async API stack for 10k+ RPS, and the lab that measures it."""


@main.command()
@click.option("--seed/--no-seed", default=True, help="Load the demo data into empty tables.")
@click.option("--products", default=100_000, show_default=True)
@click.option("--tasks", default=10_000, show_default=True)
def up(seed: bool, products: int, tasks: int) -> None:
    """Start the embedded Postgres and Redis (or use TENK_DATABASE_URL / TENK_REDIS_URL), migrate, seed."""
    from tenk.stack import PortTakenError
    from tenk.stack.devkey import ensure_dev_key
    from tenk.stack.migrate import migrate
    from tenk.stack.seed import seed as seed_data

    settings = _settings()
    pg, redis = _stack(settings)
    try:
        for server, name in ((pg, "postgres"), (redis, "redis")):
            if server is None:
                click.echo(
                    f"{name}: external ({_redact(settings.database_url if name == 'postgres' else settings.redis_url)})"
                )
                continue
            started = server.start()
            click.echo(f"{name}: {'started' if started else 'already running'} on port {server.port}")
    except PortTakenError as exc:
        raise click.ClickException(str(exc)) from None
    applied = asyncio.run(migrate(settings.resolved_database_url))
    click.echo(f"migrations: {', '.join(applied) if applied else 'up to date'}")
    if seed:
        written = asyncio.run(seed_data(settings.resolved_database_url, products, tasks))
        click.echo(f"seed: {written['products']} products, {written['tasks']} tasks written (existing rows kept)")
    key, created = ensure_dev_key(settings.data_dir)
    click.echo(f"dev API key ({'new' if created else 'existing'}, in {settings.data_dir / 'dev-api-key'}): {key}")


def _redact(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return url.replace(parts.password, "***") if parts.password else url


@main.command()
def down() -> None:
    """Stop the embedded Postgres and Redis (data is kept in TENK_DATA_DIR)."""
    pg, redis = _stack(_settings())
    for server, name in ((pg, "postgres"), (redis, "redis")):
        if server is not None:
            server.stop()
            click.echo(f"{name}: stopped")


@main.command()
def status() -> None:
    """Show whether the embedded servers run, and where."""
    pg, redis = _stack(_settings())
    for server, name in ((pg, "postgres"), (redis, "redis")):
        if server is None:
            click.echo(f"{name}: external")
        else:
            state = "running" if server.running() else "stopped"
            click.echo(f"{name}: {state} on port {server.port} ({server.url})")


@main.command()
def migrate() -> None:
    """Apply pending migrations (safe to run twice)."""
    from tenk.stack.migrate import migrate as run_migrations

    applied = asyncio.run(run_migrations(_settings().resolved_database_url))
    click.echo(f"applied: {', '.join(applied)}" if applied else "up to date")


@main.command()
@click.option("--products", default=100_000, show_default=True)
@click.option("--tasks", default=10_000, show_default=True)
def seed(products: int, tasks: int) -> None:
    """Load deterministic demo data into empty tables."""
    from tenk.stack.seed import seed as seed_data

    written = asyncio.run(seed_data(_settings().resolved_database_url, products, tasks))
    click.echo(f"seed: {written['products']} products, {written['tasks']} tasks written")


@main.command()
@click.option(
    "--server",
    type=click.Choice(["granian", "uvicorn", "gunicorn"]),
    default=None,
    help="Defaults to TENK_SERVER.",
)
@click.option("--workers", type=int, default=None, help="Defaults to TENK_WORKERS.")
@click.option("--host", default=None)
@click.option("--port", type=int, default=None)
@click.option(
    "--app",
    "app_path",
    default="tenk.app:create_app",
    show_default=True,
    help="ASGI app factory (module:callable).",
)
def serve(server: str | None, workers: int | None, host: str | None, port: int | None, app_path: str) -> None:
    """Serve the API."""
    from tenk.serving import exec_server, multiprocess_metrics_dir, server_argv

    settings = _settings()
    port = port or settings.port
    workers = workers or settings.workers
    if workers > 1 and "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(multiprocess_metrics_dir(settings.data_dir, port))
    argv = server_argv(
        app_path,
        server or settings.server,  # type: ignore[arg-type]
        host=host or settings.host,
        port=port,
        workers=workers,
        access_log=False,
    )
    exec_server(argv)


@main.command("settings")
def settings_command() -> None:
    """Print every TENK_* setting with its default, as a Markdown table."""
    from tenk.settings_doc import markdown_table

    click.echo(markdown_table())


@main.command()
def dev() -> None:
    """`make run`: the stack, the API, and its helpers, until Ctrl-C."""
    from tenk.stack.dev import run_dev

    sys.exit(run_dev(_settings()))


@main.command()
@click.option("--name", default=None, help="Consumer name; reuse it after a crash to replay its pending events.")
def worker(name: str | None) -> None:
    """Write accepted events from the Redis stream to Postgres (one consumer; run several for more)."""
    from tenk.ingest.worker import run_worker
    from tenk.ops.logging import configure_logging

    settings = _settings()
    configure_logging(settings.log_level)
    run_worker(settings, name)


@main.command("mock-upstream")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=9100, show_default=True, help="0 picks a free port (printed).")
@click.option("--p50-ms", type=click.FloatRange(min=0), default=40.0, show_default=True)
@click.option("--p99-ms", type=click.FloatRange(min=0), default=400.0, show_default=True)
@click.option("--error-rate", type=click.FloatRange(0, 1), default=0.0, show_default=True, help="Share of 500s.")
@click.option("--hang-rate", type=click.FloatRange(0, 1), default=0.0, show_default=True, help="Share never answered.")
@click.option("--seed", type=int, default=None, help="Makes the drawn delays and outcomes repeatable.")
def mock_upstream(
    host: str, port: int, p50_ms: float, p99_ms: float, error_rate: float, hang_rate: float, seed: int | None
) -> None:
    """A stand-in third-party quotes API with lognormal latency (see tenk.lab.mock_upstream)."""
    from tenk.lab.mock_upstream import Profile, ProfileError, run

    try:
        profile = Profile(p50_ms=p50_ms, p99_ms=p99_ms, error_rate=error_rate, hang_rate=hang_rate)
    except ProfileError as exc:
        raise click.BadParameter(exc.message, param_hint=f"--{exc.field.replace('_', '-')}") from None

    def ready(bound_host: str, bound_port: int) -> None:
        click.echo(f"mock-upstream listening on http://{bound_host}:{bound_port} ({profile})", err=True)

    run(host, port, profile, seed, ready)


main.add_command(lab)

if __name__ == "__main__":
    main()
