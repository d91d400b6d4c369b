"""Products: cache-aside reads (process LRU, then Redis, then Postgres) and writes that invalidate everywhere."""
