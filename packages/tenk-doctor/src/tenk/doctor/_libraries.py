"""The third-party libraries doctor knows: what blocks, what each call returns, and the other spellings.

One table, one entry a library, as data: the resolver (`_names`) reads the spellings, the return types
and the attribute types; the blocking rules read which calls and methods block, and in which family.

- `calls`: module-level callables that block when called (`time.sleep`). `stripe.*.create` matches any
  names in the middle (`stripe.Customer.create`, `stripe.checkout.Session.create`).
- `blocks`: for an instance of a type, the methods that block, space-separated; `*` is any public
  method (not `_private`, not `Capitalised`: those build objects), `-name` an exception to `*`.
- `returns`: what a call returns, when it is not simply the class called: `redis.from_url` returns a
  `redis.Redis`; `boto3.resources.base.ServiceResource().*` is any method of the type.
- `attributes`: the type any other attribute or item of an instance has (`client.shop.orders` of a
  `pymongo.MongoClient` is a database, then a collection), or one attribute has (`pathlib.Path().parent`).
- `in_memory`: callables that read or write a file unless handed an `io.BytesIO` (or `StringIO`): the
  keyword of that argument, and its position when it has one (`"file 0"`).

The family says how the rules weigh a blocking call: "client" (the library, or its own project, has an
async API: sync-route names it), "network" (network I/O, no async API of its own), "file", "process",
"sleep", "wait" (a thread, a future or a queue), "sync-over-async" (a coroutine run to completion
synchronously: on the loop's thread it raises, or blocks the loop under nest_asyncio).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Family = Literal["client", "network", "file", "process", "sleep", "wait", "sync-over-async"]
ANY = frozenset({"*"})


@dataclass(frozen=True)
class Library:
    family: Family
    calls: str = ""
    blocks: dict[str, str] = field(default_factory=dict)
    returns: dict[str, str] = field(default_factory=dict)
    attributes: dict[str, str] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    in_memory: dict[str, str] = field(default_factory=dict)


_CURSOR = "execute executemany fetchone fetchall fetchmany callproc"
_SESSION = (
    "execute query commit rollback get get_one scalar scalars flush refresh merge connection exec "
    "bulk_save_objects bulk_insert_mappings bulk_update_mappings"
)
_REDIS = "* -pipeline -lock -pubsub -register_script -from_url -close __getitem__ __setitem__ __delitem__ __contains__"
_MONGO_COLLECTION = (
    "find find_one insert_one insert_many update_one update_many replace_one delete_one delete_many "
    "count_documents estimated_document_count aggregate distinct find_one_and_update find_one_and_delete "
    "find_one_and_replace bulk_write create_index create_indexes drop drop_index list_indexes watch"
)
_HTTP = "get post put patch delete head options request send stream"
# pathlib.Path's methods that give another path: `Path(__file__).resolve().parent / "templates"`.
_PATH_METHODS = "resolve absolute expanduser joinpath with_name with_suffix with_stem relative_to"
_AZURE = "azure.storage.blob"
_GCS = "google.cloud.storage"

LIBRARIES: dict[str, Library] = {
    "redis": Library(
        "client",
        blocks={
            "redis.Redis": _REDIS,
            "redis.RedisCluster": _REDIS,
            "redis.client.Pipeline": "execute",
            "redis.client.PubSub": "subscribe psubscribe unsubscribe punsubscribe get_message listen",
            "redis.lock.Lock": "acquire release extend",
        },
        returns={
            "redis.Redis.from_url": "redis.Redis",
            "redis.from_url": "redis.Redis",
            "redis.RedisCluster.from_url": "redis.RedisCluster",
            "redis.Redis().pipeline": "redis.client.Pipeline",
            "redis.Redis().pubsub": "redis.client.PubSub",
            "redis.Redis().lock": "redis.lock.Lock",
            "redis.sentinel.Sentinel().master_for": "redis.Redis",
            "redis.sentinel.Sentinel().slave_for": "redis.Redis",
            "redis.asyncio.Redis.from_url": "redis.asyncio.Redis",
            "redis.asyncio.from_url": "redis.asyncio.Redis",
            "redis.ConnectionPool.from_url": "redis.ConnectionPool",
            "redis.asyncio.ConnectionPool.from_url": "redis.asyncio.ConnectionPool",
        },
        aliases={
            "redis.client.StrictRedis": "redis.Redis",
            "redis.client.Redis": "redis.Redis",
            "redis.StrictRedis": "redis.Redis",
            "redis.cluster.RedisCluster": "redis.RedisCluster",
            "redis.connection.ConnectionPool": "redis.ConnectionPool",
            "redis.asyncio.client.Redis": "redis.asyncio.Redis",
            "redis.asyncio.StrictRedis": "redis.asyncio.Redis",
            "redis.asyncio.connection.ConnectionPool": "redis.asyncio.ConnectionPool",
            "redis.asyncio.utils.from_url": "redis.asyncio.from_url",
            "redis.utils.from_url": "redis.from_url",
        },
    ),
    "psycopg": Library(
        "client",
        calls="psycopg.connect psycopg.Connection.connect",
        blocks={
            "psycopg.Connection": "execute commit rollback connect",
            "psycopg.Cursor": _CURSOR,
            "psycopg_pool.ConnectionPool": "connection getconn wait open",
        },
        returns={
            "psycopg.connect": "psycopg.Connection",
            "psycopg.Connection.connect": "psycopg.Connection",
            "psycopg.Connection().cursor": "psycopg.Cursor",
            "psycopg.Connection().execute": "psycopg.Cursor",
            "psycopg.AsyncConnection.connect": "psycopg.AsyncConnection",
            "psycopg_pool.ConnectionPool().connection": "psycopg.Connection",
            "psycopg_pool.ConnectionPool().getconn": "psycopg.Connection",
        },
        aliases={
            "psycopg.connection.Connection": "psycopg.Connection",
            "psycopg.connection_async.AsyncConnection": "psycopg.AsyncConnection",
            "psycopg.cursor.Cursor": "psycopg.Cursor",
        },
    ),
    "psycopg2": Library(
        "client",
        calls="psycopg2.connect",
        blocks={
            "psycopg2.connection": "commit rollback",
            "psycopg2.cursor": f"{_CURSOR} copy_from copy_to copy_expert",
            "psycopg2.pool.AbstractConnectionPool": "getconn",
        },
        returns={
            "psycopg2.connect": "psycopg2.connection",
            "psycopg2.connection().cursor": "psycopg2.cursor",
            "psycopg2.pool.AbstractConnectionPool().getconn": "psycopg2.connection",
        },
        aliases={
            "psycopg2.extensions.connection": "psycopg2.connection",
            "psycopg2.extensions.cursor": "psycopg2.cursor",
            "psycopg2.pool.SimpleConnectionPool": "psycopg2.pool.AbstractConnectionPool",
            "psycopg2.pool.ThreadedConnectionPool": "psycopg2.pool.AbstractConnectionPool",
        },
    ),
    "sqlite3": Library(
        "client",
        calls="sqlite3.connect",
        blocks={"sqlite3.Connection": "execute executemany executescript commit", "sqlite3.Cursor": _CURSOR},
        returns={"sqlite3.connect": "sqlite3.Connection", "sqlite3.Connection().cursor": "sqlite3.Cursor"},
    ),
    "mysql": Library(
        "client",
        calls="pymysql.connect MySQLdb.connect mysql.connector.connect",
        blocks={
            "pymysql.Connection": "commit rollback query ping",
            "pymysql.cursors.Cursor": _CURSOR,
            "mysql.connector.MySQLConnection": "commit rollback ping cmd_query",
            "mysql.connector.cursor.MySQLCursor": _CURSOR,
        },
        returns={
            "pymysql.connect": "pymysql.Connection",
            "pymysql.Connection().cursor": "pymysql.cursors.Cursor",
            "mysql.connector.connect": "mysql.connector.MySQLConnection",
            "mysql.connector.MySQLConnection().cursor": "mysql.connector.cursor.MySQLCursor",
        },
    ),
    "sqlalchemy": Library(
        "client",
        blocks={
            "sqlalchemy.orm.Session": _SESSION,
            "sqlalchemy.orm.scoped_session": _SESSION,
            "sqlalchemy.Engine": "connect begin execute raw_connection",
            "sqlalchemy.Connection": "execute exec_driver_sql commit rollback scalar scalars",
        },
        returns={
            "sqlalchemy.create_engine": "sqlalchemy.Engine",
            "sqlalchemy.Engine().connect": "sqlalchemy.Connection",
            "sqlalchemy.Engine().begin": "sqlalchemy.Connection",
            "sqlalchemy.orm.sessionmaker": "sqlalchemy.orm.sessionmaker",
            "sqlalchemy.orm.scoped_session": "sqlalchemy.orm.scoped_session",
            "sqlalchemy.orm.sessionmaker()": "sqlalchemy.orm.Session",
            "sqlalchemy.orm.sessionmaker().begin": "sqlalchemy.orm.Session",
            "sqlalchemy.orm.scoped_session()": "sqlalchemy.orm.Session",
        },
        aliases={
            "sqlalchemy.orm.session.Session": "sqlalchemy.orm.Session",
            "sqlalchemy.orm.session.sessionmaker": "sqlalchemy.orm.sessionmaker",
            "sqlalchemy.orm.scoping.scoped_session": "sqlalchemy.orm.scoped_session",
            "sqlalchemy.engine.base.Engine": "sqlalchemy.Engine",
            "sqlalchemy.engine.Engine": "sqlalchemy.Engine",
            "sqlalchemy.engine.base.Connection": "sqlalchemy.Connection",
            "sqlalchemy.engine.Connection": "sqlalchemy.Connection",
            "sqlalchemy.engine.create_engine": "sqlalchemy.create_engine",
            "sqlalchemy.engine.create.create_engine": "sqlalchemy.create_engine",
            "sqlmodel.create_engine": "sqlalchemy.create_engine",
            "sqlmodel.Session": "sqlalchemy.orm.Session",
            "sqlmodel.orm.session.Session": "sqlalchemy.orm.Session",
            "sqlalchemy.ext.asyncio.engine.create_async_engine": "sqlalchemy.ext.asyncio.create_async_engine",
        },
    ),
    "pymongo": Library(
        "client",
        blocks={
            "pymongo.MongoClient": "server_info list_database_names list_databases drop_database",
            "pymongo.database.Database": "command list_collection_names list_collections create_collection "
            "drop_collection",
            "pymongo.collection.Collection": _MONGO_COLLECTION,
        },
        returns={
            "pymongo.MongoClient().get_database": "pymongo.database.Database",
            "pymongo.MongoClient().get_default_database": "pymongo.database.Database",
            "pymongo.database.Database().get_collection": "pymongo.collection.Collection",
        },
        attributes={
            "pymongo.MongoClient": "pymongo.database.Database",
            "pymongo.database.Database": "pymongo.collection.Collection",
            "pymongo.collection.Collection": "pymongo.collection.Collection",
        },
        aliases={"pymongo.mongo_client.MongoClient": "pymongo.MongoClient"},
    ),
    "requests": Library(
        "client",
        calls=" ".join(f"requests.{verb}" for verb in _HTTP.split() if verb not in ("send", "stream")),
        blocks={"requests.Session": _HTTP},
        returns={"requests.Session": "requests.Session"},
        aliases={
            "requests.api": "requests",
            "requests.sessions.Session": "requests.Session",
            "requests.session": "requests.Session",
        },
    ),
    "httpx": Library(
        "client",
        calls=" ".join(f"httpx.{verb}" for verb in _HTTP.split() if verb != "send"),
        blocks={"httpx.Client": _HTTP},
        aliases={"httpx._client.Client": "httpx.Client", "httpx._client.AsyncClient": "httpx.AsyncClient"},
    ),
    "urllib": Library(
        "client",
        calls="urllib.request.urlopen urllib.request.urlretrieve",
        blocks={"urllib.request.OpenerDirector": "open"},
        returns={"urllib.request.build_opener": "urllib.request.OpenerDirector"},
    ),
    "http.client": Library(
        "network",
        blocks={
            "http.client.HTTPConnection": "connect request getresponse",
            "http.client.HTTPSConnection": "connect request getresponse",
        },
    ),
    "socket": Library(
        "network",
        calls="socket.create_connection socket.getaddrinfo socket.gethostbyname socket.gethostbyaddr socket.getfqdn",
    ),
    "smtplib": Library(
        "network",
        blocks={
            "smtplib.SMTP": "connect login starttls ehlo helo sendmail send_message noop quit",
            "smtplib.SMTP_SSL": "connect login ehlo helo sendmail send_message noop quit",
        },
    ),
    "ftplib": Library(
        "network",
        blocks={"ftplib.FTP": "connect login cwd nlst dir retrbinary retrlines storbinary storlines delete quit"},
    ),
    "boto3": Library(
        "client",
        blocks={
            "botocore.client.BaseClient": "* -get_paginator -get_waiter -can_paginate -generate_presigned_url "
            "-generate_presigned_post -close",
            "boto3.resources.base.ServiceResource": "* -meta",
        },
        returns={
            "boto3.client": "botocore.client.BaseClient",
            "boto3.resource": "boto3.resources.base.ServiceResource",
            "boto3.Session().client": "botocore.client.BaseClient",
            "boto3.Session().resource": "boto3.resources.base.ServiceResource",
            "boto3.resources.base.ServiceResource().*": "boto3.resources.base.ServiceResource",
        },
        attributes={"boto3.resources.base.ServiceResource": "boto3.resources.base.ServiceResource"},
        aliases={"boto3.session.Session": "boto3.Session"},
    ),
    "google-cloud-storage": Library(
        "network",
        blocks={
            f"{_GCS}.Client": "get_bucket lookup_bucket create_bucket list_buckets list_blobs download_blob_to_file",
            f"{_GCS}.Bucket": "exists reload create delete patch update list_blobs get_blob delete_blob delete_blobs "
            "copy_blob rename_blob make_public",
            f"{_GCS}.Blob": "upload_from_string upload_from_filename upload_from_file download_as_bytes "
            "download_as_string download_as_text download_to_filename download_to_file exists delete reload "
            "patch update rewrite compose make_public open",
        },
        returns={
            f"{_GCS}.Client().bucket": f"{_GCS}.Bucket",
            f"{_GCS}.Client().get_bucket": f"{_GCS}.Bucket",
            f"{_GCS}.Client().lookup_bucket": f"{_GCS}.Bucket",
            f"{_GCS}.Client().create_bucket": f"{_GCS}.Bucket",
            f"{_GCS}.Bucket().blob": f"{_GCS}.Blob",
            f"{_GCS}.Bucket().get_blob": f"{_GCS}.Blob",
        },
        aliases={
            f"{_GCS}.client.Client": f"{_GCS}.Client",
            f"{_GCS}.bucket.Bucket": f"{_GCS}.Bucket",
            f"{_GCS}.blob.Blob": f"{_GCS}.Blob",
        },
    ),
    "azure-storage-blob": Library(
        "client",
        blocks={
            f"{_AZURE}.BlobServiceClient": "create_container delete_container list_containers "
            "get_service_properties get_account_information",
            f"{_AZURE}.ContainerClient": "create_container delete_container exists get_container_properties "
            "list_blobs list_blob_names upload_blob download_blob delete_blob delete_blobs set_container_metadata",
            f"{_AZURE}.BlobClient": "upload_blob download_blob delete_blob exists get_blob_properties "
            "set_blob_metadata start_copy_from_url stage_block commit_block_list",
            f"{_AZURE}.StorageStreamDownloader": "readall readinto content_as_bytes content_as_text chunks",
        },
        returns={
            f"{_AZURE}.BlobServiceClient.from_connection_string": f"{_AZURE}.BlobServiceClient",
            f"{_AZURE}.ContainerClient.from_connection_string": f"{_AZURE}.ContainerClient",
            f"{_AZURE}.BlobClient.from_connection_string": f"{_AZURE}.BlobClient",
            f"{_AZURE}.BlobClient.from_blob_url": f"{_AZURE}.BlobClient",
            f"{_AZURE}.BlobServiceClient().get_container_client": f"{_AZURE}.ContainerClient",
            f"{_AZURE}.BlobServiceClient().get_blob_client": f"{_AZURE}.BlobClient",
            f"{_AZURE}.ContainerClient().get_blob_client": f"{_AZURE}.BlobClient",
            f"{_AZURE}.BlobClient().download_blob": f"{_AZURE}.StorageStreamDownloader",
            f"{_AZURE}.ContainerClient().download_blob": f"{_AZURE}.StorageStreamDownloader",
        },
        aliases={
            f"{_AZURE}._blob_service_client.BlobServiceClient": f"{_AZURE}.BlobServiceClient",
            f"{_AZURE}._container_client.ContainerClient": f"{_AZURE}.ContainerClient",
            f"{_AZURE}._blob_client.BlobClient": f"{_AZURE}.BlobClient",
        },
    ),
    "minio": Library(
        "network",
        blocks={
            "minio.Minio": "put_object get_object fput_object fget_object stat_object remove_object remove_objects "
            "list_objects bucket_exists make_bucket remove_bucket list_buckets copy_object compose_object"
        },
        aliases={"minio.api.Minio": "minio.Minio"},
    ),
    "elasticsearch": Library(
        "client",
        blocks={
            "elasticsearch.Elasticsearch": "search index get delete update bulk count exists mget msearch scroll "
            "clear_scroll delete_by_query update_by_query ping info",
            "elasticsearch.client.NamespacedClient": "*",
        },
        attributes={"elasticsearch.Elasticsearch": "elasticsearch.client.NamespacedClient"},
        aliases={"elasticsearch.client.Elasticsearch": "elasticsearch.Elasticsearch"},
    ),
    "openai": Library(
        "client",
        blocks={"openai.resources": "create retrieve list delete update cancel parse"},
        attributes={"openai.OpenAI": "openai.resources", "openai.resources": "openai.resources"},
        aliases={"openai.Client": "openai.OpenAI", "openai.AzureOpenAI": "openai.OpenAI"},
    ),
    "anthropic": Library(
        "client",
        blocks={"anthropic.resources": "create retrieve list delete count_tokens"},
        attributes={"anthropic.Anthropic": "anthropic.resources", "anthropic.resources": "anthropic.resources"},
        aliases={"anthropic.Client": "anthropic.Anthropic"},
    ),
    "stripe": Library(
        "network",
        calls=" ".join(
            f"stripe.*.{verb}"
            for verb in ("create", "retrieve", "modify", "delete", "list", "search", "capture", "confirm", "cancel")
        ),
    ),
    "slack_sdk": Library(
        "client",
        blocks={"slack_sdk.WebClient": "*"},
        aliases={
            "slack_sdk.web.client.WebClient": "slack_sdk.WebClient",
            "slack_sdk.web.WebClient": "slack_sdk.WebClient",
        },
    ),
    "pika": Library(
        "network",
        calls="pika.BlockingConnection",
        blocks={
            "pika.BlockingConnection": "channel close process_data_events sleep",
            "pika.adapters.blocking_connection.BlockingChannel": "basic_publish basic_get basic_consume "
            "queue_declare exchange_declare queue_bind confirm_delivery start_consuming",
        },
        returns={"pika.BlockingConnection().channel": "pika.adapters.blocking_connection.BlockingChannel"},
    ),
    "neo4j": Library(
        "client",
        blocks={
            "neo4j.Driver": "session verify_connectivity execute_query",
            "neo4j.Session": "run execute_read execute_write read_transaction write_transaction begin_transaction",
        },
        returns={"neo4j.GraphDatabase.driver": "neo4j.Driver", "neo4j.Driver().session": "neo4j.Session"},
    ),
    "rq": Library(
        # Every queue and job operation is a round trip on the sync Redis client the queue was given.
        "network",
        calls="rq.job.Job.fetch rq.job.Job.fetch_many rq.job.Job.exists rq.job.Job.create",
        blocks={
            "rq.Queue": "enqueue enqueue_call enqueue_at enqueue_in enqueue_many enqueue_job count empty "
            "fetch_job get_job_ids get_jobs delete",
            "rq.job.Job": "get_status refresh save cancel delete requeue get_meta save_meta return_value "
            "latest_result results",
            # `@job(queue)`: the decorated function's `.delay(...)` enqueues it.
            "rq.decorators.job": "delay",
        },
        returns={
            "rq.job.Job.fetch": "rq.job.Job",
            "rq.job.Job.create": "rq.job.Job",
            "rq.Queue().enqueue": "rq.job.Job",
            "rq.Queue().enqueue_call": "rq.job.Job",
            "rq.Queue().enqueue_at": "rq.job.Job",
            "rq.Queue().enqueue_in": "rq.job.Job",
            "rq.Queue().fetch_job": "rq.job.Job",
            "rq.decorators.job().delay": "rq.job.Job",
        },
        aliases={"rq.queue.Queue": "rq.Queue", "rq.Job": "rq.job.Job"},
    ),
    "social_core": Library(
        # A backend's user, token and profile calls are sync `requests` calls to the provider.
        "network",
        blocks={
            "social_core.backends.base.BaseAuth": "user_data request get_json get_querystring auth_complete "
            "do_auth request_access_token refresh_token revoke_token auth_url"
        },
        aliases={
            f"social_core.backends.{name}": "social_core.backends.base.BaseAuth"
            for name in (
                "oauth.BaseOAuth2",
                "oauth.BaseOAuth1",
                "oauth.OAuthAuth",
                "open_id_connect.OpenIdConnectAuth",
                "github.GithubOAuth2",
                "google.GoogleOAuth2",
            )
        },
    ),
    "locks": Library(
        # Taking a file lock waits for whoever holds it: another worker, another process.
        "wait",
        calls="fcntl.flock fcntl.lockf",
        blocks={"filelock.FileLock": "acquire __enter__"},
        aliases={
            "filelock.SoftFileLock": "filelock.FileLock",
            "filelock.UnixFileLock": "filelock.FileLock",
            "filelock._unix.UnixFileLock": "filelock.FileLock",
            "filelock._soft.SoftFileLock": "filelock.FileLock",
            "filelock._api.BaseFileLock": "filelock.FileLock",
        },
    ),
    "venv": Library(
        # Creating a venv copies the interpreter's files and, with pip, runs ensurepip in a subprocess.
        "process",
        calls="venv.create",
        blocks={"venv.EnvBuilder": "create"},
    ),
    "time": Library("sleep", calls="time.sleep"),
    "files": Library(
        "file",
        calls="builtins.open builtins.input os.fdopen tempfile.mkstemp tempfile.mkdtemp tempfile.NamedTemporaryFile "
        "tempfile.TemporaryFile tempfile.TemporaryDirectory",
        blocks={"pathlib.Path": "read_text write_text read_bytes write_bytes open"},
        returns={
            "builtins.open": "io.TextIOWrapper",
            **{f"pathlib.Path().{method}": "pathlib.Path" for method in _PATH_METHODS.split()},
        },
        attributes={"pathlib.Path().parent": "pathlib.Path"},
        aliases={"io.open": "builtins.open", "pathlib.PosixPath": "pathlib.Path"},
    ),
    "shutil": Library(
        "file",
        calls="shutil.copy shutil.copy2 shutil.copyfile shutil.copyfileobj shutil.copytree shutil.rmtree shutil.move "
        "shutil.make_archive shutil.unpack_archive",
    ),
    "zipfile": Library(
        "file",
        calls="zipfile.ZipFile",
        blocks={"zipfile.ZipFile": "read write writestr extract extractall open testzip"},
        in_memory={"zipfile.ZipFile": "file 0"},
    ),
    "tarfile": Library(
        "file",
        calls="tarfile.open tarfile.TarFile",
        blocks={"tarfile.TarFile": "add addfile extract extractall extractfile getmembers getmember getnames next"},
        returns={"tarfile.open": "tarfile.TarFile"},
        in_memory={"tarfile.open": "fileobj", "tarfile.TarFile": "fileobj"},
    ),
    "subprocess": Library(
        "process",
        calls="subprocess.run subprocess.call subprocess.check_call subprocess.check_output subprocess.Popen "
        "subprocess.getoutput subprocess.getstatusoutput os.system os.popen",
        blocks={"subprocess.Popen": "wait communicate"},
    ),
    "threads": Library(
        "wait",
        blocks={
            "concurrent.futures.Future": "result exception",
            "concurrent.futures.Executor": "map",
            "threading.Thread": "join",
            "threading.Event": "wait",
            "queue.Queue": "get join",
        },
        returns={
            "concurrent.futures.Executor().submit": "concurrent.futures.Future",
            "asyncio.run_coroutine_threadsafe": "concurrent.futures.Future",
        },
        aliases={
            "concurrent.futures.ThreadPoolExecutor": "concurrent.futures.Executor",
            "concurrent.futures.ProcessPoolExecutor": "concurrent.futures.Executor",
            "concurrent.futures.thread.ThreadPoolExecutor": "concurrent.futures.Executor",
            "concurrent.futures.process.ProcessPoolExecutor": "concurrent.futures.Executor",
        },
    ),
    "sync-over-async": Library(
        "sync-over-async",
        calls="asyncio.run anyio.run anyio.from_thread.run anyio.from_thread.run_sync asgiref.sync.AsyncToSync()",
        blocks={"asyncio.AbstractEventLoop": "run_until_complete run_forever"},
        returns={
            "asyncio.get_event_loop": "asyncio.AbstractEventLoop",
            "asyncio.new_event_loop": "asyncio.AbstractEventLoop",
            "asyncio.get_running_loop": "asyncio.AbstractEventLoop",
            "asgiref.sync.async_to_sync": "asgiref.sync.AsyncToSync",
        },
    ),
}

# BaseHTTPMiddleware subclasses that live in third-party packages, by top-level package and class name
# (so that a re-export, `from fastapi_sqlalchemy import DBSessionMiddleware`, is the same class).
# Read from each package's source: slowapi's SlowAPIMiddleware (its SlowAPIASGIMiddleware is pure ASGI),
# starlette-context's ContextMiddleware (RawContextMiddleware is pure), and so on.
BASE_HTTP_MIDDLEWARE_CLASSES: frozenset[tuple[str, str]] = frozenset(
    {
        ("slowapi", "SlowAPIMiddleware"),
        ("starlette_context", "ContextMiddleware"),
        ("fastapi_sqlalchemy", "DBSessionMiddleware"),
        ("fastapi_async_sqlalchemy", "SQLAlchemyMiddleware"),
        ("starlette_prometheus", "PrometheusMiddleware"),
        ("elasticapm", "ElasticAPM"),
        ("fastapi_babel", "BabelMiddleware"),
        ("fastapi_babel", "InternationalizationMiddleware"),
    }
)


@dataclass(frozen=True)
class Methods:
    names: frozenset[str]
    exceptions: frozenset[str]
    family: Family

    def blocks(self, method: str) -> bool:
        if method in self.names:
            return True
        if "*" not in self.names:
            return False
        return not (method in self.exceptions or method.startswith("_") or method[:1].isupper())


def _methods(spec: str, family: Family) -> Methods:
    words = spec.split()
    names = frozenset(word for word in words if not word.startswith("-"))
    return Methods(names, frozenset(word[1:] for word in words if word.startswith("-")), family)


BLOCKING_CALLS: dict[str, Family] = {}
# `stripe.*.create`: (first name, last name) -> family.
BLOCKING_PATTERNS: dict[tuple[str, str], Family] = {}
BLOCKING_METHODS: dict[str, Methods] = {}
RETURNS: dict[str, str] = {}
ATTRIBUTES: dict[str, str] = {}
ALIASES: dict[str, str] = {}
# callable -> (the keyword naming its file, and its position when it can be given by position)
IN_MEMORY: dict[str, tuple[str, int | None]] = {}


def _index() -> None:
    for library in LIBRARIES.values():
        for name in library.calls.split():
            if ".*." in name:
                head, _, last = name.partition(".*.")
                BLOCKING_PATTERNS[(head, last)] = library.family
            else:
                BLOCKING_CALLS[name] = library.family
        BLOCKING_METHODS.update({kind: _methods(spec, library.family) for kind, spec in library.blocks.items()})
        RETURNS.update(library.returns)
        ATTRIBUTES.update(library.attributes)
        ALIASES.update(library.aliases)
        for name, where in library.in_memory.items():
            keyword, _, position = where.partition(" ")
            IN_MEMORY[name] = (keyword, int(position) if position else None)


_index()


def blocking_family(callee: str) -> Family | None:
    """The family of a resolved call that blocks (`redis.Redis().get`, `time.sleep`), or None."""
    if callee in BLOCKING_CALLS:
        return BLOCKING_CALLS[callee]
    kind, sep, method = callee.rpartition("().")
    if sep:
        methods = BLOCKING_METHODS.get(kind)
        return methods.family if methods is not None and methods.blocks(method) else None
    head, _, rest = callee.partition(".")
    middle, _, last = rest.rpartition(".")
    return BLOCKING_PATTERNS.get((head, last)) if middle and "(" not in callee else None


def is_base_http_middleware(name: str) -> bool:
    return name == "starlette.middleware.base.BaseHTTPMiddleware" or (
        (name.split(".", 1)[0], name.rsplit(".", 1)[-1]) in BASE_HTTP_MIDDLEWARE_CLASSES
    )
