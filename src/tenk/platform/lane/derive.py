"""Build the hot lane's parsers from a FastAPI route's own declaration, once, at start-up.

The declaration stays the single source: the `Annotated[..., Path(...)]`/`Query(...)` bounds, lengths,
patterns and defaults that FastAPI validates and documents are read here into small parsers. A parser
accepts only input it can judge exactly as FastAPI would and answers UNRECOGNISED for anything else
(a leading zero, a number out of bounds, a repeated parameter, 5,000 digits): the request then falls
through to FastAPI, which words the 422. So the lane can be faster than FastAPI, never different.

Only the kinds tenk needs are supported; any other declaration on a `@hot` route is a start-up error
(`LaneDeclarationError`, naming one of `rules.RULES` and its fix), never a silent difference between the
lanes. `check_replies` holds every route of a domain, hot or not, to the one handler convention.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import re
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, Union, get_args, get_origin

import annotated_types
import orjson
from fastapi import params
from fastapi._compat import ModelField
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, RouteContext, iter_route_contexts
from pydantic import BaseModel
from starlette.routing import BaseRoute

from tenk.platform.auth import KEY_POLICIES, KeyPolicy
from tenk.platform.lane.declare import (
    HOT_HANDLERS,
    REPLY_HANDLERS,
    RESOLVERS,
    STATE_NAMES,
    Handler,
    Resolver,
    raw_body,
    returns_reply,
)
from tenk.platform.lane.rules import LaneDeclarationError

UNRECOGNISED: Final = object()
Parser = Callable[[str], Any]
BodyParser = Callable[[bytes], Any]

JSON_TYPE = b"application/json"
ANY_SEGMENT = "[^/]+"  # what routing takes for a path parameter


class _Broken(ValueError):
    """A parameter's declaration breaks `rule` (a key of `RULES`): `detail` says how."""

    def __init__(self, rule: str, detail: str) -> None:
        super().__init__(detail)
        self.rule, self.detail = rule, detail


@dataclass(frozen=True, slots=True)
class QueryParam:
    key: str
    position: int
    parse: Parser
    default: Any
    required: bool


@dataclass(frozen=True, slots=True)
class LaneRoute:
    route: BaseRoute  # the declaration; the lane puts it in `scope["route"]`, as Starlette's router does
    method: str
    template: str
    prefix: str  # the path before the one path parameter, or the whole path
    # A templated path's whole shape, its parameter's text the one group (a str's: any segment; an int's:
    # canonical digits, so that its parser only converts): matched in one call on every request a
    # templated route may take. None for a fixed path.
    shape: re.Pattern[str] | None
    handler: Handler
    arity: int
    path: tuple[int, Parser] | None
    query: tuple[QueryParam, ...]
    resolvers: tuple[tuple[int, Resolver], ...]
    state_reads: tuple[tuple[int, str], ...]  # `app_state` arguments: (position, name in app.state)
    # Where the body goes, and what makes the argument of it: the bytes as they are (RawBody), or a
    # model parsed as FastAPI parses it (UNRECOGNISED for anything FastAPI must word the 422 of).
    body: tuple[int, BodyParser] | None
    json_only: bool  # the body is a model: only a JSON Content-Type is the lane's (`is_json`)
    auth: tuple[KeyPolicy, ...]  # the key checks the route declares; any one that applies needs the key
    query_keys: frozenset[str]
    key_required: bool = False  # the `auth` policies judged against the app's settings, once (`Lane.derive`)
    # The latency histogram's `observe` for each status this route answered (`RequestEdge`): one dict
    # lookup a request, where `metrics.latency_observer`'s cache hashes three labels.
    observers: dict[int, Callable[[float], None]] = dataclasses.field(default_factory=dict, compare=False)

    # Nothing to check before the handler runs: no body to read, no key to ask for. A field, not a
    # property: it is read on every request.
    admit_at_once: bool = dataclasses.field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "admit_at_once", self.body is None and not self.key_required)

    def tail(self, path: str) -> str | None:
        """The path parameter's text ("" for exact routes), or None when the path is not this route's."""
        if self.shape is None:
            return "" if path == self.prefix else None
        found = self.shape.fullmatch(path)
        return None if found is None else found[1]


