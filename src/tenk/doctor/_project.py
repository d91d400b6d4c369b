"""The app's own source, parsed but never imported: its modules, functions, classes and imports.

"Own" is, for a directory, the modules it holds; for `module:app`, that module and the modules it
imports, transitively, from its own top-level package. Third-party code is never followed:
its names stay qualified strings (`redis.Redis`) for the rules to match.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
_SKIPPED_DIRS = {".venv", "venv", "node_modules", "site-packages", "__pycache__", ".git", ".tox", "build", "dist"}


class TargetError(Exception):
    """The target cannot be read: no such path or module, or no such attribute."""


@dataclass(eq=False)
class Function:
    module: Module
    node: FunctionNode
    qualname: str
    owner: ClassInfo | None = None
    parent: Function | None = None
    nested: dict[str, Function] = field(default_factory=dict)
    # Every node evaluated in this function's scope: its body, and the decorators, defaults and
    # annotations of functions nested in it; not the bodies of those.
    nodes: list[ast.AST] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def is_async(self) -> bool:
        return isinstance(self.node, ast.AsyncFunctionDef)

    @property
    def label(self) -> str:
        return f"{self.module.name}.{self.qualname}"


@dataclass(eq=False)
class ClassInfo:
    module: Module
    node: ast.ClassDef
    qualname: str
    methods: dict[str, Function] = field(default_factory=dict)
    # `self.x = <expr>` in any method: what the instance attribute was built from.
    attributes: dict[str, ast.expr] = field(default_factory=dict)


@dataclass(eq=False)
class Module:
    name: str
    path: Path
    tree: ast.Module
    lines: list[str]
    is_package: bool
    imports: dict[str, str] = field(default_factory=dict)
    functions: dict[str, Function] = field(default_factory=dict)
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    assigns: dict[str, ast.expr] = field(default_factory=dict)
    all_functions: list[Function] = field(default_factory=list)
    all_classes: list[ClassInfo] = field(default_factory=list)
    # Every call in the module, with the function whose scope it is evaluated in (None: module level).
    calls: list[tuple[ast.Call, Function | None]] = field(default_factory=list)

    def code(self, line: int) -> str:
        return self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""

    @property
    def package(self) -> str:
        return self.name if self.is_package else self.name.rpartition(".")[0]


def parse_module(name: str, path: Path) -> Module | None:
    try:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text, filename=str(path))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError, RecursionError, MemoryError):
        # Unreadable, or nested past the parser's limits (a hostile file must not end the whole run).
        return None
    module = Module(name, path, tree, text.splitlines(), path.name == "__init__.py")
    _index(module)
    return module


def _index(module: Module) -> None:
    for statement in module.tree.body:
        if (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
        ):
            module.assigns[statement.targets[0].id] = statement.value
        elif (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and statement.value is not None
        ):
            module.assigns[statement.target.id] = statement.value
    _index_body(module, module.tree.body, "", None, None)
    functions = {id(f.node): f for f in module.all_functions}
    stack: list[tuple[ast.AST, Function | None]] = [(child, None) for child in module.tree.body]
    while stack:
        node, scope = stack.pop()
        if scope is not None:
            scope.nodes.append(node)
        if isinstance(node, ast.Call):
            module.calls.append((node, scope))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            _record_import(module, node)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            inner = functions.get(id(node), scope)
            outer: list[ast.AST] = [*node.decorator_list, node.args]
            if node.returns is not None:
                outer.append(node.returns)
            stack.extend((child, scope) for child in outer)
            stack.extend((child, inner) for child in node.body)
        else:
            stack.extend((child, scope) for child in children(node))
    for function in module.all_functions:
        if function.owner is not None:
            _collect_attributes(function.owner, function)


# Leaves with nothing to find under them (`Load()`, `+`, `==`): skipping them halves the nodes walked.
_LEAVES = (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop, ast.Constant)


def children(node: ast.AST) -> list[ast.AST]:
    """`ast.iter_child_nodes` without the leaves."""
    found: list[ast.AST] = []
    for name in node._fields:
        value = getattr(node, name, None)
        if isinstance(value, ast.AST):
            if not isinstance(value, _LEAVES):
                found.append(value)
        elif isinstance(value, list):
            found.extend(item for item in value if isinstance(item, ast.AST) and not isinstance(item, _LEAVES))
    return found


def _record_import(module: Module, node: ast.Import | ast.ImportFrom) -> None:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                module.imports[alias.asname] = alias.name
            else:
                top = alias.name.split(".")[0]
                module.imports[top] = top
        return
    base = _absolute(module, node.module, node.level)
    for alias in node.names:
        if alias.name != "*":
            module.imports[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name


def _absolute(module: Module, name: str | None, level: int) -> str:
    if level == 0:
        return name or ""
    parts = module.package.split(".") if module.package else []
    base = parts[: len(parts) - (level - 1)] if level > 1 else parts
    return ".".join([*base, name] if name else base)


def _index_body(
    module: Module, body: list[ast.stmt], prefix: str, owner: ClassInfo | None, parent: Function | None
) -> None:
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = Function(module, node, f"{prefix}{node.name}", owner, parent)
            module.all_functions.append(function)
            if owner is not None:
                owner.methods[node.name] = function
            elif parent is not None:
                parent.nested[node.name] = function
            else:
                module.functions[node.name] = function
            _index_body(module, node.body, f"{function.qualname}.", None, function)
        elif isinstance(node, ast.ClassDef):
            info = ClassInfo(module, node, f"{prefix}{node.name}")
            module.all_classes.append(info)
            if owner is None and parent is None:
                module.classes[node.name] = info
            _index_body(module, node.body, f"{info.qualname}.", info, parent)
        elif isinstance(node, ast.If | ast.Try | ast.With | ast.AsyncWith):
            for block in _blocks(node):
                _index_body(module, block, prefix, owner, parent)


def _blocks(node: ast.If | ast.Try | ast.With | ast.AsyncWith) -> Iterator[list[ast.stmt]]:
    yield node.body
    if isinstance(node, ast.If):
        yield node.orelse
    elif isinstance(node, ast.Try):
        yield node.orelse
        yield node.finalbody
        for handler in node.handlers:
            yield handler.body


def _collect_attributes(owner: ClassInfo, method: Function) -> None:
    for node in method.nodes:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                    and target.attr not in owner.attributes
                ):
                    owner.attributes[target.attr] = node.value


class Project:
    """Own modules by dotted name, loaded on first use from the search roots."""

    def __init__(self, roots: list[Path], own: set[str], within: Path | None = None) -> None:
        self.roots = roots
        self.own = own
        # A directory target's code is what it holds: modules of the same package outside it are not
        # loaded (following all of a 400k-line package from one of its folders took 48 s, not 5).
        self.within = within
        self.modules: dict[str, Module] = {}
        self._missing: set[str] = set()

    def is_own(self, name: str) -> bool:
        return name.split(".")[0] in self.own

    def module(self, name: str) -> Module | None:
        if name in self.modules:
            return self.modules[name]
        if name in self._missing or not self.is_own(name):
            return None
        path = _find_module_file(name, self.roots)
        if path is not None and self.within is not None and not path.is_relative_to(self.within):
            path = None
        module = parse_module(name, path) if path else None
        if module is None:
            self._missing.add(name)
            return None
        self.modules[name] = module
        return module

    def add(self, module: Module) -> None:
        self.modules[module.name] = module

    def split(self, qualified: str) -> tuple[Module, list[str]] | None:
        """The longest own-module prefix of a dotted name, and the attribute path after it."""
        parts = qualified.split(".")
        for cut in range(len(parts), 0, -1):
            module = self.module(".".join(parts[:cut]))
            if module is not None:
                return module, parts[cut:]
        return None

    def import_closure(self, start: Module) -> list[Module]:
        seen = {start.name: start}
        queue = [start]
        while queue:
            module = queue.pop()
            for qualified in module.imports.values():
                found = self.split(qualified)
                if found and found[0].name not in seen:
                    seen[found[0].name] = found[0]
                    queue.append(found[0])
        return list(seen.values())


def _find_module_file(name: str, roots: list[Path]) -> Path | None:
    relative = Path(*name.split("."))
    for root in roots:
        for candidate in (root / relative.with_suffix(".py"), root / relative / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def _package_root(path: Path) -> tuple[Path, str]:
    """The directory a file's top-level package sits in, and the file's dotted module name."""
    parts = [] if path.name == "__init__.py" else [path.stem]
    directory = path.parent
    while (directory / "__init__.py").is_file():
        parts.insert(0, directory.name)
        directory = directory.parent
    return directory, ".".join(parts) or path.parent.name


def python_files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    return sorted(
        path
        for path in root.rglob("*.py")
        if not any(part in _SKIPPED_DIRS or part.startswith(".") for part in path.relative_to(root).parts[:-1])
    )


@dataclass
class Target:
    project: Project
    # The modules whose routes, middleware and settings are examined; others are only followed into.
    modules: list[Module]
    # Where server configuration (Dockerfile, Procfile, compose, gunicorn.conf.py) is looked for: the
    # directory named, or the one the `module:app`'s top-level package was found in.
    config_dir: Path | None
    # `module:app`, when the target named one (the ladder's target).
    app: str | None


def load_target(spec: str, search_path: list[str] | None = None) -> Target:
    """A directory or file, or `module:app` found on the search path (sys.path by default) without importing it."""
    path = Path(spec)
    if path.exists():
        return _load_path(path.resolve())
    if ":" not in spec:
        raise TargetError(f"{spec}: no such file or directory, and not module:app")
    module_name, _, attr = spec.partition(":")
    # As uvicorn's --app-dir: the current directory first, then the interpreter's path.
    entries = search_path if search_path is not None else [".", *sys.path]
    roots = [Path(entry or ".").resolve() for entry in entries]
    root = next((r for r in roots if _find_module_file(module_name, [r])), None)
    if root is None:
        raise TargetError(f"{module_name}: no such module on the search path")
    project = Project([root], {module_name.split(".")[0]})
    start = project.module(module_name)
    if start is None:
        raise TargetError(f"{module_name}: cannot be parsed")
    if attr.split(".")[0] not in {*start.assigns, *start.functions, *start.classes, *start.imports}:
        raise TargetError(f"{spec}: {module_name} defines no {attr.split('.')[0]!r}")
    # The project's files (Dockerfile, compose) sit beside its top-level package, where it was found.
    return Target(project, project.import_closure(start), root, spec)


def _load_path(path: Path) -> Target:
    files = python_files(path)
    roots: list[Path] = []
    own: set[str] = set()
    named: list[tuple[str, Path]] = []
    for file in files:
        root, name = _package_root(file)
        if root not in roots:
            roots.append(root)
        own.add(name.split(".")[0])
        named.append((name, file))
    project = Project(roots, own, path if path.is_dir() else path.parent)
    modules = []
    for name, file in named:
        module = project.modules.get(name) or parse_module(name, file)
        if module is not None:
            project.add(module)
            modules.append(module)
    return Target(project, modules, path if path.is_dir() else path.parent, None)
