"""``ebb verify --repair``: fix what the files prove, quarantine what is lost.

Each partition with something to do is repaired under its writer lock (no append or
prune meanwhile), from a check made under that lock:

- **Corrupt data** (a bad batch that hides acknowledged records, in a sealed or the
  active segment): the whole segment file and its indexes move to
  ``DATA_DIR/quarantine/<topic>/<partition>/``, next to a ``.note.json`` saying what
  was found where, and what became of the offsets. Quarantine is per segment, as
  retention is: the valid batches before the bad one go with it (their offsets are in
  the note), rather than cut a sealed segment into a shape the store never writes.
- **Where the lost offsets go** (a quarantined segment, a missing file, a gap, records
  the catalog acknowledged and the active file lacks):

  - in front of everything still held: the log start moves past them, as if
    retention had deleted them; readers start after them, and a group below the log
    start is read from it, as after a prune;
  - in the middle: they are recorded in the catalog's ``quarantined`` table, and a
    read of them fails with an error naming the quarantined file and the offset to
    move a group to. This is Kafka's behaviour for a corrupt record (the consumer is
    stuck until an operator seeks past it): nothing is skipped silently, and moving
    past lost data is the operator's decision. The catalog row of the segment before
    the range spans it (segments stay contiguous), so that retention deleting that
    segment moves the log start past the range too;
  - at the end (the active segment quarantined, or its file cut short): a new empty
    active segment starts at the acknowledged end. Offsets are never reused, so every
    committed position keeps meaning the records it meant.

- **Trailing bytes** that hold no acknowledged record (a torn write at the end of the
  active segment, garbage after a sealed segment's last batch): saved to the
  quarantine with a note, then cut.
- **A log start past the end of the data**: set to the oldest offset held (left as
  is, the next writer would delete every sealed segment below it); retention takes
  again what it should on its next cycle.
- **Group positions outside [0, next offset]**: moved into it (their commit time kept).
- Then the store's own recovery runs on fresh state (indexes rebuilt from the
  batches, an interrupted deletion finished or undone, segments below the log start
  and orphan indexes removed) and the catalog's segment rows and next offset are set
  from the files.

Files move first, then one catalog transaction records the log start, the lost
ranges, the positions and their journal rows: a crash in between leaves files gone
that the catalog still lists, which the next ``verify`` reports and ``--repair``
records, naming the quarantined file from its note.

Also: metadata files (engine/catalog/metadata_files.py) that contradict the catalog
are rewritten from it; a directory of no topic in ``topics/`` (a create or delete
killed half-way) is removed if it holds no record, else moved whole to
``DATA_DIR/quarantine/stray-topics/``. A catalog SQLite reports damaged is rebuilt
before any of this (engine/integrity/rebuild.py).

Every repair is checked: what a check after it still finds is reported as remaining,
never as repaired (the partition's under its lock, the rest by a check of the whole
directory).

Journaled (trigger ``manual``): ``quarantine`` per lost range, ``move_log_start``
when the log start moves, ``repair`` for everything else. Left to the operator:
a policy that does not parse, partition rows that disagree with the topic,
overlapping segments, stray directories inside a topic's.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.broker import Broker
from engine.catalog.catalog import ENGINE_MARK, Catalog, QuarantinedRange
from engine.catalog.metadata_files import ENGINE_FILE, METADATA_NAMES, write_durably
from engine.datadir import DataDir
from engine.integrity.check import (
    CORRUPT_DATA,
    INDEX_DAMAGED,
    LOG_START,
    METADATA_STALE,
    NOT_A_FILE,
    POSITION_OUT_OF_RANGE,
    STRAY_TOPIC,
    TRAILING_BYTES,
    Finding,
    PartitionCheck,
    Place,
    check_partition,
    engine_file_findings,
    metadata_findings,
    not_a_file,
    verify,
)
from engine.journal.journal import Entry, Journal
from engine.store.partition import LOCK_FILE, PartitionWriter, live_bases
from engine.store.segment import INDEX_SUFFIXES, LOG_SUFFIX, Segment, fsync_dir, segment_stem

TRIGGER = "manual"
NOTE_SUFFIX = ".note.json"
TAIL_SUFFIX = ".bin"
#: journal reason of a log start moved by a repair
MOVED_BY_REPAIR = "REPAIR"

#: what the store's recovery and the catalog's reconciliation did about each kind of
#: repairable finding that needs no step of its own here
_RECOVERED = {
    "INDEX_DAMAGED": "index rebuilt from the batches",
    "ROW_MISSING": "catalog row set from the file",
    "ROW_MISMATCH": "catalog row set from the file",
    "PARTITION_ROW": "next offset set from the files",
    "BELOW_LOG_START": "removed by recovery",
    "INTERRUPTED_DELETION": "deletion finished or undone by recovery",
    "ORPHAN_INDEX": "removed by recovery",
    "SEGMENT_MISSING": "new empty active segment created",
    "STRAY_ROW": "catalog row removed",
}


@dataclass(frozen=True)
class Repair:
    """One thing ``--repair`` did."""

    where: Place
    what: str
    #: the code of the finding it answers
    code: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "where": self.where.to_json(), "what": self.what}


@dataclass(frozen=True)
class RepairResult:
    found: list[Finding]
    repairs: list[Repair]
    #: what a check after the repair still finds
    remaining: list[Finding]


def _key(where: Place, code: str) -> tuple[Any, ...]:
    """What a finding and the repair of it have in common, whatever byte or offset
    the finding points at after the repair."""
    return (code, where.topic, where.partition, where.segment, where.file, where.table, where.key)


def _done(repairs: list[Repair], still: Sequence[Finding]) -> list[Repair]:
    """The repairs that a check made after them confirms: a finding that is still
    there was not repaired, whatever was attempted."""
    remaining = {_key(f.where, f.code) for f in still}
    return [r for r in repairs if _key(r.where, r.code) not in remaining]


def repair(broker: Broker, topics: Sequence[str] | None = None, *, actor: str = "cli") -> RepairResult:
    """Check the data directory (or ``topics``), repair every partition with
    something to repair or quarantine, rewrite stale metadata files, and check again;
    a repair is reported only if that check no longer finds what it repaired."""
    found = verify(broker.data, broker.catalog, broker.config.policy_defaults, topics)
    targets = sorted(
        {
            (f.where.topic, f.where.partition)
            for f in found
            if f.where.topic is not None and f.where.partition is not None and (f.repairable or f.lost)
        }
    )
    repairs = [r for topic, partition in targets for r in _repair_partition(broker, topic, partition, actor)]
    stale = sorted({f.where.topic for f in found if f.code == METADATA_STALE and f.where.topic is not None})
    # After the partitions: their repair may move a log start or a position.
    repairs += [r for topic in stale for r in _rewrite_metadata(broker, topic, found)]
    engine_file = [f for f in found if f.code == METADATA_STALE and f.where.topic is None]
    repairs += _rewrite_engine_file(broker, engine_file)
    strays = [f for f in found if f.code == STRAY_TOPIC]
    repairs += [_clear_stray(broker, f, actor) for f in strays]
    in_the_way = [f.where.file for f in found if f.code == NOT_A_FILE and f.where.topic is None]
    repairs += [_clear_not_a_file(broker, broker.data.root, name, None, None, actor) for name in in_the_way if name]
    if in_the_way:
        broker.reserve.ensure()  # the reserve, if it was in the way: made now, not at the next write
    if not targets and not stale and not engine_file and not strays and not in_the_way:
        return RepairResult(found, [], found)
    remaining = verify(broker.data, broker.catalog, broker.config.policy_defaults, topics)
    return RepairResult(found, _done(repairs, remaining), remaining)


def _rewrite_engine_file(broker: Broker, found: Sequence[Finding]) -> list[Repair]:
    """Rewrite ``engine.json`` from the catalog, after moving aside whatever is in its place."""
    if not found:
        return []
    if (path := broker.data.root / ENGINE_FILE).exists() and not path.is_file():
        _set_aside_in_the_way(broker.data.quarantine_root, path, "not-a-file")
    broker.catalog.write_metadata(ENGINE_MARK)
    still = engine_file_findings(broker.data, broker.catalog)
    return _done([Repair(f.where, "rewritten from the catalog", f.code) for f in found], still)


def _clear_stray(broker: Broker, finding: Finding, actor: str) -> Repair:
    """Finish what a crashed create or delete of a topic left in ``topics/``: the
    catalog has no such topic, so no record of it was acknowledged (a create) or it was
    deleted (a delete). One that holds no record is removed; one that does is moved
    to the quarantine, never deleted by a repair."""
    data = broker.data
    assert finding.where.topic is not None
    source = data.topics_root / finding.where.topic
    held = [p for p in source.rglob("*" + LOG_SUFFIX) if p.is_file() and p.stat().st_size]
    with broker.catalog.write():
        # Under the catalog's write lock: a create of that name cannot commit meanwhile.
        if broker.catalog.has_topic(finding.where.topic):
            return Repair(finding.where, "a topic of that name exists now: left as it is", finding.code)
        if not held:
            shutil.rmtree(source, ignore_errors=True)
            done = "removed (it held no record)"
        else:
            target = data.quarantine_root / "stray-topics"
            target.mkdir(mode=0o700, parents=True, exist_ok=True)
            name = _free_stem(target, f"{finding.where.topic}-{broker.clock()}", "")
            os.replace(source, target / name)
            fsync_dir(target)
            done = f"moved to {(target / name).relative_to(data.root)} ({len(held)} segment file(s) with records)"
        fsync_dir(data.topics_root)
        Journal(broker.catalog).append(
            [_entry("repair", finding, details={"done": done})],
            time=broker.clock(),
            trigger=TRIGGER,
            actor=actor,
            status="applied",
        )
    return Repair(finding.where, done, finding.code)


def _rewrite_metadata(broker: Broker, topic: str, found: Sequence[Finding]) -> list[Repair]:
    topic_dir = broker.data.topic_dir(topic)
    for name in METADATA_NAMES:
        if (path := topic_dir / name).exists() and not path.is_file():
            # a directory where the file goes: no file can be written over it; kept
            _set_aside_in_the_way(broker.data.quarantine_root / topic, path, "not-a-file")
    broker.catalog.write_metadata(topic)
    still = metadata_findings(broker.data, broker.catalog, topic)
    stale = [f for f in found if f.code == METADATA_STALE and f.where.topic == topic]
    return _done([Repair(f.where, "rewritten from the catalog", f.code) for f in stale], still)


@dataclass(frozen=True)
class _Plan:
    """Where a partition stands once its lost data is set aside."""

    #: base of a new active segment, if one is needed
    new_active: int | None
    log_start: int


def _plan(check: PartitionCheck, log_start: int) -> _Plan:
    quarantined = frozenset(
        f.where.segment for f in check.findings if f.code == CORRUPT_DATA and f.where.segment is not None
    )
    remaining = [b for b in sorted(check.own_ends) if b not in quarantined]
    # A new active segment when the newest one is gone (quarantined, missing) or its
    # file ends before what the catalog acknowledged: offsets are never reused.
    needs_active = (
        not remaining or remaining[-1] != check.active_base or check.own_ends[remaining[-1]] < check.end_offset
    )
    held = [*remaining, check.end_offset] if needs_active else remaining
    start = log_start if log_start <= check.end_offset else held[0]
    return _Plan(check.end_offset if needs_active else None, max(start, held[0]))


def _repair_partition(broker: Broker, topic: str, partition: int, actor: str) -> list[Repair]:
    data, catalog = broker.data, broker.catalog
    directory = data.partition_dir(topic, partition)
    if directory.exists() and not directory.is_dir():
        # Something else holds the partition directory's place (a file): it is kept in
        # the quarantine, and the partition is repaired as one whose directory is gone.
        _set_aside_in_the_way(data.quarantine_dir(topic, partition), directory, "not-a-directory")
    # A partition directory that is gone is made again: its lock file lives there.
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    lock = directory / LOCK_FILE
    moved = (
        []
        if lock.is_file() or not lock.exists()
        else [_clear_not_a_file(broker, directory, LOCK_FILE, topic, partition, actor)]
    )
    writer = PartitionWriter(directory, durable=broker.config.fsync)
    try:
        with writer.held():
            check = check_partition(data, catalog, topic, partition)
            if not check.findings:
                return moved
            now = broker.clock()
            old_start = catalog.partition(topic, partition).log_start_offset
            plan = _plan(check, old_start)
            repairs, entries, lost = _set_aside(data, directory, check, plan, now, actor)
            journal = Journal(catalog)
            with catalog.write():
                repairs += _update_catalog(catalog, check, plan, old_start, lost, entries)
                journal.append(entries, time=now, trigger=TRIGGER, actor=actor, status="applied")
            writer.reload(plan.log_start)
            _write_missing_indexes(directory, check)
            with catalog.write():
                catalog.reconcile_segments(topic, partition, writer.segments())
            # Only what a check under the same lock no longer finds counts as recovered.
            after = {_key(f.where, f.code) for f in check_partition(data, catalog, topic, partition).findings}
            recovered = [
                f
                for f in check.findings
                if f.repairable and f.code in _RECOVERED and _key(f.where, f.code) not in after
            ]
            with catalog.write():
                journal.append(
                    [_entry("repair", f, details={"done": _RECOVERED[f.code]}) for f in recovered],
                    time=now,
                    trigger=TRIGGER,
                    actor=actor,
                    status="applied",
                )
            return moved + repairs + [Repair(f.where, _RECOVERED[f.code], f.code) for f in recovered]
    finally:
        writer.close()


def _clear_not_a_file(
    broker: Broker, directory: Path, name: str, topic: str | None, partition: int | None, actor: str
) -> Repair:
    """Move ``directory / name``, a file's place taken by something else (a
    directory), to the quarantine (the partition's, or without one the quarantine's
    root): no lock can be taken there (nor a repair), no reserve made, until it is out
    of the way; kept, since it is not ours."""
    data = broker.data
    quarantine = data.quarantine_root if topic is None or partition is None else data.quarantine_dir(topic, partition)
    kept = _set_aside_in_the_way(quarantine, directory / name, "not-a-file")
    finding = not_a_file(name, topic, partition)
    with broker.catalog.write():
        Journal(broker.catalog).append(
            [_entry("repair", finding, details={"moved_to": str(kept)})],
            time=broker.clock(), trigger=TRIGGER, actor=actor, status="applied",
        )  # fmt: skip
    return Repair(finding.where, f"moved to {kept}; a new one is made", finding.code)


def _set_aside_in_the_way(quarantine: Path, path: Path, what: str) -> Path:
    """Move ``path``, which stands where something else is needed, into ``quarantine``
    as ``<name>.<what>`` (``.N`` after it if that is taken); its new path."""
    quarantine.mkdir(mode=0o700, parents=True, exist_ok=True)
    kept = quarantine / _free_stem(quarantine, f"{path.name}.{what}", "")
    os.replace(path, kept)
    return kept


def _write_missing_indexes(directory: Path, check: PartitionCheck) -> None:
    """Write the index files found missing. Recovery rewrites an index only when the
    batches give other entries than the file holds, and an empty segment's index
    (none) is what a missing file reads as: a producer killed between creating a
    segment and its indexes leaves exactly that."""
    bases = live_bases(directory)
    for f in check.findings:
        segment = f.where.segment
        if f.code != INDEX_DAMAGED or segment not in bases:
            continue
        index = Segment(directory, segment).index
        if not (index.offset_path.exists() and index.time_path.exists()):
            sealed = segment != bases[-1]
            Segment.open(directory, segment, sealed=sealed, repair=False).index.write(sync=True)


def _entry(action: str, finding: Finding, **fields: Any) -> Entry:
    where = finding.where
    details = {"where": str(where), "found": finding.what, **fields.pop("details", {})}
    return Entry(action, where.topic, where.partition, where.segment, reason=finding.code, details=details, **fields)


def _set_aside(
    data: DataDir, directory: Path, check: PartitionCheck, plan: _Plan, now: int, actor: str
) -> tuple[list[Repair], list[Entry], list[QuarantinedRange]]:
    """The file side of a repair: quarantine corrupt segments, save and cut trailing
    bytes, start a new active segment. Returns what was done, its journal rows and
    the lost ranges that stay above the log start (for the catalog to record)."""
    repairs: list[Repair] = []
    entries: list[Entry] = []
    lost: list[QuarantinedRange] = []
    for f in check.findings:
        if f.lost is not None:
            start, end = f.lost
            below = end <= plan.log_start
            effect = (
                f"below the log start, now {plan.log_start}"
                if below
                else "reads of them fail with an error naming the quarantine"
            )
            path, size = None, None
            if f.code == CORRUPT_DATA:
                path, size = _quarantine_segment(data, directory, f, now, actor, effect)
            else:
                path = _noted_path(data, f)
            if not below:
                lost.append(
                    QuarantinedRange(check.topic, check.partition, max(start, plan.log_start), end, path, f.code, now)
                )
            entries.append(
                _entry(
                    "quarantine",
                    f,
                    start_offset=start,
                    end_offset=end,
                    messages=end - start,
                    bytes=size,
                    details={"quarantined_to": path, "effect": effect},
                )
            )
            moved = f"segment moved to {path}; " if f.code == CORRUPT_DATA else ""
            repairs.append(Repair(f.where, f"{moved}offsets {start}..{end - 1} recorded as lost ({effect})", f.code))
        elif f.code == TRAILING_BYTES:
            path, size = _cut_tail(data, directory, f, now, actor)
            entries.append(_entry("repair", f, bytes=size, details={"saved_to": path}))
            repairs.append(Repair(f.where, f"{size} byte(s) saved to {path} and cut", f.code))
    if plan.new_active is not None:
        if check.active_base in live_bases(directory):
            # The active file stays, ending before what was acknowledged: seal it.
            Segment.open(directory, check.active_base, sealed=False, repair=False).seal()
        Segment.create(directory, plan.new_active)
    return repairs, entries, lost


def _update_catalog(
    catalog: Catalog,
    check: PartitionCheck,
    plan: _Plan,
    old_start: int,
    lost: list[QuarantinedRange],
    entries: list[Entry],
) -> list[Repair]:
    """The catalog side, inside the caller's transaction: log start, lost ranges,
    positions. Appends their journal rows to ``entries``."""
    topic, partition = check.topic, check.partition
    repairs = []
    place = Place(topic, partition, table="partitions", key=(topic, partition))
    if plan.log_start != old_start:
        catalog.set_log_start(topic, partition, plan.log_start)
        why = (
            "past the end of the data" if any(f.code == LOG_START for f in check.findings) else "lost offsets in front"
        )
        entries.append(
            Entry(
                "move_log_start",
                topic,
                partition,
                start_offset=old_start,
                end_offset=plan.log_start,
                messages=max(plan.log_start - old_start, 0),
                reason=MOVED_BY_REPAIR,
                details={"why": why},
            )
        )
        repairs.append(Repair(place, f"log start moved from {old_start} to {plan.log_start} ({why})", LOG_START))
    for lost_range in lost:
        catalog.add_quarantined(lost_range)
    for group in catalog.groups(topic):
        position, committed_at = group.positions.get(partition, (0, 0))
        moved = min(max(position, 0), check.end_offset)
        if moved != position:
            catalog.set_position(topic, group.name, partition, moved, committed_at)
            where = Place(topic, partition, table="positions", key=(topic, group.name, partition))
            entries.append(
                Entry(
                    "repair",
                    topic,
                    partition,
                    start_offset=position,
                    end_offset=moved,
                    reason=POSITION_OUT_OF_RANGE,
                    details={"group": group.name, "where": str(where)},
                )
            )
            repairs.append(Repair(where, f"position moved from {position} to {moved}", POSITION_OUT_OF_RANGE))
    return repairs


# -- the quarantine directory -------------------------------------------------------------


def _free_stem(directory: Path, stem: str, suffix: str) -> str:
    """``stem``, or ``stem.N`` if a file of that name (or its note) is there already
    (the same base quarantined twice, by a topic deleted and created again)."""
    candidate, n = stem, 0
    while (directory / (candidate + suffix)).exists() or (directory / (candidate + NOTE_SUFFIX)).exists():
        n += 1
        candidate = f"{stem}.{n}"
    return candidate


def _note(finding: Finding, now: int, actor: str, **more: Any) -> bytes:
    where = finding.where
    note = {
        "topic": where.topic,
        "partition": where.partition,
        "segment": where.segment,
        "where": str(where),
        "found": finding.what,
        "code": finding.code,
        "position": where.position,
        "offset": where.offset,
        "lost_offsets": None if finding.lost is None else list(finding.lost),
        "at": now,
        "by": actor,
        **more,
    }
    return (json.dumps(note, indent=2) + "\n").encode()


def _quarantine_dir(data: DataDir, where: Place) -> Path:
    assert where.topic is not None and where.partition is not None
    directory = data.quarantine_dir(where.topic, where.partition)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    return directory


def _quarantine_segment(
    data: DataDir, directory: Path, finding: Finding, now: int, actor: str, effect: str
) -> tuple[str, int]:
    """Move a segment's files into the quarantine, its note written first (a file
    there is never without its explanation); returns the .log's path relative to the
    data directory and its size."""
    assert finding.where.segment is not None
    segment = Segment(directory, finding.where.segment)
    dest = _quarantine_dir(data, finding.where)
    stem = _free_stem(dest, segment_stem(finding.where.segment), LOG_SUFFIX)
    target = dest / (stem + LOG_SUFFIX)
    relative = str(target.relative_to(data.root))
    size = segment.log_path.stat().st_size
    write_durably(dest / (stem + NOTE_SUFFIX), _note(finding, now, actor, file=relative, bytes=size, effect=effect))
    for source, suffix in (
        (segment.log_path, LOG_SUFFIX),
        *zip((segment.index.offset_path, segment.index.time_path), INDEX_SUFFIXES),
    ):
        try:
            os.replace(source, dest / (stem + suffix))
        except FileNotFoundError:
            pass  # an index file that was missing anyway
    fsync_dir(dest)
    fsync_dir(directory)
    return relative, size


def _cut_tail(data: DataDir, directory: Path, finding: Finding, now: int, actor: str) -> tuple[str, int]:
    """Save the bytes of a segment file from the finding's position on into the
    quarantine, then cut them; returns where they went and how many there were."""
    assert finding.where.file is not None and finding.where.position is not None and finding.where.segment is not None
    position = finding.where.position
    dest = _quarantine_dir(data, finding.where)
    stem = _free_stem(dest, f"{segment_stem(finding.where.segment)}.tail-at-{position}", TAIL_SUFFIX)
    target = dest / (stem + TAIL_SUFFIX)
    relative = str(target.relative_to(data.root))
    with open(directory / finding.where.file, "r+b") as f:
        tail = os.pread(f.fileno(), os.fstat(f.fileno()).st_size - position, position)
        write_durably(dest / (stem + NOTE_SUFFIX), _note(finding, now, actor, file=relative, bytes=len(tail)))
        write_durably(target, tail)
        fsync_dir(dest)
        f.truncate(position)
        os.fsync(f.fileno())
    return relative, len(tail)


def _noted_path(data: DataDir, finding: Finding) -> str | None:
    """The quarantined file of a segment found missing, if a repair moved it there
    (its note says so), else None: a repair that crashed before its catalog update,
    or a catalog rebuilt since (the lost offsets then show as a gap after the segment
    before them, and the note is found by them)."""
    if finding.where.topic is None or finding.where.partition is None:
        return None
    dest = data.quarantine_dir(finding.where.topic, finding.where.partition)
    notes = []
    for path in dest.glob("*" + NOTE_SUFFIX):
        try:
            note = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # not a note this module wrote
        if not isinstance(note, dict):
            continue
        file, lost = note.get("file"), note.get("lost_offsets")
        same = (finding.where.segment is not None and note.get("segment") == finding.where.segment) or (
            finding.lost is not None and isinstance(lost, list) and lost[:1] == [finding.lost[0]]
        )
        if same and isinstance(file, str) and file.endswith(LOG_SUFFIX) and (data.root / file).is_file():
            notes.append((note.get("at", 0), file))
    return max(notes)[1] if notes else None
