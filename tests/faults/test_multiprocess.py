"""Several processes on one data directory (SPEC §2): one writer per partition at a
time (a file lock), readers never block and never see a partial record."""

from __future__ import annotations

import json
import struct
import subprocess
import time
import zlib
from pathlib import Path

import pytest

from console.cli.records import generated_value
from engine.broker import Broker
from engine.store.batch import Record
from tests.support.cli import REPO, ebb_command, subprocess_env

TOPIC = "shared"
SIZE = 200
KEYS = {b"A": 1_700_000_000_000, b"B": 1_800_000_000_000}  # key -> first record's timestamp

# -- an independent reader of the on-disk format (see engine/store/batch.py) -----------

_PREFIX = struct.Struct("<4sII")
_HEADER = struct.Struct("<qIqq")
_RECORD = struct.Struct("<qiI")


def parse_log(path: Path) -> tuple[list[tuple[int, int, list[int]]], int, int]:
    """(base, count, record timestamps) of each valid batch, where the valid data ends,
    and the file size."""
    data = path.read_bytes()
    batches = []
    pos = 0
    while len(data) - pos >= _PREFIX.size + _HEADER.size:
        magic, length, crc = _PREFIX.unpack_from(data, pos)
        end = pos + _PREFIX.size + length
        if magic != b"EBB1" or end > len(data) or zlib.crc32(data[pos + _PREFIX.size : end]) != crc:
            break
        base, count, _first, _max = _HEADER.unpack_from(data, pos + _PREFIX.size)
        cursor = pos + _PREFIX.size + _HEADER.size
        stamps = []
        for _ in range(count):
            ts, key_len, value_len = _RECORD.unpack_from(data, cursor)
            stamps.append(ts)
            cursor += _RECORD.size + max(key_len, 0) + value_len
        assert cursor == end, f"{path}: batch at byte {pos} is not what its length says"
        batches.append((base, count, stamps))
        pos = end
    return batches, pos, len(data)


def assert_describe_agrees_with_files(ebb, data_dir: Path, topic: str = TOPIC) -> dict:
    result = ebb("topic", "describe", topic, "--json")
    assert result.code == 0, result.err
    described = json.loads(result.out)
    for part in described["partitions"]:
        pdir = data_dir / "topics" / topic / str(part["partition"])
        segments = part["segments"]
        assert [s["base_offset"] for s in segments] == sorted(int(p.name[:-4]) for p in pdir.glob("*.log"))
        for i, seg in enumerate(segments):
            path = pdir / f"{seg['base_offset']:020d}.log"
            batches, valid_end, size = parse_log(path)
            assert seg["size_bytes"] == size == valid_end, (
                f"{path}: catalog {seg['size_bytes']}, file {size}, valid {valid_end}"
            )
            assert seg["sealed"] == (i < len(segments) - 1)
            if i:
                assert seg["base_offset"] == segments[i - 1]["next_offset"], "segments are not contiguous"
            expected = seg["base_offset"]
            for base, count, _ in batches:
                assert base == expected, f"{path}: offsets not contiguous at batch {base}"
                expected = base + count
            assert seg["next_offset"] == expected
            stamps = [ts for _, _, s in batches for ts in s]
            assert seg["first_timestamp"] == (stamps[0] if stamps else None)
            assert seg["max_timestamp"] == (max(stamps) if stamps else None)
        assert part["next_offset"] == segments[-1]["next_offset"]
        assert part["size_bytes"] == sum(s["size_bytes"] for s in segments)
    return described


# -- helpers -----------------------------------------------------------------------


def producer(data_dir: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        ebb_command(data_dir, "produce", TOPIC, *args, "--json"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env=subprocess_env(),
    )


def keyed_args(key: bytes, count: int, *extra: str, size: int = SIZE) -> tuple[str, ...]:
    return (
        "--key",
        key.decode(),
        "--count",
        str(count),
        "--size",
        str(size),
        "--timestamp",
        str(KEYS[key]),
        "--timestamp-step",
        "1ms",
        *extra,
    )


def finish(procs: list[subprocess.Popen], timeout: float = 60) -> list[list[dict]]:
    """Wait for every process; their ack lines."""
    acks = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=timeout)
            assert proc.returncode == 0, err.decode()
            acks.append([json.loads(line) for line in out.decode().splitlines()])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return acks


def read_all(broker: Broker, partition: int, start: int = 0) -> list[Record]:
    out: list[Record] = []
    while batch := broker.read(TOPIC, partition, start + len(out), 5000):
        out.extend(batch)
    assert [r.offset for r in out] == list(range(start, start + len(out))), "offsets are not dense"
    return out


