"""A damaged or lost catalog, diagnosed and rebuilt from the data directory.

:func:`catalog_problems` says what is wrong with ``catalog.db`` without changing it:
missing or emptied while topic directories exist, unreadable, or failing SQLite's
``PRAGMA integrity_check``. :func:`rebuild_catalog` (``ebb verify --repair``) then
builds a new catalog beside it from what the data directory holds, as Kafka rebuilds
its state from its log directories:

- topics, partition counts, policy overrides and log starts from each topic's
  ``topic.json`` (engine/catalog/metadata_files.py); a topic directory without one
  (a crash between the commit of its creation and the file's write) comes back with
  as many partitions as it has directories and no overrides;
- segments from the segment files, the log start raised to the oldest segment held;
- groups and positions from ``groups.json``: at most one cycle old, never ahead of an
  acknowledged commit (a rebuilt group may read some records again, never skip one),
  clamped to each partition's end;
- the pause of all deletion from ``engine.json``.

The new catalog is built in ``catalog.db.rebuild`` and renamed over the old one only
once complete, after the damaged file (and its ``-wal``) moved to
``catalog.db.damaged-<UTC time>``; a crash before leaves the catalog missing, which
every command reports and the next ``--repair`` rebuilds again. The rebuild is
journaled (action ``repair``, reason ``CATALOG_REBUILT``) in the new journal, after
the old journal's rows (cycles, actions, policy changes, disk samples) as far as they can be read.
``ebb verify --repair`` then checks and repairs the rebuilt catalog against the files
as it would any other.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from engine.catalog.catalog import Catalog
from engine.catalog.damage import holds_topics, open_by
from engine.catalog.database import connect, write_transaction
from engine.catalog.metadata_files import (
    GroupMeta,
    MetadataInvalid,
    TopicMeta,
    read_groups,
    read_paused,
    read_topic,
)
from engine.catalog.schema import ensure_schema
from engine.datadir import DataDir
from engine.digits import is_digits
from engine.errors import CatalogDamaged, InvalidInput, StoreError
from engine.journal.journal import Entry, Journal
from engine.journal.salvage import salvage_history, salvage_samples
from engine.journal.schema import ensure_journal_schema
from engine.journal.state import EngineState
from engine.names import check_group_name, check_topic_name
from engine.policy.effective import resolve
from engine.store.partition import create_partition, live_bases, segment_infos
from engine.store.segment import Segment, SegmentInfo, fsync_dir

REBUILT = "CATALOG_REBUILT"
#: integrity-check problems named in the finding at most
MAX_LINES = 3
_SIDE_SUFFIXES = ("", "-wal", "-shm")


def catalog_problems(data: DataDir) -> list[str]:
    """What is wrong with the data directory's catalog file ([] if nothing): each a
    phrase completing "the catalog PATH ..."."""
    path = data.catalog_path
    if path.is_dir():
        return ["is a directory, not a database file"]
    if not path.exists():
        return [f"is missing, and {data.topics_root} holds topics"] if holds_topics(data.root) else []
    try:
        conn = sqlite3.connect(path, isolation_level=None)
    except sqlite3.Error as error:
        return [f"cannot be opened ({error})"]
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "topics" not in tables:
            return [f"holds no tables, and {data.topics_root} holds topics"] if holds_topics(data.root) else []
        rows = [r[0] for r in conn.execute("PRAGMA integrity_check(100)")]
    except sqlite3.DatabaseError as error:
        return [f"is damaged ({error})"]
    finally:
        conn.close()
    if rows == ["ok"]:
        return []
    # A row may hold several lines, under a "*** in database main ***" heading.
    lines = [line for row in rows for line in row.splitlines() if line and not line.startswith("***")]
    more = f" and {len(lines) - MAX_LINES} more" if len(lines) > MAX_LINES else ""
    return [f"fails SQLite's integrity check: {'; '.join(lines[:MAX_LINES])}{more}"]


@dataclass(frozen=True)
class Rebuilt:
    """What :func:`rebuild_catalog` did."""

    #: where the old catalog went (None: there was none)
    moved_to: Path | None
    topics: list[str]
    groups: int
    #: what could not be taken over as it was, one phrase each
    notes: list[str]


def rebuild_catalog(data: DataDir, policy_defaults: Mapping[str, str], *, now: int, actor: str) -> Rebuilt:
    path = data.catalog_path
    holder = open_by(path)
    if holder is not None:
        raise CatalogDamaged(
            f"the catalog {path} is damaged and still open in process {holder}: stop that process, "
            "then run `ebb verify --repair` again"
        )
    building = path.with_name(path.name + ".rebuild")
    _remove(building)
    db = connect(building)
    try:
        ensure_schema(db)
        ensure_journal_schema(db)
        catalog = Catalog(db)  # no data directory: the metadata files are the source here
        notes: list[str] = []
        # First, so that the rebuild's own journal rows come after the old ones.
        salvaged = salvage_history(path, db, notes)
        topics, groups = [], 0
        for topic_dir in sorted(data.topics_root.iterdir()) if data.topics_root.is_dir() else []:
            added = _rebuild_topic(data, catalog, topic_dir, policy_defaults, now, actor, notes)
            if added is not None:
                topics.append(topic_dir.name)
                groups += added
        _rebuild_pause(data, catalog, notes)
        salvaged += salvage_samples(path, db, notes)
        moved_to = _aside(path, now)
        with write_transaction(db):
            Journal(catalog).append(
                [
                    Entry(
                        "repair",
                        reason=REBUILT,
                        details={
                            "moved_to": None if moved_to is None else moved_to.name,
                            "topics": topics,
                            "groups": groups,
                            "journal_rows_kept": salvaged,
                            "notes": notes,
                        },
                    )
                ],
                time=now,
                trigger="manual",
                actor=actor,
                status="applied",
            )
        # One file to rename: the write-ahead log folded in and gone.
        db.conn.execute("PRAGMA journal_mode = DELETE")
    finally:
        db.close()
    os.replace(building, path)
    fsync_dir(path.parent)
    return Rebuilt(moved_to, topics, groups, notes)


def _rebuild_pause(data: DataDir, catalog: Catalog, notes: list[str]) -> None:
    """A pause of all deletion survives the rebuild; an unreadable record of it
    pauses (deleting less is the side to err on) and says so."""
    try:
        paused = read_paused(data.root)
    except MetadataInvalid as error:
        notes.append(f"{error}: deletion paused (`ebb resume` resumes it)")
        paused = True
    if paused:
        EngineState(catalog).set_paused(True)


def _remove(path: Path) -> None:
    for suffix in _SIDE_SUFFIXES:
        try:
            os.unlink(f"{path}{suffix}")
        except FileNotFoundError:
            pass


def _aside(path: Path, now: int) -> Path | None:
    """Move the old catalog and its write-ahead log out of the way (a ``-wal`` left in
    place would be replayed into the new catalog)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now / 1000))
    target = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 0
    while any(Path(f"{target}{s}").exists() for s in _SIDE_SUFFIXES):
        n += 1
        target = path.with_name(f"{path.name}.damaged-{stamp}.{n}")
    moved = None
    for suffix in _SIDE_SUFFIXES:
        try:
            os.replace(f"{path}{suffix}", f"{target}{suffix}")
            moved = moved or target
        except FileNotFoundError:
            pass
    fsync_dir(path.parent)
    return moved


