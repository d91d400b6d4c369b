"""The app's own source, parsed but never imported: its modules, functions, classes and imports.

"Own" is, for a directory, the modules it holds; for `module:app`, that module and the modules it
imports, transitively, from its own top-level package. Third-party code is never followed:
its names stay qualified strings (`redis.Redis`) for the rules to match.

In a directory, a module is named by its path from the directory (`routers/orders.py` is
`routers.orders` whether or not `routers/` holds an `__init__.py`), or from the folder its package
sits in when the package reaches above the directory; the name its package chain gives
(`app.main` under `src/`, through folders without `__init__.py` inside the package) is kept as an
alias, unless two files share it. No file is dropped
without a word: one that cannot be read or parsed, and an import of the app's own code that names
no file in it, are kept as `Unread`, with the reason.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
_SKIPPED_DIRS = {".venv", "venv", "node_modules", "site-packages", "__pycache__", ".git", ".tox", "build", "dist"}


class TargetError(Exception):
    """The target cannot be read: no such path or module, or no such attribute."""


@dataclass(frozen=True)
class Unread:
    """A file of the app not analysed, or an import of its own code not followed, and why."""

    path: Path
    line: int | None
    reason: str


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


@dataclass(eq=False)
class Module:
    name: str
    path: Path
    tree: ast.Module
    lines: list[str]
    is_package: bool
    imports: dict[str, str] = field(default_factory=dict)
    # Where each import of `imports` is written (the first time).
    import_lines: dict[str, int] = field(default_factory=dict)
    functions: dict[str, Function] = field(default_factory=dict)
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    assigns: dict[str, ast.expr] = field(default_factory=dict)
    all_functions: list[Function] = field(default_factory=list)
    all_classes: list[ClassInfo] = field(default_factory=list)
    # Every call in the module, with the function whose scope it is evaluated in (None: module level).
    calls: list[tuple[ast.Call, Function | None]] = field(default_factory=list)
    # Dotted names written as strings in a module that uses importlib: what it may import by name.
    named_modules: list[str] = field(default_factory=list)

    def code(self, line: int) -> str:
        return self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""

    @property
    def package(self) -> str:
        return self.name if self.is_package else self.name.rpartition(".")[0]


def parse_module(name: str, path: Path) -> Module | Unread:
    """The module, or why it cannot be read. The source's encoding is the one Python would use: its
    coding declaration or byte-order mark, else UTF-8."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return Unread(path, None, f"cannot be read: {exc.strerror or exc}")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return Unread(path, None, "not valid UTF-8, nor in the encoding its first lines declare")
    try:
        tree = ast.parse(data, filename=str(path))
    except SyntaxError as exc:
        # The offending text is not quoted: the line may be anything (a symlink to another file).
        return Unread(path, exc.lineno, f"syntax error: {exc.msg}")
    except ValueError as exc:
        return Unread(path, None, f"cannot be parsed: {exc}")
    except (RecursionError, MemoryError):
        # A hostile file must not end the whole run.
        return Unread(path, None, "nested past the parser's limits")
    module = Module(name, path, tree, text.splitlines(), path.name == "__init__.py")
    _index(module)
    return module


