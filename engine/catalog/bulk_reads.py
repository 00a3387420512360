"""The catalog's tables read into Arrow in bulk, for the planner's snapshot.

Two ways to one result (:class:`CatalogTables`), each in one read transaction, so
every table comes from the same instant while producers and consumers write:

- a catalog of up to :data:`BULK_FROM` segments is read on the catalog's own
  ``sqlite3`` connection, rows gathered into columns;
- a larger one is read by ADBC (``adbc-driver-sqlite``: SQLite's C API straight into
  Arrow columns, a third of the time ``sqlite3`` takes to make the rows) in a child
  process, which streams the tables back as Arrow IPC.

ADBC never runs in this process. The driver links its own copy of SQLite, and two
copies of SQLite in one process break each other on a WAL database: POSIX locks
belong to the process, so one copy closing the file drops the other's locks, and a
copy that believes it is alone resets the shared-memory index the other has mapped.
The console died of SIGBUS every few minutes that way, and a fresh ADBC connection
reported a sound catalog as malformed (sqlite.org/howtocorrupt.html, "multiple
copies of SQLite linked into the same application"). A child costs a few tenths of
a second to start, which only a large read repays.
"""

from __future__ import annotations

import functools
import importlib.abc
import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.catalog.damage import REMEDY
from engine.errors import CatalogDamaged, StoreError

#: segments from which the child's ADBC read is faster than rows through ``sqlite3``
BULK_FROM = 100_000
#: what a segment's row costs through ``sqlite3`` against ADBC's (measured at 1M):
#: re-reading a share of the segments beats reading them all in the child below it
_ROWS_COST = 3

_TOPICS = "SELECT name AS topic, partitions FROM topics{where} ORDER BY name"
_PARTITIONS = (
    "SELECT topic, partition, log_start_offset, next_offset, segments_changed"
    " FROM partitions{where} ORDER BY topic, partition"
)
_SEGMENTS = (
    "SELECT topic, partition, base_offset, next_offset, size_bytes, first_timestamp, max_timestamp, sealed"
    " FROM segments{where} ORDER BY topic, partition, base_offset"
)
#: the segments of the partitions stamped after a count of segment writes (engine/catalog/schema.py)
_STAMPED_AFTER = " WHERE (topic, partition) IN (SELECT topic, partition FROM partitions WHERE segments_changed > ?)"
_SEGMENT_WRITES = "SELECT epoch, count FROM segment_writes"
#: with each group's latest commit on any partition of the topic (for expiry)
_POSITIONS = (
    'SELECT p.topic, p.group_name AS "group", g.kind, p.partition, p.position, p.committed_at,'
    " MAX(p.committed_at) OVER (PARTITION BY p.topic, p.group_name) AS group_last_commit"
    " FROM positions p JOIN groups g ON g.topic = p.topic AND g.name = p.group_name"
    "{where} ORDER BY p.topic, p.group_name, p.partition"
)
_POLICIES = "SELECT topic, field, value FROM policies{where}"
_VERSIONS = "SELECT topic, MAX(id) AS version FROM policy_changes{where} GROUP BY topic"
_SUBSCRIBED = "SELECT DISTINCT topic FROM groups{where} AND kind = 'subscriber'"
_SEGMENT_COUNT = "SELECT COUNT(*) FROM segments{where}"
#: the segments' columns as every read gives them (the driver types a column from
#: its first rows, ``sqlite3`` from Python values): re-read rows join kept ones
_SEGMENT_TYPES = pa.schema(
    [("topic", pa.string())]
    + [(name, pa.int64()) for name in ("partition", "base_offset", "next_offset", "size_bytes")]
    + [(name, pa.int64()) for name in ("first_timestamp", "max_timestamp", "sealed")]
)

#: every table of :class:`CatalogTables`, in the order the child streams them
_QUERIES = {
    "topics": _TOPICS,
    "partitions": _PARTITIONS,
    "segments": _SEGMENTS,
    "positions": _POSITIONS,
    "policies": _POLICIES,
    "versions": _VERSIONS,
    "subscribed": _SUBSCRIBED,
    "segment_writes": _SEGMENT_WRITES,
}
#: the ``where`` of a query when it reads some topics (``topic IN (...)`` otherwise)
_TOPIC_COLUMN = {_TOPICS: "name", _POSITIONS: "p.topic"}
#: queries that read the same whatever the topics
_WHOLE = (_SEGMENT_WRITES,)
#: the child's exit status for a catalog SQLite calls damaged
_DAMAGED = 3


