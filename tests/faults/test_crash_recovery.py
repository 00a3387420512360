"""Recovery (SPEC §2): a killed writer, a torn tail, a corrupted batch, missing or short
indexes and an interrupted deletion.

The segment files are checked with an independent parser of the batch format
(``engine/store/batch.py``'s docstring), so that a test does not only compare the
engine with itself.
"""

from __future__ import annotations

import json
import os
import queue
import random
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from console.cli.records import generated_value
from engine.broker import Broker
from engine.errors import StoreError
from engine.store.batch import NewRecord, Record
from tests.support.cli import REPO, ebb_command, subprocess_env
from tests.support.segment_files import (
    _ENTRY,
    _PREFIX,
    T0,
    TOPIC,
    assert_describe_agrees_with_files,
    assert_records,
    expected_index_files,
    fill,
    flip,
    key_of,
    log_files,
    parse_log,
    partition_dir,
    read_all,
    seg_path,
    ts_of,
    value_of,
)

# -- 1. a producer killed with SIGKILL mid-run -----------------------------------------


class LineReader:
    """Lines of a subprocess's stdout, with timeouts (a thread does the blocking reads)."""

    def __init__(self, stream) -> None:
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream) -> None:
        for line in iter(stream.readline, b""):
            self._lines.put(line.decode())
        self._lines.put(None)

    def next(self, timeout: float = 30) -> str | None:
        return self._lines.get(timeout=timeout)

    def rest(self, timeout: float = 30) -> list[str]:
        lines = []
        while (line := self.next(timeout)) is not None:
            lines.append(line)
        return lines


def check_acks(acks: list[dict], partition: int, first_base: int) -> int:
    """Acks of one producer on one partition are contiguous; returns their end."""
    expected = first_base
    for ack in acks:
        assert ack["partition"] == partition
        assert ack["base_offset"] == expected, f"ack {ack} does not continue at {expected}"
        assert ack["count"] == ack["next_offset"] - ack["base_offset"] > 0
        expected = ack["next_offset"]
    return expected


def check_generated(
    records: list[Record], first_offset: int, t_first: int, size: int, key: bytes | None = None
) -> None:
    """Records of one ``ebb produce --count`` run that started at ``first_offset``."""
    for r in records:
        index = r.offset - first_offset
        assert r.value == generated_value(index, size), f"offset {r.offset}: value is not record {index} of the run"
        assert r.timestamp == t_first + index, f"offset {r.offset}: timestamp {r.timestamp} != {t_first + index}"
        assert r.key == key


# (acks read before the kill, seed of the extra delay): a kill after 1 to 11 acks, at
# a moment within the next batch or two, on a segment size that makes the producer roll
# every ~2.4 batches, so kills land mid-batch, between the file write and the catalog
# update, and around rolls.
KILL_POINTS = [(1, 7), (2, 19), (4, 31), (7, 43), (11, 59)]
RUN = 30_000  # records the killed producer would write: ~31 MB, ~1 s uninterrupted