def _index(module: Module) -> None:
    _index_assigns(module, module.tree.body, nested=False)
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
    if any(qualified.split(".")[0] == "importlib" for qualified in module.imports.values()):
        # A registry of lazily imported features (`LazyFeature(module_path="app.routers.billing")`,
        # `importlib.import_module(name)`): each string that is a dotted name may be a module it loads.
        module.named_modules = [
            node.value
            for node in ast.walk(module.tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and "." in node.value
            and all(part.isidentifier() for part in node.value.split("."))
        ]


def _index_assigns(module: Module, body: list[ast.stmt], *, nested: bool) -> None:
    """Module-level assignments, also those under a module-level `if`, `try` or `with` (`if DEBUG: app =
    FastAPI(debug=True) else: app = FastAPI()`): a plain one replaces what came before; a nested one only
    fills a name not yet bound, as the first branch is the one a reader (and doctor) follows."""
    for statement in body:
        target: ast.expr | None = None
        value: ast.expr | None = None
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target, value = statement.targets[0], statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            target, value = statement.target, statement.value
        if isinstance(target, ast.Name) and value is not None:
            if not nested:
                module.assigns[target.id] = value
            else:
                module.assigns.setdefault(target.id, value)
        elif isinstance(statement, ast.If):
            _index_assigns(module, [*statement.body, *statement.orelse], nested=True)
        elif isinstance(statement, ast.Try | ast.TryStar):
            handled = [item for handler in statement.handlers for item in handler.body]
            _index_assigns(module, [*statement.body, *handled, *statement.orelse, *statement.finalbody], nested=True)
        elif isinstance(statement, ast.With):
            _index_assigns(module, statement.body, nested=True)


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
            module.import_lines.setdefault(alias.name, node.lineno)
        return
    base = _absolute(module, node.module, node.level)
    for alias in node.names:
        if alias.name != "*":
            qualified = f"{base}.{alias.name}" if base else alias.name
            module.imports[alias.asname or alias.name] = qualified
            module.import_lines.setdefault(qualified, node.lineno)


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


class Project:
    """Own modules by dotted name: for a directory, all of them parsed up front; for `module:app`, loaded
    on first use from the search roots."""

    def __init__(self, roots: list[Path], own: set[str], *, open_roots: bool = False) -> None:
        self.roots = roots
        self.own = own
        # A project's folder, not site-packages: every module or package beside the app's is its own
        # (`main.py` importing `routers/` and `core/`).
        self.open_roots = open_roots
        self._foreign: set[str] = set()
        self.modules: dict[str, Module] = {}
        # Other names a module answers to (its package chain's); None where two modules share one.
        self.aliases: dict[str, Module | None] = {}
        # Files not analysed and own imports not followed, each with the reason.
        self.unread: list[Unread] = []
        self._missing: set[str] = set()

    def is_own(self, name: str) -> bool:
        top = name.split(".")[0]
        if top in self.own:
            return True
        if not self.open_roots or top in self._foreign or not top.isidentifier():
            return False
        if any(_holds_module(root, top) for root in self.roots):
            self.own.add(top)
            return True
        self._foreign.add(top)
        return False

    def module(self, name: str) -> Module | None:
        if name in self.modules:
            return self.modules[name]
        if name in self.aliases:
            return self.aliases[name]
        if name in self._missing or not self.is_own(name):
            return None
        path = _find_module_file(name, self.roots)
        module = parse_module(name, path) if path else None
        if not isinstance(module, Module):
            if module is not None:
                self.unread.append(module)
            self._missing.add(name)
            return None
        self.modules[name] = module
        return module

    def add(self, module: Module, alias: str | None = None) -> None:
        self.modules[module.name] = module
        self.own.add(module.name.split(".")[0])
        if alias is not None and alias != module.name:
            self.aliases[alias] = None if alias in self.aliases else module
            self.own.add(alias.split(".")[0])

    def split(self, qualified: str) -> tuple[Module, list[str]] | None:
        """The longest own-module prefix of a dotted name, and the attribute path after it."""
        parts = qualified.split(".")
        for cut in range(len(parts), 0, -1):
            module = self.module(".".join(parts[:cut]))
            if module is not None:
                return module, parts[cut:]
        return None

    def load_siblings(self, modules: list[Module]) -> None:
        """Load, to be followed into, the other modules of each package folder the import closure
        touches: a plugin picked by a string (`importlib.import_module(settings.backend)`) is a sibling
        of the interface it implements, and only a loaded class is known as a subclass. Their routes are
        not examined: the closure's modules stay the app's."""
        for module in modules:
            folder, package = module.path.parent, module.package
            for file in sorted(folder.glob("*.py")):
                if file.stem != "__init__" and file.stem.isidentifier():
                    self.module(f"{package}.{file.stem}" if package else file.stem)

    def import_closure(self, start: Module) -> list[Module]:
        """`start` and every own module it imports, transitively, with the packages Python runs on the way
        (`import a.b.c` runs `a/__init__.py` and `a/b/__init__.py` first)."""
        seen = {start.name: start}
        queue = [start]
        while queue:
            module = queue.pop()
            parents = _prefixes(module.name)[:-1]
            found = [self.split(qualified) for qualified in module.imports.values()]
            # A name in a string is followed only where it is a whole module, never a prefix of one.
            named = [self.module(name) for name in module.named_modules]
            for reached in [*(self.module(parent) for parent in parents), *(f[0] for f in found if f), *named]:
                if reached is not None and reached.name not in seen:
                    seen[reached.name] = reached
                    queue.append(reached)
        return list(seen.values())


def _find_module_file(name: str, roots: list[Path]) -> Path | None:
    relative = Path(*name.split("."))
    for root in roots:
        for candidate in (root / relative.with_suffix(".py"), root / relative / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def _holds_module(root: Path, top: str) -> bool:
    """Whether `root` holds a module or package named `top` (a folder of Python files without an
    `__init__.py` is a namespace package)."""
    if (root / f"{top}.py").is_file() or (root / top / "__init__.py").is_file():
        return True
    folder = root / top
    return top not in _SKIPPED_DIRS and folder.is_dir() and next(folder.glob("*.py"), None) is not None


def _installed(root: Path) -> bool:
    """Whether `root` is where packages are installed, not a project's folder."""
    return root.name in ("site-packages", "dist-packages") or next(root.glob("*.dist-info"), None) is not None


def _package_root(path: Path, top: Path) -> Path:
    """The directory a file's top-level package sits in (its own directory if it is in no package).

    Inside `top`, a folder without `__init__.py` does not end the package: in a regular package it is
    a namespace package Python imports by the package's name (`marimo/_server/models/`)."""
    root = directory = path.parent
    while True:
        if (directory / "__init__.py").is_file():
            directory = root = directory.parent
        elif directory != top and directory.is_relative_to(top):
            directory = directory.parent
        else:
            return root


def _dotted(path: Path, base: Path) -> str:
    parts = list(path.relative_to(base).parts)
    parts[-1] = path.stem
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts) or path.parent.name


def module_names(path: Path, top: Path) -> tuple[str, str, str]:
    """A file's module name, from `top` or from above it where its package reaches there; the name its
    package chain alone gives (the same, unless a folder without `__init__.py` is on the way); and the
    dotted prefix of what `top` holds (`litellm.proxy` for a file under the package folder named)."""
    root = _package_root(path, top)
    chained = _dotted(path, root)
    if root != top and root.is_relative_to(top):
        name = _dotted(path, top)
        return name, chained, name.split(".")[0]
    inside = ".".join(top.relative_to(root).parts) if top != root and top.is_relative_to(root) else ""
    return chained, chained, inside or chained.split(".")[0]


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
    project = Project([root], {module_name.split(".")[0]}, open_roots=not _installed(root))
    start = project.module(module_name)
    if start is None:
        unread = project.unread[0] if project.unread else None
        raise TargetError(f"{module_name}: {unread.reason if unread else 'cannot be parsed'}")
    if attr.split(".")[0] not in {*start.assigns, *start.functions, *start.classes, *start.imports}:
        raise TargetError(f"{spec}: {module_name} defines no {attr.split('.')[0]!r}")
    modules = project.import_closure(start)
    project.load_siblings(modules)
    _unresolved_imports(project, modules, project.own, "on the search path")
    # The project's files (Dockerfile, compose) sit beside its top-level package, where it was found.
    return Target(project, modules, root, spec)


def _load_path(path: Path) -> Target:
    top = path if path.is_dir() else path.parent
    # A directory target's code is what it holds, all parsed here: nothing outside it is loaded
    # (following all of a large package from one of its folders took many times as long: 5d4608a).
    project = Project([], set())
    modules = []
    inside: set[str] = set()
    for file in python_files(path):
        name, alias, prefix = module_names(file, top)
        inside.update((prefix, alias.split(".")[0]) if alias != name else (prefix,))
        if name in project.modules:
            # Two files one name can give (`a.b/c.py`, `a/b/c.py`): both are read; imports reach the first.
            name = f"{name}@{file.relative_to(top).as_posix()}"
        module = parse_module(name, file)
        if isinstance(module, Unread):
            project.unread.append(module)
            continue
        project.add(module, alias)
        modules.append(module)
    _unresolved_imports(project, modules, inside, "in the directory")
    return Target(project, modules, top, None)


def _unresolved_imports(project: Project, modules: list[Module], inside: set[str], where: str) -> None:
    """Imports of the app's own code (names under one of the `inside` prefixes) that reach no module: a
    file missing, generated at build time, or unreadable. Each is kept once, where first written."""
    packages = {name.rpartition(".")[0] for name in [*project.modules, *project.aliases] if "@" not in name}
    namespaces = {prefix for name in packages for prefix in _prefixes(name)}
    seen: set[str] = set()
    for module in modules:
        for qualified, line in module.import_lines.items():
            if qualified in seen or not any(qualified == p or qualified.startswith(f"{p}.") for p in inside):
                continue
            seen.add(qualified)
            if qualified not in namespaces and not _reaches(project.split(qualified)):
                reason = f"imports `{qualified}`, which names no readable module {where}: not followed"
                project.unread.append(Unread(module.path, line, reason))


def _reaches(found: tuple[Module, list[str]] | None) -> bool:
    """Whether an import reaches something: a module, or a name its module may bind (any assignment, a
    star import or a module `__getattr__` counts)."""
    if found is None:
        return False
    module, rest = found
    if not rest or "__getattr__" in module.functions:
        return True
    name = rest[0]
    if name in module.functions or name in module.classes or name in module.assigns or name in module.imports:
        return True
    return any(
        (isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store))
        or (isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names))
        for node in ast.walk(module.tree)
    )


def _prefixes(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:cut]) for cut in range(1, len(parts) + 1)] if name else []
