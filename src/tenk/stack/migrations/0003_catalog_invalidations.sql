-- The catalog's invalidation outbox (see tenk.platform.readthrough; these statements are
-- `catalog.service.PRODUCTS.outbox_sql()`). Every write to a product, by any
-- path (the API, a seed, psql), records in the same transaction that its cached copies must go; the API
-- deletes the record only once Redis has confirmed the invalidation, so a full or absent Redis, or a
-- process dying right after the commit, can delay an invalidation but never lose it.
-- One row per product: later writes to a product with an invalidation still pending coalesce into it,
-- and `seq` tells a record that was re-armed by a newer write from the one that was delivered.
CREATE SEQUENCE catalog_invalidation_seq;

CREATE TABLE catalog_invalidations (
    product_id  bigint      PRIMARY KEY,
    seq         bigint      NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX catalog_invalidations_seq_idx ON catalog_invalidations (seq);

CREATE FUNCTION record_catalog_invalidation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO catalog_invalidations (product_id, seq)
    VALUES (CASE WHEN TG_OP = 'DELETE' THEN OLD.id ELSE NEW.id END, nextval('catalog_invalidation_seq'))
    ON CONFLICT (product_id) DO UPDATE SET seq = EXCLUDED.seq, recorded_at = EXCLUDED.recorded_at;
    RETURN NULL;
END
$$;

CREATE TRIGGER products_record_invalidation
    AFTER INSERT OR UPDATE OR DELETE ON products
    FOR EACH ROW EXECUTE FUNCTION record_catalog_invalidation();
