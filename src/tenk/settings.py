"""The settings tree: one root read from the environment once, with a model per domain beneath it.

Every variable is `TENK_<FIELD>` for the service-wide fields here, and `TENK_<DOMAIN>_<FIELD>` for a
domain's (`TENK_INGEST_MAX_BACKLOG` is `settings.ingest.max_backlog`). Each domain's model lives beside
its code (`catalog/settings.py`, ...). Only the processes' entry points (`create_app()` with no
argument, the CLI) build a `Settings()`; everything else is handed the tree or a branch of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, Self

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from tenk.catalog.settings import CatalogSettings
from tenk.ingest.settings import IngestSettings
from tenk.ops.settings import Networks, OpsSettings
from tenk.redis_urls import is_sentinel_url, parse_sentinel_url
from tenk.search.settings import SearchSettings
from tenk.upstream.settings import UpstreamSettings

if TYPE_CHECKING:
    # Imported when used: the stack's modules are the CLI's, not the API's.
    from tenk.stack.postgres import EmbeddedPostgres
    from tenk.stack.redis import EmbeddedRedis

ServerName = Literal["granian", "uvicorn", "gunicorn"]


class DatabaseSettings(BaseModel):
    url: str = Field(
        "",
        description="Postgres DSN. Empty: the embedded server started by `tenk up`, as its app role `tenk`, "
        "through its private Unix socket.",
    )
    embedded_port: int = Field(
        # Below the range Linux hands out to outgoing connections (32768-60999), which could hold it.
        25432,
        description="Port of the embedded Postgres, and of its socket's name; tenk's own clients use the socket.",
    )
    embedded_shared_buffers: str = Field(
        "auto",
        pattern=r"^(auto|[1-9][0-9]*(kB|MB|GB))$",
        description="shared_buffers of the embedded Postgres, taken at start. `auto`: a quarter of the "
        "machine's memory (or its cgroup's limit), within 128MB-16GB, as Postgres's docs advise for a "
        "dedicated server. Search at 1M products reads more than a small setting holds, and then serves "
        "fewer searches at a longer p99 (docs/results.md#2026-11-26-search-throughput).",
    )
    pool_min: int = Field(4, ge=1, description="asyncpg pool: connections kept open per API process.")
    pool_max: int = Field(16, ge=1, description="asyncpg pool: most connections per API process.")
    timeout_s: float = Field(5.0, gt=0, description="Wait for a pool connection, and per-statement timeout.")
    pooler: Literal["none", "transaction"] = Field(
        "none",
        description="`transaction`: TENK_DATABASE_URL is a transaction-mode pooler (PgBouncer, RDS Proxy): no "
        "statement cache, no session state.",
    )
    direct_url: str = Field(
        "", description="Postgres DSN that bypasses the pooler, for migrations and advisory locks. Empty: the url."
    )
    replica_urls: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated read-replica DSNs for catalog misses, listings and search. Empty: the primary.",
    )

    @field_validator("replica_urls", mode="before")
    @classmethod
    def _split_urls(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @model_validator(mode="after")
    def _min_within_max(self) -> Self:
        if self.pool_min > self.pool_max:
            raise ValueError(
                f"pool_min ({self.pool_min}) is above pool_max ({self.pool_max}): "
                "lower TENK_DATABASE_POOL_MIN or raise TENK_DATABASE_POOL_MAX"
            )
        return self


class RedisSettings(BaseModel):
    url: str = Field(
        "",
        description="Redis URL: `redis://` (or `unix://<socket path>`) one server, "
        "`redis+cluster://[:password@]host:port,host:port` a Redis Cluster (>= 7, or Valkey), "
        "`redis+sentinel://[:password@]host:port,host:port/<service>[?db=N]` the master that Sentinel names "
        "for <service>. Empty: the embedded server started by `tenk up`, through its private Unix socket.",
    )
    embedded_port: int = Field(
        63799, description="Port of the embedded Redis; tenk's own clients use its Unix socket instead."
    )
    pool_max: int = Field(64, ge=1, description="Most Redis connections per API process.")
    timeout_s: float = Field(0.25, gt=0, description="Redis socket timeout; Redis is a cache, fail fast.")

    @field_validator("url")
    @classmethod
    def _sentinel_url_is_whole(cls, value: str) -> str:
        # Refused here, at start-up, rather than as a traceback from the first Redis call.
        if is_sentinel_url(value):
            parse_sentinel_url(value)
        return value


class Settings(BaseSettings):
    # `_` both ends the prefix and separates a domain from its field; one split only, so that
    # TENK_INGEST_MAX_BACKLOG is ingest.max_backlog, not ingest.max.backlog.
    # Values are kept out of error messages: a refused DSN or Redis URL may carry its password.
    model_config = SettingsConfigDict(
        env_prefix="TENK_",
        env_nested_delimiter="_",
        env_nested_max_split=1,
        extra="ignore",
        hide_input_in_errors=True,
    )

    data_dir: Path = Field(
        Path(".tenk"),
        description="Where the embedded servers keep data, logs, passwords and the dev key (mode 0700).",
    )
    api_keys: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated SHA-256 hex digests of the accepted API keys (never the keys themselves).",
    )
    auth_reads: bool = Field(False, description="Require an API key for reads too.")
    auth_events: bool = Field(
        True,
        description="Require an API key for GET /events/{id}, /sources/{source}/events and /ingest/stats: stored "
        "events are the clients' data. false: public, unless TENK_AUTH_READS is on.",
    )
    auth_metrics: bool | None = Field(None, description="Require an API key for /metrics. Unset: as TENK_AUTH_READS.")
    auth_docs: bool | None = Field(
        None, description="Require an API key for /docs, /redoc and /openapi.json. Unset: as TENK_AUTH_READS."
    )
    auth_ready: bool | None = Field(
        None,
        description="Require an API key for /ready (a load balancer's probe must then send one; /health stays "
        "open). Unset: as TENK_AUTH_READS.",
    )
    metrics_port: int = Field(
        0,
        ge=0,
        le=65535,
        description="Serve /metrics on this port of TENK_HOST instead of the traffic port (each worker binds it "
        "with SO_REUSEPORT). 0: /metrics on the traffic port.",
    )
    header_timeout_s: float = Field(
        10.0,
        gt=0,
        le=60,  # granian's bound
        description="A client that has not sent a request's whole head (request line and headers) this long "
        "after connecting, or after its previous answer, is disconnected without an answer (slowloris).",
    )
    max_body_bytes: int = Field(1024 * 1024, ge=1, description="Larger request bodies get 413.")
    body_timeout_s: float = Field(
        10.0, gt=0, description="A request body still arriving this long after its headers gets 408."
    )
    cursor_secret: str = Field(
        "",
        description="HMAC key that signs pagination cursors, the same in every API process; required with "
        "TENK_API_KEYS or with TENK_DEV_FALLBACK off. Empty in development: one generated into the data dir.",
    )
    dev_fallback: bool = Field(
        True,
        description="Without TENK_API_KEYS, accept `tenk up`'s dev key and generate a cursor secret into the data "
        "dir. Off in the container image: there tenk refuses to start without TENK_API_KEYS and "
        "TENK_CURSOR_SECRET.",
    )
    hot_lane: bool = Field(
        True,
        description="Serve the `@hot` routes from the lane, inside the request edge, without FastAPI's routing and "
        "dependency solving; false: every request through FastAPI (same answers, byte for byte).",
    )

    stock_paths: bool = Field(
        False,
        description="Serve through the libraries' own public paths only: FastAPI's routing (no hot lane), "
        "`asyncpg.create_pool`, redis-py's `BlockingConnectionPool`, prometheus_client's own metric updates. "
        "Slower, and safe on any version of them; tenk also takes these on its own for a library installed "
        "outside the versions its fast paths are tested on (docs/operations.md).",
    )

    access_log: bool = Field(False, description="Log one JSON line per request.")
    log_level: str = Field("INFO", description="Root log level.")

    trusted_proxies: Networks = Field(
        default_factory=list,
        description="Comma-separated networks (CIDR) of the proxies in front of tenk whose X-Forwarded-For is "
        "believed. From a peer in them, the client is the right-most address in that header not in them (the "
        "left-most is whatever the client wrote): what anonymous search's budget, the access log and the "
        "trace-context trust key on. From any other peer the header is ignored. Empty: the peer is the client.",
    )

    host: str = Field("127.0.0.1", description="`tenk serve` bind address.")
    port: int = Field(8000, description="`tenk serve` port; with `tenk up --topology cluster`, HAProxy's.")
    server: ServerName = Field("granian", description="`tenk serve` server; the fastest measured is the default.")
    workers: int = Field(1, ge=1, description="`tenk serve` worker processes.")
    drain_s: float = Field(
        0.0,
        ge=0,
        description="On SIGTERM, `tenk serve` answers /ready with 503 and serves on this long before closing "
        "its listener, so that a load balancer's health checks take it out of rotation first. "
        "0: exit at once (nothing in front to tell).",
    )

    # The branches: a top-level field must never be named `<branch>_...`, or its variable would be read
    # as that branch's field.
    database: DatabaseSettings = Field(default_factory=DatabaseSettings)
    redis: RedisSettings = Field(default_factory=RedisSettings)
    catalog: CatalogSettings = Field(default_factory=CatalogSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    upstream: UpstreamSettings = Field(default_factory=UpstreamSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    ops: OpsSettings = Field(default_factory=OpsSettings)

    @field_validator("api_keys", mode="before")
    @classmethod
    def _split_keys(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip().lower() for part in value.split(",") if part.strip()]
        return value

    @model_validator(mode="after")
    def _deployment_secrets_given(self) -> Self:
        # A generated cursor secret lives in one data dir: behind a balancer, each replica (pod, container)
        # would sign with its own, and a page cursor from one would be refused by the next. Where no dev
        # key exists, each would also refuse every write.
        if not self.dev_fallback and not self.api_keys:
            raise ValueError(
                "TENK_API_KEYS is empty and TENK_DEV_FALLBACK is off (as in the container image): set it to "
                'the comma-separated SHA-256 digests of the accepted keys (printf %s "$KEY" | sha256sum)'
            )
        if self.api_keys and not self.cursor_secret:
            raise ValueError(
                "TENK_API_KEYS is set but TENK_CURSOR_SECRET is not: set it to a long random string, the same "
                "for every API process (python -c 'import secrets; print(secrets.token_urlsafe(32))')"
            )
        return self

    @property
    def accepted_key_digests(self) -> list[str]:
        """TENK_API_KEYS, or, when that is empty, the dev key written by `tenk up`."""
        if self.api_keys:
            return self.api_keys
        from tenk.stack.devkey import dev_key_digest

        dev = dev_key_digest(self.data_dir)
        return [dev] if dev else []

    def embedded_postgres(self) -> EmbeddedPostgres:
        """The embedded server these settings name (whether or not TENK_DATABASE_URL points elsewhere)."""
        from tenk.stack._reachable import servers_home
        from tenk.stack.postgres import EmbeddedPostgres

        # As root in a private checkout, a place the servers' user can reach (see `tenk.stack._reachable`).
        return EmbeddedPostgres(
            servers_home(self.data_dir) / "postgres",
            self.database.embedded_port,
            shared_buffers=self.database.embedded_shared_buffers,
        )

    def embedded_redis(self) -> EmbeddedRedis:
        """The embedded Redis these settings name; its fsync policy (TENK_INGEST_DURABILITY) goes into its config."""
        from tenk.stack._reachable import servers_home
        from tenk.stack.redis import EmbeddedRedis

        return EmbeddedRedis(servers_home(self.data_dir) / "redis", self.redis.embedded_port, self.ingest.durability)

    @property
    def resolved_database_url(self) -> str:
        """TENK_DATABASE_URL, or the embedded server's, with its generated password."""
        return self.database.url or self.embedded_postgres().url

    @property
    def resolved_direct_database_url(self) -> str:
        """Where session state may live (migrations, session advisory locks): never through a pooler."""
        return self.database.direct_url or self.resolved_database_url

    @property
    def resolved_redis_url(self) -> str:
        """TENK_REDIS_URL, or the embedded server's, with its generated password."""
        return self.redis.url or self.embedded_redis().url
