"""Append latency to a partition while a cycle deletes thousands of its segments,
against the same appends with no cycle, in one run (issue 17 item 4).

One data directory, one partition with ``--segments`` sealed segments (plus a few).
A producer process appends one small record at a time, back to back, to that
partition through ``Broker.append`` (fsynced, cataloged) and records each append's
latency:

1. ``alone``: ``--appends`` appends, nothing else running;
2. ``during``: the same producer again while this process runs ``ebb truncate
   --oldest-segments N`` (``engine.prune.operations.delete_oldest``: a manual cycle
   through the executor, the path every deletion takes) deleting ``--segments``
   segments of that partition; only the appends that started while the cycle ran
   count (the clocks are the system's monotonic clock, shared by both processes).

Printed: p50, p99 and max append latency of each phase, the p99 ratio (goal: at
most 2), the cycle's duration and how long it held the partition's lock (measured by
wrapping ``FileLock`` in this process). Nothing is asserted: numbers only.

    python bench/deletion_latency.py [--segments 3000] [--appends 400]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from engine.broker import Broker
from engine.prune.operations import delete_oldest
from engine.store import lock as lock_module
from engine.store.batch import NewRecord

TOPIC = "bench"
SEGMENT_SIZE = 4096
#: one record per segment: the setup's append rolls for every record
FILLER = 4096 - 200


def setup(data: Path, segments: int) -> None:
    """A one-partition topic with ``segments`` sealed segments."""
    with Broker(data) as broker:
        broker.create_topic(TOPIC, 1, {"segment_size": f"{SEGMENT_SIZE}B"})
        records = [NewRecord(bytes(FILLER)) for _ in range(segments + 1)]
        for start in range(0, len(records), 500):
            broker.append(TOPIC, 0, records[start : start + 500])
        sealed = sum(s.sealed for s in broker.catalog.segments(TOPIC, 0))
        assert sealed >= segments, sealed


def produce(data: Path, out: Path, stop: Path, minimum: int) -> None:
    """The producer process: append until ``stop`` exists and ``minimum`` appends
    are done; write each append's (start, latency) in seconds to ``out``."""
    latencies: list[tuple[float, float]] = []
    with Broker(data) as broker:
        record = [NewRecord(b"x" * 100)]
        broker.append(TOPIC, 0, record)  # warm: the first append reads the directory
        ready = out.with_suffix(".ready")
        ready.touch()
        while len(latencies) < minimum or not stop.exists():
            start = time.monotonic()
            broker.append(TOPIC, 0, record)
            latencies.append((start, time.monotonic() - start))
    out.write_text(json.dumps(latencies))


def run_producer(data: Path, work: Path, name: str, minimum: int) -> tuple[subprocess.Popen, Path, Path]:
    out, stop = work / f"{name}.json", work / f"{name}.stop"
    child = subprocess.Popen(
        [sys.executable, __file__, "--produce", str(data), str(out), str(stop), str(minimum)],
    )
    ready = out.with_suffix(".ready")
    while not ready.exists():
        if child.poll() is not None:
            raise RuntimeError(f"producer {name} exited with {child.returncode}")
        time.sleep(0.01)
    return child, out, stop


def finish(child: subprocess.Popen, out: Path, stop: Path) -> list[tuple[float, float]]:
    stop.touch()
    if child.wait(600) != 0:
        raise RuntimeError(f"producer exited with {child.returncode}")
    return [tuple(pair) for pair in json.loads(out.read_text())]


class LockHold:
    """How long this process held partition locks (the cycle's), by wrapping FileLock."""

    def __init__(self) -> None:
        self.held: list[float] = []
        self._since: dict[int, float] = {}
        real_acquire, real_release = lock_module.FileLock.acquire, lock_module.FileLock.release

        def acquire(lock: lock_module.FileLock, timeout: float | None) -> None:
            real_acquire(lock, timeout)
            self._since[id(lock)] = time.perf_counter()

        def release(lock: lock_module.FileLock) -> None:
            since = self._since.pop(id(lock), None)
            if since is not None and lock.path.name == ".lock":
                self.held.append(time.perf_counter() - since)
            real_release(lock)

        lock_module.FileLock.acquire = acquire  # type: ignore[method-assign,assignment]
        lock_module.FileLock.release = release  # type: ignore[method-assign,assignment]


def quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=1000, method="inclusive")[int(q * 1000) - 1]


def describe(name: str, latencies: list[float]) -> str:
    ms = [v * 1000 for v in latencies]
    return (
        f"{name:<8} appends {len(ms):>5}   p50 {statistics.median(ms):7.2f} ms   "
        f"p99 {quantile(ms, 0.99):7.2f} ms   max {max(ms):8.2f} ms"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--segments", type=int, default=3000)
    parser.add_argument("--appends", type=int, default=400)
    parser.add_argument("--data-dir", type=Path, help="default: a temporary directory, removed after")
    parser.add_argument("--produce", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.produce:
        data, out, stop, minimum = args.produce
        produce(Path(data), Path(out), Path(stop), int(minimum))
        return 0

    work = Path(tempfile.mkdtemp(prefix="ebb-deletion-bench-"))
    data = args.data_dir or work / "data"
    try:
        started = time.perf_counter()
        setup(data, args.segments)
        print(f"setup: {args.segments} sealed segments in {time.perf_counter() - started:.1f} s")
        os.sync()  # the setup's dirty pages would slow the first phase's fsyncs only

        child, out, stop = run_producer(data, work, "alone", args.appends)
        alone = [latency for _start, latency in finish(child, out, stop)]

        hold = LockHold()
        child, out, stop = run_producer(data, work, "during", 0)
        with Broker(data) as broker:
            started = time.monotonic()
            result = delete_oldest(broker, TOPIC, 0, args.segments, actor="bench")
            ended = time.monotonic()
        during = [latency for start, latency in finish(child, out, stop) if started <= start < ended]
        cycle_seconds = ended - started

        print(describe("alone", alone))
        print(describe("during", during))
        ratio = quantile(during, 0.99) / quantile(alone, 0.99)
        print(f"p99 ratio during/alone: {ratio:.2f} (goal: at most 2)")
        print(
            f"cycle {result.cycle_id}: deleted {result.segments_deleted} segment(s) in {cycle_seconds:.2f} s; "
            f"partition lock held {sum(hold.held) * 1000:.1f} ms in {len(hold.held)} hold(s), "
            f"longest {max(hold.held, default=0) * 1000:.1f} ms"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
