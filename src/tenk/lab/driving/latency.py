"""Every request's latency, kept exactly enough to merge: an HdrHistogram per run.

Percentiles do not add: the p99 of two segments is not the mean of their p99s. A histogram with
fixed precision does add, so each fixed-rate run keeps one (from k6's per-request CSV stream),
stored beside its other files and, encoded, in the rung's result; `tenk lab merge` adds them and
reads exact percentiles off the sum, within HDR precision (3 significant digits: 0.1 %).

Input: k6's `--out csv=samples.csv.gz`. Output: an encoded histogram (base64 text) in
microseconds, from 1 µs to 10 minutes.
"""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

from hdrh.histogram import HdrHistogram

LOWEST_US = 1
HIGHEST_US = 600_000_000
SIGNIFICANT_DIGITS = 3


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)


def record_ms(histogram: HdrHistogram, values_ms: list[float]) -> None:
    for value in values_ms:
        histogram.record_value(min(HIGHEST_US, max(LOWEST_US, round(value * 1000))))


def histogram_from_k6_csv(path: Path) -> HdrHistogram:
    """Every `http_req_duration` sample in a k6 CSV stream (gzipped when the name ends in .gz)."""
    histogram = new_histogram()
    with gzip.open(path, "rt", newline="") if path.suffix == ".gz" else path.open(newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            return histogram
        name_at, value_at = header.index("metric_name"), header.index("metric_value")
        record_ms(histogram, [float(row[value_at]) for row in reader if row and row[name_at] == "http_req_duration"])
    return histogram


def encode(histogram: HdrHistogram) -> str:
    return bytes(histogram.encode()).decode("ascii")


def decode(text: str) -> HdrHistogram:
    histogram: HdrHistogram = HdrHistogram.decode(text.encode("ascii"))
    return histogram


def merge(encoded: list[str]) -> HdrHistogram:
    total = new_histogram()
    for text in encoded:
        total.add(decode(text))
    return total


def percentile_ms(histogram: HdrHistogram, percentile: float) -> float:
    return round(float(histogram.get_value_at_percentile(percentile)) / 1000, 3)


def max_ms(histogram: HdrHistogram) -> float:
    return round(float(histogram.get_max_value()) / 1000, 3)
