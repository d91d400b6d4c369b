"""The rules a route declaration must keep, each with the change that keeps it.

Every refusal at start-up is a `LaneDeclarationError` made from one of these `RULES`: its message names
the route (method and path), what broke the rule (a parameter, a dependency, the return type), the rule
and the fix. docs/platform.md lists the same rules; a test checks that it lists every one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class Rule:
    key: str
    says: str
    # How to keep the rule, formatted with `name` (the parameter or dependency) and `kind` (Path, Query).
    fix: str


RULES: Final = {
    rule.key: rule
    for rule in (
        Rule(
            "returns-reply",
            "every route handler returns a `Reply`, and is annotated so",
            "annotate the handler `-> Reply` (a plain `def` that may hand back a loader's coroutine: "
            "`-> Reply | Awaitable[Reply]`) and return `Reply(status, body)`, `created(...)` or `no_content()`",
        ),
        Rule(
            "reply-router",
            "a domain declares its routes on a router that turns each `Reply` into the answer",
            "declare the router as `APIRouter(..., route_class=ReplyRoute)` (`from tenk.platform import ReplyRoute`)",
        ),
        Rule(
            "response-model-documents",
            "`response_model` only documents the answer: the handler's `Reply` is sent as it is, so the "
            "`response_model_*` filters would change nothing",
            "drop `{name}=` from the route and make the `Reply`'s body what the client should get",
        ),
        Rule(
            "one-method",
            "a `@hot` route has exactly one method",
            "declare one route per method, each with its own `@hot` handler",
        ),
        Rule(
            "no-request-objects",
            "a `@hot` handler takes no Header, Cookie, Request, WebSocket, Response, BackgroundTasks or "
            "SecurityScopes parameter",
            'read a header with `{name}: Annotated[bytes, resolved(lambda state, scope: header(scope, b"x-name"))]`, '
            "or drop `@hot` and let FastAPI alone serve the route",
        ),
        Rule(
            "one-path-parameter",
            "a `@hot` route has at most one path parameter",
            "move `{name}` to the query, or drop `@hot` and let FastAPI alone serve the route",
        ),
        Rule(
            "whole-segment",
            "a `@hot` route's path parameter is a whole path segment",
            "put `{{{name}}}` between two slashes or at the end of the path: `/things/{{{name}}}`",
        ),
        Rule(
            "bounded-int",
            "an int path or query parameter of a `@hot` route declares both bounds, `ge` (0 or more) and `le`, "
            "and nothing else",
            "declare `{name}: Annotated[int, {kind}(ge=1, le=2**31-1)]`",
        ),
        Rule(
            "plain-str",
            "a str path or query parameter of a `@hot` route takes only `min_length`, `max_length` and `pattern`",
            'declare `{name}: Annotated[str, {kind}(max_length=64, pattern=r"^[a-z]+$")]` and check anything '
            "more in the handler (raise `InvalidInputError`)",
        ),
        Rule(
            "int-or-str",
            "a `@hot` route's path or query parameter is an int or a str (a query's may be `| None` with a default)",
            "declare `{name}: Annotated[str, {kind}(...)]` or `Annotated[int, {kind}(ge=..., le=...)]` "
            "and convert it in the handler",
        ),
        Rule(
            "one-model-body",
            "a `@hot` route's body is `RawBody` or one whole pydantic model",
            "declare one `{name}: SomeModel` parameter (no `Body(embed=True)`, no Form, no list), or take "
            "`body: RawBody` and parse it in the handler",
        ),
        Rule(
            "app-state-services",
            "a `@hot` handler's dependencies are `app_state(...)`, `resolved(...)` or `RawBody`: services come "
            "only through `app_state`",
            'declare `{name}: Annotated[Service, app_state("service")]` for what the lifespan stored, or '
            "`Annotated[T, resolved(lambda state, scope: ...)]` for what the request says",
        ),
        Rule(
            "key-checks-only",
            "a `@hot` route's `dependencies=[...]` are key checks only (`require_reader`, `require_writer`, "
            "`require_event_reader`, `require_ops_key(...)`)",
            "replace `Depends({name})` with a `require_*` key check, or make it a handler parameter with "
            "`resolved(...)`",
        ),
        Rule(
            "no-fixed-path-under-a-hot-template",
            "no route's fixed path is one that a `@hot` template also takes (routing and the lane would disagree "
            "on who answers it)",
            "narrow the `@hot` route's parameter so that it cannot take `{name}` (an int, a `pattern`), "
            "or move one of the two routes to another path",
        ),
        Rule(
            "no-shared-template",
            "no route's template may take a path that a `@hot` route takes",
            "narrow one of the two parameters (an int, a `pattern`) so that no path fits both, "
            "or move one of the two routes to another path",
        ),
    )
}


class LaneDeclarationError(TypeError):
    """A route declares something tenk refuses: the message names the route, what broke which rule, and
    the fix."""

    def __init__(self, route: str, subject: str, rule: str, name: str = "", kind: str = "") -> None:
        found = RULES[rule]
        self.route, self.rule = route, rule
        fix = found.fix.format(name=name, kind=kind)
        super().__init__(f"{route}: {subject}. Rule `{rule}`: {found.says}. Fix: {fix}")
