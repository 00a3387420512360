"""What the Journal view shows: the newest cycles and actions (SPEC §6), filtered in
SQL by cycle, action kind and topic so that a filter reaches rows older than the
bounded window, and the export of the actions on screen (CSV and JSON, the stable
fields of engine/journal/export.py).

Policy changes (``ebb log --policy-changes``) are a kind of their own,
:data:`POLICY_CHANGE`, picked like an action kind (not among "every kind": they are
not the engine's actions) and shown in the action fields, newest first (``reason``
reads ``retention_time 20s → 7s``; ``details`` holds field, old and new). They belong
to no cycle, so with a cycle filter there are none.

The view reads the journal and never edits it. An export writes files under the data
directory and nothing in the catalog, so it is allowed in read-only mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from console import format
from engine.broker import Broker
from engine.journal.export import write_csv, write_json
from engine.journal.journal import ACTION_KINDS, Journal
from engine.journal.rows import ACTION_FIELDS, Action, Cycle

#: at most this many of the newest cycles and of the newest matching actions are loaded
ROW_LIMIT = 500
#: the kind policy changes are shown as
POLICY_CHANGE = "policy_change"
#: what the kind picker offers, in order (None: every kind)
KINDS: tuple[str | None, ...] = (None, POLICY_CHANGE, *sorted(ACTION_KINDS))
EXPORTS_DIR = "exports"


@dataclass(frozen=True)
class JournalFilter:
    """Which actions are loaded; None matches everything."""

    cycle: int | None = None
    action: str | None = None
    topic: str | None = None

    @property
    def active(self) -> bool:
        return self != JournalFilter()

    def describe(self) -> str:
        """``cycle 3 · delete_segment · topic orders``; ``all`` without a filter."""
        parts = []
        if self.cycle is not None:
            parts.append(f"cycle {self.cycle}")
        if self.action is not None:
            parts.append(self.action)
        if self.topic is not None:
            parts.append(f"topic {self.topic}")
        return " · ".join(parts) or "all"


@dataclass(frozen=True)
class JournalData:
    now: int
    filter: JournalFilter
    #: newest first, journal rows (engine/journal/journal.py CYCLE_FIELDS)
    cycles: tuple[Cycle, ...]
    #: newest first, journal rows matching ``filter``
    actions: tuple[Action, ...]
    limit: int


def cycle_time(ms: int | None, cycle: Cycle) -> str:
    """One of a cycle's journaled times (``duration_ms``, ``plan_ms`` or ``apply_ms``),
    the same on every view: ``2.5 s``; ``-`` while it runs; ``unknown`` for what the
    journal never recorded (a cycle of an older version's journal, without planning)."""
    if ms is not None:
        return format.elapsed(ms)
    return "-" if cycle.finished is None else "unknown"


def cycle_took(cycle: Cycle) -> str:
    """``2.9 s (plan 400 ms, apply 2.5 s)``: the whole cycle, then its two parts."""
    return (
        f"{cycle_time(cycle.duration_ms, cycle)} "
        f"(plan {cycle_time(cycle.plan_ms, cycle)}, apply {cycle_time(cycle.apply_ms, cycle)})"
    )


def reason_text(action: Action) -> str:
    """An action's reason, the same in the Journal view and ``ebb log``: the plan's
    reason code; for a group's move or expiry (which have none) the group's name,
    which the operator looks for first; for a moved log start, where it went and what
    moved it (``cycle's cut to 1,200``, ``REPAIR to 1,200``)."""
    if action.action == "move_log_start" and action.end_offset is not None:
        to = format.count(action.end_offset)
        # The executor records no code (its cycle's cut moved it); a repair records
        # its own, and why in the details.
        if action.reason:
            return f"{action.reason} to {to}"
        return f"cycle's cut to {to}" if action.cycle is not None else f"moved to {to}"
    if action.reason:
        return action.reason
    group = (action.details or {}).get("group")
    return "" if group is None else f"group {group}"


def policy_value(value: str | None) -> str:
    """A policy field's value in a change; None (unset) is the default."""
    return "(default)" if value is None else value


def policy_change_row(change: dict[str, Any]) -> Action:
    """A policy change in the fields of an action (see the module docstring); its id
    is negated so that it never collides with an action's."""
    return Action(
        id=-change["id"],
        cycle=None,
        time=change["time"],
        settled=change["time"],
        trigger="manual",
        actor=change["actor"],
        action=POLICY_CHANGE,
        topic=change["topic"],
        partition=None,
        segment=None,
        start_offset=None,
        end_offset=None,
        messages=None,
        bytes=None,
        reason=f"{change['field']} {policy_value(change['old'])} → {policy_value(change['new'])}",
        details={"field": change["field"], "old": change["old"], "new": change["new"]},
        status="applied",
    )


def load_journal(broker: Broker, journal_filter: JournalFilter, *, limit: int = ROW_LIMIT) -> JournalData:
    catalog = broker.catalog
    kind, topic, cycle = journal_filter.action, journal_filter.topic, journal_filter.cycle
    with catalog.read():
        journal = Journal(catalog)
        cycles = journal.cycles(limit=limit)
        if kind != POLICY_CHANGE:
            actions = journal.actions(cycle=cycle, action=kind, topic=topic, limit=limit)
        elif cycle is None:
            actions = [policy_change_row(c) for c in journal.policy_changes(topic=topic, limit=limit)]
        else:
            actions = []  # a policy change belongs to no cycle
    return JournalData(broker.clock(), journal_filter, tuple(cycles), tuple(actions), limit)


def _free_stem(directory: Path, stem: str) -> str:
    """``stem``, or ``stem-2``..., whose CSV and JSON no earlier export has taken:
    two exports in one second never overwrite each other."""
    name, attempt = stem, 1
    while (directory / f"{name}.csv").exists() or (directory / f"{name}.json").exists():
        attempt += 1
        name = f"{stem}-{attempt}"
    return name


def export_actions(actions: Sequence[Action], root: Path, now: int) -> tuple[Path, Path]:
    """Write ``actions`` (in the order given) as
    ``<root>/exports/journal-<UTC time>.csv`` and ``.json``; returns both paths."""
    directory = root / EXPORTS_DIR
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    stamp = datetime.fromtimestamp(now / 1000, tz=UTC).strftime("%Y%m%dT%H%M%SZ")
    name = _free_stem(directory, f"journal-{stamp}")
    csv_path, json_path = directory / f"{name}.csv", directory / f"{name}.json"
    rows = [a.to_json() for a in actions]
    # "x": should another process take the name meanwhile, fail rather than overwrite
    with csv_path.open("x", encoding="utf-8", newline="") as out:
        write_csv(rows, ACTION_FIELDS, out)
    with json_path.open("x", encoding="utf-8") as out:
        write_json(rows, ACTION_FIELDS, out)
    return csv_path, json_path
