"""GET /quotes/{symbol}: calls to a third-party vendor behind a cache, single-flight, breaker and bulkhead."""

from tenk.upstream.routes import router
from tenk.upstream.service import QuoteService, upstream_lifespan
from tenk.upstream.settings import UpstreamSettings

__all__ = ["QuoteService", "UpstreamSettings", "router", "upstream_lifespan"]
