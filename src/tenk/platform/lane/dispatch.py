"""`Lane`: match a `@hot` route, parse its input as FastAPI would, and hand back the handler's call.

FastAPI's per-request work (routing, a Request object, dependency solving, validation) costs more
than a cache hit or a stream append itself. The lane matches a `@hot` route, parses its input with
parsers derived from the route's declaration (`derive.py`), and returns the handler with its
arguments. Everything else a request gets (its id, metrics, the key check, the body and every
refusal) is the edge's (`tenk.platform.edge`), which wraps this lane and FastAPI alike. Input the lane does
not fully recognise is left to FastAPI untouched.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

from starlette.datastructures import State
from starlette.types import Scope

from tenk.platform.auth import KeyPolicy
from tenk.platform.lane.declare import header
from tenk.platform.lane.derive import UNRECOGNISED, LaneRoute, hot_routes, is_json

# A matched `@hot` route and its handler's arguments (the body's slot, if any, still empty: the edge
# reads the body, and hands it to FastAPI after all when the route's parser does not recognise it).
HotCall = tuple[LaneRoute, list[Any]]


def query_pairs(query: str) -> list[tuple[str, str]]:
    """`parse_qsl(query, keep_blank_values=True)`, Starlette's split: without a `%` or a `+` nothing is
    unquoted, and the split alone gives the same pairs without parse_qsl's per-field unquoting calls."""
    if "%" in query or "+" in query:
        return parse_qsl(query, keep_blank_values=True)
    pairs = []
    for field in query.split("&"):
        if field:  # parse_qsl skips an empty field (`a=1&&b=2`), and reads `a` as ("a", "")
            key, _, value = field.partition("=")
            pairs.append((key, value))
    return pairs


def _query_arguments(route: LaneRoute, scope: Scope, args: list[Any]) -> bool:
    # The same split as Starlette's QueryParams; unknown keys are ignored there too.
    given: dict[str, str] = {}
    for key, value in query_pairs(scope["query_string"].decode("latin-1")):
        if key in given and key in route.query_keys:
            return False  # a declared parameter twice: FastAPI's to judge
        given[key] = value
    for param in route.query:
        text = given.get(param.key)
        if text is None:
            if param.required:
                return False
            args[param.position] = param.default
            continue
        value = param.parse(text)
        if value is UNRECOGNISED:
            return False
        args[param.position] = value
    return True


class DirectState(State):
    """`app.state` as the hot lane hands it to resolvers: the same values, each read a plain lookup.

    starlette's `State` keeps its values in a dict behind `__getattr__`, so every read first fails the
    ordinary attribute lookup and builds an AttributeError, its message formatted, before the dict
    answers: an exception raised and caught on every read, a part of a cached read's instructions
    (budgets.json: cached_hit), and once more for each further read a route's resolvers make (search reads
    two). This view takes that very dict as its own `__dict__`, so a read is found at once, and what the
    lifespan stores after the lane is built is seen too. Everything else is `State`'s own code, through
    `_state`."""

    def __init__(self, state: State) -> None:
        object.__setattr__(self, "__dict__", state._state)

    @property
    def _state(self) -> dict[str, Any]:  # type: ignore[override]
        return self.__dict__


class _MethodRoutes:
    """One method's `@hot` routes, as `Lane.match` looks them up."""

    __slots__ = ("by_group", "fixed", "templated")

    def __init__(self, routes: list[LaneRoute]) -> None:
        self.fixed: dict[str, LaneRoute] = {}
        for route in routes:
            if route.shape is None:
                self.fixed.setdefault(route.prefix, route)  # a path declared twice is the first's, as in routing
        shapes = [(route.shape, route) for route in routes if route.shape is not None]
        # Each shape has one group, its parameter's text, so the n-th shape's text is group n of the whole.
        assert all(shape.groups == 1 for shape, _ in shapes)
        self.templated = re.compile("|".join(f"(?:{shape.pattern})" for shape, _ in shapes) or "(?!)")
        self.by_group = {group: route for group, (_, route) in enumerate(shapes, start=1)}


class Lane:
    """The `@hot` routes of an app, by method, in the app's own order."""

    def __init__(self, routes: list[LaneRoute], state: State) -> None:
        self.routes: dict[str, list[LaneRoute]] = {}
        for route in routes:
            self.routes.setdefault(route.method, []).append(route)
        # By method: every templated shape as one regex, one call, and the fixed paths, one dict lookup.
        # Start-up refuses any two routes that may take one path (`derive.hot_routes`), so neither the
        # order of the two steps nor that of the shapes can change which route answers.
        self._by_method = {method: _MethodRoutes(routes) for method, routes in self.routes.items()}
        self._state = DirectState(state)
        # What the lifespan stores in app.state, read as it is now: `app_state` arguments are plain lookups.
        self._state_values = self._state.__dict__

    @classmethod
    def derive(cls, app_routes: list[Any], state: State, needs_key: Callable[[KeyPolicy], bool]) -> Lane:
        """The lane of an app's `@hot` routes (LaneDeclarationError if one can't be mirrored), each with
        its key policies judged once by `needs_key`."""
        routes = [
            dataclasses.replace(route, key_required=any(needs_key(policy) for policy in route.auth))
            for route in hot_routes(app_routes)
        ]
        return cls(routes, state)

    def match(self, scope: Scope) -> HotCall | None:
        """The call that answers this request, or None when FastAPI must (no such route, input to judge)."""
        routes = self._by_method.get(scope["method"])
        if routes is None:
            return None
        path = scope["path"]
        # Templated first: the product read, the hottest route, is one; a fixed path then costs a dict lookup.
        matched = routes.templated.fullmatch(path)
        if matched is not None:
            group: int = matched.lastindex  # type: ignore[assignment]  # one group always takes part
            route, tail = routes.by_group[group], matched[group]
        else:
            fixed = routes.fixed.get(path)
            if fixed is None:
                return None
            route, tail = fixed, ""
        # One function, not one per step: this runs on every request a `@hot` route may answer.
        args: list[Any] = [None] * route.arity
        if route.path is not None:
            position, parse = route.path
            value = parse(tail)
            if value is UNRECOGNISED:
                return None
            args[position] = value
        if route.query and not _query_arguments(route, scope, args):
            return None
        if route.json_only and not is_json(header(scope, b"content-type")):
            return None
        for position, name in route.state_reads:
            args[position] = self._state_values[name]
        for position, resolve in route.resolvers:
            args[position] = resolve(self._state, scope)
        # What the edge's metrics and the tracing's span read to name the route, as routing sets it.
        scope["route"] = route.route
        return route, args
