"""The `tenk` command."""

from __future__ import annotations

import os
import sys

import click
from pydantic import ValidationError

from tenk import interrupts
from tenk.settings import Settings
from tenk.stack import EmbeddedPostgres, EmbeddedRedis


def _settings() -> Settings:
    """The settings tree, read from the environment: once per command, then handed down.

    A refused setting is the user's to fix: its message, not a traceback through click."""
    try:
        return Settings()
    except ValidationError as exc:
        raise click.ClickException(str(exc)) from None


def _stack(settings: Settings) -> tuple[EmbeddedPostgres | None, EmbeddedRedis | None]:
    pg = None if settings.database.url else settings.embedded_postgres()
    redis = None if settings.redis.url else settings.embedded_redis()
    return pg, redis


class _Commands(click.Group):
    """`tenk lab` is imported only when named: the lab's dependencies (k6, rich, plotly, psycopg, httpx,
    hdrhistogram) are the `lab` extra, which a service install (the image) leaves out."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), "doctor", "lab"])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name == "doctor":
            from tenk.doctor.cli import command

            return command
        if cmd_name != "lab":
            return super().get_command(ctx, cmd_name)
        try:
            from tenk.lab.cli import lab
        except ImportError as exc:
            return _lab_missing(exc)
        return lab


def _lab_missing(exc: ImportError) -> click.Command:
    def refuse() -> None:
        raise click.ClickException(f"tenk lab needs the lab extra (pip install 'tenk[lab]'): {exc}")

    return click.Command("lab", callback=refuse, help="The lab (needs the `lab` extra: not installed).")


@click.group(cls=_Commands)
def main() -> None:
    """tenk: an async API stack for 10k+ RPS, and the lab that measures it."""
    interrupts.let_ctrl_c_through()


@main.command()
@click.option("--seed/--no-seed", default=True, help="Load the demo data into empty tables.")
@click.option("--products", default=100_000, show_default=True)
@click.option("--tasks", default=10_000, show_default=True)
@click.option(
    "--topology",
    type=click.Choice(["single", "cluster"]),
    default="single",
    show_default=True,
    help="cluster: also API nodes behind HAProxy on TENK_PORT, and ingest workers, until `tenk down`.",
)
@click.option("--apis", default=2, show_default=True, type=click.IntRange(min=1), help="cluster: API nodes.")
@click.option(
    "--ingest-workers", default=2, show_default=True, type=click.IntRange(min=0), help="cluster: `tenk worker`s."
)
def up(seed: bool, products: int, tasks: int, topology: str, apis: int, ingest_workers: int) -> None:
    """Start the embedded Postgres and Redis (or use TENK_DATABASE_URL / TENK_REDIS_URL), migrate, seed."""
    from tenk.stack import PortTakenError
    from tenk.stack._private import UnreachableError, UnsafeDataDirError, make_private
    from tenk.stack.fleet import FleetRunningError
    from tenk.stack.haproxy import HAProxyMissingError
    from tenk.stack.pgbouncer import PgBouncerMissingError
    from tenk.stack.redis import RedisServerMissingError

    settings = _settings()
    try:
        make_private(settings.data_dir, server_may_enter=True)
        if topology == "cluster":
            _cluster_up(settings, apis, ingest_workers, seed, products, tasks)
            return
        pg, redis = _stack(settings)
        for server, name in ((pg, "postgres"), (redis, "redis")):
            if server is None:
                click.echo(
                    f"{name}: external ({_redact(settings.database.url if name == 'postgres' else settings.redis.url)})"
                )
                continue
            started = server.start()
            # `auto` sizes Postgres's memory to this machine: say what a start took.
            sized = (
                f", shared_buffers {server.shared_buffers_at_start}"
                if started and isinstance(server, EmbeddedPostgres)
                else ""
            )
            click.echo(f"{name}: {'started' if started else 'already running'} on port {server.port}{sized}")
    except (
        PortTakenError,
        UnreachableError,
        UnsafeDataDirError,
        RedisServerMissingError,
        PgBouncerMissingError,
        HAProxyMissingError,
        FleetRunningError,
    ) as exc:
        raise click.ClickException(str(exc)) from None
    _prepare_data(settings, settings.resolved_direct_database_url, seed, products, tasks)


def _prepare_data(settings: Settings, database_url: str, seed: bool, products: int, tasks: int) -> None:
    """Migrate, seed, and make sure there is a dev key."""
    from tenk.stack.devkey import KEY_FILE, ensure_dev_key
    from tenk.stack.migrate import migrate
    from tenk.stack.seed import seed as seed_data

    applied = interrupts.run(migrate(database_url))
    click.echo(f"migrations: {', '.join(applied) if applied else 'up to date'}")
    if seed:
        written = interrupts.run(seed_data(database_url, products, tasks))
        click.echo(f"seed: {written['products']} products, {written['tasks']} tasks written (existing rows kept)")
    from tenk.stack._private import UnsafeDataDirError

    # Where the key is, never the key: this output ends up in terminals' scrollback and CI logs.
    try:
        _, created = ensure_dev_key(settings.data_dir)
    except UnsafeDataDirError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"dev API key: {'new' if created else 'existing'}, in {(settings.data_dir / KEY_FILE).resolve()}")


def _cluster_up(settings: Settings, apis: int, workers: int, seed: bool, products: int, tasks: int) -> None:
    from tenk.stack.topology import cluster, format_statuses

    topology = cluster(settings, apis, workers)
    for line in topology.start_stores():
        click.echo(line)
    _prepare_data(settings, topology.database_url, seed, products, tasks)
    topology.fleet.start()
    click.echo(format_statuses(topology.statuses()))
    click.echo(f"serving on {topology.fleet.url} (HAProxy); `tenk status` shows every member, `tenk down` stops them")


def _redact(url: str) -> str:
    from tenk.stack._redact import redacted_url

    return redacted_url(url)


@main.command()
def down() -> None:
    """Stop the embedded Postgres and Redis, and a cluster's members (data is kept in TENK_DATA_DIR)."""
    from tenk.stack.topology import cluster, is_recorded

    settings = _settings()
    if is_recorded(settings):
        for line in cluster(settings).stop():
            click.echo(line)
        return
    pg, redis = _stack(settings)
    for server, name in ((pg, "postgres"), (redis, "redis")):
        if server is not None:
            server.stop()
            click.echo(f"{name}: stopped")


