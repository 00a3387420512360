"""No import cycle in ``engine/`` or ``console/``: imports go one way (console: app ->
screens -> modals/widgets -> model -> host -> engine), counting deferred imports,
which run too, and not ``if TYPE_CHECKING:`` ones, which never do."""

from __future__ import annotations

from pathlib import Path

from tests.codebase.import_graph import build, cycles, describe


def test_engine_has_no_import_cycle() -> None:
    found = cycles(build(["engine"]))
    assert not found, describe(found)


def test_console_has_no_import_cycle() -> None:
    found = cycles(build(["console"]))
    assert not found, describe(found)


def test_the_graph_counts_deferred_imports_and_not_type_checking_ones(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from pkg import b\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import c\nelse:\n    import pkg.a\n"
    )
    (package / "c.py").write_text("from . import b\nfrom .b import name\n")
    graph = build(["pkg"], tmp_path)
    # importing a module runs its package first
    assert graph == {"pkg": set(), "pkg.a": {"pkg", "pkg.b"}, "pkg.b": {"pkg", "pkg.a"}, "pkg.c": {"pkg", "pkg.b"}}
    assert cycles(graph) == [(["pkg.a", "pkg.b", "pkg.a"], ["pkg.a", "pkg.b"])]
