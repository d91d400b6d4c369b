"""double-validation and dump-only-model: pydantic work the route does twice, or for nothing.

FastAPI serialises a route's return value through its response model: it dumps a returned model to a
dict and validates that dict again. A route that has just built (so validated) that model pays twice.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tenk.doctor._context import Context, finding
from tenk.doctor._findings import Finding
from tenk.doctor._names import Scope
from tenk.doctor._project import ClassInfo

PYDANTIC_BASES = {"pydantic.BaseModel", "pydantic.main.BaseModel", "sqlmodel.SQLModel", "sqlmodel.main.SQLModel"}
CONSTRUCTORS = {"model_validate", "model_validate_json", "parse_obj", "from_orm", "model_construct"}
DUMPS = {"model_dump", "model_dump_json", "dict", "json"}


def _is_model(scope: Scope, info: ClassInfo) -> bool:
    return bool(PYDANTIC_BASES.intersection(scope.bases(info)))


def built_model(scope: Scope, expr: ast.expr | None) -> ClassInfo | None:
    """The own pydantic model `expr` builds (`Model(...)`, `Model.model_validate(...)`), if it builds one."""
    if not isinstance(expr, ast.Call):
        return None
    func = expr.func
    if isinstance(func, ast.Attribute) and func.attr in CONSTRUCTORS:
        if func.attr == "model_construct":
            return None  # builds without validating
        func = func.value
    resolved = scope.resolve(func)
    return resolved if isinstance(resolved, ClassInfo) and _is_model(scope, resolved) else None


def check(context: Context) -> Iterator[Finding]:
    for entry in context.entries.of_kind("route"):
        function, registration = entry.function, entry.registration
        scope = context.graph.scope(function)
        model = _keyword(registration, "response_model") if registration is not None else None
        response_class = _keyword(registration, "response_class") if registration is not None else None
        if model is not None and isinstance(model, ast.Constant) and model.value is None:
            continue
        if model is None:
            annotated = scope.annotation_type(function.node.returns) if function.node.returns is not None else None
            if not (isinstance(annotated, ClassInfo) and _is_model(scope, annotated)) or response_class is not None:
                continue
        for node in function.nodes:
            if isinstance(node, ast.Return) and (built := built_model(scope, node.value)) is not None:
                message = (
                    f"route `{function.qualname}` returns a `{built.node.name}` it has just validated, and its "
                    "response model validates it again"
                )
                yield finding("double-validation", function.module, node, message)
    for call in context.calls:
        func = call.node.func
        if isinstance(func, ast.Attribute) and func.attr in DUMPS and _from_mapping(func.value):
            scope = context.scope(call.module, call.function)
            built = built_model(scope, func.value)
            if built is not None:
                message = f"`{built.node.name}` is built (every field validated) only to be dumped again"
                yield finding("dump-only-model", call.module, call.node, message)


def _from_mapping(expr: ast.expr) -> bool:
    """`Model(**data)` or `Model.model_validate(data)` with `data` a dict: the dump gives back what came in.
    A model built from fields, or from an object's attributes, does work of its own (defaults, conversion)."""
    if not isinstance(expr, ast.Call):
        return False
    if any(kw.arg is None for kw in expr.keywords) and not expr.args:
        return True
    # model_validate(x) of a name cannot tell a dict from an ORM row (from_attributes): only a literal.
    func = expr.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr in ("model_validate", "parse_obj")
        and len(expr.args) == 1
        and isinstance(expr.args[0], ast.Dict)
    )


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((kw.value for kw in call.keywords if kw.arg == name), None)
