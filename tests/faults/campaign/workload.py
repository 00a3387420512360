"""What the campaign's children do, and the data they leave for the checker.

- A **producer** appends small runs of records whose value encodes (producer,
  sequence, checksum), and after each append returns (``on_ack``) appends one line
  to its own acknowledgement log: the checker then knows exactly which offsets were
  acknowledged with which records. A line is written with one ``write`` after the
  append is durable; SIGKILL cannot lose it (the kernel keeps the page) but may leave
  an unacknowledged append behind it, which is allowed.
- A **consumer** reads with the topics' groups and checks every record it is served.
- An **executor** plans cycles with the reference model of docs/RETENTION.md
  (tests/reference, no Spark: milliseconds instead of a JVM) and applies them with
  the real executor, so that most kills land in a prune cycle.

Each child runs until it is killed; anything it finds wrong, or any exception, goes
to its problem file, which the campaign turns into a violation.
"""

from __future__ import annotations

import json
import os
import random
import time
import traceback
import zlib
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from engine.broker import Broker
from engine.errors import StoreError
from engine.journal.journal import Journal
from engine.producing import Acked
from engine.prune.executor import execute
from engine.prune.plan_work import work_from_plan
from engine.prune.work import TopicWork
from engine.store.batch import NewRecord
from engine.store.segment import Segment, SegmentMissing
from tests.reference import model
from tests.reference.catalog import Group, Partition, Policy, Position, RefCatalog, Topic
from tests.reference.catalog import Segment as RefSegment

#: name -> (partitions, policy overrides, groups as (name, kind)). Small segments so
#: that there are many; each topic exercises other reasons to delete: time and a size
#: cap over a lagging subscriber, record-level cuts with TTL and idle rolls, eviction
#: with a deletion budget, plain size retention without protection.
TOPICS: dict[str, tuple[int, dict[str, str], tuple[tuple[str, str], ...]]] = {
    "protected": (
        2,
        {"segment_size": "4KiB", "retention_time": "1s", "consumption": "protect", "max_partition_size": "48KiB"},
        (("sub", "subscriber"), ("rdr", "reader")),
    ),
    "ttl-msg": (
        1,
        {
            "segment_size": "4KiB",
            "granularity": "message",
            "retention_time": "1s",
            "consumption": "protect",
            "message_ttl": "3s",
            "max_time": "6s",
            "segment_roll": "2s",
        },
        (("sub", "subscriber"),),
    ),
    "evict": (
        1,
        {
            "segment_size": "4KiB",
            "retention_size": "12KiB",
            "consumption": "protect",
            "backlog_size": "20KiB",
            "backlog_policy": "consumer_backlog_eviction",
            "max_deletes_per_cycle": "5",
        },
        (("sub", "subscriber"), ("rdr", "reader")),
    ),
    "plain": (1, {"segment_size": "8KiB", "retention_size": "24KiB"}, (("rdr", "reader"),)),
}

ACK_DIR = "campaign-acks"
PROBLEM_DIR = "campaign-problems"


def setup(broker: Broker) -> None:
    for name, (partitions, policy, groups) in TOPICS.items():
        broker.create_topic(name, partitions, policy, actor="campaign")
        for group, kind in groups:
            broker.create_group(name, group, kind, "earliest")  # type: ignore[arg-type]


# -- records ----------------------------------------------------------------------------


def encode_value(producer: int, seq: int) -> bytes:
    """A record value that names its producer and sequence and carries a checksum of
    itself; its length varies with ``seq`` so that batches and segments vary too."""
    body = b"p%d:s%d:" % (producer, seq) + bytes([seq % 251]) * (20 + seq * 7919 % 180)
    return b"%08x:" % zlib.crc32(body) + body


def decode_value(value: bytes) -> tuple[int, int] | None:
    """(producer, sequence) of an intact value, None if it is not one of ours."""
    crc, _, body = value.partition(b":")
    try:
        if int(crc, 16) != zlib.crc32(body):
            return None
        producer, seq, _rest = body.split(b":", 2)
        return int(producer[1:]), int(seq[1:])
    except ValueError:
        return None


@dataclass(frozen=True)
class Ack:
    """An acknowledged append: offsets [base, next) of one partition hold the
    producer's sequences first_seq, first_seq + 1, ..."""

    producer: int
    topic: str
    partition: int
    base: int
    next: int
    first_seq: int


def ack_path(data_dir: Path, producer: int) -> Path:
    return data_dir / ACK_DIR / f"producer-{producer}.jsonl"


def read_acks(path: Path, start: int = 0) -> tuple[list[Ack], int]:
    """Acks in ``path`` from byte ``start``, and the byte where the next read starts
    (a last line without its newline is left for later: it may be half-written)."""
    try:
        data = path.read_bytes()[start:]
    except FileNotFoundError:
        return [], start
    whole = data[: data.rfind(b"\n") + 1]
    return [Ack(**json.loads(line)) for line in whole.splitlines()], start + len(whole)


def last_ack(path: Path) -> Ack | None:
    """The newest whole ack in ``path`` (a producer's sequences only grow), read from
    the end: the log grows all campaign long."""
    try:
        with open(path, "rb") as f:
            f.seek(max(f.seek(0, os.SEEK_END) - 4096, 0))
            tail = f.read()
    except FileNotFoundError:
        return None
    lines = tail[: tail.rfind(b"\n")].rsplit(b"\n", 1)
    return Ack(**json.loads(lines[-1])) if lines[-1] else None


