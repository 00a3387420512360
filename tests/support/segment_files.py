"""Segment files read independently of the engine, and the records the recovery and
verify tests write.

The batch format is parsed here from its description (``engine/store/batch.py``'s
docstring), so that a test does not only compare the engine with itself.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

from console.cli.records import generated_value
from engine.broker import Broker
from engine.store.batch import NewRecord, Record

TOPIC = "events"
T0 = 1_762_000_000_000  # 2025-11-01T12:26:40Z, epoch ms
KiB = 1024

# -- an independent reader of the on-disk format ------------------------------------

_PREFIX = struct.Struct("<4sII")  # magic, length (bytes after the crc), crc
_HEADER = struct.Struct("<qIqq")  # base, count, first timestamp, max timestamp
_RECORD = struct.Struct("<qiI")  # timestamp, key length (-1: none), value length
_ENTRY = struct.Struct("<qq")
HEADER_BYTES = _PREFIX.size + _HEADER.size


@dataclass
class FileBatch:
    position: int
    size: int
    base: int
    count: int
    first_ts: int
    max_ts: int
    records: list[tuple[int, int, bytes | None, bytes]]  # offset, timestamp, key, value

    @property
    def next(self) -> int:
        return self.base + self.count


def parse_log(path: Path) -> tuple[list[FileBatch], int, int]:
    """The valid batches of a segment file, where the valid data ends, and the file size."""
    data = path.read_bytes()
    batches: list[FileBatch] = []
    pos = 0
    while len(data) - pos >= HEADER_BYTES:
        magic, length, crc = _PREFIX.unpack_from(data, pos)
        end = pos + _PREFIX.size + length
        if magic != b"EBB1" or length < _HEADER.size or end > len(data):
            break
        body = data[pos + _PREFIX.size : end]
        if zlib.crc32(body) != crc:
            break
        base, count, first_ts, max_ts = _HEADER.unpack_from(body, 0)
        records = []
        cursor = _HEADER.size
        for i in range(count):
            ts, key_len, value_len = _RECORD.unpack_from(body, cursor)
            cursor += _RECORD.size
            key = None
            if key_len >= 0:
                key = body[cursor : cursor + key_len]
                cursor += key_len
            records.append((base + i, ts, key, body[cursor : cursor + value_len]))
            cursor += value_len
        assert cursor == len(body), f"{path}: batch at byte {pos} has trailing bytes"
        batches.append(FileBatch(pos, end - pos, base, count, first_ts, max_ts, records))
        pos = end
    return batches, pos, len(data)


def expected_index_files(batches: list[FileBatch]) -> tuple[bytes, bytes]:
    """The offset index (base, position) per batch and the time index (largest
    timestamp so far, base) per batch that raises it, as index.py documents them."""
    offsets = b"".join(_ENTRY.pack(b.base, b.position) for b in batches)
    times = []
    for b in batches:
        if not times or b.max_ts > times[-1][0]:
            times.append((b.max_ts, b.base))
    return offsets, b"".join(_ENTRY.pack(*t) for t in times)


def partition_dir(data_dir: Path, partition: int = 0, topic: str = TOPIC) -> Path:
    return data_dir / "topics" / topic / str(partition)


def log_files(pdir: Path) -> list[Path]:
    return sorted(pdir.glob("*.log"))


def seg_path(pdir: Path, base: int, suffix: str = ".log") -> Path:
    return pdir / f"{base:020d}{suffix}"


def flip(path: Path, position: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0x5A]))


def read_all(broker: Broker, topic: str, partition: int, start: int = 0, chunk: int = 4000) -> list[Record]:
    """Every record from ``start`` to the end, checking offsets are dense."""
    out: list[Record] = []
    offset = start
    while True:
        batch = broker.read(topic, partition, offset, chunk)
        if not batch:
            return out
        assert [r.offset for r in batch] == list(range(offset, offset + len(batch))), "offsets are not dense"
        out.extend(batch)
        offset += len(batch)


def assert_describe_agrees_with_files(ebb, data_dir: Path, topic: str = TOPIC) -> dict:
    """``topic describe --json`` against the segment files, checked independently."""
    result = ebb("topic", "describe", topic, "--json")
    assert result.code == 0, result.err
    described = json.loads(result.out)
    for part in described["partitions"]:
        pdir = partition_dir(data_dir, part["partition"], topic)
        assert not list(pdir.glob("*.log.deleted")), "a deletion was left half-done"
        segments = part["segments"]
        assert [s["base_offset"] for s in segments] == [int(p.name[:-4]) for p in log_files(pdir)]
        for i, seg in enumerate(segments):
            path = seg_path(pdir, seg["base_offset"])
            batches, valid_end, size = parse_log(path)
            assert seg["size_bytes"] == size, f"{path}: catalog says {seg['size_bytes']} bytes, file has {size}"
            assert valid_end == size, f"{path}: bytes after the last valid batch ({valid_end} of {size})"
            assert seg["sealed"] == (i < len(segments) - 1)
            if i:
                assert seg["base_offset"] == segments[i - 1]["next_offset"], "segments are not contiguous"
            expected_next = seg["base_offset"]
            for b in batches:
                assert b.base == expected_next, f"{path}: batch at byte {b.position} is not contiguous"
                expected_next = b.next
            assert seg["next_offset"] == expected_next
            if batches:
                assert seg["first_timestamp"] == batches[0].records[0][1]
                assert seg["max_timestamp"] == max(r[1] for b in batches for r in b.records)
            else:
                assert seg["first_timestamp"] is None and seg["max_timestamp"] is None
        assert part["next_offset"] == segments[-1]["next_offset"]
        assert part["size_bytes"] == sum(s["size_bytes"] for s in segments)
        assert segments[0]["base_offset"] <= part["log_start_offset"] <= segments[0]["next_offset"]
    return described


# -- the records the in-process cases write ----------------------------------------


def value_of(i: int) -> bytes:
    return generated_value(i, 100)


def key_of(i: int) -> bytes | None:
    return None if i % 3 == 0 else b"k%d" % i


def ts_of(i: int) -> int:
    return T0 + 10 * i


def fill(broker: Broker, appends: int, per_append: int = 60, segment_size: str = "40KiB") -> int:
    """A topic whose segments hold ~5 batches each (one batch per append, split at
    rolls); returns the number of records."""
    broker.create_topic(TOPIC, 1, {"segment_size": segment_size})
    n = 0
    for _ in range(appends):
        broker.append(TOPIC, 0, [NewRecord(value_of(i), key_of(i), ts_of(i)) for i in range(n, n + per_append)])
        n += per_append
    return n


def assert_records(records: list[Record], start: int, end: int) -> None:
    assert [r.offset for r in records] == list(range(start, end))
    for r in records:
        assert (r.timestamp, r.key, r.value) == (ts_of(r.offset), key_of(r.offset), value_of(r.offset)), r.offset