def index_of(record: Record, first_ts: int, size: int = SIZE) -> int:
    """Which record of its producer's run this is, after checking it is whole: its
    timestamp and every byte of its value say the same index."""
    index = record.timestamp - first_ts
    assert 0 <= index, f"offset {record.offset}: timestamp {record.timestamp} is not from this run"
    assert record.value == generated_value(index, size), f"offset {record.offset}: value is not record {index}"
    return index


def by_producer(records: list[Record], partition: int | None = None) -> dict[bytes, list[int]]:
    """Generated indexes per producer key, in offset order."""
    seen: dict[bytes, list[int]] = {key: [] for key in KEYS}
    for r in records:
        assert r.key in KEYS, f"offset {r.offset}: unexpected key {r.key!r}"
        seen[r.key].append(index_of(r, KEYS[r.key]))
    return seen


# -- two producers on one partition ------------------------------------------------------


@pytest.mark.slow
def test_two_processes_appending_to_one_partition(ebb, data_dir: Path) -> None:
    # Small segments: the two writers also roll segments under each other.
    assert ebb("topic", "create", TOPIC, "--segment-size", "300KiB").code == 0
    procs = [producer(data_dir, "--partition", "0", *keyed_args(key, 5000)) for key in KEYS]
    acks = finish(procs)

    with Broker(data_dir) as reader:
        records = read_all(reader, 0)
        assert reader.read(TOPIC, 0, 10_000, 10) == []
    assert [r.offset for r in records] == list(range(10_000))
    seen = by_producer(records)
    for key in KEYS:
        # Every record of each producer exactly once, in the order it produced them.
        assert seen[key] == list(range(5000)), f"producer {key!r}: records missing, duplicated or reordered"

    # Each acknowledgement covers exactly the records of its own producer, and the
    # acknowledged ranges of both tile 0..9999.
    ranges = []
    for key, key_acks in zip(KEYS, acks):
        assert sum(a["count"] for a in key_acks) == 5000
        done = 0
        for a in key_acks:
            assert a["partition"] == 0 and a["count"] == a["next_offset"] - a["base_offset"]
            chunk = records[a["base_offset"] : a["next_offset"]]
            assert {r.key for r in chunk} == {key}
            assert [index_of(r, KEYS[key]) for r in chunk] == list(range(done, done + a["count"]))
            done += a["count"]
            ranges.append((a["base_offset"], a["next_offset"]))
    ranges.sort()
    assert ranges[0][0] == 0 and ranges[-1][1] == 10_000
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))

    described = assert_describe_agrees_with_files(ebb, data_dir)
    assert described["partitions"][0]["next_offset"] == 10_000
    assert len(described["partitions"][0]["segments"]) >= 5


@pytest.mark.slow
def test_two_live_writers_taking_turns_on_one_partition(ebb, data_dir: Path) -> None:
    """Both processes stay alive with their writer state cached between appends, and
    each appends (and rolls segments) while the other waits: every append must
    continue after what the other wrote, never over it."""
    assert ebb("topic", "create", TOPIC, "--segment-size", "300KiB").code == 0
    rounds, batch = 6, 1000  # produce appends every 1000 records it reads
    procs = {
        key: subprocess.Popen(
            ebb_command(
                data_dir,
                "produce",
                TOPIC,
                "--partition",
                "0",
                "--key",
                key.decode(),
                "--timestamp",
                str(KEYS[key]),
                "--timestamp-step",
                "1ms",
                "--json",
            ),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=REPO,
            env=subprocess_env(),
        )
        for key in KEYS
    }
    sent = dict.fromkeys(KEYS, 0)
    try:
        for turn in range(rounds):
            for k, (key, proc) in enumerate(procs.items()):
                lines = b"".join(generated_value(sent[key] + i, SIZE) + b"\n" for i in range(batch))
                proc.stdin.write(lines)
                proc.stdin.flush()
                sent[key] += batch
                # Stdin is written as it arrives: where the pipe is slow to refill (a
                # loaded machine), the chunk is acknowledged in runs, each one on from
                # the last and from what the other process wrote before it.
                expected = (2 * turn + k) * batch
                at = expected
                while at < expected + batch:
                    ack = json.loads(proc.stdout.readline() or b"null")
                    assert ack is not None, proc.stderr.read().decode()
                    assert ack["base_offset"] == at and ack["next_offset"] <= expected + batch, (key, ack)
                    at = ack["next_offset"]
        # A last, partial chunk from each, flushed when its input ends.
        for key, proc in procs.items():
            proc.stdin.write(b"".join(generated_value(sent[key] + i, SIZE) + b"\n" for i in range(300)))
            sent[key] += 300
            out, err = proc.communicate(timeout=30)
            assert proc.returncode == 0, err.decode()
            tail = [json.loads(line) for line in out.decode().splitlines()]
            assert sum(a["count"] for a in tail) == 300
            assert all(a["next_offset"] == b["base_offset"] for a, b in zip(tail, tail[1:])), tail
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    total = sum(sent.values())
    with Broker(data_dir) as reader:
        records = read_all(reader, 0)
    assert len(records) == total
    seen = by_producer(records)
    assert {key: seen[key] for key in KEYS} == {key: list(range(sent[key])) for key in KEYS}
    described = assert_describe_agrees_with_files(ebb, data_dir)
    assert described["partitions"][0]["next_offset"] == total


