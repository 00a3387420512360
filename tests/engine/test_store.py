"""The segment store: round trips, rolls by size and by time, reads by time."""

from __future__ import annotations

import errno
import os
import zlib
from pathlib import Path

import numpy as np
import pytest

from engine.datadir import DataDir
from engine.errors import InvalidInput
from engine.prune.record_times import NO_RECORD, StoreRecordTimes
from engine.prune.time_cuts import RecordReads
from engine.store.batch import HEADER_SIZE, RECORD_OVERHEAD, NewRecord, encode_batch, read_header, scan
from engine.store.partition import (
    MAX_BATCH_RECORDS,
    OffsetGap,
    PartitionWriter,
    create_partition,
    offset_for_time,
    read_records,
    segment_infos,
)
from engine.store.segment import Segment, SegmentUnreadable

MiB = 1 << 20


@pytest.fixture
def part(tmp_path: Path) -> Path:
    directory = tmp_path / "p0"
    create_partition(directory)
    return directory


def append(
    directory: Path, records: list[NewRecord], *, segment_size: int = MiB, roll: int | None = None, now: int = 0
):
    writer = PartitionWriter(directory)
    try:
        with writer.locked(0):
            return writer.append(records, now_ms=now, segment_size=segment_size, segment_roll_ms=roll)
    finally:
        writer.close()


def test_batch_round_trip_and_checksum() -> None:
    records = [NewRecord(b"v1", b"k1", 5), NewRecord(b"", None, 7), NewRecord(b"\x00" * 10, b"", 6)]
    data, encoded = encode_batch(42, records, [5, 7, 6])
    header = read_header(data, 0)
    assert header is not None and header == encoded
    # The checksum is the standard CRC-32 over everything after the prefix.
    assert int.from_bytes(data[8:12], "little") == zlib.crc32(data[12:])
    assert (header.base_offset, header.count, header.first_timestamp, header.max_timestamp) == (42, 3, 5, 7)
    assert header.size == len(data)
    corrupted = bytearray(data)
    corrupted[HEADER_SIZE + 3] ^= 0xFF
    assert read_header(bytes(corrupted), 0) is None
    assert read_header(data[:-1], 0) is None  # torn: one byte short


def test_records_round_trip_with_keys_and_timestamps(part: Path) -> None:
    records = [
        NewRecord(f"value-{i}".encode(), None if i % 3 == 0 else f"k{i}".encode(), 1000 + i) for i in range(2500)
    ]
    result = append(part, records)
    assert (result.base_offset, result.next_offset) == (0, 2500)
    assert result.batches == 3  # batches hold at most MAX_BATCH_RECORDS records
    back = read_records(part, 0, 10_000)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in back] == [
        (i, rec.key, rec.value, rec.timestamp) for i, rec in enumerate(records)
    ]
    assert [r.offset for r in read_records(part, 1234, 3)] == [1234, 1235, 1236]


def test_record_without_timestamp_gets_receive_time(part: Path) -> None:
    append(part, [NewRecord(b"x")], now=987654)
    assert read_records(part, 0, 1)[0].timestamp == 987654


def test_rolls_before_a_batch_would_exceed_segment_size(part: Path) -> None:
    value = b"x" * 1000
    per_record = RECORD_OVERHEAD + len(value)
    segment_size = 64 * 1024
    append(part, [NewRecord(value, None, i) for i in range(500)], segment_size=segment_size)
    infos = segment_infos(part)
    assert len(infos) > 1
    assert all(s.size_bytes <= segment_size for s in infos)
    # Every sealed segment is full: the next record would not have fitted.
    for s in infos[:-1]:
        assert s.sealed and s.size_bytes + per_record + HEADER_SIZE > segment_size
    assert not infos[-1].sealed
    # Segments are contiguous and their sizes are the files' sizes.
    for before, after in zip(infos, infos[1:]):
        assert before.next_offset == after.base_offset
    for s in infos:
        assert (part / f"{s.base_offset:020d}.log").stat().st_size == s.size_bytes
    assert infos[-1].next_offset == 500


