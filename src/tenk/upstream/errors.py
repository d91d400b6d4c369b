"""The quotes domain's errors, beside the shared ones it also raises:

TenkError
├── NotFoundError            404  the vendor has no such symbol
├── UpstreamError            502  the vendor failed or answered nonsense   (here)
└── UnavailableError         503
    └── UpstreamTimeoutError 504  the vendor did not answer in time
CircuitOpenError, BulkheadFullError -> 503 with Retry-After (tenk.platform.errors)
"""

from __future__ import annotations

from tenk.platform import TenkError


class UpstreamError(TenkError):
    status, code = 502, "upstream_error"
