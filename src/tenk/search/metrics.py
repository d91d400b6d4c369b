from __future__ import annotations

from prometheus_client import Counter

# With the requests' own count, the share of searches the result cache answered.
RANKINGS = Counter(
    "tenk_search_rankings_total",
    "Ranking statements sent to Postgres: cache misses, first sightings, background refreshes, and every "
    "search with the cache off.",
)
