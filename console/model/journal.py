"""What the Journal view shows: the newest cycles and actions (SPEC §6), filtered in
SQL by cycle, action kind and topic so that a filter reaches rows older than the
bounded window, and the export of the actions on screen (CSV and JSON, the stable
fields of engine/journal/export.py).

The view reads the journal and never edits it. An export writes files under the data
directory and nothing in the catalog, so it is allowed in read-only mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.broker import Broker
from engine.journal.export import write_csv, write_json
from engine.journal.journal import ACTION_FIELDS, ACTION_KINDS, Journal

#: at most this many of the newest cycles and of the newest matching actions are loaded
ROW_LIMIT = 500
#: the order the action-kind filter cycles through (None: every kind)
KIND_CYCLE: tuple[str | None, ...] = (None, *sorted(ACTION_KINDS))
EXPORTS_DIR = "exports"


@dataclass(frozen=True)
class JournalFilter:
    """Which actions are loaded; None matches everything."""

    cycle: int | None = None
    action: str | None = None
    topic: str | None = None

    def next_kind(self, step: int = 1) -> JournalFilter:
        """The filter with the next (``step`` 1) or previous (-1) action kind."""
        position = KIND_CYCLE.index(self.action) + step
        return replace(self, action=KIND_CYCLE[position % len(KIND_CYCLE)])

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
    cycles: tuple[dict[str, Any], ...]
    #: newest first, journal rows (ACTION_FIELDS) matching ``filter``
    actions: tuple[dict[str, Any], ...]
    limit: int


def load_journal(broker: Broker, journal_filter: JournalFilter, *, limit: int = ROW_LIMIT) -> JournalData:
    catalog = broker.catalog
    with catalog.read():
        journal = Journal(catalog)
        cycles = journal.cycles(limit=limit)
        actions = journal.actions(
            cycle=journal_filter.cycle, action=journal_filter.action, topic=journal_filter.topic, limit=limit
        )
    return JournalData(broker.clock(), journal_filter, tuple(cycles), tuple(actions), limit)


def _free_stem(directory: Path, stem: str) -> str:
    """``stem``, or ``stem-2``..., whose CSV and JSON no earlier export has taken:
    two exports in one second never overwrite each other."""
    name, attempt = stem, 1
    while (directory / f"{name}.csv").exists() or (directory / f"{name}.json").exists():
        attempt += 1
        name = f"{stem}-{attempt}"
    return name


def export_actions(rows: Sequence[dict[str, Any]], root: Path, now: int) -> tuple[Path, Path]:
    """Write ``rows`` (journal action rows, in the order given) as
    ``<root>/exports/journal-<UTC time>.csv`` and ``.json``; returns both paths."""
    directory = root / EXPORTS_DIR
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    stamp = datetime.fromtimestamp(now / 1000, tz=UTC).strftime("%Y%m%dT%H%M%SZ")
    name = _free_stem(directory, f"journal-{stamp}")
    csv_path, json_path = directory / f"{name}.csv", directory / f"{name}.json"
    # "x": should another process take the name meanwhile, fail rather than overwrite
    with csv_path.open("x", encoding="utf-8", newline="") as out:
        write_csv(rows, ACTION_FIELDS, out)
    with json_path.open("x", encoding="utf-8") as out:
        write_json(rows, ACTION_FIELDS, out)
    return csv_path, json_path
