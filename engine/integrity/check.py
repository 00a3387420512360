"""``ebb verify``: a read-only check of one data directory.

Checked, for each topic and partition:

- every batch of every segment file, sealed and active: whole, its checksum matching,
  its records decoding to exactly its bytes and header, its offsets continuing the
  previous batch's from the file's base offset;
- segments continuing each other (a gap must be a range recorded as quarantined);
- each segment's catalog row (base, next offset, size, timestamps, sealed) against
  what the store reads from the file; files without rows, rows without files;
- the offset and time indexes against the batches;
- the partition row: the log start within the data, the next offset at its end;
- group positions within ``[0, next offset]``; the topic's policy parses;
- the catalog database itself (SQLite ``quick_check`` and foreign keys; a catalog
  that cannot be opened is diagnosed before, by engine/integrity/rebuild.py);
- each topic's metadata files (engine/catalog/metadata_files.py) against the
  catalog: ``topic.json`` exactly, ``groups.json`` by its groups, with positions
  that may lag the catalog's but never lead them.

Nothing is modified: files are read and the catalog is queried, nothing is locked.
Writers may go on meanwhile: a partition whose catalog rows change while it is being
checked is checked again, and what an append in flight looks like (a catalog row
behind its file, a partial batch at the end of the active segment) is a *warning*,
as is what a killed writer leaves behind (recovery fixes it on the next append).

Every finding says where (topic, partition, file and byte position with the batch's
offset, or catalog table and key), what, how bad (``error``: reads, retention or the
catalog are wrong now; ``warning``: a state the store recovers from on its own) and
whether ``--repair`` fixes it without losing a record (``repairable``). ``lost`` is
the range of offsets whose records are gone: ``--repair`` quarantines them
(engine/integrity/repair.py) rather than repair them.
"""

from __future__ import annotations

import bisect
import os
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Literal

from engine.catalog import metadata_files
from engine.catalog.catalog import Catalog, PartitionRow, QuarantinedRange
from engine.catalog.metadata_files import METADATA_NAMES, GroupMeta, MetadataInvalid
from engine.datadir import PRUNE_LOCK_NAME, DataDir
from engine.errors import InvalidInput, StoreError
from engine.journal.state import EngineState
from engine.policy.effective import resolve
from engine.prune.spark_service import ATTACH_LOCK, SERVICE_DIR, START_LOCK
from engine.store.batch import (
    HEADER_SIZE,
    BatchHeader,
    NewRecord,
    decode_records,
    encode_batch,
    peek_header,
    read_header,
)
from engine.store.index import ENTRY_SIZE, SegmentIndex
from engine.store.partition import LOCK_FILE, file_bases, segment_infos
from engine.store.reserve import RESERVE_NAME
from engine.store.segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIXES,
    LOG_SUFFIX,
    Segment,
    SegmentInfo,
    SegmentMissing,
    describe,
    segment_stem,
)

Severity = Literal["error", "warning"]

# Kinds of finding: stable names (``--json``, the journal's reason codes).
CATALOG_DAMAGED = "CATALOG_DAMAGED"  # SQLite integrity or a foreign key broken
POLICY_INVALID = "POLICY_INVALID"  # a topic's stored policy does not parse
PARTITION_ROWS = "PARTITION_ROWS"  # partition rows disagree with the topic's count
LEFTOVER_FILES = "LEFTOVER_FILES"  # a directory of no partition in a topic's
STRAY_TOPIC = "STRAY_TOPIC"  # a directory of no topic
CORRUPT_DATA = "CORRUPT_DATA"  # a bad batch hides acknowledged records
TRAILING_BYTES = "TRAILING_BYTES"  # bytes after the last batch that hold no record
SEGMENT_MISSING = "SEGMENT_MISSING"  # a catalog row whose file is gone
OFFSET_GAP = "OFFSET_GAP"  # offsets in no segment and not recorded as lost
RECORDS_MISSING = "RECORDS_MISSING"  # the active file ends before what was acknowledged
OVERLAP = "OVERLAP"  # a segment's batches run into its successor's offsets
BELOW_LOG_START = "BELOW_LOG_START"  # a segment retention deleted, not yet removed
INTERRUPTED_DELETION = "INTERRUPTED_DELETION"  # a ``.log.deleted`` file
ORPHAN_INDEX = "ORPHAN_INDEX"  # index files of no segment
INDEX_DAMAGED = "INDEX_DAMAGED"  # missing, truncated or garbled index file
ROW_MISSING = "ROW_MISSING"  # a segment file without a catalog row
ROW_MISMATCH = "ROW_MISMATCH"  # a segment row that its file contradicts
STRAY_ROW = "STRAY_ROW"  # a segment row of no file, for offsets another file holds
PARTITION_ROW = "PARTITION_ROW"  # the partition's next offset is not its data's end
LOG_START = "LOG_START"  # the log start lies past the end of the data
POSITION_OUT_OF_RANGE = "POSITION_OUT_OF_RANGE"  # a group position outside [0, next offset]
METADATA_STALE = "METADATA_STALE"  # topic.json, groups.json or engine.json not what the catalog says
NOT_A_FILE = "NOT_A_FILE"  # something else (a directory) where a lock file or the reserve goes

