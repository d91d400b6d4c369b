"""The live view reads each whole second from k6's CSV stream while k6 is still writing it."""

from __future__ import annotations

from pathlib import Path

from tenk.lab.documents import Second
from tenk.lab.driving.live import LiveTail

HEADER = "metric_name,timestamp,metric_value,check,error,error_code,expected_response,status\n"


def rows(t: int, durations: list[float], failed: int) -> str:
    out = []
    for i, ms in enumerate(durations):
        expected = "false" if i < failed else "true"
        out.append(f"http_reqs,{t},1.000000,,,,{expected},200\n")
        out.append(f"http_req_duration,{t},{ms:.6f},,,,{expected},200\n")
    return "".join(out)


def test_each_second_is_reported_once_it_is_whole_even_across_partial_writes(tmp_path: Path) -> None:
    path = tmp_path / "samples.csv"
    seen: list[Second] = []
    tail = LiveTail(path, offered_rps=4, on_second=seen.append)
    first = HEADER + rows(100, [1.0, 2.0, 3.0, 50.0], failed=1)
    path.write_text(first[:-7])  # k6 mid-line
    tail.poll()
    assert seen == []  # second 100 may still grow
    with path.open("a") as handle:
        handle.write(first[-7:] + rows(101, [1.0, 1.0], failed=0))
    tail.poll()
    assert [(s.t, s.goodput_rps, s.errors, s.p99_ms) for s in seen] == [(100, 3.0, 1, 50.0)]
    tail.poll(final=True)
    assert [(s.t, s.goodput_rps, s.errors) for s in seen] == [(100, 3.0, 1), (101, 2.0, 0)]
    assert all(s.offered_rps == 4 for s in seen)
