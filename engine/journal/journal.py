"""The journal (SPEC §6): every prune cycle and every action the engine takes.

Rows are appended and never edited, with one exception that the executor's crash
safety needs: an action recorded as ``planned`` before it is carried out later gets
its final status (``applied``, ``rolled_back`` or ``skipped``), once. The only
deletion is the journal's own retention.

Actions of a prune cycle carry its id; a manual operation (truncate, purge, hold,
pause...) is journaled with ``cycle`` null unless it runs as a cycle of its own.
Timestamps are epoch milliseconds; ``details`` is a JSON object. Reads hand out the
typed rows of :mod:`engine.journal.rows` (policy changes, the catalog's table, as dicts).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from engine.catalog.catalog import Catalog
from engine.catalog.database import select_rows
from engine.errors import NotFound
from engine.journal import trimmed
from engine.journal.rows import Action, ActionStatus, Cycle, CycleStatus
from engine.journal.schema import ensure_cycle_phases, ensure_journal_schema, write_or_join

#: every kind of action; a new kind of operation adds its name here
ACTION_KINDS = frozenset(
    {
        # a prune cycle's changes
        "delete_segment",
        "move_log_start",
        "group_expired",
        "ttl_advance",
        "backlog_eviction",
        "reader_moved",
        "subscriber_overrun",
        "roll",
        "quota_exceeded",
        "quota_cleared",
        # what a cycle did not do
        "skipped",
        "topic_failed",
        # manual operations
        "manual_move",
        "hold",
        "release",
        "pause",
        "resume",
        "purge",
        "truncate",
        "topic_deleted",
        # ``ebb verify --repair``: corrupt or missing data set aside, and what it fixed
        "quarantine",
        "repair",
    }
)

#: stable field names of the policy-change export (SPEC §7: fields may be added, never renamed)
POLICY_CHANGE_FIELDS = ("id", "time", "actor", "topic", "field", "old", "new")


@dataclass(frozen=True)
class Entry:
    """One action to journal; who, when and in which cycle are given on append."""

    action: str
    topic: str | None = None
    partition: int | None = None
    segment: int | None = None
    start_offset: int | None = None
    end_offset: int | None = None
    messages: int | None = None
    bytes: int | None = None
    reason: str | None = None
    details: Mapping[str, Any] | None = None


#: what the journal's retention deletes (``:cutoff``: now less the retention): a
#: cycle still ``running`` and its actions are kept whatever their age (recovery
#: needs them)
_TRIMMED_CYCLES = "started < :cutoff AND status != 'running'"
_TRIMMED_ACTIONS = "time < :cutoff AND (cycle IS NULL OR cycle NOT IN (SELECT id FROM cycles WHERE status = 'running'))"


@dataclass(frozen=True)
class RetentionResult:
    """Rows removed by one pass of the journal's retention."""

    cycles: int
    actions: int
    policy_changes: int