#: the data directory's own files (beside the catalog's), and what fails while one is
#: not a file
DATA_DIR_FILES = {
    PRUNE_LOCK_NAME: "every prune cycle fails",
    RESERVE_NAME: "no room is kept for deleting on a full disk",
    f"{SERVICE_DIR}/{START_LOCK}": "the Spark service cannot be started or stopped",
    f"{SERVICE_DIR}/{ATTACH_LOCK}": "no process can plan on the Spark service",
}

#: times a partition is checked again when its catalog rows changed meanwhile
ATTEMPTS = 3


@dataclass(frozen=True)
class Place:
    """Where a finding is: a file of a partition (and a byte of it, with the offset
    the batch there holds or should hold), or a catalog table and key (with the topic
    and partition the row belongs to, when it belongs to one)."""

    topic: str | None = None
    partition: int | None = None
    #: base offset of the segment the file belongs to
    segment: int | None = None
    file: str | None = None
    position: int | None = None
    offset: int | None = None
    table: str | None = None
    key: tuple[Any, ...] | None = None

    def __str__(self) -> str:
        if self.table is not None:
            key = "" if self.key is None else "[" + ", ".join(str(k) for k in self.key) + "]"
            return f"catalog {self.table}{key}"
        parts = [str(p) for p in (self.topic, self.partition, self.file) if p is not None]
        text = "/".join(parts) or "data directory"
        if self.position is not None:
            text += f" @ byte {self.position}"
        if self.offset is not None:
            text += f" (offset {self.offset})"
        return text

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["key"] = None if self.key is None else list(self.key)
        out["text"] = str(self)
        return out


@dataclass(frozen=True)
class Finding:
    severity: Severity
    where: Place
    what: str
    #: ``--repair`` fixes it and no record is lost
    repairable: bool
    code: str
    #: offsets ``[start, end)`` whose records are gone
    lost: tuple[int, int] | None = None

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"

    def to_json(self) -> dict[str, Any]:
        return {
            "severity": self.severity,
            "code": self.code,
            "where": self.where.to_json(),
            "what": self.what,
            "repairable": self.repairable,
            "lost": None if self.lost is None else list(self.lost),
        }


# -- one segment file ---------------------------------------------------------------------


@dataclass(frozen=True)
class SegmentScan:
    """What a full read of one segment file found."""

    base_offset: int
    file_size: int
    #: the valid batches from the start of the file, each continuing the previous one
    headers: tuple[BatchHeader, ...]
    #: what is wrong with the bytes at ``valid_end``; None if the file is valid to its end
    problem: str | None
    #: the system refused to read the file from ``valid_end`` on (EIO, a permission, a
    #: directory in its place): its bytes there are lost to the store as if corrupt
    unreadable: bool = False

    @property
    def valid_end(self) -> int:
        last = self.headers[-1] if self.headers else None
        return last.position + last.size if last else 0

    @property
    def next_offset(self) -> int:
        return self.headers[-1].next_offset if self.headers else self.base_offset


