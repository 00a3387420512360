"""Access (issue 5, item 6): owner-only files, and SQL that never carries input.

- A new data directory is 0700 and everything in it is owner-only, whatever the umask:
  the catalog with its WAL and shared-memory files, topic and partition directories,
  segments and their indexes.
- Every SQL text built with an f-string, ``str.format`` or ``+``/``%`` interpolates only
  pieces on the allowlist below, each of which is fixed by the code (a clause, a
  constant, placeholders), never operator input; values always go as parameters.
"""

from __future__ import annotations

import ast
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.broker import Broker
from engine.store.batch import NewRecord
from tests.support.cli import REPO


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The most permissive umask: what is owner-only must be so by its own mode."""
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_data_directory_is_owner_only_whatever_the_umask(tmp_path: Path, open_umask: None) -> None:
    data = tmp_path / "new" / "data"
    with Broker(data) as broker:
        broker.create_topic("t", 2)
        broker.produce("t", [NewRecord(b"x" * 10, None, None) for _ in range(5)])
        # While a connection is open SQLite keeps its -wal and -shm files: it gives
        # them the database file's mode, so they are owner-only too.
        catalog = [data / "catalog.db", data / "catalog.db-wal", data / "catalog.db-shm"]
        assert {p.name: oct(mode(p)) for p in catalog} == {p.name: "0o600" for p in catalog}
        everything = [data, *data.rglob("*")]
        assert {p.name for p in everything} >= {"topics", "t", "0", "1", "00000000000000000000.index"}
        loose = {str(p.relative_to(tmp_path)): oct(mode(p)) for p in everything if mode(p) & 0o077}
        assert loose == {}
    assert mode(data) == 0o700


def test_the_cli_creates_an_owner_only_data_directory(ebb, data_dir: Path, open_umask: None) -> None:
    assert ebb("topic", "create", "t").code == 0
    assert ebb("produce", "t", stdin="a\nb\n").code == 0
    assert mode(data_dir) == 0o700 and mode(data_dir / "catalog.db") == 0o600
    assert {str(p): oct(mode(p)) for p in data_dir.rglob("*") if mode(p) & 0o077} == {}


# -- SQL --------------------------------------------------------------------------------------------

SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE|PRAGMA|WHERE|VALUES|LIMIT|ATTACH|DROP|ALTER|JOIN)\b")

ALLOWED: dict[str, set[str]] = {
    # "WHERE topic = ?" or nothing; the topic is a parameter. The metadata triggers:
    # event, name, topic and condition are literals of the module's _URGENT_CHANGES.
    "engine/catalog/catalog.py": {"event", "name", "topic", "f'WHEN {when}' if when else ''"},
    # Integer constants of the module: PRAGMA takes no parameters.
    "engine/catalog/database.py": {"BUSY_TIMEOUT_MS"},
    # The segment-write triggers: name, event and row (NEW or OLD) are literals of
    # the module's _STAMPED, the body its _STAMP.
    "engine/catalog/schema.py": {"SCHEMA_VERSION", "name", "event", "row", "_STAMP.format(row=row)"},
    # "WHERE p.topic IN (?, ...)", one "?" per topic, or nothing; the topics are
    # parameters. The positions query is a literal of the module, embedded in the lag one.
    "engine/catalog/queries.py": {"','.join('?' * len(topics))", "_POSITIONS_SQL.format(where=where)", "where"},
    # _Where joins terms that are literals of this module (checked below); the
    # retention's WHERE clauses are literals of the module, the cutoff a parameter.
    "engine/journal/journal.py": {"' AND '.join(self.terms)", "where.sql()", "_TRIMMED_CYCLES", "_TRIMMED_ACTIONS"},
    # The tables salvaged: names of engine/journal/trimmed.py's TABLES, literals.
    "engine/journal/salvage.py": {"table"},
    # The trimmed totals: DELETIONS a literal of trimmed.py; column a phase's column,
    # a literal of its PHASE_COLUMNS; bucket_of a CASE over its integer bounds; kept
    # those joined; the retention's WHERE clauses (actions, cycles) literals of
    # engine/journal/journal.py, the cutoff a parameter.
    "engine/journal/totals.py": {"DELETIONS", "bucket_of(column)", "column", "kept"},
    "engine/journal/trimmed.py": {"DELETIONS", "bucket_of(column)", "column", "actions", "cycles"},
    # "WHERE column IN (?, ...)", one "?" per topic, or nothing; the topics are
    # parameters, the column a literal of the module's _TOPIC_COLUMN; _STAMPED_AFTER a
    # literal of the module, its count a parameter.
    "engine/catalog/bulk_reads.py": {"where", "column", "', '.join('?' * len(names))", "_STAMPED_AFTER"},
    # " AND topic IN (?, ...)" or nothing, and "cycle IN (?, ...)": one "?" per topic
    # or cycle, the values parameters.
    "engine/journal/history.py": {"where", "','.join('?' * len(cycles))"},
    # ALTER TABLE takes no parameters: the column is a literal of the module's _PHASE_COLUMNS.
    "engine/journal/schema.py": {"column"},
    # The planner's bucketed table: quoted identifiers of its schema (types from a
    # fixed map) and an integer; its name and location go as parameters.
    "engine/prune/bucketed.py": {"ddl(schema)", "_quoted([key])", "_quoted(order)", "int(buckets)"},
    # The forecast's timeline query, built once at import: the same rules over the
    # columns of the forecast's instants and (suffixed BEFORE, a literal) of the cycle
    # before each; _named joins literals of the module, _BY_TARGET and _REASON are
    # engine/prune/plan/rules.py's statements over literals. Its rows go as a DataFrame.
    "engine/forecast/timeline.py": {
        "BEFORE",
        "_BY_TARGET",
        "_REASON",
        "_named('', 'gone')",
        "_named('', 'm_target', 'm_hard')",
        "_named('', 'run_target', 'run_hard')",
        "_named(BEFORE, 'gone')",
        "_named(BEFORE, 'm_target', 'm_hard')",
        "_named(BEFORE, 'run_target', 'run_hard')",
    },
}


#: Modules whose SQL text is built once, at import, from the module's own names: the
#: Spark planner's one query (engine.prune.plan.query.PLAN_QUERY). No snapshot value
#: ever reaches its text; the inputs go to spark.sql as DataFrames (checked below).
SQL_AT_IMPORT = {"engine/prune/plan/query.py"}


def _module_strings(tree: ast.Module) -> dict[str, str]:
    """Module-level ``NAME = "..."`` constants, to recognize ``NAME.format(...)``."""
    return {
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        for target in node.targets
        if isinstance(target, ast.Name)
    }


def interpolated_sql(source: str) -> Iterator[str]:
    """The source of every piece interpolated into an SQL text in ``source``."""
    tree = ast.parse(source)
    constants = _module_strings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            fixed = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
            if SQL.search(fixed):
                yield from (ast.unparse(v.value) for v in node.values if isinstance(v, ast.FormattedValue))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
            receiver = node.func.value
            text = receiver.value if isinstance(receiver, ast.Constant) else constants.get(getattr(receiver, "id", ""))
            if isinstance(text, str) and SQL.search(text):
                yield from (ast.unparse(a) for a in [*node.args, *(k.value for k in node.keywords)])
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
            sides = (node.left, node.right)
            if any(isinstance(s, ast.Constant) and isinstance(s.value, str) and SQL.search(s.value) for s in sides):
                yield from (ast.unparse(s) for s in sides if not isinstance(s, ast.Constant))


def test_the_scanner_sees_every_way_of_building_sql() -> None:
    source = (
        'Q = "SELECT * FROM t WHERE {w}"\n'
        'db.execute(f"SELECT * FROM t WHERE name = {name}")\n'
        "db.execute(Q.format(w=user))\n"
        'db.execute("DELETE FROM t WHERE a = " + value)\n'
        'db.execute("UPDATE t SET a = %s" % other)\n'
        'print(f"no sql {here}")\n'
    )
    assert list(interpolated_sql(source)) == ["name", "user", "value", "other"]


def test_sql_interpolates_only_fixed_pieces() -> None:
    found: dict[str, set[str]] = {}
    for root in ("engine", "console"):
        for path in sorted((REPO / root).rglob("*.py")):
            if str(path.relative_to(REPO)) in SQL_AT_IMPORT:
                continue
            pieces = set(interpolated_sql(path.read_text()))
            if pieces:
                found[str(path.relative_to(REPO))] = pieces
    unexpected = {path: pieces - ALLOWED.get(path, set()) for path, pieces in found.items()}
    assert {path: pieces for path, pieces in unexpected.items() if pieces} == {}, (
        "SQL built with interpolation: pass values as parameters, or add a fixed piece to ALLOWED with why"
    )
    # The allowlist names no piece that no longer exists.
    assert {p: ALLOWED[p] - found.get(p, set()) for p in ALLOWED if ALLOWED[p] - found.get(p, set())} == {}


@pytest.mark.parametrize("module", sorted(SQL_AT_IMPORT))
def test_the_planner_query_is_built_at_import_from_constants(module: str) -> None:
    tree = ast.parse((REPO / module).read_text())
    functions = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}

    def called(node: ast.AST) -> set[str]:
        return {c.func.id for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}

    builders = {name for name, fn in functions.items() if list(interpolated_sql(ast.unparse(fn)))}
    assert "_plan_query" in builders
    # The builders are called by builders only, and the query once, at module level,
    # by a function that takes nothing.
    for name, fn in functions.items():
        if name not in builders:
            assert not called(fn) & builders, f"{name} calls {called(fn) & builders}"
    top_level = [n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    assert {c for n in top_level for c in called(n)} & builders == {"_plan_query"}
    assert not functions["_plan_query"].args.args
    # Spark gets that constant text and nothing else: through round_trips.sql_frame
    # (spark.sql's text, sent in one round trip), never spark.sql with another.
    sql_calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and getattr(c.func, "attr", None) == "sql"]
    assert sql_calls == []
    sent = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and getattr(c.func, "id", None) == "sql_frame"]
    assert [ast.unparse(c.args[1]) for c in sent] == ["PLAN_QUERY"]


@pytest.mark.parametrize(
    ("module", "function"),
    [("engine/journal/journal.py", "add")],
)
def test_the_allowed_clause_builders_get_literal_sql(module: str, function: str) -> None:
    # What makes ALLOWED's clause builders safe: every call gives them literal SQL.
    calls = [
        node
        for node in ast.walk(ast.parse((REPO / module).read_text()))
        if isinstance(node, ast.Call)
        and (getattr(node.func, "attr", None) == function or getattr(node.func, "id", None) == function)
    ]
    assert calls
    assert all(isinstance(call.args[0], ast.Constant) for call in calls), [ast.unparse(c) for c in calls]
