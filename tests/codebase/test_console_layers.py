"""The console's imports run one way: app → screens → modals/widgets → model → host →
engine. Deferred imports count (a function-level import that dodges a cycle is still a
cycle); imports under ``if TYPE_CHECKING:`` do not (they never run)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONSOLE = ROOT / "console"

#: each console package and the layers it may import at run time (besides leaf modules)
LAYERS = ["app", "screens", "modals", "widgets", "model", "host"]
MAY_IMPORT = {
    "app": set(LAYERS) - {"app"},
    "screens": {"screens", "modals", "widgets", "model", "host"},
    "modals": {"modals", "widgets", "model", "host"},
    "widgets": {"widgets", "model", "host"},
    "model": {"model", "host"},
    "host": set(),
}


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_imports(path: Path, known: set[str]) -> set[str]:
    """Modules of ``known`` that ``path`` imports when it runs, at any depth."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking_only(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            # ``from console import format`` imports the module console.format
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), filename=str(path)))
    return found & known


def graph(package: Path) -> dict[str, set[str]]:
    sources = sorted(package.rglob("*.py"))
    known = {module_name(p) for p in sources}
    return {module_name(p): runtime_imports(p, known) - {module_name(p)} for p in sources}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in edges.get(node, ()):
            if other not in index:
                connect(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            connect(node)
    return found


def layer(module: str) -> str | None:
    """The console layer of ``module``; None for leaf modules (errors, views, format...)
    and for the CLI, which stands beside the app."""
    parts = module.split(".")
    if len(parts) < 2 or parts[0] != "console":
        return None
    name = parts[1]
    return name if name in LAYERS else None


def test_the_console_has_no_import_cycle() -> None:
    edges = graph(CONSOLE)
    assert len(edges) > 40
    assert cycles(edges) == []


def test_console_imports_point_down_the_layers() -> None:
    upward = {
        (module, target)
        for module, targets in graph(CONSOLE).items()
        for target in targets
        if (source := layer(module)) is not None
        and (destination := layer(target)) is not None
        and destination not in MAY_IMPORT[source] | {source}
    }
    assert upward == set()


def test_the_cycle_finder_sees_a_deferred_import(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "a.py").write_text("from pkg.b import thing\n")
    (package / "b.py").write_text("def thing():\n    from pkg.a import other\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import x\n")
    sources = sorted(package.glob("*.py"))
    known = {".".join(p.relative_to(tmp_path).with_suffix("").parts) for p in sources}
    edges = {".".join(p.relative_to(tmp_path).with_suffix("").parts): runtime_imports(p, known) for p in sources}
    assert cycles(edges) == [["pkg.a", "pkg.b"]]
    assert edges["pkg.c"] == set()
