-- Score-ordered postings for search: one row per (lexeme, product) with the rank that product gets
-- for a query of that one word. The GIN index answers "which products match" but not "which match
-- best", so a common word made every search rank thousands of rows; reading the top K postings of
-- each query word is an index range scan of K rows, however common the word.
--
-- `score` is exactly ts_rank_cd(search, 'lexeme') with the default weights: the sum over the word's
-- positions of the weight of each (A 1.0, B 0.4, C 0.2, D 0.1). Statement-level triggers keep the
-- table in step with every write path (COPY, INSERT, upsert, UPDATE, DELETE, TRUNCATE), one set-based
-- statement per write statement.
CREATE TABLE search_postings (
    lexeme     text   NOT NULL,
    score      real   NOT NULL,
    product_id bigint NOT NULL
);

CREATE FUNCTION search_postings_of(vector tsvector) RETURNS TABLE (lexeme text, score real)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    WITH scored AS (
        SELECT entry.lexeme,
               'A' = ANY (entry.weights) AS in_name,
               coalesce((SELECT sum(CASE weight WHEN 'A' THEN 1.0 WHEN 'B' THEN 0.4 WHEN 'C' THEN 0.2 ELSE 0.1 END)
                         FROM unnest(entry.weights) AS weight), 0.1)::real AS score
        FROM unnest(vector) AS entry
    )
    SELECT scored.lexeme, scored.score FROM scored
    UNION ALL
    -- Pairs of name words ("kettl lamp"), scored by the sum: a query of two common words finds the
    -- products that have both in their name without intersecting two long postings lists.
    SELECT first.lexeme || ' ' || second.lexeme, first.score + second.score
    FROM scored AS first JOIN scored AS second ON first.lexeme < second.lexeme
    WHERE first.in_name AND second.in_name
$$;

CREATE FUNCTION search_postings_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO search_postings (lexeme, score, product_id)
    SELECT scored.lexeme, scored.score, added.id FROM added, search_postings_of(added.search) AS scored;
    RETURN NULL;
END
$$;

CREATE FUNCTION search_postings_remove() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Matching on the whole key keeps each delete an index probe, not a scan of a common word's postings.
    DELETE FROM search_postings AS posting
    USING removed, search_postings_of(removed.search) AS scored
    WHERE posting.lexeme = scored.lexeme AND posting.score = scored.score AND posting.product_id = removed.id;
    RETURN NULL;
END
$$;

CREATE FUNCTION search_postings_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Price and stock updates leave the vector alone; only rows whose text changed are re-posted.
    DELETE FROM search_postings AS posting
    USING removed JOIN added ON added.id = removed.id, search_postings_of(removed.search) AS scored
    WHERE removed.search IS DISTINCT FROM added.search
      AND posting.lexeme = scored.lexeme AND posting.score = scored.score AND posting.product_id = removed.id;
    INSERT INTO search_postings (lexeme, score, product_id)
    SELECT scored.lexeme, scored.score, added.id
    FROM added JOIN removed ON removed.id = added.id, search_postings_of(added.search) AS scored
    WHERE removed.search IS DISTINCT FROM added.search;
    RETURN NULL;
END
$$;

CREATE FUNCTION search_postings_clear() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE search_postings;
    RETURN NULL;
END
$$;

INSERT INTO search_postings (lexeme, score, product_id)
SELECT scored.lexeme, scored.score, products.id FROM products, search_postings_of(products.search) AS scored;

-- The whole row is in the key: top-K reads are index-only scans, and deletes find their row exactly.
CREATE UNIQUE INDEX search_postings_rank_idx ON search_postings (lexeme, score DESC, product_id);

CREATE TRIGGER products_search_postings_insert AFTER INSERT ON products
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION search_postings_add();
CREATE TRIGGER products_search_postings_update AFTER UPDATE ON products
    REFERENCING OLD TABLE AS removed NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION search_postings_change();
CREATE TRIGGER products_search_postings_delete AFTER DELETE ON products
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION search_postings_remove();
CREATE TRIGGER products_search_postings_truncate AFTER TRUNCATE ON products
    FOR EACH STATEMENT EXECUTE FUNCTION search_postings_clear();
