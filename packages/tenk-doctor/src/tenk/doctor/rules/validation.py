"""double-validation and dump-only-model: pydantic work the route does twice, or for nothing.

double-validation: on pydantic 1, FastAPI dumps a returned model to a dict and validates that dict again
against the response model; a route that has just built (so validated) that model, or a subclass of it,
pays twice. On pydantic 2 FastAPI hands the instance to the response model's validator, which returns it
as it is: no second validation, and the rule stays silent (`costs.toml` has both counts). A model of
another class is validated from its attributes: that is the projection a response model is for.

dump-only-model: a model built from a mapping only to be dumped back gives the mapping it was built from,
having validated every field, when its fields are the mapping's: the same class (`Model(**m.model_dump())`
with `m` a `Model`), a class whose fields are known to be the same, or a literal with those keys. A class
with fewer fields is a projection: the dump drops what the model lacks, and returning the mapping instead
would send it to the client.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tenk.doctor._context import Context, ResolvedCall, finding, rewritten, segment
from tenk.doctor._findings import Finding
from tenk.doctor._names import Scope
from tenk.doctor._project import ClassInfo, Module
from tenk.doctor._rules import RULES

PYDANTIC_BASES = {"pydantic.BaseModel", "pydantic.main.BaseModel", "sqlmodel.SQLModel", "sqlmodel.main.SQLModel"}
CONSTRUCTORS = {"model_validate", "model_validate_json", "parse_obj", "from_orm", "model_construct"}
DUMPS = {"model_dump", "model_dump_json", "dict", "json"}
# Class-level names that are not fields.
_NOT_FIELDS = {"model_config", "Config", "__slots__"}


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


def _is_or_inherits(scope: Scope, info: ClassInfo, model: ClassInfo, depth: int = 0) -> bool:
    if info is model:
        return True
    if depth > 5:
        return False
    base_scope = scope.at(info.module)
    return any(
        isinstance(base := base_scope.resolve(node), ClassInfo) and _is_or_inherits(scope, base, model, depth + 1)
        for node in info.node.bases
    )


def check(context: Context) -> Iterator[Finding]:
    if RULES["double-validation"].cost.exists_on(context.versions):
        yield from _double_validation(context)
    for call in context.calls:
        found = _dump_only(context, call)
        if found is not None:
            yield found


def _response_model(
    scope: Scope, entry_function: ast.FunctionDef | ast.AsyncFunctionDef, registration: ast.Call | None
) -> ClassInfo | None:
    """The own pydantic class a route's response model is (also through Optional[...]), if it is one."""
    model = _keyword(registration, "response_model") if registration is not None else None
    response_class = _keyword(registration, "response_class") if registration is not None else None
    if model is None and (response_class is not None or entry_function.returns is None):
        return None
    found = scope.annotation_type(model if model is not None else entry_function.returns)
    return found if isinstance(found, ClassInfo) and _is_model(scope, found) else None


def _double_validation(context: Context) -> Iterator[Finding]:
    for entry in context.entries.of_kind("route"):
        function = entry.function
        scope = context.graph.scope(function)
        model = _response_model(scope, function.node, entry.registration)
        if model is None:
            continue
        for node in function.nodes:
            if not isinstance(node, ast.Return) or not isinstance(node.value, ast.Call):
                continue
            built = built_model(scope, node.value)
            if built is None or not _is_or_inherits(scope, built, model):
                continue
            message = (
                f"route `{function.qualname}` returns a `{built.node.name}` it has just validated, and on pydantic 1 "
                f"FastAPI dumps it and validates the dump again against `{model.node.name}`"
            )
            fix = rewritten(function.module, node.value, _source(function.module, node.value))
            yield finding("double-validation", function.module, node, message, fix=fix)


def _source(module: Module, built: ast.Call) -> str | None:
    """What a model was built from, as the route could return it instead: the mapping or object itself."""
    if not built.args and len(built.keywords) == 1 and built.keywords[0].arg is None:
        return segment(module, built.keywords[0].value)
    if isinstance(built.func, ast.Attribute) and built.func.attr in CONSTRUCTORS and len(built.args) == 1:
        return segment(module, built.args[0])
    if not built.args and built.keywords and all(kw.arg for kw in built.keywords):
        return "dict(" + ", ".join(f"{kw.arg}={segment(module, kw.value)}" for kw in built.keywords) + ")"
    return None