@main.command()
def restart() -> None:
    """Restart a cluster's API nodes one at a time, each drained first, so that no request fails.

    For `tenk up --topology cluster`; the nodes start with this command's environment."""
    from tenk.stack.topology import cluster, is_recorded

    settings = _settings()
    if not is_recorded(settings):
        raise click.ClickException("no cluster is running here: `tenk up --topology cluster` starts one")
    for line in cluster(settings).rolling_restart():
        click.echo(line)


@main.command()
def status() -> None:
    """Show whether the embedded servers (and a cluster's members) run, and where."""
    from tenk.stack.topology import cluster, format_statuses, is_recorded

    settings = _settings()
    if is_recorded(settings):
        click.echo(format_statuses(cluster(settings).statuses()))
        return
    pg, redis = _stack(settings)
    for server, name in ((pg, "postgres"), (redis, "redis")):
        if server is None:
            click.echo(f"{name}: external")
        else:
            state = "running" if server.running() else "stopped"
            # The URL the app gets: the embedded Postgres's application role, not its superuser.
            click.echo(f"{name}: {state} on port {server.port} ({_redact(server.url)})")


@main.command()
def migrate() -> None:
    """Apply pending migrations (safe to run twice)."""
    from tenk.stack.migrate import migrate as run_migrations

    applied = interrupts.run(run_migrations(_settings().resolved_direct_database_url))
    click.echo(f"applied: {', '.join(applied)}" if applied else "up to date")


@main.command()
@click.option("--products", default=100_000, show_default=True)
@click.option("--tasks", default=10_000, show_default=True)
def seed(products: int, tasks: int) -> None:
    """Load deterministic demo data into empty tables."""
    from tenk.stack.seed import seed as seed_data

    written = interrupts.run(seed_data(_settings().resolved_direct_database_url, products, tasks))
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
        traced=bool(settings.ops.otel_endpoint),
        header_timeout_s=settings.header_timeout_s,
    )
    if settings.drain_s > 0:
        from tenk.ops.drain import serve_draining

        sys.exit(serve_draining(argv, settings.drain_s))
    exec_server(argv)


@main.command("settings")
def settings_command() -> None:
    """Print every TENK_* setting with its default, as a Markdown table."""
    from tenk.settings_doc import markdown_table

    click.echo(markdown_table())


@main.command()
@click.option("--products", default=100_000, show_default=True, help="Demo products `tenk up` seeds.")
@click.option("--tasks", default=10_000, show_default=True, help="Demo tasks `tenk up` seeds.")
def dev(products: int, tasks: int) -> None:
    """`make run`: the stack, the API, and its helpers (restarted if they crash), until Ctrl-C."""
    from tenk.stack.dev import run_dev

    sys.exit(run_dev(_settings(), products, tasks))


@main.command()
@click.option("--name", default=None, help="Consumer name; reuse it after a crash to replay its pending events.")
def worker(name: str | None) -> None:
    """Write accepted events from the Redis stream to Postgres (one consumer; run several for more)."""
    from tenk.ingest.worker import run_worker
    from tenk.ops.logging import configure_logging
    from tenk.ops.tracing import setup_tracing

    settings = _settings()
    configure_logging(settings.log_level)
    setup_tracing("tenk-worker", settings.ops)
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
    """A stand-in third-party quotes API with lognormal latency (see tenk.lab.targets.mock_upstream).

    Its admin calls (PUT /admin/latency, DELETE /stats) need TENK_MOCK_ADMIN_TOKEN set in its environment."""
    from tenk.lab.targets.mock_upstream import ADMIN_TOKEN_ENV, Profile, ProfileError, run

    try:
        profile = Profile(p50_ms=p50_ms, p99_ms=p99_ms, error_rate=error_rate, hang_rate=hang_rate)
    except ProfileError as exc:
        raise click.BadParameter(exc.message, param_hint=f"--{exc.field.replace('_', '-')}") from None

    def ready(bound_host: str, bound_port: int) -> None:
        click.echo(f"mock-upstream listening on http://{bound_host}:{bound_port} ({profile})", err=True)

    run(host, port, profile, seed, ready, admin_token=os.environ.get(ADMIN_TOKEN_ENV, ""))


if __name__ == "__main__":
    main()
