"""The journal's rows as the journal hands them out: one frozen dataclass per table
(engine/journal/schema.py), fields in the schema's order and with its names.

The field names are the exports' (SPEC §7: fields may be added, never renamed), so
:meth:`to_json` is the row as ``ebb log --json`` and the CSV export write it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

CycleStatus = Literal["running", "done", "failed", "interrupted", "dry_run", "paused"]
ActionStatus = Literal["planned", "applied", "rolled_back", "skipped"]


@dataclass(frozen=True)
class Cycle:
    """One prune cycle (table ``cycles``)."""

    id: int
    trigger: str
    actor: str
    #: the topics the cycle was asked to plan, or "all"
    scope: list[str] | Literal["all"]
    #: the planning instant (ms)
    now: int
    started: int
    #: None while it runs
    finished: int | None
    status: CycleStatus
    #: segment deletions planned and done
    planned: int
    applied: int
    bytes_freed: int
    spark_master: str | None
    #: the whole cycle, planning and applying (None while it runs, or unknown: a
    #: cycle journaled before planning times were)
    duration_ms: int | None
    error: str | None
    #: how long its plan took to make (snapshot and Spark; a previewed plan's own
    #: time) and how long applying took, from its start in the journal to its end
    plan_ms: int | None = None
    apply_ms: int | None = None

    @property
    def began(self) -> int:
        """When the cycle began, as the console and ``ebb log --cycles`` say it: its
        applying's start (``started``, when it was journaled) less its planning
        (``plan_ms``) where known, so that it plus ``duration_ms`` is ``finished``. A
        previewed plan (the console's prune now) counts the preview's own time, though
        the preview ran earlier."""
        return self.started - (self.plan_ms or 0)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Cycle:
        row = current_cycle_row(row)
        values = {f: row[f] for f in CYCLE_FIELDS}
        values["scope"] = json.loads(row["scope"])
        return cls(**values)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def current_cycle_row(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """A ``cycles`` row as the current schema has it. One of a journal that predates
    the planning and applying times (engine/journal/schema.py) had the applying alone
    as its duration: that is its ``apply_ms``, and its planning and whole are unknown."""
    if "apply_ms" in row:
        return row
    return {**row, "plan_ms": None, "apply_ms": row["duration_ms"], "duration_ms": None}


@dataclass(frozen=True)
class Action:
    """One action (table ``actions``); ``cycle`` is None for a manual operation
    outside any cycle."""

    id: int
    cycle: int | None
    #: when it was recorded, and when its status became final (None while planned)
    time: int
    settled: int | None
    trigger: str
    actor: str
    action: str
    topic: str | None
    partition: int | None
    #: the segment's base offset
    segment: int | None
    start_offset: int | None
    end_offset: int | None
    messages: int | None
    bytes: int | None
    #: the plan's reason code
    reason: str | None
    details: dict[str, Any] | None
    status: ActionStatus

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Action:
        values = {f: row[f] for f in ACTION_FIELDS}
        values["details"] = None if row["details"] is None else json.loads(row["details"])
        return cls(**values)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


#: stable field names of the exports, in the schema's order
CYCLE_FIELDS = tuple(f.name for f in fields(Cycle))
ACTION_FIELDS = tuple(f.name for f in fields(Action))
