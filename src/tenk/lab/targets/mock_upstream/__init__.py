"""`tenk mock-upstream`: a stand-in third-party API with lognormal latency, injected errors and hangs.

GET  /v1/quotes/{symbol}   a small JSON quote, after a drawn delay
GET  /stats                counts, requests held now, latency histogram (?symbol=X adds its count)
DELETE /stats              start counting afresh (admin)
GET  /health               200 once listening
PUT  /admin/latency        {"p50_ms":..,"p99_ms":..,"error_rate":..,"hang_rate":..}, any subset (admin)

Admin calls need the token in TENK_MOCK_ADMIN_TOKEN and a loopback client (see `server.py`).
"""

from tenk.lab.targets.mock_upstream.process import MockUpstreamProcess, start_mock_upstream
from tenk.lab.targets.mock_upstream.profile import Draw, Outcome, Profile, ProfileError, Sampler
from tenk.lab.targets.mock_upstream.server import ADMIN_TOKEN_ENV, run, serve
from tenk.lab.targets.mock_upstream.stats import Stats

__all__ = [
    "ADMIN_TOKEN_ENV",
    "Draw",
    "MockUpstreamProcess",
    "Outcome",
    "Profile",
    "ProfileError",
    "Sampler",
    "Stats",
    "run",
    "serve",
    "start_mock_upstream",
]
