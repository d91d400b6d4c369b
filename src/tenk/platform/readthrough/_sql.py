"""Every SQL statement a read-through cache runs, and the outbox migration it needs, for any table.

The statements are made once, when a cache is declared, from its names: identifiers checked against
`IDENTIFIER` (never input), the values parameterised.

The outbox, for a cache `<name>` of `<item>`s over `<table>` keyed by `<key>`: a trigger on the table
records, in the same transaction as each write, whichever path made it, that the item's cached copies
must go, as a row of `<name>_invalidations (<item>_id, seq)`. One row per item: later writes coalesce
into it, and `seq` tells a record that a newer write re-armed from the one that was delivered. The key
is read from the row written (OLD on a DELETE, NEW otherwise): an UPDATE must not change it.
"""

from __future__ import annotations

import re

IDENTIFIER = re.compile(r"^[a-z][a-z0-9_]{0,39}$")

# The primary's WAL position, read after the write committed, so at or past its commit record: a
# replica that has replayed that far sees the write.
_WAL_POSITION = "(pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint"
# On a replica: has it replayed the primary's WAL up to $1? (Not in recovery: NULL, so no.) Asked
# before the read, in a statement of its own: the read's snapshot, taken after, then includes the write.
REPLAYED_PAST = "SELECT COALESCE(pg_last_wal_replay_lsn() - '0/0'::pg_lsn >= $1::bigint, false)"


def highest_id(table: str, key: str) -> str:
    """The id range (`_ceiling.py`): one backward step of the key's index."""
    return f"SELECT coalesce(max({key}), 0) FROM {table}"


class OutboxSql:
    def __init__(self, name: str, table: str, key: str, item: str) -> None:
        self.records = f"{name}_invalidations"
        self.column = f"{item}_id"
        self._sequence = f"{name}_invalidation_seq"
        self._function = f"record_{name}_invalidation"
        self._trigger = f"{table}_record_invalidation"
        self._table = table
        self._key = key
        self.pending_one = (
            f"SELECT (SELECT seq FROM {self.records} WHERE {self.column} = $1) AS seq, {_WAL_POSITION} AS lsn"
        )
        # The position is read after the snapshot, so past the commit of every record the query sees.
        self.pending_many = (
            f"SELECT {self.column} AS id, seq, {_WAL_POSITION} AS lsn FROM {self.records} ORDER BY seq LIMIT $1"
        )
        # Only the records that were delivered: a write that re-armed a record meanwhile changed its seq.
        self.settle = (
            f"DELETE FROM {self.records} AS c USING unnest($1::bigint[], $2::bigint[]) AS done (id, seq) "
            f"WHERE c.{self.column} = done.id AND c.seq = done.seq"
        )

    def migration(self) -> str:
        """The outbox's table, sequence, function and trigger: run it once, as a migration does."""
        width = max(len(self.column), len("recorded_at")) + 1
        return f"""\
CREATE SEQUENCE {self._sequence};

CREATE TABLE {self.records} (
    {self.column:<{width}}bigint      PRIMARY KEY,
    {"seq":<{width}}bigint      NOT NULL,
    {"recorded_at":<{width}}timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX {self.records}_seq_idx ON {self.records} (seq);

CREATE FUNCTION {self._function}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {self.records} ({self.column}, seq)
    VALUES (CASE WHEN TG_OP = 'DELETE' THEN OLD.{self._key} ELSE NEW.{self._key} END, nextval('{self._sequence}'))
    ON CONFLICT ({self.column}) DO UPDATE SET seq = EXCLUDED.seq, recorded_at = EXCLUDED.recorded_at;
    RETURN NULL;
END
$$;

CREATE TRIGGER {self._trigger}
    AFTER INSERT OR UPDATE OR DELETE ON {self._table}
    FOR EACH ROW EXECUTE FUNCTION {self._function}();
"""
