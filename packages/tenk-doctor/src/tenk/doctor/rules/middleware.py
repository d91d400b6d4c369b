"""base-http-middleware: `BaseHTTPMiddleware` subclasses and `@app.middleware("http")` functions."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tenk.doctor._context import Context, finding
from tenk.doctor._findings import Finding


def check(context: Context) -> Iterator[Finding]:
    for found in context.entries.http_middleware:
        node = found.node
        if isinstance(node, ast.ClassDef):
            message = f"class `{node.name}` subclasses BaseHTTPMiddleware: a task group and memory streams per request"
        elif isinstance(node, ast.Call) and any(kw.arg == "dispatch" for kw in node.keywords):
            message = "BaseHTTPMiddleware added with a dispatch function: a task group and memory streams per request"
        elif isinstance(node, ast.Call):
            message = (
                f"`{ast.unparse(node.args[0]) if node.args else 'middleware'}` is a BaseHTTPMiddleware from a "
                "third-party package: a task group and memory streams per request"
            )
        else:
            message = (
                f"`{node.name}` is an @app.middleware('http') function, which runs inside BaseHTTPMiddleware: "
                "a task group and memory streams per request"
            )
        yield finding("base-http-middleware", found.module, node, message)
