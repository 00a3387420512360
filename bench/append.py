"""Append throughput of the store against a plain sequential write plus fsync.

For 100 B and 1 KiB records, in batches of 1000 records with one fsync per batch,
this measures three sides on the same disk, in the same run:

- ``plain``: one file written with ``os.write`` and ``os.fsync``ed after every batch;
  each write is exactly the bytes the store writes for that batch (the encoded batch,
  built before the clock starts), so the two sides put the same bytes on disk and
  differ only in what the store does around them.
- ``store``: ``PartitionWriter.append`` on a fresh partition, one batch per append
  under the partition lock, as the broker calls it (lock, refresh check, encoding and
  checksum, index entries, one fsync).
- ``broker``: ``Broker.append`` of the same batches: the store path plus the policy
  lookup and one SQLite catalog commit per batch, to show what the catalog costs.

Records (values of the given size, a short key, fixed timestamps) are built before
any timing. Every side runs ``--repeat`` times, the order rotating between repeats,
each run in a fresh directory after an ``os.sync()`` so that one run's writeback does
not land in the next; the median time of each side is reported. MB are 10^6 bytes:
payload MB count the record values only, disk MB the segment bytes (framing,
timestamps and keys included; the store's few index bytes are left out). The ratio is
the side's disk MB/s over plain's, which for the same bytes is plain's time over the
side's. The temporary directory is created under ``--dir`` (default: the current
directory, so not a tmpfs /tmp) and removed at the end. The script only reports: it
never fails on a slow result.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.broker import Broker
from engine.store.batch import NewRecord, encode_batch
from engine.store.partition import MAX_BATCH_RECORDS, PartitionWriter, create_partition

RECORD_SIZES = (100, 1024)
SIDES = ("plain", "store", "broker")
SEGMENT_SIZE = 1 << 30
SEGMENT_SIZE_TEXT = "1 GiB"
BASE_TIMESTAMP = 1_700_000_000_000
TOPIC = "bench"
TARGET_RATIO = 0.5
MB = 1_000_000


@dataclass(frozen=True)
class Workload:
    """The batches to append and, for each, the exact bytes the store writes for it."""

    record_size: int
    batches: list[list[NewRecord]]
    encoded: list[bytearray]

    @property
    def records(self) -> int:
        return sum(len(batch) for batch in self.batches)

    @property
    def payload_bytes(self) -> int:
        return sum(len(r.value) for batch in self.batches for r in batch)

    @property
    def disk_bytes(self) -> int:
        return sum(len(data) for data in self.encoded)


@dataclass(frozen=True)
class SideResult:
    record_size: int
    side: str
    seconds: list[float]
    records: int
    payload_bytes: int
    disk_bytes: int

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def records_per_s(self) -> float:
        return self.records / self.median

    @property
    def payload_mb_per_s(self) -> float:
        return self.payload_bytes / MB / self.median

    @property
    def disk_mb_per_s(self) -> float:
        return self.disk_bytes / MB / self.median


def size_label(size: int) -> str:
    return f"{size // 1024} KiB" if size % 1024 == 0 else f"{size} B"


def build_workload(record_size: int, batch_count: int) -> Workload:
    """Batches of ``MAX_BATCH_RECORDS`` records; values are shared between batches
    (the disk does not care), records and timestamps are not."""
    pool = os.urandom(record_size * MAX_BATCH_RECORDS)
    values = [pool[i * record_size : (i + 1) * record_size] for i in range(MAX_BATCH_RECORDS)]
    keys = [f"k{i:04d}".encode() for i in range(MAX_BATCH_RECORDS)]
    batches: list[list[NewRecord]] = []
    encoded: list[bytearray] = []
    for b in range(batch_count):
        base = b * MAX_BATCH_RECORDS
        timestamps = [BASE_TIMESTAMP + base + i for i in range(MAX_BATCH_RECORDS)]
        batch = [NewRecord(values[i], keys[i], timestamps[i]) for i in range(MAX_BATCH_RECORDS)]
        batches.append(batch)
        encoded.append(encode_batch(base, batch, timestamps)[0])
    return Workload(record_size, batches, encoded)


def run_plain(workdir: Path, workload: Workload) -> float:
    path = workdir / "plain.log"
    start = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        for data in workload.encoded:
            view = memoryview(data)
            written = 0
            while written < len(view):
                written += os.write(fd, view[written:])
            os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - start


def run_store(workdir: Path, workload: Workload) -> float:
    directory = workdir / "partition"
    create_partition(directory)
    writer = PartitionWriter(directory)
    try:
        start = time.perf_counter()
        for batch in workload.batches:
            with writer.locked(0):
                writer.append(batch, now_ms=BASE_TIMESTAMP, segment_size=SEGMENT_SIZE)
        return time.perf_counter() - start
    finally:
        writer.close()


def run_broker(workdir: Path, workload: Workload) -> float:
    with Broker(workdir / "data") as broker:
        broker.create_topic(TOPIC, 1, {"segment_size": SEGMENT_SIZE_TEXT})
        start = time.perf_counter()
        for batch in workload.batches:
            broker.append(TOPIC, 0, batch)
        return time.perf_counter() - start


RUNNERS: dict[str, Callable[[Path, Workload], float]] = {
    "plain": run_plain,
    "store": run_store,
    "broker": run_broker,
}


def measure(side: str, root: Path, workload: Workload) -> float:
    """One timed run of ``side`` in a fresh directory, checked to have written the
    same log bytes as the others."""
    workdir = Path(tempfile.mkdtemp(prefix=f"{side}-", dir=root))
    try:
        os.sync()
        seconds = RUNNERS[side](workdir, workload)
        written = sum(p.stat().st_size for p in workdir.rglob("*.log"))
        if written != workload.disk_bytes:
            raise RuntimeError(f"{side} wrote {written} log bytes, expected {workload.disk_bytes}")
        return seconds
    finally:
        shutil.rmtree(workdir)


def bench_size(root: Path, record_size: int, batch_count: int, repeat: int) -> list[SideResult]:
    workload = build_workload(record_size, batch_count)
    seconds: dict[str, list[float]] = {side: [] for side in SIDES}
    for r in range(repeat):
        for side in SIDES[r % len(SIDES) :] + SIDES[: r % len(SIDES)]:
            seconds[side].append(measure(side, root, workload))
    return [
        SideResult(record_size, side, seconds[side], workload.records, workload.payload_bytes, workload.disk_bytes)
        for side in SIDES
    ]


def ratio(result: SideResult, plain: SideResult) -> float:
    return result.disk_mb_per_s / plain.disk_mb_per_s


def print_table(results: list[SideResult]) -> None:
    print(f"{'records':<9}{'side':<8}{'records/s':>12}{'payload MB/s':>14}{'disk MB/s':>11}{'vs plain':>10}")
    for size in RECORD_SIZES:
        rows = [r for r in results if r.record_size == size]
        plain = next(r for r in rows if r.side == "plain")
        for row in rows:
            print(
                f"{size_label(size):<9}{row.side:<8}{row.records_per_s:>12,.0f}"
                f"{row.payload_mb_per_s:>14.1f}{row.disk_mb_per_s:>11.1f}{ratio(row, plain):>10.2f}"
            )


def print_summary(results: list[SideResult]) -> None:
    for size in RECORD_SIZES:
        rows = {r.side: r for r in results if r.record_size == size}
        print(
            f"{size_label(size)} records: store reaches {ratio(rows['store'], rows['plain']):.2f} of plain "
            f"sequential write+fsync (target >= {TARGET_RATIO}); through the broker "
            f"{ratio(rows['broker'], rows['plain']):.2f}"
        )


def to_json(results: list[SideResult], batch_count: int, repeat: int, directory: Path) -> dict[str, object]:
    plains = {r.record_size: r for r in results if r.side == "plain"}
    return {
        "batches": batch_count,
        "batch_records": MAX_BATCH_RECORDS,
        "repeat": repeat,
        "directory": str(directory),
        "results": [
            {
                "record_size": r.record_size,
                "side": r.side,
                "seconds": r.seconds,
                "median_seconds": r.median,
                "records": r.records,
                "payload_bytes": r.payload_bytes,
                "disk_bytes": r.disk_bytes,
                "records_per_s": r.records_per_s,
                "payload_mb_per_s": r.payload_mb_per_s,
                "disk_mb_per_s": r.disk_mb_per_s,
                "ratio_to_plain": ratio(r, plains[r.record_size]),
            }
            for r in results
        ],
    }


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path.cwd(),
        help="directory to create the temporary files under (default: the current one; use the disk under test)",
    )
    parser.add_argument(
        "--batches", type=int, default=64, help=f"batches of {MAX_BATCH_RECORDS} records per run (default 64)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per side; the median is reported (default 3)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON after the table")
    args = parser.parse_args()
    if args.batches < 1 or args.repeat < 1:
        parser.error("--batches and --repeat must be at least 1")
    return args


def main() -> None:
    args = parse_args()
    root = Path(tempfile.mkdtemp(prefix=".bench-tmp-", dir=args.dir))
    try:
        print(
            f"{args.batches} batches of {MAX_BATCH_RECORDS} records, one fsync per batch, "
            f"median of {args.repeat} runs, in {root}"
        )
        results = [r for size in RECORD_SIZES for r in bench_size(root, size, args.batches, args.repeat)]
    finally:
        shutil.rmtree(root)
    print_table(results)
    print_summary(results)
    if args.json:
        print(json.dumps(to_json(results, args.batches, args.repeat, root), indent=2))


if __name__ == "__main__":
    main()