# -- child processes ------------------------------------------------------------------------


def run_child(data_dir: Path, name: str, body: Callable[[], None]) -> None:
    """Run a child's loop; an exception is a problem for the checker (a child is
    only ever supposed to end by being killed)."""
    try:
        body()
    except BaseException:
        report_problem(data_dir, name, traceback.format_exc())
        raise


def report_problem(data_dir: Path, name: str, text: str) -> None:
    directory = data_dir / PROBLEM_DIR
    directory.mkdir(exist_ok=True)
    with open(directory / f"{name}-{os.getpid()}.txt", "a") as f:
        f.write(text + "\n")


def produce_forever(data_dir: Path, producer: int, seed: int) -> None:
    rng = random.Random(seed)
    path = ack_path(data_dir, producer)
    path.parent.mkdir(exist_ok=True)
    # Sequences go on after the last acknowledged one; an unacknowledged append that
    # reached the log before a kill shares sequences with the next run, which is fine:
    # the checker goes by the acknowledged offsets.
    last = last_ack(path)
    seq = 0 if last is None else last.first_seq + last.next - last.base
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with Broker(data_dir) as broker:
        while True:
            topic = rng.choice(list(TOPICS))
            partition = rng.randrange(TOPICS[topic][0])
            count = rng.randint(1, 30)
            first = seq

            def on_ack(acked: Acked, topic: str = topic) -> None:
                nonlocal first
                line = Ack(producer, topic, acked.partition, acked.base_offset, acked.next_offset, first)
                os.write(fd, (json.dumps(asdict(line)) + "\n").encode())
                first += acked.count

            broker.produce(
                topic, [NewRecord(encode_value(producer, seq + i)) for i in range(count)], partition, on_ack=on_ack
            )
            seq += count


def consume_forever(data_dir: Path, seed: int) -> None:
    rng = random.Random(seed)
    pairs = [(topic, group) for topic, (_n, _p, groups) in TOPICS.items() for group, _kind in groups]
    with Broker(data_dir) as broker:
        while True:
            topic, group = rng.choice(pairs)
            for consumed in broker.consume(topic, group, max_records=rng.randint(1, 60)):
                if decode_value(consumed.record.value) is None:
                    report_problem(
                        data_dir, "consumer", f"{topic}/{consumed.partition}@{consumed.record.offset}: corrupt value"
                    )
            # Subscribers must lag now and then for protection and the caps to matter.
            time.sleep(rng.random() * 0.02)


def prune_forever(data_dir: Path, seed: int) -> None:
    """Plan with the reference model and apply with the real executor, again and
    again; sometimes a plan for a later ``now`` (a forecast, as ``ebb prune --now``),
    sometimes after a pause that lets the producers make it stale."""
    rng = random.Random(seed)
    with Broker(data_dir) as broker:
        while True:
            now = broker.clock() + rng.choice((0, 0, 500, 2000))
            try:
                work = reference_work(broker, now)
            except SegmentMissing:
                continue  # deleted under the snapshot by another cycle: plan again
            time.sleep(rng.random() * 0.02)
            execute(broker, work, now=now, trigger="campaign", actor="campaign")


def warm_up() -> None:
    """Plan once in the parent: the first use of Arrow's compute functions costs half
    a second, which every forked executor would pay again otherwise."""
    work_from_plan(model.plan_tables(RefCatalog((), 0)))


# -- the reference model's view of the store ------------------------------------------------


def reference_work(broker: Broker, now: int) -> list[TopicWork]:
    """What the reference model plans for the store at ``now``, as executor work."""
    return work_from_plan(model.plan_tables(reference_catalog(broker, now)))


def reference_catalog(broker: Broker, now: int) -> RefCatalog:
    """The store as the reference model's catalog, every record's timestamp read from
    the segment files, in one read transaction of the catalog (the files hold at
    least what the catalog says: appends are durable before they are cataloged)."""
    topics = []
    with broker.catalog.read():
        for row in broker.catalog.topics():
            effective = broker.policy(row.name)
            policy = Policy(**{f.name: effective[f.name] for f in fields(Policy)})
            partitions = tuple(
                Partition(p.partition, p.log_start_offset, tuple(_ref_segments(broker, row.name, p.partition)))
                for p in broker.catalog.partitions(row.name)
            )
            groups = tuple(
                Group(g.name, g.kind, tuple(Position(p, pos, at) for p, (pos, at) in sorted(g.positions.items())))
                for g in broker.catalog.groups(row.name)
            )
            version = Journal(broker.catalog).policy_version(row.name)
            topics.append(Topic(row.name, policy, partitions, groups, broker.catalog.overrides(row.name), version))
    return RefCatalog(tuple(topics), now)


def _ref_segments(broker: Broker, topic: str, partition: int) -> Iterator[RefSegment]:
    directory = broker.data.partition_dir(topic, partition)
    for s in broker.catalog.segments(topic, partition):
        segment = Segment.open(directory, s.base_offset, sealed=s.sealed, repair=False)
        stamps = tuple(r.timestamp for r in segment.read(s.base_offset, s.next_offset - s.base_offset))
        if len(stamps) != s.next_offset - s.base_offset:
            raise StoreError(f"{topic}/{partition}: segment {s.base_offset} holds less than the catalog says")
        yield RefSegment(s.base_offset, s.next_offset, s.size_bytes, s.sealed, stamps)