def _partition_dirs(topic_dir: Path) -> list[int]:
    return sorted(int(e.name) for e in os.scandir(topic_dir) if e.is_dir() and is_digits(e.name))


def _rebuild_topic(
    data: DataDir,
    catalog: Catalog,
    topic_dir: Path,
    policy_defaults: Mapping[str, str],
    now: int,
    actor: str,
    notes: list[str],
) -> int | None:
    """Add one topic from its directory; returns how many groups came back, None if
    the directory is no topic (noted)."""
    name = topic_dir.name
    try:
        check_topic_name(name)
    except InvalidInput:
        notes.append(f"{topic_dir} is not a topic's directory (left as it is)")
        return None
    if not topic_dir.is_dir():
        return None
    damage: str | None = None  # why its topic.json could not be read, where it is there
    try:
        meta = read_topic(topic_dir)
    except MetadataInvalid as error:
        meta, damage = None, str(error)
    present = _partition_dirs(topic_dir)
    if meta is None:
        if not present:
            why = (
                f"{damage}, and {topic_dir} holds no partition"
                if damage
                else f"{topic_dir} holds no partition and no topic.json"
            )
            notes.append(f"{why} (left as it is)")
            return None
        why = damage or f"topic {name} had no topic.json"
        notes.append(f"{why}: topic {name} rebuilt from its {max(present) + 1} partition(s), no overrides")
        meta = TopicMeta(name, max(present) + 1, now, {}, {})
    policy = dict(meta.policy)
    try:
        resolve(policy, policy_defaults)
    except InvalidInput as error:
        notes.append(f"topic {name}: its policy overrides do not parse ({error}); rebuilt without them")
        policy = {}
    ends: dict[int, int] = {}
    with write_transaction(catalog.db):
        catalog.add_topic(name, meta.partitions, meta.created_at)
        catalog.replace_overrides(name, policy, actor=actor, now_ms=now)
        for p in range(meta.partitions):
            ends[p] = _rebuild_partition(data, catalog, name, p, meta.log_starts.get(p, 0))
    try:
        groups = read_groups(topic_dir)
    except MetadataInvalid as error:
        notes.append(f"{error}: the groups of topic {name} are lost")
        groups = []
    kept = [g for g in groups if _group_ok(name, g, notes)]
    with write_transaction(catalog.db):
        for g in kept:
            positions = {p: min(pos, ends[p]) for p, (pos, _at) in g.positions.items() if p in ends}
            catalog.add_group(name, g.name, g.kind, g.start_from, positions, g.created_at)  # type: ignore[arg-type]
            for p, (_pos, at) in g.positions.items():
                if p in positions:
                    catalog.set_position(name, g.name, p, positions[p], at)
    return len(kept)


def _group_ok(topic: str, group: GroupMeta, notes: list[str]) -> bool:
    try:
        check_group_name(group.name)
    except InvalidInput:
        notes.append(f"topic {topic}: group {group.name!r} in groups.json has an invalid name (dropped)")
        return False
    if group.kind not in ("subscriber", "reader") or group.start_from not in ("earliest", "latest"):
        notes.append(f"topic {topic}: group {group.name!r} in groups.json has an unknown kind or start (dropped)")
        return False
    return True


def _rebuild_partition(data: DataDir, catalog: Catalog, topic: str, partition: int, log_start: int) -> int:
    """Catalog one partition's segments as its files hold them, and its log start;
    returns its end. Damage in the files is left for the repair that follows."""
    directory = data.partition_dir(topic, partition)
    if not directory.is_dir():
        create_partition(directory)
    bases = live_bases(directory)
    if not bases:
        # Offsets are never reused: an empty partition starts again at its log start.
        Segment.create(directory, log_start)
        bases = [log_start]
    try:
        infos = segment_infos(directory, bases)
    except (OSError, StoreError):
        infos = [SegmentInfo(b, b, 0, None, None, i < len(bases) - 1) for i, b in enumerate(bases)]
    catalog.reconcile_segments(topic, partition, infos)
    end = infos[-1].next_offset
    catalog.set_log_start(topic, partition, min(max(log_start, infos[0].base_offset), end))
    return end