@dataclass(frozen=True)
class CatalogTables:
    """The catalog's tables as read, column names as in the queries above; the
    caller casts them to the schema it needs."""

    topics: pa.Table
    partitions: pa.Table
    segments: pa.Table
    positions: pa.Table
    #: topic -> field -> value of the saved policy overrides
    overrides: dict[str, dict[str, str]]
    #: topic -> the id of its latest policy change, for topics that have one
    versions: dict[str, int]
    #: topics with at least one subscriber group
    subscribed: set[str]
    #: the catalog file's epoch and its count of segment writes when read
    #: (engine/catalog/schema.py), and each partition's stamp from that count
    epoch: str
    writes: int
    stamps: np.ndarray
    #: whether every topic was read (only such a read is a base for :func:`read_since`)
    whole: bool

    @classmethod
    def of(cls, tables: dict[str, pa.Table], *, whole: bool) -> CatalogTables:
        policies = tables["policies"]
        overrides: dict[str, dict[str, str]] = {}
        for topic, field, value in zip(*(policies[c].to_pylist() for c in ("topic", "field", "value"))):
            overrides.setdefault(topic, {})[field] = value
        versions = tables["versions"]
        partitions = tables["partitions"]
        ((epoch, writes),) = zip(*(tables["segment_writes"][c].to_pylist() for c in ("epoch", "count")))
        return cls(
            topics=tables["topics"],
            partitions=partitions.drop_columns(["segments_changed"]),
            segments=tables["segments"].cast(_SEGMENT_TYPES),
            positions=tables["positions"],
            overrides=overrides,
            versions=dict(zip(versions["topic"].to_pylist(), versions["version"].to_pylist())),
            subscribed=set(tables["subscribed"]["topic"].to_pylist()),
            epoch=epoch,
            writes=writes,
            stamps=partitions["segments_changed"].to_numpy(zero_copy_only=False).astype(np.int64),
            whole=whole,
        )

    @functools.cached_property
    def partition_keys(self) -> pa.Array:
        return keys_of(self.partitions)

    @functools.cached_property
    def segment_partitions(self) -> np.ndarray:
        """Each segment's row in ``partitions``."""
        return _rows_in(self.segments, self.partition_keys)


def read_tables(
    connection: Any,
    database: Path,
    names: Sequence[str] | None,
    *,
    child_allowed: bool,
    since: CatalogTables | None = None,
) -> CatalogTables:
    """The tables of ``names``'s topics (every topic if None). ``connection`` is the
    catalog's own, inside a read transaction; ``child_allowed`` is False where a
    second process could not open the catalog (it is held in exclusive mode).
    ``since``: an earlier read of every topic, whose segments are kept where no
    write to them has come since (:func:`read_since`)."""
    if names is None and since is not None:
        read = read_since(connection, since, child_allowed=child_allowed)
        if read is not None:
            return read
    where, params = _where(_SEGMENT_COUNT, names)
    (segments,) = connection.execute(_SEGMENT_COUNT.format(where=where), params).fetchone()
    if child_allowed and segments >= BULK_FROM:
        return read_in_child(database, names)
    tables = {key: _rows_as_table(connection, query, names) for key, query in _QUERIES.items()}
    return CatalogTables.of(tables, whole=names is None)


def read_since(connection: Any, since: CatalogTables, *, child_allowed: bool) -> CatalogTables | None:
    """Every table, the segments re-read only for the partitions stamped after
    ``since`` was read (and those it did not hold); None when ``since`` is no base
    for this catalog (another file, a count gone back: a restored copy) or when
    reading everything in the child would be faster.

    Exact across processes: every write to a segment row, by any process, stamps
    its partition in the same transaction (the triggers of engine/catalog/schema.py),
    and this reads the stamps and the rows in one read transaction."""
    ((epoch, writes),) = connection.execute(_SEGMENT_WRITES).fetchall()
    if not since.whole or epoch != since.epoch or writes < since.writes:
        return None
    if child_allowed:
        (stale,) = connection.execute(_SEGMENT_COUNT.format(where=_STAMPED_AFTER), (since.writes,)).fetchone()
        if stale >= BULK_FROM and stale * _ROWS_COST >= since.segments.num_rows:
            return None
    tables = {key: _rows_as_table(connection, query, None) for key, query in _QUERIES.items() if key != "segments"}
    cursor = connection.execute(_SEGMENTS.format(where=_STAMPED_AFTER), (since.writes,))
    fresh = _as_table([d[0] for d in cursor.description], cursor.fetchall())
    read = CatalogTables.of({**tables, "segments": fresh}, whole=True)
    segments, rows_in = _merged(since, read, read.segments)
    merged = replace(read, segments=segments)
    merged.__dict__["segment_partitions"] = rows_in  # known here: the next read need not find it again
    return merged


def _merged(since: CatalogTables, now: CatalogTables, fresh: pa.Table) -> tuple[pa.Table, np.ndarray]:
    """``since``'s segments of the partitions ``now`` holds unstamped since, with the
    ``fresh`` rows of the others, in the order of ``now``'s partitions; and each
    row's partition there."""
    moved = pc.fill_null(pc.index_in(since.partition_keys, value_set=now.partition_keys), -1).to_numpy()
    kept_partition = np.zeros(len(moved), dtype=bool)
    present = moved >= 0
    kept_partition[present] = now.stamps[moved[present]] <= since.writes
    kept_rows = kept_partition[since.segment_partitions]
    kept = since.segments.filter(pa.array(kept_rows))
    rows_in = np.concatenate([moved[since.segment_partitions[kept_rows]], _rows_in(fresh, now.partition_keys)])
    segments = pa.concat_tables([kept, fresh])
    if np.any(rows_in[1:] < rows_in[:-1]):
        order = np.argsort(rows_in, kind="stable")  # a partition's rows are all kept or all fresh
        segments, rows_in = segments.take(pa.array(order)), rows_in[order]
    return segments, rows_in


