"""The catalog: topics, policy overrides, partitions, segments, groups, positions.

Every write runs in one ``BEGIN IMMEDIATE`` transaction. The segment files are the
truth about what was appended; the catalog mirrors them after each append (under the
partition lock) and is reconciled from the files when a writer opens a partition.

What the files cannot tell (topics, policies, log starts, groups, positions) is also
kept beside them (engine/catalog/metadata_files.py), so that a lost catalog can be
rebuilt: temporary triggers of this connection note which topics a transaction
changed, and once it commits their files are rewritten (see that module for when).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import sqlite_utils

from engine.catalog import metadata_files
from engine.catalog.anchors import READING_SPAN_MS, Anchors
from engine.catalog.damage import REMEDY, CheckedConnection, damaged, holds_topics
from engine.catalog.database import (
    connect,
    connect_read_only,
    is_exclusive,
    read_transaction,
    select_rows,
    write_transaction,
)
from engine.catalog.metadata_files import GroupMeta, TopicMeta
from engine.catalog.schema import ensure_schema
from engine.errors import AlreadyExists, CatalogDamaged, EbbError, NotFound
from engine.journal.schema import ensure_journal_schema
from engine.journal.state import EngineState
from engine.store.segment import SegmentInfo, describe

if TYPE_CHECKING:
    from engine.catalog.bulk_reads import CatalogTables

GroupKind = Literal["subscriber", "reader"]
StartFrom = Literal["earliest", "latest"]


@dataclass(frozen=True, slots=True)
class TopicRow:
    name: str
    partitions: int
    created_at: int


@dataclass(frozen=True, slots=True)
class PartitionRow:
    topic: str
    partition: int
    log_start_offset: int
    next_offset: int


@dataclass(frozen=True, slots=True)
class GroupRow:
    topic: str
    name: str
    kind: GroupKind
    start_from: StartFrom
    created_at: int
    #: partition -> (position, committed at ms)
    positions: dict[int, tuple[int, int]]


@dataclass(frozen=True, slots=True)
class QuarantinedRange:
    """Offsets ``[base_offset, next_offset)`` of a partition whose records are gone:
    their segment was quarantined as corrupt (``path``: where it went, relative to the
    data directory) or its file was missing (``path`` None)."""

    topic: str
    partition: int
    base_offset: int
    next_offset: int
    path: str | None
    reason: str
    quarantined_at: int


def _has_table(db: sqlite_utils.Database, name: str) -> bool:
    found = db.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone()
    return found is not None


def _segment(row: Mapping) -> SegmentInfo:
    return SegmentInfo(
        row["base_offset"],
        row["next_offset"],
        row["size_bytes"],
        row["first_timestamp"],
        row["max_timestamp"],
        bool(row["sealed"]),
    )


#: Temporary (this connection's own) triggers that note the topics whose metadata
#: files a write changes: ``urgent`` 1 to rewrite after the commit, 0 at the latest
#: when the catalog is closed or a prune cycle ends; the topic '' (a cycle finished)
#: asks for every topic. Plain inserts (no key, no OR REPLACE): a conflict clause in
#: a trigger gives way to the triggering statement's own (an upsert's), and fails.
#: ``ENGINE_MARK`` is noted for ``engine.json`` (never a topic's name: those take no ``*``).
ENGINE_MARK = "*engine"
#: topics whose metadata files are rewritten in one write transaction (the lock held
#: for a batch, not for every topic of a large catalog at once)
_METADATA_BATCH = 200
#: (trigger, event, the topic it changes, condition): each notes an urgent rewrite
_URGENT_CHANGES = (
    ("topic_new", "INSERT ON main.topics", "NEW.name", None),
    ("topic_gone", "DELETE ON main.topics", "OLD.name", None),
    ("policy_new", "INSERT ON main.policies", "NEW.topic", None),
    ("policy_gone", "DELETE ON main.policies", "OLD.topic", None),
    ("policy_set", "UPDATE ON main.policies", "NEW.topic", None),
    (
        "log_start",
        "UPDATE OF log_start_offset ON main.partitions",
        "NEW.topic",
        "NEW.log_start_offset != OLD.log_start_offset",
    ),
    ("group_new", "INSERT ON main.groups", "NEW.topic", None),
    ("group_gone", "DELETE ON main.groups", "OLD.topic", None),
    ("position_new", "INSERT ON main.positions", "NEW.topic", None),
    ("position_back", "UPDATE ON main.positions", "NEW.topic", "NEW.position < OLD.position"),
    ("cycle_end", "UPDATE OF finished ON main.cycles", "''", "NEW.finished IS NOT NULL"),
    ("engine_new", "INSERT ON main.engine_state", f"'{ENGINE_MARK}'", None),
    ("engine_set", "UPDATE ON main.engine_state", f"'{ENGINE_MARK}'", None),
)
_TRACKING = "\n".join(
    [
        "CREATE TEMP TABLE IF NOT EXISTS metadata_dirty (topic TEXT NOT NULL, urgent INTEGER NOT NULL);",
        *(
            f"CREATE TEMP TRIGGER IF NOT EXISTS md_{name} AFTER {event} {f'WHEN {when}' if when else ''}"
            f" BEGIN INSERT INTO metadata_dirty VALUES ({topic}, 1); END;"
            for name, event, topic, when in _URGENT_CHANGES
        ),
        """CREATE TEMP TRIGGER IF NOT EXISTS md_position_on AFTER UPDATE ON main.positions
            WHEN NEW.position >= OLD.position
            BEGIN INSERT INTO metadata_dirty SELECT NEW.topic, 0
                WHERE NOT EXISTS (SELECT 1 FROM metadata_dirty WHERE topic = NEW.topic); END;""",
    ]
)


class Catalog:
    def __init__(self, db: sqlite_utils.Database, root: Path | None = None) -> None:
        self.db = db
        #: the data directory whose metadata files this catalog keeps (None: none kept)
        self.root = root
        self._flushing = False
        self._closed = False
        #: (device, inode) of the file this connection opened (None: not checked)
        self._identity: tuple[int, int] | None = None
        #: inside :meth:`write`: a write opened within it joins it
        self._writing = False
        #: why the metadata files could not be brought up to the catalog at the last
        #: try (None: they were, or nothing was due); what they lack stays noted
        self.metadata_unwritten: str | None = None

    @classmethod
    def open(cls, path: Path) -> Catalog:
        """Open the catalog of the data directory that ``path`` lies in; refused (with
        the remedy) when it is a directory, or missing or empty while that directory
        holds topics."""
        root = path.parent
        if path.is_dir():
            raise damaged(path, "is a directory, not a database file")
        if not path.exists() and holds_topics(root):
            raise damaged(path, f"is missing, and {root / 'topics'} holds topics")
        db = connect(path)
        try:
            if not _has_table(db, "topics") and holds_topics(root):
                raise damaged(path, f"holds no tables, and {root / 'topics'} holds topics")
            ensure_schema(db)
            # Here, not only by the broker: the cycle's trigger needs the journal's table.
            ensure_journal_schema(db)
            catalog = cls(db, root)
            catalog.track_metadata()
            st = path.stat()
            catalog._identity = (st.st_dev, st.st_ino)
        except BaseException:
            db.close()
            raise
        return catalog

    @classmethod
    def open_read_only(cls, path: Path, timeout: float) -> Catalog:
        """The catalog at ``path`` for reading only (a shell completer's): unlike
        :meth:`open`, it creates no tables, no triggers and no file, and keeps no
        metadata files, so closing it writes nothing."""
        return cls(connect_read_only(path, timeout))

    def track_metadata(self) -> None:
        """Keep the metadata files from now on (the journal's tables must exist)."""
        conn = self.db.conn
        conn.executescript(_TRACKING)
        if isinstance(conn, CheckedConnection):
            conn.on_commit = self._after_commit

    @property
    def damage(self) -> CatalogDamaged | None:
        """The damage a query of this catalog met, if any (nothing else will work)."""
        return getattr(self.db.conn, "damage", None)

    def close(self) -> None:
        """Write what the metadata files still lack, then close; closing twice is a no-op."""
        if self._closed:
            return
        self._closed = True
        self._try_flush_metadata(lazy=True)
        self.db.close()

    @contextmanager
    def write(self) -> Iterator[sqlite_utils.Database]:
        """``with catalog.write():`` — one atomic write transaction. One opened inside
        another joins it: a change made of two (a hold and its journal row) commits
        whole or not at all."""
        if self._writing:
            yield self.db
            return
        self._check_identity()
        with write_transaction(self.db) as db:
            self._writing = True
            try:
                yield db
            finally:
                self._writing = False

    def _check_identity(self) -> None:
        """Refuse to write to a catalog file that was deleted or replaced (by a
        rebuild) since this process opened it: its writes would reach no one."""
        if self._identity is None:
            return
        conn = self.db.conn
        if not isinstance(conn, CheckedConnection):
            return
        path = conn.path
        try:
            st = path.stat()
        except FileNotFoundError:
            st = None
        if st is None or (st.st_dev, st.st_ino) != self._identity:
            what = "was deleted" if st is None else "was replaced (rebuilt?)"
            error = CatalogDamaged(
                f"the catalog {path} {what} while this process had it open: restart it "
                f"(if the catalog is missing, {REMEDY} first)"
            )
            conn.damage = error
            raise error

    def read(self) -> AbstractContextManager[sqlite_utils.Database]:
        """``with catalog.read():`` — queries inside see one consistent state."""
        return read_transaction(self.db)

    def bulk_tables(self, names: Sequence[str] | None, since: CatalogTables | None = None) -> CatalogTables:
        """The tables of ``names``'s topics (every topic if None) into Arrow, in bulk,
        from one consistent state (engine/catalog/bulk_reads.py); ``since``, an
        earlier read of every topic, spares re-reading the segments nobody wrote since."""
        # Imported here: Arrow costs a command that never plans 0.2 s.
        from engine.catalog.bulk_reads import read_tables

        (_seq, _name, path) = self.db.conn.execute("PRAGMA database_list").fetchone()
        with self.read():
            return read_tables(self.db.conn, Path(path), names, child_allowed=not is_exclusive(self.db), since=since)

    def _one(self, sql: str, params: tuple = ()) -> Mapping | None:
        rows = list(select_rows(self.db, sql, params))
        return rows[0] if rows else None

    # -- metadata files -------------------------------------------------------------

    def _after_commit(self) -> None:
        # The change is committed (acknowledged): a file that cannot be written now
        # stays noted and is retried after the next commit; `ebb verify` reports it.
        if not self._flushing:
            self._try_flush_metadata(lazy=False)

    def _try_flush_metadata(self, *, lazy: bool) -> None:
        """:meth:`flush_metadata`, its failure kept in :attr:`metadata_unwritten` for
        the caller to report: the change it follows is committed whatever happens."""
        try:
            self.flush_metadata(lazy=lazy)
        except OSError as error:
            self.metadata_unwritten = describe(error)
        except EbbError as error:
            self.metadata_unwritten = str(error)
        else:
            self.metadata_unwritten = None

    def flush_metadata(self, *, lazy: bool) -> None:
        """Rewrite the metadata files of the topics this connection changed: the
        urgent ones, and with ``lazy`` the others too."""
        if self.root is None:
            return
        rows = self.db.conn.execute("SELECT topic, urgent FROM temp.metadata_dirty").fetchall()
        names = {topic for topic, urgent in rows if urgent or lazy}
        if "" in names:
            names = (names - {""}) | {t.name for t in self.topics()}
            self.db.conn.execute("DELETE FROM temp.metadata_dirty WHERE topic = ''")
        ordered = sorted(names)
        for start in range(0, len(ordered), _METADATA_BATCH):
            self._write_metadata_of(ordered[start : start + _METADATA_BATCH])

    def _write_engine_file(self) -> None:
        assert self.root is not None
        metadata_files.replace_file(
            self.root / metadata_files.ENGINE_FILE, metadata_files.engine_bytes(EngineState(self).is_paused())
        )

    def write_metadata(self, topic: str) -> None:
        """Bring one topic's metadata files up to the catalog (removed with a deleted
        topic), or with :data:`ENGINE_MARK` the engine file."""
        self._write_metadata_of([topic])

    def _write_metadata_of(self, topics: Sequence[str]) -> None:
        """:meth:`write_metadata` of each of ``topics``, their rows read in bulk. The
        catalog's write lock is held meanwhile, so that another process cannot write
        an older state over a newer one; a file that cannot be written leaves every
        one of ``topics`` noted, to be tried again (the unchanged files are then only read)."""
        assert self.root is not None
        self._flushing = True
        try:
            with write_transaction(self.db):
                wanted = self._metadata_of([t for t in topics if t != ENGINE_MARK])
                for topic in topics:
                    topic_dir = self.root / "topics" / topic
                    try:
                        if topic == ENGINE_MARK:
                            self._write_engine_file()
                        elif topic not in wanted:
                            metadata_files.remove_files(topic_dir)
                        elif topic_dir.is_dir():
                            metadata_files.write_topic_files(topic_dir, *wanted[topic])
                    except FileNotFoundError:
                        continue  # the topic's directory went with it: left noted, as it was
                    self.db.conn.execute("DELETE FROM temp.metadata_dirty WHERE topic = ?", (topic,))
        finally:
            self._flushing = False

    def metadata(self, topic: str) -> tuple[TopicMeta, list[GroupMeta]] | None:
        """What the topic's metadata files should hold; None if it does not exist."""
        return self._metadata_of([topic]).get(topic)

    def _metadata_of(self, topics: Sequence[str]) -> dict[str, tuple[TopicMeta, list[GroupMeta]]]:
        """:meth:`metadata` of each of ``topics`` that exists, in one query per table
        (a cycle's end rewrites every topic's: six queries a topic took most of a
        cycle that deleted nothing, at a thousand topics)."""
        if not topics:
            return {}
        marks = ", ".join("?" * len(topics))

        def rows(sql: str) -> list[tuple]:
            return self.db.conn.execute(sql.format(marks=marks), tuple(topics)).fetchall()

        policies: dict[str, dict[str, str]] = {}
        for topic, field, value in rows("SELECT topic, field, value FROM policies WHERE topic IN ({marks})"):
            policies.setdefault(topic, {})[field] = value
        log_starts: dict[str, dict[int, int]] = {}
        for topic, partition, log_start in rows(
            "SELECT topic, partition, log_start_offset FROM partitions WHERE topic IN ({marks}) ORDER BY partition"
        ):
            log_starts.setdefault(topic, {})[partition] = log_start
        positions: dict[tuple[str, str], dict[int, tuple[int, int]]] = {}
        for topic, group, partition, position, committed_at in rows(
            "SELECT topic, group_name, partition, position, committed_at FROM positions"
            " WHERE topic IN ({marks}) ORDER BY partition"
        ):
            positions.setdefault((topic, group), {})[partition] = (position, committed_at)
        groups: dict[str, list[GroupMeta]] = {}
        for topic, name, kind, start_from, created_at in rows(
            "SELECT topic, name, kind, start_from, created_at FROM groups WHERE topic IN ({marks}) ORDER BY name"
        ):
            groups.setdefault(topic, []).append(
                GroupMeta(name, kind, start_from, created_at, positions.get((topic, name), {}))
            )
        return {
            name: (
                TopicMeta(name, partitions, created_at, policies.get(name, {}), log_starts.get(name, {})),
                groups.get(name, []),
            )
            for name, partitions, created_at in rows(
                "SELECT name, partitions, created_at FROM topics WHERE name IN ({marks})"
            )
        }

    # -- topics -----------------------------------------------------------------

    def topics(self) -> list[TopicRow]:
        return [
            TopicRow(**r) for r in select_rows(self.db, "SELECT name, partitions, created_at FROM topics ORDER BY name")
        ]

    def topic(self, name: str) -> TopicRow:
        row = self._one("SELECT name, partitions, created_at FROM topics WHERE name = ?", (name,))
        if row is None:
            raise NotFound(f"topic {name!r} does not exist (see `ebb topic list`)")
        return TopicRow(**row)

    def has_topic(self, name: str) -> bool:
        return self._one("SELECT 1 FROM topics WHERE name = ?", (name,)) is not None

    def add_topic(self, name: str, partitions: int, now_ms: int) -> None:
        """Insert a topic with its partitions (each with one empty active segment);
        its policy overrides go through :meth:`replace_overrides`, which journals them."""
        if self.has_topic(name):
            raise AlreadyExists(f"topic {name!r} already exists")
        self.db.table("topics").insert({"name": name, "partitions": partitions, "created_at": now_ms})
        self.db.table("partitions").insert_all(
            [{"topic": name, "partition": p, "log_start_offset": 0, "next_offset": 0} for p in range(partitions)]
        )
        self.db.table("segments").insert_all(
            [
                {
                    "topic": name,
                    "partition": p,
                    "base_offset": 0,
                    "next_offset": 0,
                    "size_bytes": 0,
                    "first_timestamp": None,
                    "max_timestamp": None,
                    "sealed": 0,
                }
                for p in range(partitions)
            ]
        )

    def remove_topic(self, name: str) -> None:
        self.topic(name)
        self.db.execute("DELETE FROM segments WHERE topic = ?", (name,))
        self.db.execute("DELETE FROM topics WHERE name = ?", (name,))

    # -- policies ---------------------------------------------------------------

    def overrides(self, topic: str) -> dict[str, str]:
        return {
            r["field"]: r["value"]
            for r in select_rows(self.db, "SELECT field, value FROM policies WHERE topic = ?", (topic,))
        }

    def replace_overrides(
        self, topic: str, new: Mapping[str, str], *, actor: str, now_ms: int
    ) -> list[tuple[str, str | None, str | None]]:
        """Store a topic's new overrides and journal each field that changed."""
        old = self.overrides(topic)
        changes = [
            (field, old.get(field), new.get(field))
            for field in sorted(set(old) | set(new))
            if old.get(field) != new.get(field)
        ]
        self.db.execute("DELETE FROM policies WHERE topic = ?", (topic,))
        self.db.table("policies").insert_all([{"topic": topic, "field": f, "value": v} for f, v in new.items()])
        self.db.table("policy_changes").insert_all(
            [{"time": now_ms, "actor": actor, "topic": topic, "field": f, "old": o, "new": n} for f, o, n in changes]
        )
        return changes

    # -- partitions and segments ----------------------------------------------------

    def partitions(self, topic: str) -> list[PartitionRow]:
        return [
            PartitionRow(**r)
            for r in select_rows(
                self.db,
                "SELECT topic, partition, log_start_offset, next_offset FROM partitions"
                " WHERE topic = ? ORDER BY partition",
                (topic,),
            )
        ]

    def partition(self, topic: str, partition: int) -> PartitionRow:
        row = self._one(
            "SELECT topic, partition, log_start_offset, next_offset FROM partitions WHERE topic = ? AND partition = ?",
            (topic, partition),
        )
        if row is None:
            count = self.topic(topic).partitions
            raise NotFound(f"topic {topic!r} has no partition {partition} (it has partitions 0..{count - 1})")
        return PartitionRow(**row)

    def segments(self, topic: str, partition: int) -> list[SegmentInfo]:
        return [
            _segment(r)
            for r in select_rows(
                self.db,
                "SELECT * FROM segments WHERE topic = ? AND partition = ? ORDER BY base_offset",
                (topic, partition),
            )
        ]

    def cut_candidates(self, topic: str, partition: int, log_start: int, theta: int) -> Iterator[int]:
        """Base offsets of the partition's segments that may hold its first record
        >= ``theta`` at or above ``log_start``, oldest first: a segment whose max
        timestamp is below θ holds none."""
        for (base,) in self.db.conn.execute(
            "SELECT base_offset FROM segments WHERE topic = ? AND partition = ? AND next_offset > ?"
            " AND max_timestamp >= ? ORDER BY base_offset",
            (topic, partition, log_start, theta),
        ):
            yield base

    def update_segments(self, topic: str, partition: int, infos: Iterable[SegmentInfo], next_offset: int) -> None:
        """Record the new extent of segments an append or roll changed.

        One statement with the values bound, not sqlite-utils' ``upsert_all``: that
        reads the schema (the table's columns, whether it exists) on every call, and
        every append calls this: it was half of a single-record produce's SQL."""
        self.db.conn.executemany(
            "INSERT INTO segments (topic, partition, base_offset, next_offset, size_bytes, first_timestamp,"
            " max_timestamp, sealed) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (topic, partition, base_offset) DO UPDATE SET next_offset = excluded.next_offset,"
            " size_bytes = excluded.size_bytes, first_timestamp = excluded.first_timestamp,"
            " max_timestamp = excluded.max_timestamp, sealed = excluded.sealed",
            [
                (
                    topic,
                    partition,
                    s.base_offset,
                    s.next_offset,
                    s.size_bytes,
                    s.first_timestamp,
                    s.max_timestamp,
                    int(s.sealed),
                )
                for s in infos
            ],
        )
        self.db.conn.execute(
            "UPDATE partitions SET next_offset = ? WHERE topic = ? AND partition = ?", (next_offset, topic, partition)
        )

    def reconcile_segments(self, topic: str, partition: int, infos: list[SegmentInfo]) -> bool:
        """Make the catalog's segments exactly the ones on disk, and the partition's
        next offset their end; True if anything differed.

        Only the rows that differ are written: the executor calls this after each
        segment it deletes, and rewriting every row made a cycle quadratic in the
        partition's segments (64 ms a call at 3,000), all under the partition lock."""
        current = {s.base_offset: s for s in self.segments(topic, partition)}
        wanted = {s.base_offset: s for s in infos}
        gone = [base for base in current if base not in wanted]
        changed = [s for base, s in wanted.items() if current.get(base) != s]
        if not gone and not changed and self.partition(topic, partition).next_offset == infos[-1].next_offset:
            return False
        self.db.conn.executemany(
            "DELETE FROM segments WHERE topic = ? AND partition = ? AND base_offset = ?",
            [(topic, partition, base) for base in gone],
        )
        self.update_segments(topic, partition, changed, infos[-1].next_offset)
        return True

    def quarantined(self, topic: str, partition: int) -> list[QuarantinedRange]:
        return [
            QuarantinedRange(**r)
            for r in select_rows(
                self.db,
                "SELECT * FROM quarantined WHERE topic = ? AND partition = ? ORDER BY base_offset",
                (topic, partition),
            )
        ]

    def add_quarantined(self, lost: QuarantinedRange) -> None:
        self.db.table("quarantined").upsert(
            {
                "topic": lost.topic,
                "partition": lost.partition,
                "base_offset": lost.base_offset,
                "next_offset": lost.next_offset,
                "path": lost.path,
                "reason": lost.reason,
                "quarantined_at": lost.quarantined_at,
            },
            pk=("topic", "partition", "base_offset"),
        )

    def set_log_start(self, topic: str, partition: int, log_start_offset: int) -> None:
        self.db.execute(
            "UPDATE partitions SET log_start_offset = ? WHERE topic = ? AND partition = ?",
            (log_start_offset, topic, partition),
        )

    # -- groups -------------------------------------------------------------------

    def groups(self, topic: str) -> list[GroupRow]:
        positions: dict[str, dict[int, tuple[int, int]]] = {}
        for r in select_rows(
            self.db,
            "SELECT group_name, partition, position, committed_at FROM positions WHERE topic = ? ORDER BY partition",
            (topic,),
        ):
            positions.setdefault(r["group_name"], {})[r["partition"]] = (r["position"], r["committed_at"])
        return [
            GroupRow(r["topic"], r["name"], r["kind"], r["start_from"], r["created_at"], positions.get(r["name"], {}))
            for r in select_rows(self.db, "SELECT * FROM groups WHERE topic = ? ORDER BY name", (topic,))
        ]

    def group(self, topic: str, name: str) -> GroupRow:
        for group in self.groups(topic):
            if group.name == name:
                return group
        self.topic(topic)
        raise NotFound(f"group {name!r} does not exist on topic {topic!r} (see `ebb group list {topic}`)")

    def add_group(
        self, topic: str, name: str, kind: GroupKind, start_from: StartFrom, positions: Mapping[int, int], now_ms: int
    ) -> None:
        if self._one("SELECT 1 FROM groups WHERE topic = ? AND name = ?", (topic, name)):
            raise AlreadyExists(f"group {name!r} already exists on topic {topic!r}")
        self.db.table("groups").insert(
            {"topic": topic, "name": name, "kind": kind, "start_from": start_from, "created_at": now_ms}
        )
        self.db.table("positions").insert_all(
            [
                {"topic": topic, "group_name": name, "partition": p, "position": o, "committed_at": now_ms}
                for p, o in positions.items()
            ]
        )

    def remove_group(self, topic: str, name: str) -> None:
        self.group(topic, name)
        self.db.execute("DELETE FROM groups WHERE topic = ? AND name = ?", (topic, name))

    def set_position(self, topic: str, group: str, partition: int, position: int, at_ms: int) -> None:
        """Put a group somewhere else (``ebb group move``, a repair, a rebuild): its
        reading anchors go, what it read before says nothing of its pace from there."""
        self._put_position(topic, group, partition, position, at_ms, Anchors())

    def commit_position(
        self,
        topic: str,
        group: str,
        partition: int,
        position: int,
        at_ms: int,
        *,
        skipped: int = 0,
        span_ms: int = READING_SPAN_MS,
    ) -> None:
        """A consumer's commit: rotates its reading anchors (engine/catalog/anchors.py).
        ``skipped``: offsets of the move that were not read (a reader below the log
        start reads on from there)."""
        row = self._position_row(topic, group, partition)
        old = None if row is None else row["position"] + skipped
        anchors = Anchors.of(row).shifted(skipped).committed(old, position, at_ms, span_ms)
        self._put_position(topic, group, partition, position, at_ms, anchors)

    def move_position(self, topic: str, group: str, partition: int, position: int, committed_at: int) -> None:
        """An engine move (a TTL skip, an eviction): not reading, so the commit time
        stays and the anchors shift by as much (the group's pace stays its own)."""
        row = self._position_row(topic, group, partition)
        anchors = Anchors.of(row).shifted(0 if row is None else position - row["position"])
        self._put_position(topic, group, partition, position, committed_at, anchors)

    def _position_row(self, topic: str, group: str, partition: int) -> Mapping | None:
        return self._one(
            "SELECT * FROM positions WHERE topic = ? AND group_name = ? AND partition = ?", (topic, group, partition)
        )

    def _put_position(
        self, topic: str, group: str, partition: int, position: int, at_ms: int, anchors: Anchors
    ) -> None:
        self.db.table("positions").upsert(
            {
                "topic": topic,
                "group_name": group,
                "partition": partition,
                "position": position,
                "committed_at": at_ms,
                **anchors.columns(),
            },
            pk=("topic", "group_name", "partition"),
        )

    def reading_anchors(self, topics: Collection[str]) -> list[tuple[Any, ...]]:
        """``(topic, group, partition, position, committed_at, anchor position,
        anchor time)`` of every position of ``topics`` that has an older anchor."""
        rows = self.db.execute(
            "SELECT topic, group_name, partition, position, committed_at, anchor_position, anchor_at"
            " FROM positions WHERE anchor_at IS NOT NULL"
        ).fetchall()
        return [tuple(r) for r in rows if r[0] in topics]

    def never_committed(self, topics: Collection[str]) -> set[tuple[str, str]]:
        """``(topic, group)`` of every group of ``topics`` that no consumer has
        committed for since it was created: its creation is not a read.

        Creation stamps every position with the group's ``created_at`` and no anchor;
        a commit always sets the newer anchor (engine/catalog/anchors.py), even in the
        millisecond the group was created, and moves that are not reading (a TTL skip,
        an eviction, ``ebb group move``, a repair) keep the commit time. So a group
        whose positions all still have their creation's time and no anchor never
        committed; and one that did still tells so once a move or a rebuild cleared its
        anchors, by a commit time other than its creation's (unless that commit came in
        the millisecond it was created)."""
        rows = self.db.execute(
            "SELECT g.topic, g.name FROM groups g"
            " JOIN positions p ON p.topic = g.topic AND p.group_name = g.name"
            " GROUP BY g.topic, g.name"
            " HAVING MAX(p.committed_at != g.created_at OR p.next_anchor_at IS NOT NULL) = 0"
        ).fetchall()
        return {(topic, group) for topic, group in rows if topic in topics}
