"""Guards shared by every domain that calls something that can be slow or down."""

from tenk.resilience.backoff import Backoff
from tenk.resilience.breaker import BreakerCall, BreakerState, CircuitBreaker, CircuitOpenError, Permit
from tenk.resilience.bulkhead import Bulkhead, BulkheadFullError
from tenk.resilience.singleflight import SingleFlight

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
