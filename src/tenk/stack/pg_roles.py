"""The embedded Postgres's application role: what the API, workers, lab and migrations sign in as.

The cluster's bootstrap superuser (`postgres`) can run programs as the server user (`COPY ... TO
PROGRAM`), rewrite the server's configuration (`ALTER SYSTEM`) and read any file: a bug or an SQL
injection in the app must not get that. So the app signs in as `tenk`: LOGIN and nothing else, owner
of the application database, its `public` schema and everything in it, so that migrations (tables,
functions, triggers, the events partitions the ingest worker creates and drops) need no more. The
superuser is kept for what only it may do: streaming replication (`pg_basebackup`, the replica's
`primary_conninfo`) and administration.

The superuser runs SQL in the application database on every start, so nothing the app role controls
may reach that SQL. Name lookup is the way in: a function the app role puts earlier on the search_path
(`public.pg_is_in_recovery`, say, after `ALTER DATABASE ... SET search_path = public, pg_catalog`) would
run with the superuser's rights. So every superuser session pins `search_path = pg_catalog, pg_temp` from
its startup packet (which outranks database and role settings), each script pins it again, the names in
the scripts are schema-qualified, and the superuser keeps the database itself: the app role may create
in it but cannot `ALTER DATABASE ... SET` what the superuser's sessions read. Settings an older tenk's
app role could have planted there are reset on every start.

Data directories from before the role existed hold tables owned by the superuser. `REASSIGN OWNED BY
postgres` cannot move them (the bootstrap superuser also owns the system catalogs, which cannot change
hands), so every start hands over, one by one, what the superuser owns outside the system schemas:
relations, functions, types, schemas. It is a no-op once done.

The role's password is set as a SCRAM verifier computed here, so the password itself never reaches
the server (nor its log, should the statement fail).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

# The iteration count Postgres itself uses by default (scram_iterations).
_SCRAM_ITERATIONS = 4096


def scram_verifier(password: str, iterations: int = _SCRAM_ITERATIONS, salt: bytes | None = None) -> str:
    """`SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`, as `pg_authid.rolpassword` holds it.

    Our passwords are URL-safe ASCII (`tenk.stack._private.secret`), which SASLprep leaves unchanged."""
    salt = secrets.token_bytes(16) if salt is None else salt
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.digest(salted, b"Server Key", "sha256")
    b64 = base64.b64encode
    return f"SCRAM-SHA-256${iterations}:{b64(salt).decode()}${b64(stored_key).decode()}:{b64(server_key).decode()}"


# The search_path every superuser session and script runs with: the system catalog first, and the
# session's own temporary schema last (where nobody else can create anything).
SAFE_SEARCH_PATH = "pg_catalog, pg_temp"
# For libpq's PGOPTIONS: a startup-packet setting, which no `ALTER DATABASE/ROLE ... SET` overrides.
SAFE_PGOPTIONS = "-c search_path=pg_catalog,pg_temp"


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _identifier(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


def ensure_role_sql(role: str, password: str) -> str:
    """Run in any database as the superuser: the role exists, may log in with `password`, and nothing more.

    A standby cannot write; it gets the role by replaying the primary's WAL."""
    return f"""
SET search_path = {SAFE_SEARCH_PATH};
DO $tenk$
BEGIN
    IF pg_catalog.pg_is_in_recovery() THEN
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = {_literal(role)}) THEN
        BEGIN
            CREATE ROLE {_identifier(role)};
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL;  -- another `tenk up` made it just now
        END;
    END IF;
    ALTER ROLE {_identifier(role)}
        LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS INHERIT
        PASSWORD {_literal(scram_verifier(password))};
END
$tenk$;
"""


def hand_over_sql(role: str) -> str:
    """Run in the application database as the superuser: the role may connect to and create in the
    database, and owns its schemas and every object in them that the superuser (`current_user`) owns.
    The database itself stays the superuser's, with no database-level settings. Idempotent; a no-op on
    a standby."""
    app = _literal(role)
    return f"""
SET search_path = {SAFE_SEARCH_PATH};
DO $tenk$
DECLARE
    target record;
    me oid := (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = CURRENT_USER);
    db text := pg_catalog.current_database();
BEGIN
    IF pg_catalog.pg_is_in_recovery() THEN
        RETURN;
    END IF;
    -- An older tenk gave the database to the app role, which could then set what our sessions read.
    EXECUTE pg_catalog.format('ALTER DATABASE %I OWNER TO CURRENT_USER', db);
    EXECUTE pg_catalog.format('ALTER DATABASE %I RESET ALL', db);
    EXECUTE pg_catalog.format('GRANT CONNECT, CREATE, TEMPORARY ON DATABASE %I TO %I', db, {app});
    -- public, owned by pg_database_owner since Postgres 15, and any schema the superuser made.
    FOR target IN
        SELECT nspname FROM pg_catalog.pg_namespace
        WHERE nspowner IN (me, 'pg_database_owner'::pg_catalog.regrole)
          AND nspname NOT LIKE 'pg\\_%' AND nspname <> 'information_schema'
    LOOP
        EXECUTE pg_catalog.format('ALTER SCHEMA %I OWNER TO %I', target.nspname, {app});
    END LOOP;
    -- Tables (partitions included: ALTER TABLE does not recurse to them), views, standalone sequences.
    -- Indexes, TOAST tables and identity/serial sequences follow their table.
    FOR target IN
        SELECT c.oid::pg_catalog.regclass AS name, c.relkind
        FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
        WHERE c.relowner = me
          AND n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema'
          AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
          AND NOT EXISTS (
              SELECT FROM pg_catalog.pg_depend d
              WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid = c.oid
                AND (d.deptype = 'e' OR (c.relkind = 'S' AND d.deptype IN ('a', 'i')
                                          AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass)))
    LOOP
        EXECUTE pg_catalog.format('ALTER %s %s OWNER TO %I',
            CASE target.relkind WHEN 'S' THEN 'SEQUENCE' WHEN 'v' THEN 'VIEW'
                WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'f' THEN 'FOREIGN TABLE' ELSE 'TABLE' END,
            target.name, {app});
    END LOOP;
    -- Functions, trigger functions included, procedures and aggregates; not an extension's.
    FOR target IN
        SELECT p.oid::pg_catalog.regprocedure AS name, p.prokind
        FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
        WHERE p.proowner = me
          AND n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema'
          AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend d
                          WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
                            AND d.objid = p.oid AND d.deptype = 'e')
    LOOP
        EXECUTE pg_catalog.format('ALTER %s %s OWNER TO %I',
            CASE target.prokind WHEN 'a' THEN 'AGGREGATE' WHEN 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END,
            target.name, {app});
    END LOOP;
    -- Enums, domains, ranges and standalone composite types (a table's row type and array types follow).
    FOR target IN
        SELECT t.oid::pg_catalog.regtype AS name, t.typtype
        FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
        WHERE t.typowner = me
          AND n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema'
          AND (t.typtype IN ('e', 'd', 'r')
               OR (t.typtype = 'c' AND (SELECT relkind FROM pg_catalog.pg_class WHERE oid = t.typrelid) = 'c'))
          AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend d
                          WHERE d.classid = 'pg_catalog.pg_type'::pg_catalog.regclass
                            AND d.objid = t.oid AND d.deptype = 'e')
    LOOP
        EXECUTE pg_catalog.format('ALTER %s %s OWNER TO %I',
            CASE target.typtype WHEN 'd' THEN 'DOMAIN' ELSE 'TYPE' END, target.name, {app});
    END LOOP;
END
$tenk$;
"""