def keys_of(table: pa.Table) -> pa.Array:
    """One string per row's (topic, partition), to match rows of two tables by
    partition: topic names never hold the separator."""
    # cast: an empty table read through ``sqlite3`` has columns of type null
    topic, partition = (pc.cast(table[name], pa.string()) for name in ("topic", "partition"))
    joined = pc.binary_join_element_wise(topic, partition, "\x1f")
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


def _rows_in(segments: pa.Table, partition_keys: pa.Array) -> np.ndarray:
    """Each of ``segments``' row in the partitions of ``partition_keys`` (a
    partition's segments are consecutive: looked up once per partition)."""
    rows = segments.num_rows
    if rows == 0:
        return np.zeros(0, dtype=np.int64)
    topic, partition = segments["topic"], segments["partition"].to_numpy()
    changed = pc.not_equal(topic[1:], topic[:-1]).to_numpy(zero_copy_only=False) | (partition[1:] != partition[:-1])
    starts = np.flatnonzero(np.concatenate([[True], changed]))
    found = pc.index_in(keys_of(segments.take(pa.array(starts))), value_set=partition_keys)
    return np.repeat(pc.fill_null(found, -1).to_numpy(), np.diff(np.append(starts, rows)))


def read_in_child(database: Path, names: Sequence[str] | None) -> CatalogTables:
    """Every table read by ADBC in a child process (see the module's docstring)."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "engine.catalog.bulk_reads", str(database)],
            input=json.dumps(None if names is None else list(names)).encode(),
            capture_output=True,
            check=False,
        )
    except OSError as error:
        raise StoreError(f"cannot read the catalog {database}: {error}") from None
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        reason = said[-1] if said else f"exit status {done.returncode}"
        if done.returncode == _DAMAGED:
            raise CatalogDamaged(f"the catalog {database} is damaged ({reason}); {REMEDY}")
        raise StoreError(f"cannot read the catalog {database}: {reason}")
    stream = pa.BufferReader(done.stdout)
    return CatalogTables.of({key: pa.ipc.open_stream(stream).read_all() for key in _QUERIES}, whole=names is None)


def _where(query: str, names: Sequence[str] | None) -> tuple[str, tuple[str, ...]]:
    """The ``where`` that limits ``query`` to ``names`` (nothing if None), and its parameters."""
    if names is None or query in _WHOLE:
        return (" WHERE 1" if query == _SUBSCRIBED else ""), ()
    column = _TOPIC_COLUMN.get(query, "topic")
    return f" WHERE {column} IN ({', '.join('?' * len(names))})", tuple(names)


def _rows_as_table(connection: Any, query: str, names: Sequence[str] | None) -> pa.Table:
    where, params = _where(query, names)
    cursor = connection.execute(query.format(where=where), params)
    return _as_table([d[0] for d in cursor.description], cursor.fetchall())


def _as_table(columns: list[str], rows: list[tuple]) -> pa.Table:
    values = list(zip(*rows)) if rows else [() for _ in columns]
    return pa.table({name: pa.array(column) for name, column in zip(columns, values)})


def _stream_tables(database: Path, names: Sequence[str] | None, out: BinaryIO) -> None:
    """The child's side: every table through ADBC, in one read transaction, to ``out``."""
    import adbc_driver_sqlite.dbapi as adbc

    # Not autocommit: the driver holds one transaction, so every read sees one instant.
    connection = adbc.connect(f"{database.resolve().as_uri()}?mode=ro", autocommit=False)
    try:
        with connection.cursor() as cursor:
            for query in _QUERIES.values():
                where, params = _where(query, names)
                cursor.execute(query.format(where=where), params)
                table = cursor.fetch_arrow_table()
                with pa.ipc.new_stream(out, table.schema) as writer:
                    writer.write_table(table)
        connection.rollback()
    finally:
        connection.close()


class _NoPandas(importlib.abc.MetaPathFinder):
    """Makes pandas unimportable. ADBC's DB-API imports ``pyarrow.dataset``, which
    imports pandas when it is installed (pyspark's Connect client needs it): two thirds
    of the child's imports, paid by every snapshot, for a reader that makes no frame."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> None:
        if name.partition(".")[0] == "pandas":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def main() -> int:
    """``python -m engine.catalog.bulk_reads DATABASE`` with the topics (a JSON list,
    or null for all) on stdin: the tables as Arrow IPC streams on stdout."""
    sys.meta_path.insert(0, _NoPandas())
    from adbc_driver_manager import Error as AdbcError

    database = Path(sys.argv[1])
    names = json.loads(sys.stdin.read())
    try:
        _stream_tables(database, names, sys.stdout.buffer)
    except (AdbcError, OSError) as error:  # the parent turns it into one line
        text = str(error).splitlines()[0] if str(error) else type(error).__name__
        print(text, file=sys.stderr)
        return _DAMAGED if "malformed" in text or "not a database" in text else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
