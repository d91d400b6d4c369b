-- The app role that tenk (API, workers, migrations) signs in as. The postgres image's entrypoint runs this
-- once, as its superuser, in POSTGRES_DB, on the first start of an empty volume (psql, ON_ERROR_STOP).
--
-- The superuser can run programs as the server's user (COPY ... TO PROGRAM), rewrite the server's
-- configuration and read any file: a bug or an injection in the app must not get that. The app role may
-- log in and owns the database and its public schema, which is all that tenk's migrations need (tables,
-- functions, triggers, the events partitions the worker creates and drops); nothing else.
--
-- The names come from the environment (psql's \getenv), never from a command line that `ps` shows.
-- A missing or short password is an error, so Postgres does not start with a role that has none.

SET search_path = pg_catalog, pg_temp;

\getenv app_role APP_DB_USER
\getenv app_password APP_DB_PASSWORD
\if :{?app_role}
\else
\set app_role tenk
\endif
\if :{?app_password}
\else
\set app_password ''
\endif
SELECT pg_catalog.length(:'app_password') >= 24 AS app_password_given \gset
\if :app_password_given
\else
DO $$ BEGIN RAISE EXCEPTION 'APP_DB_PASSWORD (deploy/compose/postgres.env) must be set: 24 characters or more'; END $$;
\endif

CREATE ROLE :"app_role" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS INHERIT
    PASSWORD :'app_password';

SELECT pg_catalog.current_database() AS app_database \gset
ALTER DATABASE :"app_database" OWNER TO :"app_role";
-- Since Postgres 15 public belongs to pg_database_owner, hence to the role above; said here for 14 and older.
ALTER SCHEMA public OWNER TO :"app_role";
-- Only the app role (and the superuser) may connect to the application database.
REVOKE CONNECT, TEMPORARY ON DATABASE :"app_database" FROM PUBLIC;