def _dump_only(context: Context, call: ResolvedCall) -> Finding | None:
    func = call.node.func
    if not (isinstance(func, ast.Attribute) and func.attr in DUMPS and isinstance(func.value, ast.Call)):
        return None
    scope = context.scope(call.module, call.function)
    built = built_model(scope, func.value)
    if built is None:
        return None
    source = _same_fields_source(call.module, scope, func.value, built)
    if source is None:
        return None
    message = (
        f"`{built.node.name}` is built from a mapping with its own fields (every field validated) only to be "
        "dumped back to that mapping"
    )
    fix = rewritten(call.module, call.node, _dumped(source, func.attr))
    return finding("dump-only-model", call.module, call.node, message, fix=fix)


def _dumped(source: str, dump: str) -> str:
    """`source` (a literal or another model's `model_dump()`) dumped as the flagged call dumps."""
    if dump in ("model_dump", "dict"):
        return source
    for to_dict, to_json in ((".model_dump()", ".model_dump_json()"), (".dict()", ".json()")):
        if source.endswith(to_dict):
            return source[: -len(to_dict)] + to_json
    return f"json.dumps({source})"


def _same_fields_source(module: Module, scope: Scope, built: ast.Call, model: ClassInfo) -> str | None:
    """What `built` was made from, where it is a mapping whose keys are known to be `model`'s fields:
    another model's dump (of the same class, or of one with the same fields) or a literal; else None."""
    if not built.args and len(built.keywords) == 1 and built.keywords[0].arg is None:
        data = built.keywords[0].value
    elif (
        isinstance(built.func, ast.Attribute)
        and built.func.attr in ("model_validate", "parse_obj")
        and len(built.args) == 1
        and not built.keywords
    ):
        data = built.args[0]
    else:
        return None
    fields = model_fields(scope, model)
    if isinstance(data, ast.Dict):
        keys = [key.value for key in data.keys if isinstance(key, ast.Constant) and isinstance(key.value, str)]
        if fields is not None and len(keys) == len(data.keys) and set(keys) == fields:
            return segment(module, data)
        return None
    if (
        isinstance(data, ast.Call)
        and isinstance(data.func, ast.Attribute)
        and data.func.attr in ("model_dump", "dict")
        and not data.args
        and not data.keywords
    ):
        other = scope.type_of(data.func.value)
        if isinstance(other, ClassInfo) and (
            other is model or (fields is not None and model_fields(scope, other) == fields)
        ):
            return segment(module, data)
    return None


def model_fields(scope: Scope, model: ClassInfo, depth: int = 0) -> frozenset[str] | None:
    """The fields of an own pydantic model, where the source tells them all: its annotated class names and
    its own bases'. None where it cannot (a third-party base other than pydantic's, extra fields allowed,
    an alias, a field added by a validator's return)."""
    if depth > 5:
        return None
    fields: set[str] = set()
    base_scope = scope.at(model.module)
    for node in model.node.bases:
        base = base_scope.resolve(node)
        if isinstance(base, ClassInfo):
            inherited = model_fields(scope, base, depth + 1)
            if inherited is None:
                return None
            fields |= inherited
        elif base not in PYDANTIC_BASES:
            return None
    for keyword in model.node.keywords:
        if keyword.arg == "extra":
            return None
    for statement in model.node.body:
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            name = statement.target.id
            if name in _NOT_FIELDS or name.startswith("_") or "ClassVar" in ast.unparse(statement.annotation):
                continue
            if statement.value is not None and "alias" in ast.unparse(statement.value):
                return None
            fields.add(name)
        elif isinstance(statement, ast.Assign | ast.ClassDef):
            text = ast.unparse(statement)
            if "extra" in text and ("allow" in text or "Extra" in text):
                return None
    return frozenset(fields)


def _keyword(call: ast.Call | None, name: str) -> ast.expr | None:
    if call is None:
        return None
    return next((kw.value for kw in call.keywords if kw.arg == name), None)
