"""Counting what a rule says a pattern costs, in the process: calls into a function, tasks made, events
audited. Counted, not timed, so the figure is the same on a busy machine as on a quiet one.

Standard library only: the framework probe imports this in throwaway environments that hold nothing
but the framework versions it measures.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections import Counter
from collections.abc import Callable, Coroutine, Generator, Iterator
from contextlib import contextmanager
from types import CodeType, FrameType
from typing import Any


@contextmanager
def calls_into(*functions: Callable[..., Any]) -> Iterator[Counter[str]]:
    """Count the calls this thread makes into `functions` while the block runs, by `__qualname__`:
    Python functions and builtins alike (`time.sleep`, `io.open`). Another thread's calls are not its.

    A coroutine is one call however often it is resumed: each distinct frame counts once (the frames
    are held until the block ends, so an id is never reused for another call)."""
    codes: dict[CodeType, str] = {f.__code__: f.__qualname__ for f in functions if hasattr(f, "__code__")}
    builtins: dict[int, str] = {id(f): f.__qualname__ for f in functions if not hasattr(f, "__code__")}
    counted: Counter[str] = Counter()
    frames: list[FrameType] = []
    seen: set[int] = set()

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code in codes and id(frame) not in seen:
            seen.add(id(frame))
            frames.append(frame)
            counted[codes[frame.f_code]] += 1
        elif event == "c_call" and id(arg) in builtins:
            counted[builtins[id(arg)]] += 1

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield counted
    finally:
        sys.setprofile(previous)
        frames.clear()


@contextmanager
def tasks_made() -> Iterator[list[int]]:
    """Count the asyncio tasks the running loop makes while the block runs (a one-element list)."""
    loop = asyncio.get_running_loop()
    made = [0]
    previous = loop.get_task_factory()

    def factory(
        loop: asyncio.AbstractEventLoop, coro: Generator[Any, None, Any] | Coroutine[Any, Any, Any], **kwargs: Any
    ) -> asyncio.Future[Any]:
        made[0] += 1
        if previous is not None:
            return previous(loop, coro, **kwargs)
        return asyncio.Task(coro, loop=loop, **kwargs)

    loop.set_task_factory(factory)
    try:
        yield made
    finally:
        loop.set_task_factory(previous)


class Audited:
    """Audit events (`sys.addaudithook`) seen while `active`, each with the thread that raised it.

    An audit hook cannot be removed, so one instance serves the whole test session."""

    def __init__(self) -> None:
        self.active = False
        self.events: list[tuple[str, tuple[Any, ...], int]] = []
        sys.addaudithook(self._hook)

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if self.active:
            self.events.append((event, args, threading.get_ident()))

    @contextmanager
    def watching(self) -> Iterator[list[tuple[str, tuple[Any, ...], int]]]:
        self.events = []
        self.active = True
        try:
            yield self.events
        finally:
            self.active = False


AUDITED: Audited | None = None


def audited() -> Audited:
    """The session's one audit hook, added on first use."""
    global AUDITED
    if AUDITED is None:
        AUDITED = Audited()
    return AUDITED
