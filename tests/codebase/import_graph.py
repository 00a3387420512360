"""The import graph of the project's packages, read from the source with ``ast``.

Every import counts, wherever it is written (a function's deferred import too: it
runs, just later), except those under ``if TYPE_CHECKING:``, which never run.
Importing ``a.b.c`` runs ``a`` and ``a.b`` first, so it depends on those too.

Run as a script to print the cycles: ``python -m tests.codebase.import_graph engine console``.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.support.cli import REPO

Graph = dict[str, set[str]]


def module_name(path: Path, top: Path) -> str:
    parts = path.relative_to(top).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of ``tree`` that runs, at any depth."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from (n for child in node.orelse for n in _imports_in(child))
            continue
        yield from _imports_in(node)


def _imports_in(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node
    else:
        yield from _imports(node)


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: set[str]) -> Iterator[str]:
    """The project modules ``node`` (in ``module``) runs, parents included."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = module.split(".") if is_package else module.split(".")[:-1]
            package = package[: len(package) - (node.level - 1)]
            base = ".".join([*package, base] if base else package)
        # ``from a import b``: b is a submodule, or a name defined in a
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
    for name in names:
        parts = name.split(".")
        for end in range(1, len(parts) + 1):
            target = ".".join(parts[:end])
            if target in known and target != module:
                yield target


def build(roots: list[str], top: Path = REPO) -> Graph:
    """The graph of every module of the ``roots`` packages (directories of ``top``):
    module -> the modules of those packages it imports."""
    files = {module_name(path, top): path for root in roots for path in sorted((top / root).rglob("*.py"))}
    known = set(files)
    graph: Graph = {}
    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        graph[module] = {t for node in _imports(tree) for t in _targets(node, module, is_package, known)}
    return graph


def cycles(graph: Graph) -> list[tuple[list[str], list[str]]]:
    """For each set of modules that import each other (a strongly connected component
    of more than one module, by Tarjan's algorithm): one cycle through it
    (``[a, b, ..., a]``) and its members, sorted for stable messages."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for node in sorted(graph):
            if node not in index:
                visit(node)
    finally:
        sys.setrecursionlimit(limit)
    return sorted((_one_cycle(graph, component), sorted(component)) for component in components)


def _one_cycle(graph: Graph, component: set[str]) -> list[str]:
    """The shortest cycle through the component's first module (breadth first)."""
    start = min(component)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & component):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start] if node != start else [start, start]
                if nxt not in came_from:
                    came_from[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no cycle through {start} in a strongly connected component")


def describe(found: list[tuple[list[str], list[str]]]) -> str:
    return "\n".join(
        f"{' -> '.join(cycle)}\n  (one cycle of {len(members)} modules that import each other: {', '.join(members)})"
        for cycle, members in found
    )


if __name__ == "__main__":
    print(describe(cycles(build(sys.argv[1:] or ["engine", "console"]))) or "no cycle")
