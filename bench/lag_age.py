"""Lag in time: what reading the record at each group's position costs a console
refresh or a metrics scrape, against the catalog query alone (the lag the console
and the metrics showed before, from the first timestamp of the segment holding the
position: no segment file read).

A data directory with real segment files is written once through ``Broker.append``
(``--topics`` topics of ``--partitions`` partitions, each with ``--segments`` sealed
segments of ``--batches`` batches of 10 records, and ``--groups`` subscriber groups
per topic at random positions), then, in one process, alternating, ``--rounds``
times each:

- ``catalog``: ``group_lags``, the catalog query every variant runs (the baseline);
- ``cold``: ``partition_lags`` with a new :class:`RecordAges`, so every (group,
  partition) opens the segment holding its position and reads its record: a
  console's first refresh, or every scrape with a cache that never hits;
- ``cold opened``: as ``cold``, each segment opened whole (:meth:`Segment.open`
  validates every batch) instead of read through its offset index: the read path
  before the index was used, and still the fallback where an index is stale;
- ``warm``: ``partition_lags`` with one :class:`RecordAges` kept across rounds: what
  each later refresh or scrape pays while positions stay put;
- ``scrape cold`` / ``scrape warm``: a whole metrics scrape (``EbbCollector``) with
  a new collector each time / with one kept.

Medians in ms, and each against the catalog query of the same run. The machine's
load average is printed before and after; the script only reports.

Run from the repository root: ``python -m bench.lag_age`` (about a minute on the
2-core machine, most of it writing the data directory), or with smaller sizes.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from engine.broker import Broker
from engine.catalog.catalog import Catalog
from engine.catalog.lag import partition_lags
from engine.catalog.queries import group_lags
from engine.metrics.collector import EbbCollector
from engine.prune.record_times import FirstRecord, RecordAges
from engine.store.batch import NewRecord

RECORDS_PER_BATCH = 10
RECORD_BYTES = 100


class OpenedAges(RecordAges):
    """Every record read by opening its segment whole (the ``cold opened`` variant)."""

    def _indexed(self, catalog: Catalog, topic: str, partition: int, offset: int) -> FirstRecord | None:
        return None


def build(root: Path, args: argparse.Namespace) -> int:
    """The data directory; returns how many (group, partition) positions it holds."""
    rng = random.Random(args.seed)
    root.mkdir(parents=True)
    (root / "ebb.toml").write_text('[engine]\nfsync = "never"\n')
    batch_bytes = RECORDS_PER_BATCH * (RECORD_BYTES + 40)
    segment_size = f"{args.batches * batch_bytes} B"
    now = int(time.time() * 1000)
    batches = args.segments * args.batches
    with Broker(root) as broker:
        for t in range(args.topics):
            topic = f"t{t:03d}"
            broker.create_topic(topic, args.partitions, {"segment_size": segment_size, "backlog_age": "1h"})
            for p in range(args.partitions):
                for b in range(batches):
                    stamp = now - (batches - b) * 60_000
                    records = [NewRecord(bytes(RECORD_BYTES), timestamp=stamp + i) for i in range(RECORDS_PER_BATCH)]
                    broker.append(topic, p, records)
            end = batches * RECORDS_PER_BATCH
            for g in range(args.groups):
                broker.create_group(topic, f"g{g:02d}", "subscriber")
                for p in range(args.partitions):
                    broker.commit(topic, f"g{g:02d}", p, rng.randrange(end))
    return args.topics * args.partitions * args.groups


def timed(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--groups", type=int, default=25, help="subscriber groups per topic")
    parser.add_argument("--segments", type=int, default=2, help="segments per partition")
    parser.add_argument("--batches", type=int, default=500, help="batches per segment")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    print(f"load average before: {os.getloadavg()}")
    parent = Path(tempfile.mkdtemp(prefix="bench-lag-age-"))
    try:
        root = parent / "data"
        started = time.perf_counter()
        positions = build(root, args)
        print(
            f"{args.topics} topics x {args.partitions} partitions x {args.groups} groups = {positions} positions; "
            f"{args.segments} segments of {args.batches} batches per partition; "
            f"written in {time.perf_counter() - started:.1f} s"
        )
        samples: dict[str, list[float]] = {}
        with Broker(root) as broker:
            catalog = broker.catalog
            warm = RecordAges(broker.data)
            kept = EbbCollector(root, None)

            def read(run: Callable[[], object]) -> Callable[[], object]:
                def inside() -> object:
                    with catalog.read():
                        return run()

                return inside

            variants: dict[str, Callable[[], object]] = {
                "catalog": read(lambda: group_lags(catalog)),
                "cold": read(lambda: partition_lags(catalog, RecordAges(broker.data))),
                "cold opened": read(lambda: partition_lags(catalog, OpenedAges(broker.data))),
                "warm": read(lambda: partition_lags(catalog, warm)),
                "scrape cold": lambda: list(EbbCollector(root, None).collect()),
                "scrape warm": lambda: list(kept.collect()),
            }
            for run in variants.values():
                run()  # warm the page cache and the kept caches
            for _ in range(args.rounds):
                for name, run in variants.items():
                    samples.setdefault(name, []).append(timed(run))
        base = statistics.median(samples["catalog"])
        print(f"{'variant':<12} {'median ms':>10} {'per position µs':>16} {'x catalog':>10}")
        for name, values in samples.items():
            median = statistics.median(values)
            print(f"{name:<12} {median:>10.1f} {median * 1000 / positions:>16.1f} {median / base:>10.1f}")
    finally:
        shutil.rmtree(parent, ignore_errors=True)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