def _bounds(metadata: list[Any], rule: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for item in metadata:
        if isinstance(item, annotated_types.Ge):
            found["low"] = item.ge
        elif isinstance(item, annotated_types.Gt):
            found["low"] = int(item.gt) + 1  # type: ignore[call-overload]
        elif isinstance(item, annotated_types.Le):
            found["high"] = item.le
        elif isinstance(item, annotated_types.Lt):
            found["high"] = int(item.lt) - 1  # type: ignore[call-overload]
        elif isinstance(item, annotated_types.MinLen):
            found["min_length"] = item.min_length
        elif isinstance(item, annotated_types.MaxLen):
            found["max_length"] = item.max_length
        elif type(item).__name__ == "_PydanticGeneralMetadata" and set(vars(item)) == {"pattern"}:
            found["pattern"] = vars(item)["pattern"]
        else:
            raise _Broken(rule, f"unsupported constraint {item!r}")
    return found


class ParameterParsers(NamedTuple):
    """How the lane reads one path or query parameter's text."""

    segment: str  # the regex its text matches within a path: checked by the route's shape
    parse: Parser  # any text (a query's): its value, or UNRECOGNISED
    convert: Parser  # text that matched `segment` (a path's): its value, or UNRECOGNISED


def _int_parsers(low: int, high: int) -> ParameterParsers:
    # Canonical ASCII digits only: no sign, no leading zero, and never more digits than the bound has (no
    # 5,000-digit int()). All else is FastAPI's to judge. A path's text is checked by its route's regex,
    # in the call that matches the path; a query's by string methods, cheaper than a second regex.
    digits = len(str(high))

    def convert(text: str) -> Any:
        value = int(text)
        return value if low <= value <= high else UNRECOGNISED

    def parse(text: str) -> Any:
        if not 0 < len(text) <= digits or not (text.isascii() and text.isdigit()) or (text[0] == "0" and text != "0"):
            return UNRECOGNISED
        return convert(text)

    return ParameterParsers(f"0|[1-9][0-9]{{0,{digits - 1}}}", parse, convert)


def _str_parser(min_length: int, max_length: int | None, pattern: str | None) -> Parser:
    # fullmatch is at least as strict as pydantic's (unanchored) pattern search: stricter only falls through.
    matcher = re.compile(pattern).fullmatch if pattern is not None else None

    def parse(text: str) -> Any:
        if len(text) < min_length or (max_length is not None and len(text) > max_length):
            return UNRECOGNISED
        if matcher is not None and matcher(text) is None:
            return UNRECOGNISED
        return text

    return parse


def _parser(annotation: Any, metadata: list[Any], optional_ok: bool) -> ParameterParsers:
    if get_origin(annotation) in (Union, types.UnionType):
        members = set(get_args(annotation))
        if not optional_ok or len(members) != 2 or type(None) not in members:
            raise _Broken("int-or-str", f"unsupported type {annotation!r}")
        (annotation,) = members - {type(None)}
    if annotation is int:
        found = _bounds(metadata, "bounded-int")
        if set(found) - {"low", "high"} or "low" not in found or "high" not in found or found["low"] < 0:
            missing = [bound for key, bound in (("low", "ge"), ("high", "le")) if key not in found]
            raise _Broken("bounded-int", f"an int without {' and '.join(missing)}" if missing else "an int's bounds")
        return _int_parsers(found["low"], found["high"])
    if annotation is str:
        found = _bounds(metadata, "plain-str")
        if set(found) - {"min_length", "max_length", "pattern"}:
            raise _Broken("plain-str", f"a str with {sorted(set(found) - {'min_length', 'max_length', 'pattern'})}")
        parse = _str_parser(found.get("min_length", 0), found.get("max_length"), found.get("pattern"))
        return ParameterParsers(ANY_SEGMENT, parse, parse)
    raise _Broken("int-or-str", f"unsupported type {annotation!r}")


def _raw(body: bytes) -> bytes:
    return body


def _model_parser(field: ModelField) -> BodyParser:
    """FastAPI's own steps for a JSON body of one model: Starlette's `json.loads`, then the route's own
    field validated in Python mode; any failure is UNRECOGNISED, and FastAPI reads the body again.

    `orjson.loads` stands for `json.loads`: what it parses, `json.loads` parses to the same value, and
    what it refuses (a BOM, UTF-16, NaN, an int past 64 bits) is FastAPI's to answer, with its own."""

    def parse(body: bytes) -> Any:
        try:
            value, errors = field.validate(orjson.loads(body), {}, loc=("body",))
        except Exception:  # not JSON, not text, nested past the recursion limit: FastAPI's to answer
            return UNRECOGNISED
        return UNRECOGNISED if errors else value

    return parse


def is_json(content_type: bytes) -> bool:
    """A Content-Type FastAPI reads as JSON. Only the plain form, in any case and with any parameters,
    is recognised; the rest (`application/vnd.x+json`, none at all) is left to FastAPI."""
    return content_type.partition(b";")[0].strip().lower() == JSON_TYPE


def _model_body(route: RouteContext, field: ModelField) -> BodyParser:
    annotation = field.field_info.annotation
    if (
        len(route.dependant.body_params) != 1
        or getattr(route, "_embed_body_fields", True)
        or not isinstance(field.field_info, params.Body)
        or isinstance(field.field_info, params.Form)
        or not (isinstance(annotation, type) and issubclass(annotation, BaseModel))
    ):
        raise LaneDeclarationError(
            _name(route), f"body parameter {field.name!r} is not one whole pydantic model", "one-model-body", field.name
        )
    return _model_parser(field)


def _auth(route: RouteContext) -> tuple[KeyPolicy, ...]:
    policies: list[KeyPolicy] = []
    for depends in route.dependencies:
        policy = KEY_POLICIES.get(depends.dependency) if depends.dependency is not None else None
        if policy is None:
            name = getattr(depends.dependency, "__name__", repr(depends.dependency))
            raise LaneDeclarationError(_name(route), f"route dependency {name!r}", "key-checks-only", name)
        policies.append(policy)
    return tuple(policies)


def _name(route: RouteContext) -> str:
    return f"{'/'.join(sorted(route.methods or ()))} {route.path}"


def derive(route: RouteContext) -> LaneRoute:
    """The lane's version of one `@hot` FastAPI route; LaneDeclarationError for what it cannot mirror."""
    assert route.endpoint is not None
    assert route.path is not None
    handler = HOT_HANDLERS[route.endpoint]
    dependant: Dependant = route.dependant
    if not returns_reply(handler):
        raise LaneDeclarationError(_name(route), f"handler {handler.__name__!r} returns no `Reply`", "returns-reply")
    _refuse_response_model_filters(route)
    if len(route.methods or ()) != 1:
        raise LaneDeclarationError(_name(route), f"{len(route.methods or ())} methods", "one-method")
    unsupported = [f.name for f in (*dependant.header_params, *dependant.cookie_params)] + [
        name
        for name in (
            dependant.request_param_name,
            dependant.websocket_param_name,
            dependant.http_connection_param_name,
            dependant.response_param_name,
            dependant.background_tasks_param_name,
            dependant.security_scopes_param_name,
        )
        if name
    ]
    if unsupported:
        raise LaneDeclarationError(_name(route), f"parameter {unsupported[0]!r}", "no-request-objects", unsupported[0])
    if len(dependant.path_params) > 1:
        second = dependant.path_params[1].name
        raise LaneDeclarationError(_name(route), f"a second path parameter {second!r}", "one-path-parameter", second)
    if dependant.path_params and f"/{{{dependant.path_params[0].name}}}" not in route.path:
        name = dependant.path_params[0].name
        raise LaneDeclarationError(_name(route), f"path parameter {name!r} within a segment", "whole-segment", name)

    positions = {name: index for index, name in enumerate(inspect.signature(handler).parameters)}
    path: tuple[int, Parser] | None = None
    segment = ANY_SEGMENT  # the path parameter's text in the shape: the parameter's own, once read below
    query: list[QueryParam] = []
    resolvers: list[tuple[int, Resolver]] = []
    state_reads: list[tuple[int, str]] = []
    body: tuple[int, BodyParser] | None = None
    for field in dependant.body_params:
        body = (positions[field.name], _model_body(route, field))
    for field in dependant.path_params:
        try:
            parsers = _parser(field.field_info.annotation, field.field_info.metadata, False)
            path, segment = (positions[field.name], parsers.convert), parsers.segment
        except _Broken as exc:
            subject = f"path parameter {field.name!r}: {exc.detail}"
            raise LaneDeclarationError(_name(route), subject, exc.rule, field.name, "Path") from None
    for field in dependant.query_params:
        info = field.field_info
        assert isinstance(info, params.Query)  # FastAPI makes every query parameter's field a Query
        try:
            parse = _parser(info.annotation, info.metadata, not field.field_info.is_required()).parse
        except _Broken as exc:
            subject = f"query parameter {field.name!r}: {exc.detail}"
            raise LaneDeclarationError(_name(route), subject, exc.rule, field.name, "Query") from None
        required = info.is_required()
        default = None if required else info.default
        query.append(QueryParam(field.alias, positions[field.name], parse, default, required))
    for sub in dependant.dependencies[len(route.dependencies) :]:
        call = sub.call
        if sub.name is None or call is None:
            raise LaneDeclarationError(_name(route), f"unnamed dependency {call!r}", "app-state-services", "service")
        if call is raw_body and body is None:
            body = (positions[sub.name], _raw)
        elif call in STATE_NAMES:
            state_reads.append((positions[sub.name], STATE_NAMES[call]))
        elif call in RESOLVERS:
            resolvers.append((positions[sub.name], RESOLVERS[call]))
        else:
            called = getattr(call, "__name__", call)
            subject = f"dependency {sub.name!r} ({called!r}) is not an `app_state`/`resolved` one"
            raise LaneDeclarationError(_name(route), subject, "app-state-services", sub.name)
    method = next(iter(route.methods or ()))
    brace, close = route.path.find("{"), route.path.find("}")
    prefix, suffix = (route.path, "") if brace < 0 else (route.path[:brace], route.path[close + 1 :])
    return LaneRoute(
        route=route.route,
        method=method,
        template=route.path,
        prefix=prefix,
        shape=None if brace < 0 else re.compile(f"{re.escape(prefix)}({segment}){re.escape(suffix)}"),
        handler=handler,
        arity=len(positions),
        path=path,
        query=tuple(query),
        resolvers=tuple(resolvers),
        state_reads=tuple(state_reads),
        body=body,
        json_only=bool(dependant.body_params),
        auth=_auth(route),
        query_keys=frozenset(param.key for param in query),
    )


# What FastAPI would apply to a returned model; a `Reply` is sent as it is, so none may be asked for.
_RESPONSE_MODEL_FILTERS = {
    "response_model_include": None,
    "response_model_exclude": None,
    "response_model_by_alias": True,
    "response_model_exclude_unset": False,
    "response_model_exclude_defaults": False,
    "response_model_exclude_none": False,
}


def _refuse_response_model_filters(route: RouteContext) -> None:
    for option, default in _RESPONSE_MODEL_FILTERS.items():
        if getattr(route, option) != default:
            subject = f"{option}={getattr(route, option)!r}"
            raise LaneDeclarationError(_name(route), subject, "response-model-documents", option)


def check_replies(routes: list[Any]) -> None:
    """Refuse, at start-up, a route among a domain's `routes` that does not keep the one handler
    convention: its handler returns a `Reply`, on a `ReplyRoute` router, with no `response_model_*` filter."""
    for context in iter_route_contexts(routes):
        endpoint = context.endpoint
        if not isinstance(context.original_route, APIRoute) or endpoint is None:
            continue
        if endpoint not in REPLY_HANDLERS:
            name = getattr(endpoint, "__name__", repr(endpoint))
            if returns_reply(endpoint):
                raise LaneDeclarationError(_name(context), f"handler {name!r} on a plain APIRoute", "reply-router")
            annotation = inspect.signature(endpoint).return_annotation
            shown = "nothing" if annotation is inspect.Signature.empty else getattr(annotation, "__name__", annotation)
            subject = f"handler {name!r} is annotated to return `{shown}`"
            raise LaneDeclarationError(_name(context), subject, "returns-reply")
        _refuse_response_model_filters(context)


def hot_routes(routes: list[Any]) -> list[LaneRoute]:
    """Every `@hot` route of an app (included routers and all), derived, in the app's own order."""
    contexts = list(iter_route_contexts(routes))
    hot = [c for c in contexts if isinstance(c.original_route, APIRoute) and c.endpoint in HOT_HANDLERS]
    lane = [derive(context) for context in hot]
    for context in contexts:
        if all(context is not h for h in hot) and context.path is not None:
            _refuse_overlap(lane, context.path, context.methods or set())
            if "{" in context.path:
                _refuse_shared_template(lane, context.path, context.methods or set(), None)
    for route in lane:
        if route.shape is not None:
            _refuse_shared_template(lane, route.template, {route.method}, route)
    return lane


def _refuse_shared_template(lane: list[LaneRoute], template: str, methods: set[str], own: LaneRoute | None) -> None:
    # Routing gives a path to the first route whose template takes it, any text in a parameter's segment.
    # The lane looks a hot fixed path up first, and a hot template's shape takes only the text its
    # parameter's type allows (an int's digits). So no template may take a path that another route the
    # lane answers takes: then the lane's choice and routing's can never differ, whatever the order.
    for route in lane:
        if route is not own and route.method in methods and _may_share_a_path(template, route.template):
            raise LaneDeclarationError(
                f"{'/'.join(sorted(methods))} {template}",
                f"{template} and the hot route {route.template} may take the same path",
                "no-shared-template",
            )


def _may_share_a_path(one: str, other: str) -> bool:
    """Whether two templates can match one path: each segment the same, or a parameter in either. A
    parameter that takes the rest of the path (`{name:path}`) ends the comparison there."""
    for mine, theirs in itertools.zip_longest(one.split("/"), other.split("/")):
        if mine is None or theirs is None:
            return False
        if ":path}" in mine or ":path}" in theirs:
            return True
        if mine != theirs and "{" not in mine and "{" not in theirs:
            return False
    return True


def _refuse_overlap(lane: list[LaneRoute], path: str, methods: set[str]) -> None:
    # The lane matches only its own routes: a fixed path it would also accept (`/products/export` beside
    # `/products/{name}`) must stay FastAPI's, whatever the order the two were declared in.
    for route in lane:
        tail = route.tail(path) if route.method in methods and "{" not in path else None
        if tail is not None and (route.path is None or route.path[1](tail) is not UNRECOGNISED):
            raise LaneDeclarationError(
                f"{route.method} {path}",
                f"{route.method} {path} would be taken by the hot route {route.template}",
                "no-fixed-path-under-a-hot-template",
                path,
            )