def scan_segment(path: Path, base_offset: int) -> SegmentScan:
    """Read a segment file batch by batch (one batch in memory at a time) with the
    store's own decoding, up to the first batch that is not valid."""
    headers: list[BatchHeader] = []
    size = 0
    try:
        with open(path, "rb") as f:
            fd = f.fileno()
            size = os.fstat(fd).st_size
            position, expected = 0, base_offset
            while position < size:
                header = peek_header(os.pread(fd, HEADER_SIZE, position), 0)
                problem = _batch_problem(fd, position, size, expected, header)
                if problem is not None:
                    return SegmentScan(base_offset, size, tuple(headers), problem)
                assert header is not None
                headers.append(replace(header, position=position))
                position += header.size
                expected = header.next_offset
    except OSError as error:
        # A finding like a corrupt batch, from where reading stopped, not a traceback
        # that ends the whole check: every other file still gets its verdict.
        why = describe(OSError(error.errno, error.strerror))
        return SegmentScan(base_offset, size, tuple(headers), f"the file cannot be read ({why})", unreadable=True)
    return SegmentScan(base_offset, size, tuple(headers), None)


def _batch_problem(fd: int, position: int, file_size: int, expected: int, header: BatchHeader | None) -> str | None:
    """What is wrong with the batch at ``position`` that should start at offset
    ``expected`` (``header``: its framing as peeked), or None if it is valid."""
    if header is None:
        if file_size - position < HEADER_SIZE:
            return f"{file_size - position} byte(s) at the end, too few for a batch header"
        return f"no valid batch header (magic, length or record count) where offset {expected} should start"
    if position + header.size > file_size:
        return f"the batch of {header.size} bytes runs past the end of the file ({file_size - position} left)"
    data = os.pread(fd, header.size, position)
    if read_header(data, 0) is None:
        return f"checksum mismatch in the batch where offset {expected} should start"
    if header.base_offset != expected:
        return (
            f"the batch holds offsets {header.base_offset}..{header.next_offset - 1}, expected to start at {expected}"
        )
    # The checksum rules out damage after writing; this rules out a writer that wrote
    # a batch its own reader would misread: decoded and encoded again, the records
    # must give the batch back byte for byte (header fields included).
    try:
        records = list(decode_records(data, header))
    except struct.error:
        return f"the records of the batch of offsets {expected}..{header.next_offset - 1} run past its end"
    timestamps = [r.timestamp for r in records]
    again, _ = encode_batch(header.base_offset, [NewRecord(r.value, r.key, r.timestamp) for r in records], timestamps)
    if again != data:
        return f"the batch of offsets {expected}..{header.next_offset - 1} does not decode to its own bytes"
    return None


def _index_problem(path: Path, got: list[tuple[int, int]], want: list[tuple[int, int]]) -> tuple[int, str] | None:
    """(byte position, what is wrong) of an index file that is not what the batches
    give, or None."""
    try:
        stray = path.stat().st_size % ENTRY_SIZE
    except FileNotFoundError:
        return 0, "missing"
    common = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), min(len(got), len(want)))
    partial = f"; ends with {stray} byte(s) of a partial entry" if stray else ""
    if got == want:
        return (len(got) * ENTRY_SIZE, partial[2:]) if stray else None
    if common == len(got):
        return common * ENTRY_SIZE, f"truncated: {len(got)} of {len(want)} entries{partial}"
    if common == len(want):
        return common * ENTRY_SIZE, f"entries past the last batch: {len(got) - common}{partial}"
    return common * ENTRY_SIZE, f"entry {common} is {got[common]}, the batches give {want[common]}{partial}"


def _index_findings(directory: Path, topic: str, partition: int, scan: SegmentScan) -> list[Finding]:
    index = Segment(directory, scan.base_offset).index
    loaded = SegmentIndex.load(index.offset_path, index.time_path)
    expected = SegmentIndex.build(index.offset_path, index.time_path, list(scan.headers))
    findings = []
    for kind, path, got, want in (
        ("offset index", index.offset_path, loaded.offsets, expected.offsets),
        ("time index", index.time_path, loaded.times, expected.times),
    ):
        problem = _index_problem(path, got, want)
        if problem is not None:
            position, what = problem
            findings.append(
                Finding(
                    "warning",
                    Place(topic, partition, scan.base_offset, path.name, position),
                    f"{kind} {what} (reads are right regardless; --repair rebuilds it from the batches)",
                    True,
                    INDEX_DAMAGED,
                )
            )
    return findings