def _json(value: Mapping[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, separators=(",", ":"))


def _inserted_id(cursor: sqlite3.Cursor) -> int:
    """The rowid of the row an INSERT just wrote (sqlite3 sets it on every INSERT)."""
    if cursor.lastrowid is None:
        raise TypeError("the statement inserted no row")
    return cursor.lastrowid


def _limit(limit: int | None) -> int:
    """A LIMIT parameter; None means all rows (SQLite reads -1 so)."""
    return -1 if limit is None else limit


class _Where:
    """A WHERE clause built from optional filters, every value a parameter; the terms
    are literals of this module, never input (tests/engine/test_access.py checks both)."""

    def __init__(self) -> None:
        self.terms: list[str] = []
        self.params: list[Any] = []

    def add(self, term: str, value: Any) -> None:
        if value is not None:
            self.terms.append(term)
            self.params.append(value)

    def sql(self) -> str:
        return f" WHERE {' AND '.join(self.terms)}" if self.terms else ""


class Journal:
    """The journal of one data directory, on its catalog's connection (so that a
    journal row commits in the same transaction as the change it records)."""

    def __init__(self, catalog: Catalog) -> None:
        self.db = catalog.db
        ensure_journal_schema(self.db)

    # -- appending ------------------------------------------------------------------

    def start_cycle(
        self,
        *,
        trigger: str,
        actor: str,
        scope: Sequence[str] | Literal["all"],
        now: int,
        started: int,
        spark_master: str | None,
        status: CycleStatus = "running",
        plan_ms: int | None = None,
    ) -> int:
        """Record a cycle whose plan took ``plan_ms`` to make (None: unknown); returns its id."""
        with write_or_join(self.db):
            ensure_cycle_phases(self.db)
            cursor = self.db.conn.execute(
                "INSERT INTO cycles (trigger, actor, scope, now, started, status, spark_master, plan_ms) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    trigger,
                    actor,
                    json.dumps(scope if scope == "all" else list(scope)),
                    now,
                    started,
                    status,
                    spark_master,
                    plan_ms,
                ),
            )
            return _inserted_id(cursor)

    def finish_cycle(
        self,
        cycle_id: int,
        *,
        status: CycleStatus,
        finished: int,
        planned: int,
        applied: int,
        bytes_freed: int,
        error: str | None = None,
    ) -> None:
        """Close a cycle: applying took from its start to ``finished``, and the whole
        cycle that plus its planning (unknown if the planning is)."""
        with write_or_join(self.db):
            ensure_cycle_phases(self.db)  # a cycle a process of an older version left running
            self.db.conn.execute(
                "UPDATE cycles SET status = ?, finished = ?, planned = ?, applied = ?, bytes_freed = ?, "
                "apply_ms = ? - started, duration_ms = plan_ms + (? - started), error = ? WHERE id = ?",
                (status, finished, planned, applied, bytes_freed, finished, finished, error, cycle_id),
            )

    def append(
        self,
        entries: Iterable[Entry],
        *,
        time: int,
        trigger: str,
        actor: str,
        status: ActionStatus,
        cycle: int | None = None,
    ) -> list[int]:
        """Append actions; returns their ids in order."""
        ids = []
        with write_or_join(self.db):
            for e in entries:
                if e.action not in ACTION_KINDS:
                    raise ValueError(f"unknown journal action {e.action!r}")
                cursor = self.db.conn.execute(
                    "INSERT INTO actions (cycle, time, settled, trigger, actor, action, topic, partition, segment, "
                    "start_offset, end_offset, messages, bytes, reason, details, status) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        cycle,
                        time,
                        None if status == "planned" else time,
                        trigger,
                        actor,
                        e.action,
                        e.topic,
                        e.partition,
                        e.segment,
                        e.start_offset,
                        e.end_offset,
                        e.messages,
                        e.bytes,
                        e.reason,
                        _json(e.details),
                        status,
                    ),
                )
                ids.append(_inserted_id(cursor))
        return ids

    def settle(
        self, ids: Iterable[int], status: ActionStatus, *, time: int, details: Mapping[str, Any] | None = None
    ) -> None:
        """Give planned actions their final status, merging ``details`` into theirs.
        Actions already settled are left as they are: a status is final."""
        if status == "planned":
            raise ValueError("settle gives a final status, not 'planned'")
        with write_or_join(self.db):
            self.db.conn.executemany(
                "UPDATE actions SET status = ?, settled = ?, "
                "details = CASE WHEN ? IS NULL THEN details ELSE json_patch(COALESCE(details, '{}'), ?) END "
                "WHERE id = ? AND status = 'planned'",
                [(status, time, _json(details), _json(details), i) for i in ids],
            )

    # -- reading --------------------------------------------------------------------

    def cycle(self, cycle_id: int) -> Cycle:
        rows = list(select_rows(self.db, "SELECT * FROM cycles WHERE id = ?", (cycle_id,)))
        if not rows:
            raise NotFound(f"cycle {cycle_id} is not in the journal (see `ebb log`)")
        return Cycle.from_row(rows[0])

    def cycles(self, *, since: int | None = None, status: str | None = None, limit: int | None = 100) -> list[Cycle]:
        """Cycles started at or after ``since``, newest first."""
        where = _Where()
        where.add("started >= ?", since)
        where.add("status = ?", status)
        return [
            Cycle.from_row(r)
            for r in select_rows(
                self.db,
                f"SELECT * FROM cycles{where.sql()} ORDER BY started DESC, id DESC LIMIT ?",
                (*where.params, _limit(limit)),
            )
        ]

    def actions(
        self,
        *,
        since: int | None = None,
        topic: str | None = None,
        action: str | None = None,
        cycle: int | None = None,
        status: str | None = None,
        limit: int | None = 1000,
    ) -> list[Action]:
        """Actions recorded at or after ``since`` that match every filter given,
        newest first."""
        where = _Where()
        where.add("time >= ?", since)
        where.add("topic = ?", topic)
        where.add("action = ?", action)
        where.add("cycle = ?", cycle)
        where.add("status = ?", status)
        return [
            Action.from_row(r)
            for r in select_rows(
                self.db,
                f"SELECT * FROM actions{where.sql()} ORDER BY time DESC, id DESC LIMIT ?",
                (*where.params, _limit(limit)),
            )
        ]

    def policy_changes(
        self, *, since: int | None = None, topic: str | None = None, limit: int | None = 1000
    ) -> list[dict[str, Any]]:
        """Policy changes (written by the catalog) at or after ``since``, newest first."""
        where = _Where()
        where.add("time >= ?", since)
        where.add("topic = ?", topic)
        return [
            {f: r[f] for f in POLICY_CHANGE_FIELDS}
            for r in select_rows(
                self.db,
                f"SELECT * FROM policy_changes{where.sql()} ORDER BY time DESC, id DESC LIMIT ?",
                (*where.params, _limit(limit)),
            )
        ]

    def policy_version(self, topic: str) -> int:
        """Id of the topic's latest policy change, 0 if none (as the snapshot has it)."""
        row = self.db.conn.execute(
            "SELECT COALESCE(MAX(id), 0) FROM policy_changes WHERE topic = ?", (topic,)
        ).fetchone()
        return int(row[0])

    def mentions_topic(self, topic: str) -> bool:
        """Whether an action or a policy change names ``topic`` (a deleted topic's rows stay)."""
        row = self.db.conn.execute(
            "SELECT 1 FROM actions WHERE topic = ? UNION ALL SELECT 1 FROM policy_changes WHERE topic = ? LIMIT 1",
            (topic, topic),
        ).fetchone()
        return row is not None

    def latest_cycle_id(self) -> int:
        """Id of the newest cycle, 0 before the first."""
        return int(self.db.conn.execute("SELECT COALESCE(MAX(id), 0) FROM cycles").fetchone()[0])

    def unfinished_cycle_after(self, cycle_id: int, *, trigger: str, actor: str) -> int | None:
        """Id of the newest cycle after ``cycle_id`` of this trigger and actor that failed
        or is still running, if any."""
        row = self.db.conn.execute(
            "SELECT id FROM cycles WHERE id > ? AND trigger = ? AND actor = ? AND status IN ('failed', 'running')"
            " ORDER BY id DESC LIMIT 1",
            (cycle_id, trigger, actor),
        ).fetchone()
        return None if row is None else int(row[0])

    # -- retention --------------------------------------------------------------------

    def apply_retention(self, *, now: int, retention_ms: int | None) -> RetentionResult:
        """Delete journal rows older than ``retention_ms`` (None: keep everything),
        having added the cycles and deletions among them to the trimmed totals
        (engine/journal/trimmed.py), so that the metrics' counters never go down.

        Kept whatever their age: a cycle still ``running`` and its actions (recovery
        needs them), and each topic's latest policy change, whose id is the topic's
        policy version: deleting it could let a new change reuse the id and make a
        stale plan look current."""
        if retention_ms is None:
            return RetentionResult(0, 0, 0)
        cutoff = now - retention_ms
        with write_or_join(self.db):
            trimmed.carry(self.db.conn, cycles=_TRIMMED_CYCLES, actions=_TRIMMED_ACTIONS, cutoff=cutoff)
            actions = self.db.conn.execute(f"DELETE FROM actions WHERE {_TRIMMED_ACTIONS}", {"cutoff": cutoff})
            cycles = self.db.conn.execute(f"DELETE FROM cycles WHERE {_TRIMMED_CYCLES}", {"cutoff": cutoff})
            changes = self.db.conn.execute(
                "DELETE FROM policy_changes WHERE time < ? AND id NOT IN "
                "(SELECT MAX(id) FROM policy_changes GROUP BY topic)",
                (cutoff,),
            )
        return RetentionResult(cycles.rowcount, actions.rowcount, changes.rowcount)
