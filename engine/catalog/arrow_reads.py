"""The catalog read into Arrow in bulk, for the planner's snapshot: no row goes
through Python.

An ADBC connection (``adbc-driver-sqlite``: SQLite's C API straight into Arrow
columns) reads the catalog's database file in one read transaction of its own, so
every table comes from the same instant while producers and consumers write (WAL
gives it a snapshot). At 1M segments this reads the segments in about a third of the
time ``sqlite3`` takes to make their rows, before any conversion (docs/SPARK_NOTES.md).

The driver types a column from its first rows, and one null in all of them comes
typed as an integer; so every table is cast to the schema asked for.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import adbc_driver_sqlite.dbapi as adbc
import pyarrow as pa

_TOPICS = "SELECT name AS topic, partitions FROM topics{where} ORDER BY name"
_PARTITIONS = "SELECT topic, partition, log_start_offset, next_offset FROM partitions{where} ORDER BY topic, partition"
_SEGMENTS = (
    "SELECT topic, partition, base_offset, next_offset, size_bytes, first_timestamp, max_timestamp, sealed"
    " FROM segments{where} ORDER BY topic, partition, base_offset"
)
#: with each group's latest commit on any partition of the topic (for expiry)
_POSITIONS = (
    'SELECT p.topic, p.group_name AS "group", g.kind, p.partition, p.position, p.committed_at,'
    " MAX(p.committed_at) OVER (PARTITION BY p.topic, p.group_name) AS group_last_commit"
    " FROM positions p JOIN groups g ON g.topic = p.topic AND g.name = p.group_name"
    "{where} ORDER BY p.topic, p.group_name, p.partition"
)
#: per request (topic, partition, log start, θ, after): the first segment after
#: ``after`` that may hold the partition's first record >= θ at or above the log start
_NEXT_CUT_CANDIDATE = (
    "SELECT (SELECT base_offset FROM segments WHERE topic = ?1 AND partition = ?2 AND next_offset > ?3"
    " AND max_timestamp >= ?4 AND base_offset > ?5 ORDER BY base_offset LIMIT 1) AS base_offset"
)

_POLICIES = "SELECT topic, field, value FROM policies{where}"
_POLICY_ROWS = pa.schema([("topic", pa.string()), ("field", pa.string()), ("value", pa.string())])
_VERSIONS = "SELECT topic, MAX(id) AS version FROM policy_changes{where} GROUP BY topic"
_VERSION_ROWS = pa.schema([("topic", pa.string()), ("version", pa.int64())])

#: the ``where`` of each query when it reads one topic; a parameter
_OF_TOPIC = {_TOPICS: " WHERE name = ?", _POSITIONS: " WHERE p.topic = ?"}


class ArrowReads:
    """Reads of one catalog read transaction, as Arrow tables (:func:`arrow_reads`)."""

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    def topics(self, names: Sequence[str] | None, schema: pa.Schema) -> pa.Table:
        """``(topic, partitions)`` of ``names`` (every topic if None), by name."""
        return self._read(_TOPICS, names, schema)

    def partitions(self, names: Sequence[str] | None, schema: pa.Schema) -> pa.Table:
        """The partitions of ``names``'s topics (all if None), as ``schema``."""
        return self._read(_PARTITIONS, names, schema)

    def segments(self, names: Sequence[str] | None, schema: pa.Schema) -> pa.Table:
        """The segments of ``names``'s topics (all if None), as ``schema``, in offset order."""
        return self._read(_SEGMENTS, names, schema)

    def positions(self, names: Sequence[str] | None, schema: pa.Schema) -> pa.Table:
        """The group positions of ``names``'s topics (all if None) with each group's
        kind and last commit, as ``schema``."""
        return self._read(_POSITIONS, names, schema)

    def overrides(self, names: Sequence[str] | None) -> dict[str, dict[str, str]]:
        """The policy overrides of ``names`` (every topic if None): topic -> field -> value."""
        table = self._read(_POLICIES, names, _POLICY_ROWS)
        found: dict[str, dict[str, str]] = {}
        for topic, field, value in zip(*(table[c].to_pylist() for c in _POLICY_ROWS.names)):
            found.setdefault(topic, {})[field] = value
        return found

    def policy_versions(self, names: Sequence[str] | None) -> dict[str, int]:
        """The latest policy change id of ``names`` (every topic if None) that have one."""
        table = self._read(_VERSIONS, names, _VERSION_ROWS)
        return dict(zip(table["topic"].to_pylist(), table["version"].to_pylist()))

    def subscribed_topics(self) -> set[str]:
        """Topics with at least one subscriber group."""
        self._cursor.execute("SELECT DISTINCT topic FROM groups WHERE kind = 'subscriber'")
        return {topic for (topic,) in self._cursor.fetchall()}

    def next_cut_candidates(self, requests: pa.Table) -> pa.Array:
        """Per row of ``requests`` (``topic``, ``partition``, ``log_start``, ``theta``,
        ``after``): the base offset of the partition's first segment above ``after``
        that may hold its first record >= θ at or above the log start (a segment
        whose max timestamp is below θ holds none), null if none does. One call: the
        driver runs the query once per row, in C."""
        if requests.num_rows == 0:
            return pa.array([], pa.int64())
        self._cursor.execute(_NEXT_CUT_CANDIDATE, requests)
        return self._cursor.fetch_arrow_table().column("base_offset").combine_chunks().cast(pa.int64())

    def _read(self, query: str, names: Sequence[str] | None, schema: pa.Schema) -> pa.Table:
        if names is None:
            return self._table(query.format(where=""), (), schema)
        one = query.format(where=_OF_TOPIC.get(query, " WHERE topic = ?"))
        return (
            pa.concat_tables([self._table(one, (name,), schema) for name in names]) if names else schema.empty_table()
        )

    def _table(self, sql: str, params: tuple, schema: pa.Schema) -> pa.Table:
        self._cursor.execute(sql, params)
        return self._cursor.fetch_arrow_table().rename_columns(schema.names).cast(schema)


@contextmanager
def arrow_reads(database: Path) -> Iterator[ArrowReads]:
    """One read transaction on the catalog ``database`` (the file), read-only."""
    # Not autocommit: the driver holds one transaction, so every read sees one instant.
    connection = adbc.connect(f"{database.resolve().as_uri()}?mode=ro", autocommit=False)
    try:
        with connection.cursor() as cursor:
            yield ArrowReads(cursor)
        connection.rollback()
    finally:
        connection.close()
