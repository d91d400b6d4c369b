-- /ingest/stats reports how many dead letters are kept. A count(*) over ingest_dead_letters on every
-- call read the whole table, and anyone holding a writer key can make it grow; this keeps the count in
-- one row instead, moved by statement triggers in the transactions that add or remove dead letters.
-- Dead letters now expire (TENK_INGEST_DEAD_LETTER_RETENTION_DAYS, by the workers): dead_at is indexed.

CREATE TABLE ingest_dead_letter_count (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    kept     bigint  NOT NULL
);
INSERT INTO ingest_dead_letter_count (kept) SELECT count(*) FROM ingest_dead_letters;

CREATE FUNCTION tenk_count_dead_letters() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE ingest_dead_letter_count SET kept = kept + (SELECT count(*) FROM added);
    ELSIF TG_OP = 'DELETE' THEN
        UPDATE ingest_dead_letter_count SET kept = kept - (SELECT count(*) FROM removed);
    ELSE
        UPDATE ingest_dead_letter_count SET kept = 0;
    END IF;
    RETURN NULL;
END
$$;

-- INSERT ... ON CONFLICT DO NOTHING puts only the rows it inserted in the transition table.
CREATE TRIGGER ingest_dead_letters_added AFTER INSERT ON ingest_dead_letters
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION tenk_count_dead_letters();
CREATE TRIGGER ingest_dead_letters_removed AFTER DELETE ON ingest_dead_letters
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION tenk_count_dead_letters();
CREATE TRIGGER ingest_dead_letters_truncated AFTER TRUNCATE ON ingest_dead_letters
    FOR EACH STATEMENT EXECUTE FUNCTION tenk_count_dead_letters();

CREATE INDEX ingest_dead_letters_dead_at_idx ON ingest_dead_letters (dead_at);
