"""A database that starts every use as it was seeded: a template filled once, and a copy of it per use.

The lab measures on data of its own, a database beside the dev stack's in the same embedded Postgres, so
that what a person did through `make run` neither changes its figures nor is changed by a ladder. Filling
a catalogue takes a while (its search postings most of it), so it is done once, into `<name>_template`.
Each use then drops `<name>`, ending any session a crashed run left on it, and creates it again from the
template with `STRATEGY FILE_COPY`: the template's files copied, rather than its rows written again
through the WAL. Every use starts from the same rows, the same pages and the same planner statistics,
whatever the previous one wrote.

The template is closed (`ALLOW_CONNECTIONS false`) once filled: no session can hold it open and so
block a copy, and the app role, which owns what is in it, cannot change it. Both databases are the
superuser's, as every tenk database is (`tenk.stack.pg_roles`). The template's comment records the
fingerprint of what filled it (for the lab, `tenk.stack.seed.fingerprint`: the migrations, the seed's
code, the counts). It is written last, so a template whose filling was interrupted has none, and a
template whose comment is not the fingerprint asked for is made again.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from tenk.stack.postgres import EmbeddedPostgres

# Names tenk chooses, checked anyway: they are written into SQL as identifiers.
_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,40}$")
_FINGERPRINT = re.compile(r"^[0-9a-f]{16,128}$")


@dataclass(frozen=True)
class SeededCopy:
    """`name` on `server`, made afresh from its template by `renew`; `fill(url)` fills a new template,
    given the app role's URL for it, and `fingerprint` says what it fills it with."""

    server: EmbeddedPostgres
    name: str
    fingerprint: str
    fill: Callable[[str], None]

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"{self.name!r}: a database name here is lower-case letters, digits and _")
        if not _FINGERPRINT.match(self.fingerprint):
            raise ValueError(f"{self.fingerprint!r}: a fingerprint is a hex digest")

    @property
    def template(self) -> str:
        return f"{self.name}_template"

    @property
    def url(self) -> str:
        """The app role's URL for the copy."""
        return self.server.url_for(self.name)

    def renew(self) -> bool:
        """Drop the copy and make it again from the template, making the template first if it is missing
        or was filled from something else. Returns whether the template was made."""
        made = self.template_fingerprint() != self.fingerprint
        if made:
            self._make_template()
        self.server.superuser_sql(
            f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE);\n'
            f'CREATE DATABASE "{self.name}" TEMPLATE "{self.template}" STRATEGY FILE_COPY;\n'
        )
        # A database's grants are not copied with it (they live in the cluster's catalog): given again.
        self.server.hand_over(self.name)
        return made

    def template_fingerprint(self) -> str:
        """The fingerprint the template was filled with; "" if there is none, or it was never finished."""
        return self.server.superuser_sql(
            "SELECT pg_catalog.shobj_description(oid, 'pg_database') FROM pg_catalog.pg_database "
            f"WHERE datname = '{self.template}'"
        ).strip()

    def _make_template(self) -> None:
        template = f'"{self.template}"'
        if self.server.has_database(self.template):
            self.server.superuser_sql(
                f"ALTER DATABASE {template} IS_TEMPLATE false;\nDROP DATABASE {template} WITH (FORCE);\n"
            )
        self.server.superuser_sql(f"CREATE DATABASE {template};\n")
        self.server.hand_over(self.template)
        self.fill(self.server.url_for(self.template))
        self.server.superuser_sql(
            f"ALTER DATABASE {template} ALLOW_CONNECTIONS false IS_TEMPLATE true;\n"
            f"COMMENT ON DATABASE {template} IS '{self.fingerprint}';\n"
        )
