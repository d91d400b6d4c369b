"""The live view of a fixed-rate run: each second's offered rate, goodput, p99 and errors, read
from the per-request CSV that k6 is writing anyway for the run's latency histogram.

k6 flushes that stream once a second, so reading it costs the generator nothing more; the lab
process does the parsing. A second is reported once a later second has appeared, so it is whole.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tenk.lab.documents import Second


@dataclass
class _Window:
    requests: int = 0
    failed: int = 0
    durations: list[float] = field(default_factory=list)


def _p99(values: list[float]) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return round(ordered[max(0, -(-len(ordered) * 99 // 100) - 1)], 3)


class LiveTail:
    """Follows a growing k6 CSV stream; `poll()` reports every second completed since the last poll."""

    def __init__(self, path: Path, offered_rps: float, on_second: Callable[[Second], None] | None = None) -> None:
        self.path = path
        self.offered_rps = offered_rps
        self.on_second = on_second
        self.seconds: list[Second] = []
        self._offset = 0
        self._partial = ""
        self._columns: dict[str, int] = {}
        self._windows: dict[int, _Window] = {}

    def poll(self, final: bool = False) -> None:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self._offset)
                chunk = handle.read()
        except OSError:
            return
        self._offset += len(chunk)
        text = self._partial + chunk.decode(errors="replace")
        lines = text.split("\n")
        self._partial = lines.pop()  # an unfinished line waits for the next poll
        for row in csv.reader(io.StringIO("\n".join(lines))):
            self._add(row)
        done = sorted(self._windows) if final else sorted(self._windows)[:-1]
        for t in done:
            window = self._windows.pop(t)
            second = Second(
                t=t,
                offered_rps=self.offered_rps,
                goodput_rps=float(window.requests - window.failed),
                errors=window.failed,
                p99_ms=_p99(window.durations),
            )
            self.seconds.append(second)
            if self.on_second is not None:
                self.on_second(second)

    def _add(self, row: list[str]) -> None:
        if not row:
            return
        if not self._columns:
            self._columns = {name: i for i, name in enumerate(row)}
            return
        name = row[self._columns["metric_name"]]
        if name not in ("http_reqs", "http_req_duration"):
            return
        window = self._windows.setdefault(int(row[self._columns["timestamp"]]), _Window())
        if name == "http_req_duration":
            window.durations.append(float(row[self._columns["metric_value"]]))
        else:
            window.requests += 1
            if row[self._columns["expected_response"]] == "false":
                window.failed += 1