def test_single_record_larger_than_segment_is_refused_and_nothing_written(part: Path) -> None:
    with pytest.raises(InvalidInput, match="does not fit a segment"):
        append(part, [NewRecord(b"small", None, 1), NewRecord(b"x" * 5000, None, 2)], segment_size=4096)
    assert segment_infos(part)[0].size_bytes == 0
    assert read_records(part, 0, 10) == []


def test_rolls_when_first_record_is_older_than_segment_roll(part: Path) -> None:
    hour = 3_600_000
    append(part, [NewRecord(b"a", None, 0), NewRecord(b"b", None, hour - 1)], roll=hour)
    assert len(segment_infos(part)) == 1
    append(part, [NewRecord(b"c", None, hour)], roll=hour)
    infos = segment_infos(part)
    assert [(s.base_offset, s.next_offset, s.sealed) for s in infos] == [(0, 2, True), (2, 3, False)]
    assert (infos[0].first_timestamp, infos[0].max_timestamp) == (0, hour - 1)


def test_explicit_roll_seals_only_a_non_empty_segment(part: Path) -> None:
    writer = PartitionWriter(part)
    with writer.locked(0):
        assert writer.roll() is None
        writer.append([NewRecord(b"a", None, 1)], now_ms=0, segment_size=MiB)
        sealed = writer.roll()
        assert sealed is not None and sealed.sealed and sealed.next_offset == 1
        assert [s.base_offset for s in writer.segments()] == [0, 1]
    writer.close()


def test_segment_metadata_first_and_max_timestamp(part: Path) -> None:
    append(part, [NewRecord(b"a", None, 50), NewRecord(b"b", None, 90), NewRecord(b"c", None, 70)])
    (info,) = segment_infos(part)
    assert (info.first_timestamp, info.max_timestamp) == (50, 90)


def test_read_by_time_finds_first_record_at_or_after(part: Path) -> None:
    # Ten segments of 100 records, timestamps 10 ms apart.
    value = b"v" * 100
    records = [NewRecord(value, None, 1_000 + 10 * i) for i in range(1000)]
    append(part, records, segment_size=100 * (RECORD_OVERHEAD + 100) + HEADER_SIZE)
    assert len(segment_infos(part)) >= 10
    assert offset_for_time(part, 0) == 0
    assert offset_for_time(part, 1_000) == 0
    assert offset_for_time(part, 1_001) == 1
    assert offset_for_time(part, 1_000 + 10 * 537) == 537
    assert offset_for_time(part, 1_000 + 10 * 537 - 3) == 537
    assert offset_for_time(part, 1_000 + 10 * 999) == 999
    assert offset_for_time(part, 1_000 + 10 * 999 + 1) is None


def test_read_by_time_with_out_of_order_timestamps(part: Path) -> None:
    append(part, [NewRecord(b"a", None, 100), NewRecord(b"b", None, 300), NewRecord(b"c", None, 200)])
    assert offset_for_time(part, 150) == 1
    assert offset_for_time(part, 250) == 1
    assert offset_for_time(part, 301) is None


def test_writer_sees_appends_of_another_writer(part: Path) -> None:
    first, second = PartitionWriter(part), PartitionWriter(part)
    with first.locked(0):
        first.append([NewRecord(b"a", None, 1)] * 3, now_ms=0, segment_size=4096)
    with second.locked(0):
        result = second.append([NewRecord(b"b" * 1000, None, 2)] * 6, now_ms=0, segment_size=4096)
        assert result.base_offset == 3
    with first.locked(0):
        assert first.append([NewRecord(b"c", None, 3)], now_ms=0, segment_size=4096).base_offset == 9
    first.close()
    second.close()
    assert [r.value[:1] for r in read_records(part, 0, 100)] == [b"a"] * 3 + [b"b"] * 6 + [b"c"]


def test_appends_are_split_into_batches_of_at_most_max_records(part: Path) -> None:
    append(part, [NewRecord(b"x", None, 0)] * (MAX_BATCH_RECORDS * 2 + 1))
    log = (part / f"{0:020d}.log").read_bytes()
    assert [h.count for h in scan(log)] == [MAX_BATCH_RECORDS, MAX_BATCH_RECORDS, 1]