# -- catalog rows against files -----------------------------------------------------------


def _behind(field: str, row: Any, file: Any) -> bool:
    """Whether a row's value is one an append or roll not yet cataloged leaves."""
    if field == "sealed":
        return not row and file
    if field == "first_timestamp":
        return row is None
    return row is None or (file is not None and row < file)


def _row_findings(topic: str, partition: int, row: SegmentInfo | None, info: SegmentInfo) -> list[Finding]:
    place = Place(topic, partition, table="segments", key=(topic, partition, info.base_offset))
    if row is None:
        return [
            Finding(
                "warning",
                place,
                f"segment file {segment_stem(info.base_offset)}{LOG_SUFFIX} (offsets {info.base_offset}.."
                f"{info.next_offset - 1}) has no catalog row (an append not yet cataloged; --repair adds it)",
                True,
                ROW_MISSING,
            )
        ]
    diffs = [(f.name, getattr(row, f.name), getattr(info, f.name)) for f in fields(SegmentInfo)]
    diffs = [(name, r, f) for name, r, f in diffs if r != f]
    if not diffs:
        return []
    lagging = all(_behind(name, r, f) for name, r, f in diffs)
    text = ", ".join(f"{name} {r} (the file: {f})" for name, r, f in diffs)
    why = "behind its file (an append not yet cataloged)" if lagging else "contradicted by its file"
    return [
        Finding(
            "warning" if lagging else "error",
            place,
            f"{why}: {text}; --repair sets it from the file",
            True,
            ROW_MISMATCH,
        )
    ]


# -- one partition ------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionCheck:
    """The findings of one partition and what its repair needs to know."""

    topic: str
    partition: int
    #: base offset of the partition's newest segment (file or catalog row); None if none
    active_base: int | None
    #: where the partition's records end: its active file's end, or the catalog's
    #: acknowledged end when records up to it are lost
    end_offset: int
    #: base offset -> the next offset of the valid batches of the file
    own_ends: Mapping[int, int]
    findings: tuple[Finding, ...]


def _acknowledged_end(row: PartitionRow, last: SegmentInfo | None, scan: SegmentScan | None) -> int:
    """The end of the partition's records: the active file's, unless the catalog
    acknowledged more than the file holds (a bad batch, or a file cut short: its row
    claims more records *and* more bytes, where a damaged row would differ in one)."""
    if scan is None:
        return last.next_offset if last is not None else row.next_offset
    if last is None or last.next_offset <= scan.next_offset:
        return scan.next_offset
    if scan.problem is not None or last.size_bytes > scan.file_size:
        return last.next_offset
    return scan.next_offset


def _covered(lost: Sequence[QuarantinedRange], start: int, end: int) -> bool:
    """Whether recorded lost ranges (in offset order) cover ``[start, end)``."""
    for r in lost:
        if r.base_offset <= start < r.next_offset:
            start = r.next_offset
    return start >= end


_CatalogState = tuple[PartitionRow, dict[int, SegmentInfo], list[QuarantinedRange]]


def _catalog_state(catalog: Catalog, topic: str, partition: int) -> _CatalogState:
    """The rows a partition's files are checked against (read them in one transaction)."""
    return (
        catalog.partition(topic, partition),
        {s.base_offset: s for s in catalog.segments(topic, partition)},
        catalog.quarantined(topic, partition),
    )


