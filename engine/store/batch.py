"""The on-disk batch: the unit of writing, checksumming and recovery.

A segment file is a sequence of batches. Each batch is::

    magic   4s   b"EBB1"
    length  u32  bytes that follow the crc field (header rest + records)
    crc     u32  CRC-32 of those bytes
    base    i64  offset of the first record
    count   u32  number of records
    first   i64  timestamp (ms) of the first record
    maxts   i64  largest timestamp (ms) in the batch
    records count x (timestamp i64, key length i32 (-1 = no key), value length u32,
                     key bytes, value bytes)

A batch is valid only if its magic, length and checksum agree; the first invalid batch
of a file marks its end (a torn write) or corruption (an invalid batch in the middle).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

# The standard CRC-32 (as zlib's), computed with zlib-ng's SIMD code: 13x faster than
# the system zlib here, which made the checksum the largest cost of an append.
from zlib_ng.zlib_ng import crc32

MAGIC = b"EBB1"
_PREFIX = struct.Struct("<4sII")  # magic, length, crc
_HEADER = struct.Struct("<qIqq")  # base, count, first timestamp, max timestamp
_RECORD = struct.Struct("<qiI")  # timestamp, key length, value length
PREFIX_SIZE = _PREFIX.size
HEADER_SIZE = _PREFIX.size + _HEADER.size
RECORD_OVERHEAD = _RECORD.size
# A batch's length field is a u32; no batch may come near it.
MAX_BATCH_BYTES = 1 << 30


@dataclass(frozen=True, slots=True)
class Record:
    """A record as read back from the log."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes


@dataclass(frozen=True, slots=True)
class NewRecord:
    """A record to append; the log assigns its offset."""

    value: bytes
    key: bytes | None = None
    timestamp: int | None = None  # None: the time the engine receives it


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """Where a valid batch sits in its file and what it holds."""

    position: int
    size: int
    base_offset: int
    count: int
    first_timestamp: int
    max_timestamp: int

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.count


def record_size(record: NewRecord) -> int:
    """Bytes a record takes inside a batch."""
    return RECORD_OVERHEAD + len(record.value) + (len(record.key) if record.key else 0)


def encode_batch(
    base_offset: int, records: Sequence[NewRecord], timestamps: Sequence[int]
) -> tuple[bytearray, BatchHeader]:
    """Encode records (with their resolved timestamps) as one checksummed batch; the
    header describes it as if it started at position 0."""
    first_ts, max_ts = timestamps[0], max(timestamps)
    # One join into one buffer, then the prefix patched in place: a batch is about a
    # megabyte, and every extra copy of it shows in the append benchmark.
    parts: list[bytes] = [bytes(_PREFIX.size), _HEADER.pack(base_offset, len(records), first_ts, max_ts)]
    pack = _RECORD.pack
    for record, ts in zip(records, timestamps):
        key = record.key
        parts.append(pack(ts, -1 if key is None else len(key), len(record.value)))
        if key:
            parts.append(key)
        parts.append(record.value)
    data = bytearray().join(parts)
    crc = crc32(memoryview(data)[PREFIX_SIZE:])
    _PREFIX.pack_into(data, 0, MAGIC, len(data) - PREFIX_SIZE, crc)
    return data, BatchHeader(0, len(data), base_offset, len(records), first_ts, max_ts)


def peek_header(buf: bytes | memoryview, position: int) -> BatchHeader | None:
    """The framing and header fields of the batch at ``position``, without reading its
    records or checking its checksum (for indexes that were validated when built)."""
    if len(buf) - position < HEADER_SIZE:
        return None
    magic, length, _crc = _PREFIX.unpack_from(buf, position)
    if magic != MAGIC or length < _HEADER.size:
        return None
    base, count, first_ts, max_ts = _HEADER.unpack_from(buf, position + PREFIX_SIZE)
    if count == 0 or base < 0:
        return None
    return BatchHeader(position, PREFIX_SIZE + length, base, count, first_ts, max_ts)


def read_header(buf: bytes | memoryview, position: int) -> BatchHeader | None:
    """The batch starting at ``position`` of ``buf``, or None if it is not a whole valid batch."""
    header = peek_header(buf, position)
    if header is None or position + header.size > len(buf):
        return None
    crc = _PREFIX.unpack_from(buf, position)[2]
    if crc32(buf[position + PREFIX_SIZE : position + header.size]) != crc:
        return None
    return header


def scan(buf: bytes | memoryview, position: int = 0) -> Iterator[BatchHeader]:
    """Valid batches of ``buf`` from ``position`` on, stopping at the first invalid one."""
    while True:
        header = read_header(buf, position)
        if header is None:
            return
        yield header
        position += header.size


def decode_records(buf: bytes | memoryview, header: BatchHeader) -> Iterator[Record]:
    """The records of a batch whose header (and so checksum) was already validated."""
    pos = header.position + HEADER_SIZE
    unpack = _RECORD.unpack_from
    rsize = _RECORD.size
    for i in range(header.count):
        ts, key_len, value_len = unpack(buf, pos)
        pos += rsize
        key: bytes | None = None
        if key_len >= 0:
            key = bytes(buf[pos : pos + key_len])
            pos += key_len
        value = bytes(buf[pos : pos + value_len])
        pos += value_len
        yield Record(header.base_offset + i, ts, key, value)
