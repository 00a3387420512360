"""The engine knows nothing of the UI: ``engine/`` never imports console or textual."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.support.cli import REPO

ENGINE = REPO / "engine"
FORBIDDEN = ("console", "textual")


def imported_roots(source: Path) -> set[str]:
    tree = ast.parse(source.read_text(), filename=str(source))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_no_engine_module_imports_console_or_textual() -> None:
    sources = sorted(ENGINE.rglob("*.py"))
    assert len(sources) > 10
    offenders = {
        str(path.relative_to(ENGINE.parent)): sorted(imported_roots(path) & set(FORBIDDEN)) for path in sources
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_importing_the_whole_engine_loads_no_ui() -> None:
    modules = [
        ".".join(p.relative_to(ENGINE.parent).with_suffix("").parts).removesuffix(".__init__")
        for p in sorted(ENGINE.rglob("*.py"))
    ]
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        "print(','.join(bad))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ENGINE.parent, check=True)
    assert done.stdout.strip() == ""