class _PartitionChecker:
    """One pass over one partition: its files read once, compared with its rows."""

    def __init__(self, data: DataDir, catalog: Catalog, topic: str, partition: int) -> None:
        self.topic, self.partition = topic, partition
        self.directory = data.partition_dir(topic, partition)
        with catalog.read():
            self.state = _catalog_state(catalog, topic, partition)
            self.groups = catalog.groups(topic)
        self.row, self.rows, self.lost = self.state
        try:
            self.names = os.listdir(self.directory)
        except (FileNotFoundError, NotADirectoryError):
            self.names = []  # every segment then reports its file missing
        bases = file_bases(self.names, LOG_SUFFIX)
        self.scans = {b: scan_segment(self.directory / (segment_stem(b) + LOG_SUFFIX), b) for b in bases}
        # The store's view of the files it can read (an unreadable one has its finding).
        readable = [b for b in bases if not self.scans[b].unreadable]
        self.infos = {i.base_offset: i for i in segment_infos(self.directory, readable)} if readable else {}
        self.deleted = set(file_bases(self.names, DELETED_SUFFIX))
        # A row of no file for offsets that a file holds is the catalog's error alone.
        self.stray = {
            r
            for r in self.rows
            if r not in self.scans
            and (i := bisect.bisect_right(bases, r) - 1) >= 0
            and r < self.scans[bases[i]].next_offset
        }
        self.slots = sorted((set(bases) | set(self.rows) | self.deleted) - self.stray)
        newest = self.slots[-1] if self.slots else None
        self.end = (
            self.row.next_offset
            if newest is None
            else _acknowledged_end(self.row, self.rows.get(newest), self.scans.get(newest))
        )
        self.first = self.slots[0] if self.slots else self.end
        # A log start past the end of the data is itself the damage (reported as such):
        # the segments are then judged from the oldest offset held, not as all deleted.
        self.log_start = self.row.log_start_offset if self.row.log_start_offset <= self.end else self.first
        self.findings: list[Finding] = []

    def check(self) -> PartitionCheck:
        for base in sorted(self.stray):
            self._row_finding(
                "segments",
                (self.partition, base),
                "error",
                "catalog row of no segment file; its offsets are in another file's batches (--repair removes it)",
                STRAY_ROW,
            )
        for i, base in enumerate(self.slots):
            last = i == len(self.slots) - 1
            self._slot(base, self.end if last else self.slots[i + 1], last)
        self._partition_row()
        for suffix in INDEX_SUFFIXES:
            for base in file_bases(self.names, suffix):
                if base not in self.scans and base not in self.deleted:
                    self._add(
                        "warning",
                        "index file of no segment (recovery removes it)",
                        ORPHAN_INDEX,
                        True,
                        segment=base,
                        file=segment_stem(base) + suffix,
                    )
        if LOCK_FILE in self.names and not (self.directory / LOCK_FILE).is_file():
            self.findings.append(not_a_file(LOCK_FILE, self.topic, self.partition))
        own_ends = {b: s.next_offset for b, s in self.scans.items()}
        active = self.slots[-1] if self.slots else None
        return PartitionCheck(self.topic, self.partition, active, self.end, own_ends, tuple(self.findings))

    def _add(
        self,
        severity: Severity,
        what: str,
        code: str,
        repairable: bool,
        lost: tuple[int, int] | None = None,
        **where: Any,
    ) -> None:
        self.findings.append(
            Finding(severity, Place(self.topic, self.partition, **where), what, repairable, code, lost)
        )

    def _row_finding(self, table: str, key: tuple[Any, ...], severity: Severity, what: str, code: str) -> None:
        place = Place(self.topic, self.partition, table=table, key=(self.topic, *key))
        self.findings.append(Finding(severity, place, what, True, code))

    def _slot(self, base: int, successor: int, last: bool) -> None:
        """One segment, by its file, its catalog row or both; ``successor``: where the
        next one starts (for the newest, the end of the data)."""
        scan = self.scans.get(base)
        name = segment_stem(base) + LOG_SUFFIX
        below = not last and successor <= self.log_start
        if scan is None and base in self.deleted:
            undone = "" if below else "; the log start does not cover it, so recovery restores it"
            self._add(
                "warning",
                f"deletion interrupted by a crash{undone}",
                INTERRUPTED_DELETION,
                True,
                segment=base,
                file=segment_stem(base) + DELETED_SUFFIX,
            )
        elif below:
            what = "its file is still there" if scan else "its catalog row is still there"
            self._add(
                "warning",
                f"segment wholly below the log start {self.log_start}: {what} (recovery removes it)",
                BELOW_LOG_START,
                True,
                segment=base,
                file=name,
            )
        elif scan is None and successor > base:
            gone = (max(base, self.log_start), successor)
            self._add(
                "error",
                f"segment file missing: offsets {gone[0]}..{gone[1] - 1} are lost (--repair records them as lost)",
                SEGMENT_MISSING,
                False,
                gone,
                segment=base,
                file=name,
            )
        elif scan is None:
            self._add(
                "warning",
                "the empty active segment's file is missing (--repair creates it)",
                SEGMENT_MISSING,
                True,
                segment=base,
                file=name,
            )
        else:
            self._file(scan, name, successor, last)

    def _file(self, scan: SegmentScan, name: str, successor: int, last: bool) -> None:
        base, own_end = scan.base_offset, scan.next_offset
        at: dict[str, Any] = {"segment": base, "file": name, "offset": own_end}
        if scan.problem is not None and own_end < successor:
            gone = (max(base, self.log_start), successor)
            self._add(
                "error",
                f"{scan.problem}: offsets {own_end}..{successor - 1} are unreadable (--repair quarantines the segment)",
                CORRUPT_DATA,
                False,
                gone,
                position=scan.valid_end,
                **at,
            )
            return  # its index and row go with it
        if scan.problem is not None:
            held = "a torn write" if last else "no record"
            self._add(
                "warning",
                f"{scan.file_size - scan.valid_end} byte(s) after the last batch hold {held}: "
                f"{scan.problem} (--repair saves them to the quarantine and cuts them)",
                TRAILING_BYTES,
                True,
                position=scan.valid_end,
                **at,
            )
        elif own_end < successor and last:
            self._add(
                "error",
                f"the catalog acknowledged offsets up to {successor - 1}, the file ends at offset "
                f"{own_end}: records {own_end}..{successor - 1} are lost (--repair records them as lost)",
                RECORDS_MISSING,
                False,
                (own_end, successor),
                position=scan.file_size,
                **at,
            )
        elif own_end < successor and not _covered(self.lost, own_end, successor):
            self._add(
                "error",
                f"offsets {own_end}..{successor - 1} are in no segment (--repair records them as lost)",
                OFFSET_GAP,
                False,
                (own_end, successor),
                position=scan.file_size,
                **at,
            )
        elif own_end > successor:
            self._add(
                "error",
                f"batches run to offset {own_end - 1}, past the next segment's base {successor}",
                OVERLAP,
                False,
                segment=base,
                file=name,
            )
        self.findings.extend(_index_findings(self.directory, self.topic, self.partition, scan))
        # A file cut short: its row says what was acknowledged; an unreadable file has
        # its finding already, and no view of the store's to hold the row to.
        if base in self.infos and not (last and own_end < successor):
            # The store's view stretches a sealed segment to the next *file*; the row
            # should reach the next segment, whose file may be missing or being deleted.
            expected = replace(self.infos[base], next_offset=successor, sealed=not last)
            self.findings.extend(_row_findings(self.topic, self.partition, self.rows.get(base), expected))

    def _partition_row(self) -> None:
        row, end = self.row, self.end
        if self.log_start < self.first and not _covered(self.lost, self.log_start, self.first):
            gone = (self.log_start, self.first)
            self._add(
                "error",
                f"offsets {gone[0]}..{gone[1] - 1} above the log start are in no segment (--repair "
                "moves the log start past them)",
                OFFSET_GAP,
                False,
                gone,
            )
        if row.log_start_offset > end:
            self._row_finding(
                "partitions",
                (self.partition,),
                "error",
                f"log start {row.log_start_offset} is past "
                f"the end of the data ({end}); a writer would delete every sealed segment below it "
                f"(--repair sets it to the oldest offset held, {self.first})",
                LOG_START,
            )
        if row.next_offset != end:
            lagging = row.next_offset < end
            self._row_finding(
                "partitions",
                (self.partition,),
                "warning" if lagging else "error",
                f"next_offset {row.next_offset}, the data ends at {end}"
                f"{' (an append not yet cataloged)' if lagging else ''}; --repair sets it",
                PARTITION_ROW,
            )
        for group in self.groups:
            position = group.positions.get(self.partition)
            if position is not None and not 0 <= position[0] <= end:
                self._row_finding(
                    "positions",
                    (group.name, self.partition),
                    "warning",
                    f"position {position[0]} is outside [0, {end}] (--repair moves it to "
                    f"{min(max(position[0], 0), end)})",
                    POSITION_OUT_OF_RANGE,
                )


