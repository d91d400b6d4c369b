"""GET /quotes/{symbol}: calls to a third-party vendor behind a cache, single-flight, breaker and bulkhead."""
