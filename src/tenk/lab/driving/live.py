"""The live view of a fixed-rate run: each second's offered rate, goodput, p99 and errors, read
from the per-request CSV that k6 is writing anyway for the run's latency histogram.

k6 flushes that stream ten times a second (the lab's K6_CSV_SAVE_INTERVAL), so reading it costs k6
nothing more; the lab process does the reading, on the generator's cores, and parses only each request's
duration row. A second is reported once a later second has appeared, so it is whole.
"""

from __future__ import annotations

import csv
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


# k6 writes metric_name first, so a request's duration sample is the line that starts with this.
DURATION_ROW = "http_req_duration,"


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
        if not self._columns and lines:
            self._columns = {name: i for i, name in enumerate(next(csv.reader([lines.pop(0)])))}
        # About a dozen samples a request reach the stream and one of them is read: the lab shares the
        # generator's cores, so the rest are skipped before the CSV parser sees them.
        for row in csv.reader(line for line in lines if line.startswith(DURATION_ROW)):
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
        # Every request's samples carry its tags, so its duration row alone says when it ended and
        # whether its status was one the mix expects.
        window = self._windows.setdefault(int(row[self._columns["timestamp"]]), _Window())
        window.durations.append(float(row[self._columns["metric_value"]]))
        window.requests += 1
        if row[self._columns["expected_response"]] == "false":
            window.failed += 1