def not_a_file(name: str, topic: str | None = None, partition: int | None = None) -> Finding:
    """The finding of a partition's lock file ``name`` (or, without a partition, the
    data directory's file ``name`` of :data:`DATA_DIR_FILES`) that is not a file (a
    directory)."""
    if partition is None:
        where, fails = Place(file=name), DATA_DIR_FILES[name]
    else:
        where, fails = Place(topic, partition, file=name), "producing, truncating and pruning the partition fail"
    return Finding("error", where, f"not a file: {fails} (--repair moves it to the quarantine)", True, NOT_A_FILE)


def check_partition(data: DataDir, catalog: Catalog, topic: str, partition: int) -> PartitionCheck:
    """Check one partition; checked again (a few times) while a writer changes its
    catalog rows under the check, or deletes a file the check was reading."""
    for _attempt in range(ATTEMPTS):
        try:
            checker = _PartitionChecker(data, catalog, topic, partition)
            check = checker.check()
        except (FileNotFoundError, SegmentMissing):
            continue  # a prune deleted a file between the listing and its read
        with catalog.read():
            if _catalog_state(catalog, topic, partition) == checker.state:
                return check
    raise StoreError(f"partition {topic}/{partition} kept changing while it was checked; try again")


# -- the data directory ---------------------------------------------------------------------


