"""What the mock has served: counts, requests held right now, and a latency histogram.

Latency is measured from the moment a request was parsed to the moment its response was written,
so if the mock itself ever fell behind, its own numbers would show it.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from typing import NotRequired

# pydantic validates a TypedDict only from typing_extensions before Python 3.12 (pydantic depends on it).
from typing_extensions import TypedDict

from tenk.lab.targets.mock_upstream.profile import ProfileValues

# Log-spaced buckets, 5% wide, from 0.05 ms to past 10 minutes: quantiles are read to within 5%.
_GROWTH = 1.05
_FIRST_MS = 0.05
_BUCKETS = 340
# Per-symbol counts are kept for this many distinct symbols; later ones are only counted in total.
MAX_TRACKED_SYMBOLS = 100_000


def _bucket(ms: float) -> int:
    if ms <= _FIRST_MS:
        return 0
    return min(_BUCKETS - 1, 1 + int(math.log(ms / _FIRST_MS, _GROWTH)))


def _upper_edge_ms(bucket: int) -> float:
    return _FIRST_MS * _GROWTH**bucket


class LatencyFigures(TypedDict):
    """Answered requests' latency; every figure None until one was answered."""

    count: int
    p50: float | None
    p90: float | None
    p99: float | None
    max: float | None
    histogram: list[tuple[float, int]]  # (bucket's upper edge in ms, answers in it), non-empty buckets only


class SymbolQuotes(TypedDict):
    symbol: str
    quotes: int


class StatsSnapshot(TypedDict):
    """GET /stats: what the mock has served since it started or its stats were last reset."""

    uptime_s: float
    requests: int
    quotes: int
    answered: dict[str, int]  # by outcome: "ok", "error"
    client_gone: int
    in_flight: int
    max_in_flight: int
    distinct_symbols: int
    latency_ms: LatencyFigures
    profile: ProfileValues
    symbol: NotRequired[SymbolQuotes]  # with ?symbol=X


class Stats:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.started = time.time()
        self.requests = 0
        self.quotes = 0
        self.outcomes: Counter[str] = Counter()
        self.client_gone = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.symbols: Counter[str] = Counter()
        self._histogram = [0] * _BUCKETS
        self._observed = 0
        self._max_ms = 0.0

    def parked(self) -> None:
        self.in_flight += 1
        if self.in_flight > self.max_in_flight:
            self.max_in_flight = self.in_flight

    def unparked(self) -> None:
        self.in_flight -= 1

    def quote(self, symbol: str) -> None:
        self.quotes += 1
        if symbol in self.symbols or len(self.symbols) < MAX_TRACKED_SYMBOLS:
            self.symbols[symbol] += 1

    def answered(self, outcome: str, latency_s: float) -> None:
        self.outcomes[outcome] += 1
        ms = latency_s * 1000
        self._histogram[_bucket(ms)] += 1
        self._observed += 1
        if ms > self._max_ms:
            self._max_ms = ms

    def quantile_ms(self, q: float) -> float | None:
        if not self._observed:
            return None
        rank = max(1, math.ceil(q * self._observed))
        seen = 0
        for bucket, count in enumerate(self._histogram):
            seen += count
            if seen >= rank:
                return round(min(_upper_edge_ms(bucket), self._max_ms), 3)
        return round(self._max_ms, 3)

    def snapshot(self, profile: ProfileValues, symbol: str | None = None) -> StatsSnapshot:
        body = StatsSnapshot(
            uptime_s=round(time.time() - self.started, 3),
            requests=self.requests,
            quotes=self.quotes,
            answered=dict(self.outcomes),
            client_gone=self.client_gone,
            in_flight=self.in_flight,
            max_in_flight=self.max_in_flight,
            distinct_symbols=len(self.symbols),
            latency_ms=LatencyFigures(
                count=self._observed,
                p50=self.quantile_ms(0.50),
                p90=self.quantile_ms(0.90),
                p99=self.quantile_ms(0.99),
                max=round(self._max_ms, 3) if self._observed else None,
                histogram=[
                    (round(_upper_edge_ms(bucket), 3), count) for bucket, count in enumerate(self._histogram) if count
                ],
            ),
            profile=profile,
        )
        if symbol is not None:
            body["symbol"] = SymbolQuotes(symbol=symbol, quotes=self.symbols.get(symbol, 0))
        return body
