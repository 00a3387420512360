"""The catalog: topics, policy overrides, partitions, segments, groups, positions.

Every write runs in one ``BEGIN IMMEDIATE`` transaction. The segment files are the
truth about what was appended; the catalog mirrors them after each append (under the
partition lock) and is reconciled from the files when a writer opens a partition.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import sqlite_utils

from engine.catalog.database import connect, read_transaction, write_transaction
from engine.catalog.schema import ensure_schema
from engine.errors import AlreadyExists, NotFound
from engine.store.segment import SegmentInfo

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


def _segment(row: Mapping) -> SegmentInfo:
    return SegmentInfo(
        row["base_offset"],
        row["next_offset"],
        row["size_bytes"],
        row["first_timestamp"],
        row["max_timestamp"],
        bool(row["sealed"]),
    )


class Catalog:
    def __init__(self, db: sqlite_utils.Database) -> None:
        self.db = db

    @classmethod
    def open(cls, path: Path) -> Catalog:
        db = connect(path)
        ensure_schema(db)
        return cls(db)

    def close(self) -> None:
        self.db.close()

    def write(self) -> AbstractContextManager[sqlite_utils.Database]:
        """``with catalog.write():`` — one atomic write transaction."""
        return write_transaction(self.db)

    def read(self) -> AbstractContextManager[sqlite_utils.Database]:
        """``with catalog.read():`` — queries inside see one consistent state."""
        return read_transaction(self.db)

    def _one(self, sql: str, params: tuple = ()) -> Mapping | None:
        rows = list(self.db.query(sql, params))
        return rows[0] if rows else None

    # -- topics -----------------------------------------------------------------

    def topics(self) -> list[TopicRow]:
        return [TopicRow(**r) for r in self.db.query("SELECT name, partitions, created_at FROM topics ORDER BY name")]

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
                    "topic": name, "partition": p, "base_offset": 0, "next_offset": 0, "size_bytes": 0,
                    "first_timestamp": None, "max_timestamp": None, "sealed": 0,
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
        return {r["field"]: r["value"] for r in self.db.query("SELECT field, value FROM policies WHERE topic = ?", (topic,))}

    def replace_overrides(self, topic: str, new: Mapping[str, str], *, actor: str, now_ms: int) -> list[tuple[str, str | None, str | None]]:
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

    def policy_changes(self, topic: str | None = None) -> list[dict]:
        # Only a fixed clause is interpolated; the topic is a parameter.
        where, params = ("WHERE topic = ?", (topic,)) if topic else ("", ())
        return [dict(r) for r in self.db.query(f"SELECT * FROM policy_changes {where} ORDER BY id", params)]

    # -- partitions and segments ----------------------------------------------------

    def partitions(self, topic: str) -> list[PartitionRow]:
        return [
            PartitionRow(**r)
            for r in self.db.query(
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
            for r in self.db.query(
                "SELECT * FROM segments WHERE topic = ? AND partition = ? ORDER BY base_offset", (topic, partition)
            )
        ]

    def update_segments(self, topic: str, partition: int, infos: Iterable[SegmentInfo], next_offset: int) -> None:
        """Record the new extent of segments an append or roll changed."""
        self.db.table("segments").upsert_all(
            [
                {
                    "topic": topic, "partition": partition, "base_offset": s.base_offset,
                    "next_offset": s.next_offset, "size_bytes": s.size_bytes,
                    "first_timestamp": s.first_timestamp, "max_timestamp": s.max_timestamp,
                    "sealed": int(s.sealed),
                }
                for s in infos
            ],
            pk=("topic", "partition", "base_offset"),
        )
        self.db.execute(
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
            for r in self.db.query(
                "SELECT * FROM quarantined WHERE topic = ? AND partition = ? ORDER BY base_offset", (topic, partition)
            )
        ]

    def add_quarantined(self, lost: QuarantinedRange) -> None:
        self.db.table("quarantined").upsert(
            {
                "topic": lost.topic, "partition": lost.partition, "base_offset": lost.base_offset,
                "next_offset": lost.next_offset, "path": lost.path, "reason": lost.reason,
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
        for r in self.db.query(
            "SELECT group_name, partition, position, committed_at FROM positions WHERE topic = ? ORDER BY partition",
            (topic,),
        ):
            positions.setdefault(r["group_name"], {})[r["partition"]] = (r["position"], r["committed_at"])
        return [
            GroupRow(r["topic"], r["name"], r["kind"], r["start_from"], r["created_at"], positions.get(r["name"], {}))
            for r in self.db.query("SELECT * FROM groups WHERE topic = ? ORDER BY name", (topic,))
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
        self.db.table("positions").upsert(
            {"topic": topic, "group_name": group, "partition": partition, "position": position, "committed_at": at_ms},
            pk=("topic", "group_name", "partition"),
        )
