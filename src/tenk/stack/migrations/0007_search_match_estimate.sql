-- How many products a search query matches, as the planner estimates it from the search column's
-- statistics (its most common lexemes and their frequencies, which ANALYZE keeps: the seed runs it,
-- autovacuum after that). The count-estimate idiom of the PostgreSQL wiki: planning this one-table
-- statement costs about 50 µs, where counting a GIN match of two mid-frequency words costs a
-- millisecond or more. Search ranks a small match outright and ranks candidates only for a large one.
-- VOLATILE because EXPLAIN may not run in a function that is not; it reads nothing but statistics.
CREATE FUNCTION search_match_estimate(query tsquery) RETURNS double precision
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    plan json;
BEGIN
    EXECUTE format('EXPLAIN (FORMAT JSON) SELECT FROM products WHERE search @@ %L::tsquery', query) INTO plan;
    RETURN (plan -> 0 -> 'Plan' ->> 'Plan Rows')::double precision;
END
$$;
