"""The order the xdist workers get the tests in (tests/support/scheduling.py): the
long tests at the head of each worker's share, modules that must stay whole kept
whole, the Connect server's tests on one worker, and a table that names real tests."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support import scheduling
from tests.support.cli import REPO
from tests.support.scheduling import LONG_SECONDS, WHOLE_MODULES, long_first_halves


@dataclass
class _Item:
    """What long_first_halves reads of a pytest item."""

    nodeid: str
    fixturenames: tuple[str, ...] = ()


def _items(*nodeids: str, on_server: tuple[str, ...] = ()) -> list[Any]:
    fixtures = ("connect_server_of_the_run",)
    return [_Item(n, fixtures if n in on_server else ()) for n in nodeids]


def _shares(items: list[Any], workers: int = 2) -> list[list[str]]:
    """The contiguous shares xdist hands out: len // workers, then of what is left."""
    out, start = [], 0
    for i in range(workers):
        size = (len(items) - start) // (workers - i)
        out.append([item.nodeid for item in items[start : start + size]])
        start += size
    return out


@pytest.fixture
def table(monkeypatch: pytest.MonkeyPatch) -> dict[str, float]:
    """A table of our own, so the cases do not depend on today's durations."""
    ours: dict[str, float] = {}
    monkeypatch.setattr(scheduling, "LONG_SECONDS", ours)
    monkeypatch.setattr(scheduling, "WHOLE_MODULES", frozenset({"t/whole.py"}))
    return ours


def test_each_share_begins_with_its_long_tests_and_nothing_is_lost(table: dict[str, float]) -> None:
    short = [f"t/short.py::s{i}" for i in range(10)]
    table.update({"t/long.py::a": 100, "t/long.py::b": 90, "t/long.py::c": 20})
    items = _items(*short[:5], "t/long.py::a", *short[5:], "t/long.py::b", "t/long.py::c")
    ordered = long_first_halves(items)
    assert sorted(i.nodeid for i in ordered) == sorted(i.nodeid for i in items)
    first, second = _shares(ordered)
    # Longest first, each to the share with less so far: a alone, b then c.
    assert first[0] == "t/long.py::a"
    assert second[:2] == ["t/long.py::b", "t/long.py::c"]
    # The short ones fill the rest in their collected order.
    assert [n for n in first + second if n.startswith("t/short.py")] == short


def test_all_cases_of_a_parametrized_long_test_move_together(table: dict[str, float]) -> None:
    table["t/long.py::p"] = 50
    items = _items("t/short.py::s0", "t/short.py::s1", "t/long.py::p[1]", "t/long.py::p[2]")
    assert [i.nodeid for i in long_first_halves(items)][:2] == ["t/long.py::p[1]", "t/long.py::p[2]"]


def test_a_whole_module_stays_whole_and_in_its_order(table: dict[str, float]) -> None:
    table["t/whole.py"] = 60
    whole = ["t/whole.py::x", "t/whole.py::y", "t/whole.py::z"]
    items = _items("t/short.py::s0", whole[2], "t/short.py::s1", whole[0], whole[1])
    ordered = [i.nodeid for i in long_first_halves(items)]
    start = ordered.index(whole[2])
    # Collected order is kept inside the module: z, x, y as collected.
    assert ordered[start : start + 3] == [whole[2], whole[0], whole[1]]


def test_the_connect_servers_tests_share_one_worker(table: dict[str, float]) -> None:
    server = ("t/a.py::c1", "t/b.py::c2", "t/c.py::c3")
    table.update({"t/long.py::a": 100, "t/long.py::b": 95})
    items = _items(
        "t/a.py::c1", "t/long.py::a", "t/short.py::s0", "t/b.py::c2",
        "t/short.py::s1", "t/long.py::b", "t/c.py::c3", "t/short.py::s2",
        on_server=server,
    )  # fmt: skip
    shares = _shares(long_first_halves(items))
    holding = [share for share in shares if any(n in share for n in server)]
    assert len(holding) == 1 and all(n in holding[0] for n in server)


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    }


@pytest.mark.parametrize("unit", sorted(LONG_SECONDS))
def test_the_long_tests_table_names_tests_that_exist(unit: str) -> None:
    """A renamed or removed test would silently lose its place at the head of a share:
    the table must be kept up to date with the suite."""
    module, _, name = unit.partition("::")
    path = REPO / module
    assert path.is_file(), f"LONG_SECONDS names {module}, which is not a file any more"
    if name:
        assert name in _test_names(path), f"LONG_SECONDS names {unit}, which is not a test any more"
    else:
        assert module in WHOLE_MODULES, f"{module} is timed as a whole but is not in WHOLE_MODULES"