@pytest.mark.slow
def test_two_processes_appending_to_a_topic_of_three_partitions(ebb, data_dir: Path) -> None:
    assert ebb("topic", "create", TOPIC, "--partitions", "3", "--segment-size", "300KiB").code == 0
    # No key and no partition: each producer spreads its records over the partitions;
    # the timestamps (and the values) tell the producers and their records apart.
    procs = [
        producer(
            data_dir, "--count", "5000", "--size", str(SIZE), "--timestamp", str(KEYS[key]), "--timestamp-step", "1ms"
        )
        for key in KEYS
    ]
    acks = finish(procs)

    starts = sorted(KEYS.values())
    seen: dict[int, set[int]] = {t: set() for t in starts}
    total = 0
    with Broker(data_dir) as reader:
        for p in range(3):
            records = read_all(reader, p)
            total += len(records)
            per_run: dict[int, list[int]] = {t: [] for t in starts}
            for r in records:
                assert r.key is None
                first_ts = max(t for t in starts if t <= r.timestamp)
                per_run[first_ts].append(index_of(r, first_ts))
            for first_ts, indexes in per_run.items():
                assert indexes == sorted(indexes), f"partition {p}: a producer's records are out of order"
                assert not seen[first_ts] & set(indexes), f"partition {p}: a record is duplicated"
                seen[first_ts].update(indexes)
    assert total == 10_000
    for first_ts in starts:
        assert seen[first_ts] == set(range(5000)), "a producer's record is missing"

    used = {a["partition"] for run in acks for a in run}
    assert used == {0, 1, 2}, "records without a key are spread over the partitions"
    described = assert_describe_agrees_with_files(ebb, data_dir)
    assert sum(p["next_offset"] for p in described["partitions"]) == 10_000
    for p in described["partitions"]:
        acked = sum(a["count"] for run in acks for a in run if a["partition"] == p["partition"])
        assert p["next_offset"] == acked


# -- a reader while two producers append ----------------------------------------------------


@pytest.mark.slow
def test_reader_never_sees_a_partial_record_while_two_processes_append(ebb, data_dir: Path) -> None:
    # Batches of 1000 records of 4 KiB (4 MB each, copied into the file by one write)
    # make a half-written batch visible to a reader for long enough to be met.
    count, size = 6000, 4096
    assert ebb("topic", "create", TOPIC, "--segment-size", "9MiB").code == 0
    reader = Broker(data_dir)
    procs = [producer(data_dir, "--partition", "0", *keyed_args(key, count, size=size)) for key in KEYS]
    try:
        position = 0  # the reader's next offset
        last_index = dict.fromkeys(KEYS, -1)
        polls = partial_views = 0
        group_position = 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            running = any(p.poll() is None for p in procs)
            # Incremental reads: dense offsets, whole records, each producer's records
            # in its own order with none skipped.
            while batch := reader.read(TOPIC, 0, position, 3000):
                assert [r.offset for r in batch] == list(range(position, position + len(batch)))
                for r in batch:
                    assert r.key in KEYS
                    index = index_of(r, KEYS[r.key], size)
                    assert index == last_index[r.key] + 1, f"offset {r.offset}: producer {r.key!r} skipped or repeated"
                    last_index[r.key] = index
                position += len(batch)
            # A group consuming (and committing to the shared catalog) meanwhile.
            consumed = reader.consume(TOPIC, "watcher", partition=0, max_records=500)
            assert [c.record.offset for c in consumed] == list(range(group_position, group_position + len(consumed)))
            for c in consumed:
                index_of(c.record, KEYS[c.record.key], size)
            group_position += len(consumed)
            polls += 1
            if running and 0 < position < 2 * count:
                partial_views += 1
            if not running:
                break
        acks = finish(procs)
        assert sum(a["count"] for run in acks for a in run) == 2 * count
        assert position == 2 * count
        assert last_index == dict.fromkeys(KEYS, count - 1)
        assert partial_views >= 1, f"the reader never ran while the producers were writing ({polls} polls)"
        # A full re-read after the fact sees the same log.
        assert len(read_all(reader, 0)) == 2 * count
    finally:
        reader.close()
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    described = assert_describe_agrees_with_files(ebb, data_dir)
    assert described["partitions"][0]["next_offset"] == 2 * count
