"""Live terminal progress for a ladder run: rung, step, current rate, last p99 and errors (rich);
for fixed-rate runs, also each second's offered rate, goodput, p99, errors and target CPU."""

from __future__ import annotations

from typing import Protocol

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from tenk.lab.documents import LoadFigures, Second


class Progress(Protocol):
    def note(self, text: str) -> None: ...
    def rung(self, index: int, total: int, label: str, changed: str) -> None: ...
    def step(self, phase: str, number: int, rate: float, elapsed_s: float, duration_s: float) -> None: ...
    def step_done(self, phase: str, rate: float, figures: LoadFigures, verdict: str) -> None: ...
    def second(self, second: Second, target_cores: float | None) -> None: ...
    def close(self) -> None: ...


class QuietProgress:
    """For tests and scripts: notes go to a list, nothing to the terminal."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    def note(self, text: str) -> None:
        self.notes.append(text)

    def rung(self, index: int, total: int, label: str, changed: str) -> None:
        self.notes.append(f"rung {index}/{total}: {label}")

    def step(self, phase: str, number: int, rate: float, elapsed_s: float, duration_s: float) -> None:
        return None

    def step_done(self, phase: str, rate: float, figures: LoadFigures, verdict: str) -> None:
        self.notes.append(f"{phase} {rate:g}: p99 {figures.p99_ms} ms, errors {figures.error_rate:.3%} {verdict}")

    def second(self, second: Second, target_cores: float | None) -> None:
        return None

    def close(self) -> None:
        return None


def _steps_table() -> Table:
    table = Table(box=None, pad_edge=False)
    for column in ("phase", "rate", "rps", "p50 ms", "p99 ms", "errors", "gen CPU", "verdict"):
        table.add_column(column, justify="left" if column in ("phase", "verdict") else "right")
    return table


class RichProgress:
    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console()
        self._header = Text("")
        self._current = Text("")
        self._second = Text("")
        self._done = _steps_table()
        self._live = Live(self._render(), console=self.console, refresh_per_second=4, transient=False)
        self._live.start()

    def _render(self) -> Group:
        return Group(self._header, self._done, self._current, self._second)

    def note(self, text: str) -> None:
        self._live.console.print(text)

    def rung(self, index: int, total: int, label: str, changed: str) -> None:
        self._header = Text.assemble(
            ("rung ", "bold"), (f"{index}/{total} ", "bold cyan"), (label, "bold"), f"  [{changed}]"
        )
        self._done = _steps_table()
        self._live.update(self._render())

    def step(self, phase: str, number: int, rate: float, elapsed_s: float, duration_s: float) -> None:
        share = min(1.0, elapsed_s / duration_s) if duration_s else 1.0
        bar = "#" * int(share * 30)
        self._current = Text(f"{phase} {number}: {rate:g} req/s  [{bar:<30}] {elapsed_s:4.0f}/{duration_s:g}s")
        self._live.update(self._render())

    def step_done(self, phase: str, rate: float, figures: LoadFigures, verdict: str) -> None:
        self._done.add_row(
            phase,
            f"{rate:g}" if rate else "closed",
            f"{figures.rps:,.0f}",
            f"{figures.p50_ms:.1f}",
            f"{figures.p99_ms:.1f}",
            f"{figures.error_rate:.2%}",
            f"{figures.generator_util:.0%}",
            verdict,
        )
        self._current = Text("")
        self._second = Text("")
        self._live.update(self._render())

    def second(self, second: Second, target_cores: float | None) -> None:
        cpu = f"{target_cores:.2f} cores" if target_cores is not None else "-"
        self._second = Text(
            f"last second: offered {second.offered_rps:g}/s  goodput {second.goodput_rps:,.0f}/s  "
            f"p99 {second.p99_ms:.1f} ms  errors {second.errors}  target CPU {cpu}"
        )
        self._live.update(self._render())

    def close(self) -> None:
        self._live.stop()