@pytest.mark.slow
@pytest.mark.parametrize(("acks_before_kill", "seed"), KILL_POINTS)
def test_producer_killed_with_sigkill_keeps_every_acknowledged_record(
    ebb, ebb_process, data_dir: Path, acks_before_kill: int, seed: int
) -> None:
    rng = random.Random(seed)
    assert ebb("topic", "create", TOPIC, "--partitions", "2", "--segment-size", "2500KiB").code == 0
    t1 = T0 + seed * 1_000_000
    proc = subprocess.Popen(
        ebb_command(
            data_dir,
            "produce",
            TOPIC,
            "--partition",
            "1",
            "--count",
            str(RUN),
            "--size",
            "1KiB",
            "--timestamp",
            str(t1),
            "--timestamp-step",
            "1ms",
            "--json",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env=subprocess_env(),
    )
    try:
        lines = LineReader(proc.stdout)
        acks = []
        for _ in range(acks_before_kill):
            line = lines.next()
            assert line is not None, f"producer ended early: {proc.stderr.read().decode()}"
            acks.append(json.loads(line))
        time.sleep(rng.uniform(0.0, 0.04))
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
        # Every line printed before the kill is an acknowledgement.
        acks += [json.loads(line) for line in lines.rest()]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    acked_end = check_acks(acks, 1, 0)
    assert acked_end < RUN, "the producer finished before the kill: the test did not kill it mid-run"

    pdir = partition_dir(data_dir, 1)
    valid_on_disk = []
    for i, path in enumerate(log_files(pdir)):
        batches, valid_end, size = parse_log(path)
        if i < len(log_files(pdir)) - 1:
            assert valid_end == size, f"sealed segment {path} has an invalid tail"
        valid_on_disk += [r for b in batches for r in b.records]

    # A new process reads: every acknowledged record, intact; nothing partial or past
    # the last valid batch.
    with Broker(data_dir) as reader:
        records = read_all(reader, TOPIC, 1)
        on_disk = len(records)
        assert on_disk >= acked_end, f"acknowledged up to {acked_end}, only {on_disk} readable"
        check_generated(records, 0, t1, 1024)
        assert [(r.offset, r.timestamp, r.key, r.value) for r in records] == valid_on_disk
        assert reader.read(TOPIC, 1, on_disk, 10) == []
        assert reader.read(TOPIC, 1, on_disk + 1000, 10) == []
        assert reader.read(TOPIC, 0, 0, 10) == []

    # The same through `ebb consume` in a real process.
    consumed = ebb_process(
        "consume", TOPIC, "--group", "audit", "--partition", "1", "--max", str(on_disk + 500), "--json", "--no-commit"
    )
    assert consumed.code == 0, consumed.err
    rows = [json.loads(line) for line in consumed.out.splitlines()]
    assert [r["offset"] for r in rows] == list(range(on_disk))
    assert all(r["value"] == generated_value(r["offset"], 1024).decode() for r in rows)
    assert all(r["timestamp"] == t1 + r["offset"] for r in rows)

    # Appending again continues right after the surviving records: no gap, no duplicate.
    t2 = t1 + 10_000_000
    again = ebb_process(
        "produce",
        TOPIC,
        "--partition",
        "1",
        "--count",
        "2500",
        "--size",
        "1KiB",
        "--timestamp",
        str(t2),
        "--timestamp-step",
        "1ms",
        "--json",
    )
    assert again.code == 0, again.err
    assert check_acks([json.loads(line) for line in again.out.splitlines()], 1, on_disk) == on_disk + 2500
    with Broker(data_dir) as reader:
        records = read_all(reader, TOPIC, 1)
    assert len(records) == on_disk + 2500
    check_generated(records[:on_disk], 0, t1, 1024)
    check_generated(records[on_disk:], on_disk, t2, 1024)

    described = assert_describe_agrees_with_files(ebb, data_dir)
    parts = {p["partition"]: p for p in described["partitions"]}
    assert parts[1]["next_offset"] == on_disk + 2500
    assert len(parts[1]["segments"]) >= 2
    assert parts[0]["next_offset"] == 0


# -- 2. a truncated tail ---------------------------------------------------------------

TAIL_DAMAGE = [
    "cut_in_the_middle_of_the_last_batch",
    "cut_inside_the_last_batch_header",
    "cut_one_byte_short_of_the_last_batch",
    "garbage_after_the_last_batch",
    "half_a_header_after_the_last_batch",
]


@pytest.mark.parametrize("damage", TAIL_DAMAGE)
def test_torn_tail_is_cut_at_the_last_whole_batch(broker: Broker, ebb, data_dir: Path, damage: str) -> None:
    n = fill(broker, 8)
    pdir = partition_dir(data_dir)
    assert len(log_files(pdir)) >= 2
    active = log_files(pdir)[-1]
    batches, end, size = parse_log(active)
    assert end == size and len(batches) >= 2
    last = batches[-1]
    if damage.startswith("cut"):
        cut_to = {
            "cut_in_the_middle_of_the_last_batch": last.position + last.size // 2,
            "cut_inside_the_last_batch_header": last.position + 20,
            "cut_one_byte_short_of_the_last_batch": last.position + last.size - 1,
        }[damage]
        os.truncate(active, cut_to)
        boundary, survivors = last.position, last.base
    else:
        tail = b"\x00\xffgarbage" if damage.startswith("garbage") else _PREFIX.pack(b"EBB1", 5000, 12345) + b"\x01" * 9
        with open(active, "ab") as f:
            f.write(tail)
        boundary, survivors = size, n
    damaged_size = active.stat().st_size

    # Readers (no lock, no repair) never return a partial record, and change nothing.
    with Broker(data_dir) as reader:
        assert_records(read_all(reader, TOPIC, 0), 0, survivors)
        assert reader.read(TOPIC, 0, survivors, 10) == []
        assert reader.read(TOPIC, 0, survivors - 1, 10)[-1].offset == survivors - 1
    assert active.stat().st_size == damaged_size

    # A writer that opens the partition cuts the tail at the batch boundary.
    with Broker(data_dir) as writer:
        writer.recover(TOPIC)
        assert active.stat().st_size == boundary
        assert parse_log(active)[1:] == (boundary, boundary)
        offsets, times = expected_index_files(parse_log(active)[0])
        assert seg_path(pdir, int(active.name[:-4]), ".index").read_bytes() == offsets
        assert seg_path(pdir, int(active.name[:-4]), ".timeindex").read_bytes() == times
        assert writer.catalog.partition(TOPIC, 0).next_offset == survivors
        result = writer.append(
            TOPIC, 0, [NewRecord(value_of(i), key_of(i), ts_of(i)) for i in range(survivors, survivors + 25)]
        )
        assert (result.base_offset, result.next_offset) == (survivors, survivors + 25)
    with Broker(data_dir) as reader:
        assert_records(read_all(reader, TOPIC, 0), 0, survivors + 25)
    assert_describe_agrees_with_files(ebb, data_dir)


# -- 3. a corrupted batch -----------------------------------------------------------------

# Where in a batch a byte is flipped: its framing, its header, its records.
WHERE = {
    "magic": lambda b: 1,
    "length": lambda b: 4,
    "crc": lambda b: 9,
    "base_offset": lambda b: _PREFIX.size + 2,
    "count": lambda b: _PREFIX.size + 8,
    "record_bytes": lambda b: b.size // 2,
    "last_byte": lambda b: b.size - 1,
}


@pytest.mark.parametrize("where", list(WHERE))
def test_corrupted_last_batch_of_the_active_segment_is_cut_as_torn(
    broker: Broker, ebb, data_dir: Path, where: str
) -> None:
    fill(broker, 8)
    pdir = partition_dir(data_dir)
    active = log_files(pdir)[-1]
    last = parse_log(active)[0][-1]
    flip(active, last.position + WHERE[where](last))

    with Broker(data_dir) as reader:
        assert_records(read_all(reader, TOPIC, 0), 0, last.base)
        assert reader.read(TOPIC, 0, last.base, 10) == []
    with Broker(data_dir) as writer:
        result = writer.append(
            TOPIC, 0, [NewRecord(value_of(i), key_of(i), ts_of(i)) for i in range(last.base, last.base + 10)]
        )
        assert (result.base_offset, result.next_offset) == (last.base, last.base + 10)
    assert parse_log(active)[0][-1].position == last.position  # the new batch replaced the bad one
    with Broker(data_dir) as reader:
        assert_records(read_all(reader, TOPIC, 0), 0, last.base + 10)
    assert_describe_agrees_with_files(ebb, data_dir)


@pytest.mark.parametrize("which", ["first", "middle", "last"])
@pytest.mark.parametrize("where", list(WHERE))
def test_corrupted_batch_of_a_sealed_segment_is_an_error_naming_file_and_position(
    broker: Broker, ebb, data_dir: Path, which: str, where: str
) -> None:
    n = fill(broker, 14)
    pdir = partition_dir(data_dir)
    logs = log_files(pdir)
    assert len(logs) >= 3
    sealed = logs[0]
    batches = parse_log(sealed)[0]
    assert len(batches) >= 3
    bad = {"first": batches[0], "middle": batches[len(batches) // 2], "last": batches[-1]}[which]
    before = broker.catalog.segments(TOPIC, 0)
    flip(sealed, bad.position + WHERE[where](bad))
    corrupted = sealed.read_bytes()

    def assert_refused(reader: Broker, end: int) -> None:
        for offset in (bad.base, bad.base + bad.count // 2, bad.next - 1):
            with pytest.raises(StoreError) as error:
                reader.read(TOPIC, 0, offset, 5)
            message = str(error.value)
            assert str(sealed) in message and f"byte {bad.position}" in message, message
        # What precedes the bad batch, and the other segments, still read fine.
        if bad.base > 0:
            assert_records(reader.read(TOPIC, 0, 0, bad.base), 0, bad.base)
        assert_records(read_all(reader, TOPIC, 0, start=batches[-1].next), batches[-1].next, end)

    with Broker(data_dir) as reader:
        assert_refused(reader, n)
        assert reader.offset_for_time(TOPIC, 0, ts_of(n - 1)) == n - 1

    # The CLI reports it as one line and prints no record.
    broker.create_group(TOPIC, "audit", "reader")
    broker.commit(TOPIC, "audit", 0, bad.base)
    consumed = ebb("consume", TOPIC, "--group", "audit", "--json")
    assert consumed.code == 2 and consumed.out == ""
    assert str(sealed) in consumed.err and len(consumed.err.strip().splitlines()) == 1

    # A writer opening the partition does not "repair" a sealed segment by cutting it,
    # and the catalog keeps describing it as it was written.
    with Broker(data_dir) as writer:
        result = writer.append(TOPIC, 0, [NewRecord(value_of(n), key_of(n), ts_of(n))])
        assert (result.base_offset, result.next_offset) == (n, n + 1)
        after = writer.catalog.segments(TOPIC, 0)[0]
        extent = lambda s: (s.base_offset, s.next_offset, s.size_bytes, s.sealed)  # noqa: E731
        assert extent(after) == extent(before[0]), "the catalog no longer describes the sealed segment as written"
    assert sealed.read_bytes() == corrupted
    with Broker(data_dir) as reader:
        assert_refused(reader, n + 1)


# -- 4. missing and short index files --------------------------------------------------


def test_index_files_written_by_appends_point_at_each_batch(broker: Broker, data_dir: Path) -> None:
    """The baseline the recovery cases rely on: as appended (and sealed), each segment's
    .index holds (base offset, file position) of every batch and its .timeindex the
    (largest timestamp so far, base offset) entries, as engine/store/index.py says."""
    fill(broker, 14)
    logs = log_files(partition_dir(data_dir))
    assert len(logs) >= 3
    for p in logs:
        batches = parse_log(p)[0]
        assert len(batches) >= 2
        offsets, times = expected_index_files(batches)
        written = list(_ENTRY.iter_unpack(p.with_suffix(".index").read_bytes()))
        assert written == list(_ENTRY.iter_unpack(offsets)), f"{p.with_suffix('.index')}: (base, position) entries"
        assert p.with_suffix(".timeindex").read_bytes() == times


def _delete(path: Path) -> None:
    path.unlink()


def _shorten(path: Path) -> None:
    size = path.stat().st_size
    assert size >= 3 * _ENTRY.size
    os.truncate(path, 2 * _ENTRY.size + 7)  # two whole entries and part of a third


INDEX_DAMAGE = {
    # name: [(segment: 0 = oldest sealed, 1 = next sealed, -1 = active, suffix, action)]
    "sealed_index_and_timeindex_missing": [(0, ".index", _delete), (0, ".timeindex", _delete)],
    "sealed_index_missing": [(1, ".index", _delete)],
    "sealed_timeindex_missing": [(1, ".timeindex", _delete)],
    "sealed_indexes_short": [(0, ".index", _shorten), (0, ".timeindex", _shorten)],
    "sealed_timeindex_short": [(1, ".timeindex", _shorten)],
    "active_index_short": [(-1, ".index", _shorten)],
    "active_timeindex_short": [(-1, ".timeindex", _shorten)],
    "active_indexes_missing": [(-1, ".index", _delete), (-1, ".timeindex", _delete)],
    "sealed_missing_and_active_short": [(0, ".index", _delete), (0, ".timeindex", _delete), (-1, ".index", _shorten)],
}


@pytest.mark.parametrize("damage", list(INDEX_DAMAGE))
def test_missing_or_short_index_files_give_correct_reads_and_are_rebuilt(
    broker: Broker, ebb, data_dir: Path, damage: str
) -> None:
    n = fill(broker, 16, per_append=40, segment_size="30KiB")
    pdir = partition_dir(data_dir)
    logs = log_files(pdir)
    assert len(logs) >= 3 and all(len(parse_log(p)[0]) >= 3 for p in logs)
    for segment, suffix, action in INDEX_DAMAGE[damage]:
        action(logs[segment].with_suffix(suffix))

    probes = [0, 1, n // 3, n // 2, n - 41, n - 1]
    for p in logs:
        for b in parse_log(p)[0]:
            probes += [b.base, b.base + b.count // 2, b.next - 1]
    # Time probes: exactly a record's time, just after one, before everything, after everything.
    times = [(ts_of(o), o) for o in probes] + [(ts_of(o) + 5, o + 1) for o in probes if o + 1 < n]
    times += [(T0 - 1000, 0), (ts_of(n - 1) + 1, None)]

    def assert_reads(b: Broker) -> None:
        assert_records(read_all(b, TOPIC, 0), 0, n)
        for o in probes:
            assert_records(b.read(TOPIC, 0, o, 1), o, o + 1)
            assert_records(b.read(TOPIC, 0, o, 7), o, min(o + 7, n))
        for t, expected in times:
            assert b.offset_for_time(TOPIC, 0, t) == expected, f"offset_for_time({t - T0} ms after T0)"

    with Broker(data_dir) as reader:
        assert_reads(reader)
    with Broker(data_dir) as writer:
        writer.recover(TOPIC)
        for p in logs:
            offsets, times_ = expected_index_files(parse_log(p)[0])
            assert p.with_suffix(".index").read_bytes() == offsets, f"{p.with_suffix('.index')} not rebuilt"
            assert p.with_suffix(".timeindex").read_bytes() == times_, f"{p.with_suffix('.timeindex')} not rebuilt"
        result = writer.append(TOPIC, 0, [NewRecord(value_of(n), key_of(n), ts_of(n))])
        assert result.base_offset == n
    n += 1
    times[-1] = (ts_of(n - 1) + 1, None)
    times.append((ts_of(n - 1), n - 1))
    with Broker(data_dir) as reader:
        assert_reads(reader)
    assert_describe_agrees_with_files(ebb, data_dir)


# -- 5. an interrupted deletion ----------------------------------------------------------


def set_log_start(broker: Broker, offset: int) -> None:
    with broker.catalog.write():
        broker.catalog.db.execute(
            "UPDATE partitions SET log_start_offset = ? WHERE topic = ? AND partition = 0", (offset, TOPIC)
        )


def segment_bases(pdir: Path) -> list[int]:
    return [int(p.name[:-4]) for p in log_files(pdir)]


def files_of(pdir: Path, base: int) -> list[str]:
    return sorted(p.name for p in pdir.iterdir() if p.name.startswith(f"{base:020d}."))


@pytest.fixture
def four_segments(broker: Broker, data_dir: Path) -> tuple[int, list[int]]:
    n = fill(broker, 20)
    bases = segment_bases(partition_dir(data_dir))
    assert len(bases) >= 4
    return n, bases


def test_interrupted_deletion_is_finished_when_the_log_start_moved_past_it(
    broker: Broker, ebb, data_dir: Path, four_segments
) -> None:
    n, bases = four_segments
    pdir = partition_dir(data_dir)
    set_log_start(broker, bases[1])
    os.replace(seg_path(pdir, bases[0]), seg_path(pdir, bases[0], ".log.deleted"))  # crash after the rename

    with Broker(data_dir) as reader:  # a reader meanwhile serves from the log start
        assert_records(read_all(reader, TOPIC, 0, start=bases[1]), bases[1], n)
    with Broker(data_dir) as writer:
        result = writer.append(TOPIC, 0, [NewRecord(value_of(n), key_of(n), ts_of(n))])
        assert result.base_offset == n
    assert files_of(pdir, bases[0]) == []
    assert segment_bases(pdir) == bases[1:]
    with Broker(data_dir) as reader:
        assert_records(read_all(reader, TOPIC, 0, start=bases[1]), bases[1], n + 1)
    described = assert_describe_agrees_with_files(ebb, data_dir)
    assert described["partitions"][0]["log_start_offset"] == bases[1]
    assert [s["base_offset"] for s in described["partitions"][0]["segments"]] == bases[1:]


@pytest.mark.parametrize("log_start", ["unmoved", "inside_the_segment"])
def test_interrupted_deletion_is_rolled_back_when_the_log_start_does_not_cover_it(
    broker: Broker, ebb, data_dir: Path, four_segments, log_start: str
) -> None:
    n, bases = four_segments
    pdir = partition_dir(data_dir)
    start = 0 if log_start == "unmoved" else bases[1] + 3
    set_log_start(broker, start)
    original = seg_path(pdir, bases[1]).read_bytes()
    os.replace(seg_path(pdir, bases[1]), seg_path(pdir, bases[1], ".log.deleted"))

    with Broker(data_dir) as writer:
        writer.recover(TOPIC)
    assert seg_path(pdir, bases[1]).read_bytes() == original
    assert not seg_path(pdir, bases[1], ".log.deleted").exists()
    # Below the log start, the oldest segment goes (wholly below) or stays (not).
    assert segment_bases(pdir) == (bases if start == 0 else bases[1:])
    with Broker(data_dir) as reader:
        assert_records(read_all(reader, TOPIC, 0, start=start), start, n)
    assert_describe_agrees_with_files(ebb, data_dir)


def test_readers_meanwhile_never_skip_the_segment_of_an_interrupted_deletion(
    broker: Broker, ebb, data_dir: Path, four_segments
) -> None:
    """Until a writer rolls the deletion back, the records of the renamed segment are
    still live (the log start does not cover them): a reader may fail on them, but must
    not silently serve later offsets instead, and a group must not commit past them."""
    n, bases = four_segments
    pdir = partition_dir(data_dir)
    os.replace(seg_path(pdir, bases[1]), seg_path(pdir, bases[1], ".log.deleted"))
    broker.create_group(TOPIC, "audit", "subscriber")
    broker.commit(TOPIC, "audit", 0, bases[1])
    delivered: list[int] = []

    with Broker(data_dir) as reader:
        try:
            got = [r.offset for r in reader.read(TOPIC, 0, bases[1], 3)]
        except StoreError:
            got = None
        assert got in (None, [bases[1], bases[1] + 1, bases[1] + 2]), f"asked for {bases[1]}, served {got}"
        try:
            delivered += [c.record.offset for c in reader.consume(TOPIC, "audit", max_records=3)]
        except StoreError:
            pass
        assert delivered in ([], [bases[1], bases[1] + 1, bases[1] + 2]), f"group was served {delivered}"

    with Broker(data_dir) as writer:
        writer.recover(TOPIC)  # rolls the deletion back
        while consumed := writer.consume(TOPIC, "audit", max_records=500):
            delivered += [c.record.offset for c in consumed]
    assert delivered == list(range(bases[1], n)), "the group lost records of the segment"


def test_sealed_segments_wholly_below_the_log_start_are_deleted_on_writer_open(
    broker: Broker, ebb, data_dir: Path, four_segments
) -> None:
    n, bases = four_segments
    pdir = partition_dir(data_dir)
    set_log_start(broker, bases[2])  # decided, but the process died before deleting
    with Broker(data_dir) as reader:
        assert_records(read_all(reader, TOPIC, 0, start=bases[2]), bases[2], n)
    with Broker(data_dir) as writer:
        writer.recover(TOPIC)
    assert files_of(pdir, bases[0]) == [] and files_of(pdir, bases[1]) == []
    assert segment_bases(pdir) == bases[2:]
    with Broker(data_dir) as reader:
        assert_records(read_all(reader, TOPIC, 0, start=bases[2]), bases[2], n)
        assert reader.read(TOPIC, 0, 0, 5)[0].offset == bases[2]
    described = assert_describe_agrees_with_files(ebb, data_dir)
    assert [s["base_offset"] for s in described["partitions"][0]["segments"]] == bases[2:]