def _catalog_findings(catalog: Catalog) -> list[Finding]:
    findings = [
        Finding("error", Place(table="catalog.db"), f"SQLite integrity check: {line}", False, CATALOG_DAMAGED)
        for (line,) in catalog.db.conn.execute("PRAGMA quick_check")
        if line != "ok"
    ]
    findings += [
        Finding(
            "error",
            Place(table=table, key=(f"rowid {rowid}",)),
            f"refers to a missing {parent} row",
            False,
            CATALOG_DAMAGED,
        )
        for table, rowid, parent, _fk in catalog.db.conn.execute("PRAGMA foreign_key_check")
    ]
    return findings


def _topic_findings(
    data: DataDir, catalog: Catalog, topic: str, count: int, policy_defaults: Mapping[str, str]
) -> list[Finding]:
    findings = []
    try:
        resolve(catalog.overrides(topic), policy_defaults)
    except InvalidInput as error:
        findings.append(
            Finding(
                "error",
                Place(topic, table="policies", key=(topic,)),
                f"the policy does not parse: {error}",
                False,
                POLICY_INVALID,
            )
        )
    rows = {r.partition for r in catalog.partitions(topic)}
    if rows != set(range(count)):
        findings.append(
            Finding(
                "error",
                Place(topic, table="partitions", key=(topic,)),
                f"the topic has {count} partition(s), the rows are {sorted(rows)}",
                False,
                PARTITION_ROWS,
            )
        )
    try:
        entries = sorted(os.listdir(data.topic_dir(topic)))
    except FileNotFoundError:
        entries = []  # every partition then reports its files missing
    expected = {str(p) for p in range(count)}
    findings += [
        Finding(
            "warning",
            Place(topic, file=entry),
            "not a partition of the topic (remove it by hand)",
            False,
            LEFTOVER_FILES,
        )
        for entry in entries
        if entry not in expected and entry not in METADATA_NAMES
    ]
    return findings


def _file_against(path: Path, wanted: bytes) -> str | None:
    """What is wrong with the metadata file at ``path`` that should hold ``wanted``
    (``missing``, unreadable, other bytes), or None."""
    try:
        held = path.read_bytes()
    except FileNotFoundError:
        return "missing"
    except OSError as error:  # a directory in its place: --repair moves it aside
        return f"cannot be read: {describe(error)}"
    return None if held == wanted else "not what the catalog holds"


def _metadata_problems(data: DataDir, catalog: Catalog, topic: str) -> list[tuple[str, str]]:
    """(file, what is wrong) for each of the topic's metadata files that the catalog
    contradicts."""
    with catalog.read():
        snapshot = catalog.metadata(topic)
    if snapshot is None:
        return []
    meta, groups = snapshot
    topic_dir = data.topic_dir(topic)
    problems = []
    if (wrong := _file_against(topic_dir / metadata_files.TOPIC_FILE, metadata_files.topic_bytes(meta))) is not None:
        problems.append((metadata_files.TOPIC_FILE, wrong))
    try:
        if not (topic_dir / metadata_files.GROUPS_FILE).exists():
            problems.append((metadata_files.GROUPS_FILE, "missing"))
        elif (why := _groups_differ(metadata_files.read_groups(topic_dir), groups)) is not None:
            problems.append((metadata_files.GROUPS_FILE, why))
    except MetadataInvalid as error:
        problems.append((metadata_files.GROUPS_FILE, str(error)))
    return problems


