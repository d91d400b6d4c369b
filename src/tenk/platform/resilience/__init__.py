"""Guards shared by every domain that calls something that can be slow or down."""

from tenk.platform.resilience.backoff import Backoff
from tenk.platform.resilience.breaker import BreakerCall, BreakerState, CircuitBreaker, CircuitOpenError, Permit
from tenk.platform.resilience.bulkhead import Bulkhead, BulkheadFullError
from tenk.platform.resilience.singleflight import SingleFlight

__all__ = [
    "Backoff",
    "BreakerCall",
    "BreakerState",
    "Bulkhead",
    "BulkheadFullError",
    "CircuitBreaker",
    "CircuitOpenError",
    "Permit",
    "SingleFlight",
]
