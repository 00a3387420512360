"""No SQL against the catalog's tables outside ``engine/catalog/`` and
``engine/journal/``: a read or write the engine or the console needs is a named method
there, so that the schema has one owner and a query one copy.

Found from the source with ast: SQL in string literals (f-strings too) that reads or
writes one of the tables, and sqlite-utils table handles (``db["segments"]``,
``db.table("segments")``). Docstrings are prose, not queries. Scanned: the product
(``engine/``, ``console/``); tests and benches build and damage catalogs on purpose.
"""

from __future__ import annotations

import ast
import re

from tests.support.cli import REPO

TABLES = ("topics", "partitions", "segments", "groups", "positions", "cycles", "actions", "policy_changes")
OWNERS = ("engine/catalog/", "engine/journal/")
SCANNED = ("engine", "console")

_SQL = re.compile(
    r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\s+(" + "|".join(TABLES) + r")\b(?!\s*\()",
)
_PLACEHOLDER = "\x00"


def _literal_text(node: ast.Constant | ast.JoinedStr) -> str:
    if isinstance(node, ast.Constant):
        return node.value
    return "".join(v.value if isinstance(v, ast.Constant) else _PLACEHOLDER for v in node.values)


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def catalog_sql(source: str) -> list[tuple[int, str]]:
    """(line, table) of every use of a catalog table in ``source``."""
    tree = ast.parse(source)
    prose = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) or (
            isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose
        ):
            found += [(node.lineno, m.group(1)) for m in _SQL.finditer(_literal_text(node))]
        elif isinstance(node, ast.Subscript) and _is_db(node.value) and _table_name(node.slice):
            found.append((node.lineno, _table_name(node.slice)))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "table"
            and _is_db(node.func.value)
            and node.args
            and _table_name(node.args[0])
        ):
            found.append((node.lineno, _table_name(node.args[0])))
    return sorted(set(found))


def _is_db(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "db") or (isinstance(node, ast.Name) and node.id == "db")


def _table_name(node: ast.expr) -> str:
    return node.value if isinstance(node, ast.Constant) and node.value in TABLES else ""


def offenders() -> dict[str, list[tuple[int, str]]]:
    found = {}
    for root in SCANNED:
        for path in sorted((REPO / root).rglob("*.py")):
            name = path.relative_to(REPO).as_posix()
            if not name.startswith(OWNERS) and (uses := catalog_sql(path.read_text(encoding="utf-8"))):
                found[name] = uses
    return found


def test_no_sql_on_the_catalog_tables_outside_the_catalog_and_the_journal() -> None:
    found = offenders()
    assert not found, "SQL on catalog tables (add a named method to engine/catalog/ or engine/journal/):\n" + "\n".join(
        f"{name}:{line}: {table}" for name, uses in sorted(found.items()) for line, table in uses
    )


def test_the_scan_finds_sql_and_table_handles_and_skips_docstrings_and_prose() -> None:
    source = '''
"""Reads FROM segments, in a docstring: prose."""
def f(db, where):
    """SELECT * FROM topics: a docstring too."""
    db.conn.execute("SELECT topic FROM partitions" " WHERE topic = ?")
    db.query(f"UPDATE groups SET x = 1{where}")
    db["positions"].insert({})
    db.table("cycles").upsert({})
    message = "topics deleted from the groups view"
    return db.query("SELECT COUNT(*) FROM sqlite_master")
'''
    assert catalog_sql(source) == [(5, "partitions"), (6, "groups"), (7, "positions"), (8, "cycles")]