def _groups_differ(on_disk: list[GroupMeta], catalog: list[GroupMeta]) -> str | None:
    """Why the groups file contradicts the catalog, or None: the same groups, and no
    position ahead of the catalog's (behind is the file's normal lag)."""
    wanted = {g.name: g for g in catalog}
    found = {g.name: g for g in on_disk}
    if set(wanted) != set(found):
        return f"its groups are {sorted(found)}, the catalog's {sorted(wanted)}"
    for name, g in found.items():
        w = wanted[name]
        if (g.kind, g.start_from, g.created_at) != (w.kind, w.start_from, w.created_at):
            return f"group {name!r} is not the catalog's"
        ahead = [p for p, (pos, _at) in g.positions.items() if pos > w.positions.get(p, (-1, 0))[0]]
        if ahead:
            return f"group {name!r} is ahead of its committed position on partition(s) {ahead}"
    return None


def metadata_findings(data: DataDir, catalog: Catalog, topic: str) -> list[Finding]:
    """The topic's metadata files against the catalog. A file found wrong is looked
    at again once: another process may have committed and rewritten it meanwhile."""
    problems = _metadata_problems(data, catalog, topic) and _metadata_problems(data, catalog, topic)
    return [
        Finding(
            "warning",
            Place(topic, file=name),
            f"metadata file {what} (a lost catalog would be rebuilt from it; --repair rewrites it)",
            True,
            METADATA_STALE,
        )
        for name, what in problems
    ]


def _engine_file_problem(data: DataDir, catalog: Catalog) -> str | None:
    """What is wrong with ``engine.json`` against the catalog's pause, or None. No file
    is right while deletion is not paused (none is written until the first pause)."""
    with catalog.read():
        paused = EngineState(catalog).is_paused()
    wrong = _file_against(data.root / metadata_files.ENGINE_FILE, metadata_files.engine_bytes(paused))
    return None if wrong == "missing" and not paused else wrong


def engine_file_findings(data: DataDir, catalog: Catalog) -> list[Finding]:
    """``engine.json`` against the catalog: a rebuilt catalog takes the pause of all
    deletion from it. Looked at again once, as :func:`metadata_findings` does."""
    problem = _engine_file_problem(data, catalog) and _engine_file_problem(data, catalog)
    if problem is None:
        return []
    what = f"metadata file {problem} (a lost catalog would take its pause from it; --repair rewrites it)"
    return [Finding("warning", Place(file=metadata_files.ENGINE_FILE), what, True, METADATA_STALE)]


def verify(
    data: DataDir, catalog: Catalog, policy_defaults: Mapping[str, str], topics: Sequence[str] | None = None
) -> list[Finding]:
    """Every finding in the data directory (or in ``topics`` only), in order: the
    catalog, then each topic and its partitions, then stray topic directories."""
    findings = _catalog_findings(catalog)
    names = list(topics) if topics is not None else [t.name for t in catalog.topics()]
    for name in names:
        topic = catalog.topic(name)
        findings += _topic_findings(data, catalog, name, topic.partitions, policy_defaults)
        findings += metadata_findings(data, catalog, name)
        for row in catalog.partitions(name):
            findings += check_partition(data, catalog, name, row.partition).findings
    if topics is None:
        findings += engine_file_findings(data, catalog)
        findings += [
            not_a_file(name)
            for name in DATA_DIR_FILES
            if os.path.lexists(data.root / name) and not (data.root / name).is_file()
        ]
        known = set(names)
        try:
            strays = sorted(set(os.listdir(data.topics_root)) - known)
        except FileNotFoundError:
            strays = []
        findings += [
            Finding(
                "warning",
                Place(stray),
                "directory of no topic, left by a crashed create or delete (--repair removes it if it "
                "holds no record, else moves it to the quarantine)",
                True,
                STRAY_TOPIC,
            )
            for stray in strays
        ]
    return findings