def test_one_fsync_per_append_and_none_when_durability_is_relaxed(part: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.store.partition as partition_module

    calls: list[int] = []
    real_fsync = partition_module.os.fsync
    monkeypatch.setattr(partition_module.os, "fsync", lambda fd: (calls.append(fd), real_fsync(fd))[1])
    durable = PartitionWriter(part)
    with durable.locked(0):
        durable.append([NewRecord(b"x", None, 0)] * 2500, now_ms=0, segment_size=MiB)  # 3 batches
    assert len(calls) == 1  # group commit: the whole append is synced once, before it returns
    durable.close()
    calls.clear()
    relaxed = PartitionWriter(part, durable=False)
    with relaxed.locked(0):
        relaxed.append([NewRecord(b"x", None, 0)] * 10, now_ms=0, segment_size=MiB)
    assert calls == []
    relaxed.close()
    assert len(read_records(part, 0, 10_000)) == 2510


def test_recovery_never_truncates_a_sealed_segment(part: Path) -> None:
    from engine.errors import StoreError

    append(part, [NewRecord(b"v" * 100, None, i) for i in range(20)])
    append(part, [NewRecord(b"w" * 100, None, i) for i in range(20, 40)])
    writer = PartitionWriter(part)
    with writer.locked(0):
        writer.roll()
        writer.append([NewRecord(b"z", None, 50)], now_ms=0, segment_size=MiB)
    writer.close()
    sealed = segment_infos(part)[0]
    assert sealed.sealed and sealed.next_offset == 40
    log = part / f"{sealed.base_offset:020d}.log"
    data = bytearray(log.read_bytes())
    last_batch = list(scan(bytes(data)))[-1]
    assert last_batch.position > 0
    data[last_batch.position + 1] ^= 0xFF  # break the framing of its last batch
    log.write_bytes(bytes(data))
    writer = PartitionWriter(part)
    with writer.locked(0):
        pass
    writer.close()
    assert log.stat().st_size == len(data)
    with pytest.raises(StoreError, match=f"{log.name} at byte {last_batch.position}"):
        read_records(part, last_batch.base_offset, 1)
    assert [r.offset for r in read_records(part, 0, 2)] == [0, 1]
    assert [r.offset for r in read_records(part, 40, 5)] == [40]


def test_a_read_skips_a_segment_deleted_between_its_open_and_its_read(
    part: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by the crash campaign: a consumer raised FileNotFoundError when a prune
    # unlinked the segment it had just opened.
    writer = PartitionWriter(part)
    with writer.locked(0):
        writer.append([NewRecord(b"a", None, 100), NewRecord(b"b", None, 100)], now_ms=0, segment_size=MiB)
        writer.roll()
        writer.append([NewRecord(b"c", None, 200)], now_ms=0, segment_size=MiB)
    writer.close()
    opened = Segment.open

    def open_then_pruned(directory: Path, base_offset: int, **kwargs: bool) -> Segment:
        segment = opened(directory, base_offset, **kwargs)
        if base_offset == 0:
            segment.log_path.unlink()
        return segment

    monkeypatch.setattr(Segment, "open", staticmethod(open_then_pruned))
    # The records before the next segment are gone: the gap says where reading resumes.
    with pytest.raises(OffsetGap) as gap:
        read_records(part, 0, 10)
    assert (gap.value.first_missing, gap.value.next_present) == (0, 2)
    assert [r.value for r in read_records(part, 2, 10)] == [b"c"]


def test_read_by_time_tolerates_a_segment_deleted_after_the_listing(
    part: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import engine.store.partition as partition_module

    writer = PartitionWriter(part)
    with writer.locked(0):
        writer.append([NewRecord(b"a", None, 100)], now_ms=0, segment_size=MiB)
        writer.roll()
        writer.append([NewRecord(b"b", None, 200)], now_ms=0, segment_size=MiB)
    writer.close()
    listed = partition_module.live_bases(part)
    # A prune removes the old segment between the reader's listing and its open.
    (part / f"{0:020d}.log").unlink()
    monkeypatch.setattr(partition_module, "live_bases", lambda directory: listed)
    assert offset_for_time(part, 50) == 1


def _sealed_segments(part: Path) -> list[Path]:
    append(part, [NewRecord(b"x" * 100, None, i) for i in range(30)], segment_size=1024)
    logs = sorted(part.glob("*.log"))
    assert len(logs) >= 3
    return logs


def test_a_segment_file_the_system_refuses_to_read_is_one_store_error(part: Path) -> None:
    """Lockless reads (consume, describe, a time cut) fail on an unreadable file with
    one line naming it, as on a corrupt batch: never an OSError's traceback."""
    logs = _sealed_segments(part)
    logs[0].unlink()
    logs[0].mkdir()  # open() works on a directory, reading it fails with EISDIR
    with pytest.raises(SegmentUnreadable, match=rf"cannot read segment file {logs[0]}: Is a directory \(EISDIR\)"):
        read_records(part, 0, 10)
    with pytest.raises(SegmentUnreadable):
        segment_infos(part)
    with pytest.raises(SegmentUnreadable):
        offset_for_time(part, 0)


def test_records_before_an_unreadable_segment_are_returned_first(part: Path) -> None:
    logs = _sealed_segments(part)
    second = int(logs[1].stem)
    logs[1].unlink()
    logs[1].mkdir()
    before = read_records(part, 0, 1000)
    assert [r.offset for r in before] == list(range(second))
    with pytest.raises(SegmentUnreadable):
        read_records(part, second, 1000)


def test_an_io_error_while_reading_a_batch_is_one_store_error(part: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failing disk: the file opens and its reads fail with EIO."""
    logs = _sealed_segments(part)
    segment = Segment.open(part, int(logs[0].stem), sealed=True, repair=False)

    def failing_pread(fd: int, n: int, offset: int) -> bytes:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "pread", failing_pread)
    with pytest.raises(SegmentUnreadable, match=r"Input/output error \(EIO\)"):
        segment.indexed_record(0)
    with pytest.raises(SegmentUnreadable, match="EIO"):
        segment.first_at_or_after(0, 0)
    with pytest.raises(SegmentUnreadable, match="EIO"):
        Segment.open(part, int(logs[1].stem), sealed=True, repair=False)


def test_the_store_answers_many_time_reads_opening_each_segment_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``StoreRecordTimes.first_offsets`` (the time cuts' batch, engine/prune/time_cuts.py):
    each read is the first record at or after its start stamped θ or later in its
    segment; a segment is opened (and validated) once for all its reads; a segment
    pruned since the snapshot holds none, and the next candidate decides."""
    data = DataDir(tmp_path)
    directory = data.partition_dir("t", 0)
    create_partition(directory)
    # two segments of five records, stamped 100, 110, ... 190
    append(
        directory,
        [NewRecord(b"v", None, 100 + 10 * i) for i in range(10)],
        segment_size=5 * (RECORD_OVERHEAD + 1) + HEADER_SIZE,
    )
    bases = [info.base_offset for info in segment_infos(directory)]
    assert bases == [0, 5]
    opened: list[int] = []
    real_open = Segment.open

    def counted(directory: Path, base_offset: int, **kwargs: bool) -> Segment:
        opened.append(base_offset)
        return real_open(directory, base_offset, **kwargs)

    monkeypatch.setattr(Segment, "open", staticmethod(counted))
    reads = RecordReads(
        ["t"],
        *(np.array(column) for column in ([0] * 5, [0] * 5, [0, 0, 5, 0, 5], [0, 3, 5, 0, 5], [0, 115, 160, 200, 999])),
    )
    assert list(StoreRecordTimes(data).first_offsets(reads)) == [0, 3, 6, NO_RECORD, NO_RECORD]
    assert sorted(opened) == [0, 5]
    (directory / f"{0:020d}.log").unlink()  # pruned since the snapshot
    assert list(StoreRecordTimes(data).first_offsets(reads)) == [NO_RECORD, NO_RECORD, 6, NO_RECORD, NO_RECORD]
