"""Which imports of a source reach past a package's public names (its `__all__`)."""

from __future__ import annotations

import ast
import importlib


def private_imports(source: str, package: str = "tenk") -> list[str]:
    """Each import of `package` (or a module under it) in `source` that reaches past a public `__all__`,
    or names something `_`-prefixed."""

    def within(module: str) -> bool:
        return module == package or module.startswith(f"{package}.")

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"line {node.lineno}: import {a.name}" for a in node.names if within(a.name)]
        elif isinstance(node, ast.ImportFrom) and within(node.module or ""):
            module = node.module or ""
            if any(part.startswith("_") for part in module.split(".")):
                found.append(f"line {node.lineno}: {module} is a private module")
                continue
            public = getattr(importlib.import_module(module), "__all__", None)
            if public is None:
                found.append(f"line {node.lineno}: {module} has no __all__, so no public names")
                continue
            found += [
                f"line {node.lineno}: {module}.{alias.name} is not in its __all__"
                for alias in node.names
                if alias.name.startswith("_") or alias.name not in public
            ]
    return found
