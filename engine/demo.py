"""Demo traffic for ``ebb console --demo`` (SPEC §8): topics that each show one policy
of SPEC §3, and producers and consumers that keep them moving, so that a newcomer sees
segments roll, groups lag, quotas fill and prune cycles delete data within a minute.

:meth:`DemoTraffic.start` returns at once (the console paints right after it) and
runs one producer thread per topic and one consumer thread, each with a
:class:`~engine.broker.Broker` of its own (one SQLite connection per thread). Each
producer first creates its topic and groups where they are missing (the ``demo-*``
topics of :data:`TOPICS`) and nothing else: a second run on the same data directory
reuses the topics as they are, policies edited since included. It then backfills
:data:`BACKFILL_MS` of history into an empty partition, so that the first prune cycle
has something to delete, and sends from then on. :meth:`DemoTraffic.seed` does the
creating alone, synchronously (scripts, tests): with durable catalog writes and
directory fsyncs it takes a few hundred ms on a busy disk, too long before a first
paint.

The threads are daemons, stop promptly on :meth:`DemoTraffic.stop`, and never write
to the terminal (the console owns it): what goes wrong is counted and kept in
:attr:`DemoTraffic.counters` instead, and handed to the console by
:meth:`DemoTraffic.new_failures`, which shows it. A producer refused by a backlog quota
(:class:`~engine.errors.QuotaExceeded`: ``producer_exception`` at once,
``producer_request_hold`` once its hold timed out) drops that send and tries again
after :data:`RETRY_SECONDS`, as a client of a real broker would.

Pruning is the console's job (its prune schedule), not the demo's. The default
``prune_interval`` of one minute would make the demo slow to show anything, so
:meth:`DemoTraffic.start` (and ``seed``) writes ``ebb.toml`` with a short one
(:data:`DEMO_PRUNE_INTERVAL`), but only when the data directory has no config file
and none was named with ``--config``: an operator's config is never overwritten.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from engine.broker import Broker
from engine.catalog.catalog import GroupKind
from engine.clock import now_ms
from engine.datadir import DataDir
from engine.errors import AlreadyExists, NotFound, QuotaExceeded
from engine.store.batch import NewRecord

#: the prune interval written to a new ``ebb.toml``: several cycles a minute
DEMO_PRUNE_INTERVAL = "10s"
#: how long a demo producer waits on ``producer_request_hold`` before its send fails
#: (a client's send timeout; kept short so that :meth:`DemoTraffic.stop` is prompt)
SEND_TIMEOUT_MS = 500
#: the history an empty topic starts with, so that retention has something to act on
BACKFILL_MS = 90_000
#: how often producers send and consumers read
TICK_SECONDS = 0.5
#: the pause after a refused send or a failed step before the thread tries again
RETRY_SECONDS = 2.0
#: errors kept per thread (the newest)
ERRORS_KEPT = 20
#: failures kept for the console over all threads (the newest), between two of its reads
FAILURES_KEPT = 100


@dataclass(frozen=True)
class DemoGroup:
    name: str
    kind: GroupKind
    #: records read per second as a fraction of what each partition receives;
    #: None reads everything there is (keeps up), 0 never reads (a stalled consumer)
    pace: float | None = None
    #: reads nothing for this long, then catches up at once (a consumer in bursts)
    burst_every_s: float | None = None


@dataclass(frozen=True)
class DemoTopic:
    name: str
    partitions: int
    policy: Mapping[str, str]
    record_bytes: int
    #: records produced per second into each partition
    rate: float
    groups: tuple[DemoGroup, ...] = ()


# One topic per policy of SPEC §3. Segments of 4 KiB and records of 100-250 B: a busy
# partition rolls every few seconds. The timings suit a 10 s prune interval and 90 s
# of backfilled history: the first cycle already deletes, evicts and overruns.
TOPICS: tuple[DemoTopic, ...] = (
    # Short time retention (30 s), an idle roll (10 s); a reader that keeps up.
    DemoTopic(
        "demo-clickstream",
        2,
        {"retention_time": "30s", "segment_size": "4 KiB", "segment_roll": "10s"},
        record_bytes=200,
        rate=4,
        groups=(DemoGroup("dashboard", "reader"),),
    ),
    # A size cap (DELETE_MAX_SIZE), no time retention.
    DemoTopic(
        "demo-metrics",
        1,
        {"retention_time": "infinite", "max_partition_size": "16 KiB", "segment_size": "4 KiB"},
        record_bytes=250,
        rate=4,
    ),
    # Protected consumption: a subscriber at half the pace holds data back
    # (KEEP_BARRIER) until the hard cap max_time overruns it; another keeps up.
    DemoTopic(
        "demo-orders",
        2,
        {"retention_time": "20s", "max_time": "3m", "consumption": "protect", "segment_size": "4 KiB"},
        record_bytes=150,
        rate=3,
        groups=(DemoGroup("billing", "subscriber"), DemoGroup("audit", "subscriber", pace=0.5)),
    ),
    # A backlog quota with consumer_backlog_eviction: a slow subscriber is moved on.
    DemoTopic(
        "demo-payments",
        1,
        {
            "retention_time": "30s",
            "consumption": "protect",
            "segment_size": "4 KiB",
            "backlog_size": "8 KiB",
            "backlog_policy": "consumer_backlog_eviction",
        },
        record_bytes=200,
        rate=2,
        groups=(DemoGroup("ledger", "subscriber", pace=0.25),),
    ),
    # A backlog quota with producer_request_hold: the topic is quota exceeded, and its
    # producer held and refused, while a subscriber that reads in bursts is behind.
    DemoTopic(
        "demo-alerts",
        1,
        {
            "retention_time": "30s",
            "consumption": "protect",
            "segment_size": "4 KiB",
            "backlog_size": "8 KiB",
            "backlog_policy": "producer_request_hold",
        },
        record_bytes=150,
        rate=2,
        groups=(DemoGroup("pager", "subscriber", burst_every_s=40),),
    ),
    # A message TTL moves a stalled subscriber on (without it, nothing would go);
    # message granularity.
    DemoTopic(
        "demo-sessions",
        1,
        {
            "retention_time": "30s",
            "message_ttl": "20s",
            "consumption": "protect",
            "granularity": "message",
            "segment_size": "4 KiB",
        },
        record_bytes=120,
        rate=3,
        groups=(DemoGroup("tracker", "subscriber", pace=0),),
    ),
    # A retention hold: nothing goes although the data is past its retention time.
    DemoTopic(
        "demo-legal",
        1,
        {"retention_time": "30s", "hold": "on", "segment_size": "4 KiB"},
        record_bytes=100,
        rate=1,
    ),
)


@dataclass
class Counters:
    """What one demo thread has done (written by that thread only)."""

    produced: int = 0
    consumed: int = 0
    #: reads that committed a new position
    commits: int = 0
    #: sends refused by a backlog quota (QuotaExceeded)
    refused: int = 0
    #: the newest errors, one line each
    errors: deque[str] = field(default_factory=lambda: deque(maxlen=ERRORS_KEPT))


def payload(topic: str, sequence: int, size: int) -> bytes:
    """A readable record value of ``size`` bytes."""
    return f"{topic} #{sequence} ".encode().ljust(size, b".")[:size]


def ensure_topic(broker: Broker, topic: DemoTopic) -> None:
    """Create ``topic`` and its groups (from the earliest offset) where they are
    missing; what exists is left as it is, policy edits included."""
    # AlreadyExists: another console seeding the same directory got there first.
    if not broker.catalog.has_topic(topic.name):
        with suppress(AlreadyExists):
            broker.create_topic(topic.name, topic.partitions, topic.policy, actor="demo")
    existing = {g.name for g in broker.catalog.groups(topic.name)}
    for group in topic.groups:
        if group.name not in existing:
            with suppress(AlreadyExists):
                broker.create_group(topic.name, group.name, group.kind, "earliest")


class DemoTraffic:
    """Seeds the demo topics and runs their traffic; see the module docstring."""

    def __init__(
        self,
        root: Path,
        config_path: Path | None = None,
        *,
        clock: Callable[[], int] = now_ms,
        tick_seconds: float = TICK_SECONDS,
        retry_seconds: float = RETRY_SECONDS,
        topics: tuple[DemoTopic, ...] = TOPICS,
    ) -> None:
        """``config_path`` is the config file the console uses, None when the data
        directory's default one (which may not exist yet) applies."""
        self.root = Path(root)
        self.config_path = config_path
        self.clock = clock
        self.tick_seconds = tick_seconds
        self.retry_seconds = retry_seconds
        self.topics = topics
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        #: per thread name, what it has done
        self.counters: dict[str, Counters] = {}
        #: failures not yet taken by new_failures(), the newest (the threads put, the
        #: console takes; bounded, for a demo no console reads)
        self._failures: deque[str] = deque(maxlen=FAILURES_KEPT)
        self._failures_lock = threading.Lock()
        #: the config file :meth:`seed` or :meth:`start` wrote, if one of them wrote one
        self.wrote_config: Path | None = None

    def _open(self) -> Broker:
        return Broker(self.root, self.config_path, clock=self.clock)

    # -- seeding ------------------------------------------------------------------------------

    def seed(self) -> None:
        """Write the demo config where there is none (see the module docstring) and
        create the demo topics and groups that do not exist yet, in the calling thread.

        This waits for durable catalog writes and directory fsyncs (a few hundred ms on
        a busy disk, for an empty data directory): the console calls :meth:`start`
        alone, which does the same in the background."""
        self._write_config()
        with self._open() as broker:
            for topic in self.topics:
                ensure_topic(broker, topic)

    def _write_config(self) -> None:
        if self.config_path is not None:
            return  # a file named on purpose is the operator's
        data = DataDir(self.root)
        data.ensure()
        try:
            # O_EXCL: a file that appeared meanwhile is never overwritten.
            fd = os.open(data.config_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return
        with os.fdopen(fd, "w") as file:
            file.write(
                "# Written by `ebb console --demo`, because this data directory had no config file:\n"
                "# prune often, so that the demo's retention is visible within a minute.\n"
                "# Edit or delete it freely; the demo never overwrites an existing config file.\n"
                "[engine]\n"
                f'prune_interval = "{DEMO_PRUNE_INTERVAL}"\n'
            )
        self.wrote_config = data.config_path

    # -- traffic --------------------------------------------------------------------------------

    def start(self) -> None:
        """Write the demo config where there is none, then start the threads (daemons)
        and return at once: each producer creates its topic and groups if they are
        missing, backfills an empty topic, then sends; the consumer reads for the
        groups that exist."""
        if self._threads:
            return
        # Before the threads, so that a console started next loads the prune interval.
        self._write_config()
        self._stop = threading.Event()  # a thread a timed-out stop() left behind stays stopped
        workers: list[_Worker] = [_Producer(self, self._stop, topic) for topic in self.topics]
        workers.append(_Consumer(self, self._stop))
        for worker in workers:
            self.counters[worker.name] = worker.counters
            thread = threading.Thread(target=worker.run, name=worker.name, daemon=True)
            self._threads.append(thread)
            thread.start()

    def report_failure(self, line: str) -> None:
        """A thread's failure, for :meth:`new_failures` (any thread may call it)."""
        with self._failures_lock:
            self._failures.append(line)

    def new_failures(self) -> list[str]:
        """What went wrong in the demo's threads since the last call (at most
        :data:`FAILURES_KEPT`, the newest), oldest first, one line each (``thread:
        error``). A thread that fails tries again every ``retry_seconds``, so one cause
        may come again and again."""
        with self._failures_lock:
            taken = list(self._failures)
            self._failures.clear()
        return taken

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop the threads and wait up to ``timeout`` s for them; True once all ended.
        A thread in the middle of a held send ends after at most
        :data:`SEND_TIMEOUT_MS`."""
        self._stop.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        alive = [t for t in self._threads if t.is_alive()]
        self._threads = alive
        return not alive


class _Worker:
    """A demo thread: a broker of its own and a step every tick until stopped."""

    def __init__(self, traffic: DemoTraffic, stop: threading.Event, name: str) -> None:
        self.traffic = traffic
        self.stop = stop
        self.name = name
        self.counters = Counters()

    def run(self) -> None:
        stop = self.stop
        broker = self._opened()
        if broker is None:
            return
        # A send timeout of the demo's own (see SEND_TIMEOUT_MS), not the config's.
        timeout = broker.config.producer_hold_timeout_ms
        broker.config = dataclasses.replace(
            broker.config,
            producer_hold_timeout_ms=SEND_TIMEOUT_MS if timeout is None else min(timeout, SEND_TIMEOUT_MS),
        )
        with broker:
            delay = 0.0
            while not stop.wait(delay):
                delay = self.traffic.tick_seconds
                try:
                    self.step(broker)
                except QuotaExceeded:
                    self.counters.refused += 1
                    delay = self.traffic.retry_seconds
                except Exception as error:  # noqa: BLE001 - e.g. an operator deleted a demo topic
                    self._failed(error)
                    delay = self.traffic.retry_seconds

    def _opened(self) -> Broker | None:
        """A broker of this thread's own, tried again until it opens or the demo
        stops (None). The demo's threads start together on a new data directory and
        each makes sure of the catalog's tables: one of them may find the catalog
        locked by another, and a thread that gave up then left its topic without
        traffic for the whole demo."""
        while True:
            try:
                return self.traffic._open()
            except Exception as error:  # noqa: BLE001 - a demo thread never prints; see counters
                self._failed(error)
            if self.stop.wait(self.traffic.retry_seconds):
                return None

    def _failed(self, error: BaseException) -> None:
        line = f"{type(error).__name__}: {error}"
        self.counters.errors.append(line)
        self.traffic.report_failure(f"{self.name}: {line}")

    def step(self, broker: Broker) -> None:
        raise NotImplementedError


class _Producer(_Worker):
    """Sends ``topic.rate`` records a second into each partition; first backfills
    :data:`BACKFILL_MS` of history into empty partitions."""

    def __init__(self, traffic: DemoTraffic, stop: threading.Event, topic: DemoTopic) -> None:
        super().__init__(traffic, stop, f"ebb-demo-produce-{topic.name}")
        self.topic = topic
        self.sequence = 0
        self.seeded = False
        self.backfilled = False
        self.last = time.monotonic()
        self.due = 0.0

    def step(self, broker: Broker) -> None:
        if not self.seeded:
            ensure_topic(broker, self.topic)
            self.seeded = True
        if not self.backfilled:
            self._backfill(broker)
            self.backfilled = True
            self.last = time.monotonic()
            return
        now = time.monotonic()
        self.due += (now - self.last) * self.topic.rate
        self.last = now
        count = int(self.due)
        if count == 0:
            return
        # A refused send loses its records (the client gave up on them), it does not
        # come back as a burst: the amount due is spent before sending.
        self.due -= count
        for partition in range(self.topic.partitions):
            self._send(broker, partition, [None] * count)

    def _backfill(self, broker: Broker) -> None:
        end = self.traffic.clock()
        count = int(BACKFILL_MS / 1000 * self.topic.rate)
        stamps = [end - BACKFILL_MS + i * BACKFILL_MS // count for i in range(count)]
        for row in broker.catalog.partitions(self.topic.name):
            if row.next_offset == 0:
                self._send(broker, row.partition, stamps)

    def _send(self, broker: Broker, partition: int, stamps: Sequence[int | None]) -> None:
        records = []
        for stamp in stamps:
            records.append(NewRecord(payload(self.topic.name, self.sequence, self.topic.record_bytes), timestamp=stamp))
            self.sequence += 1
        broker.produce(self.topic.name, records, partition=partition)
        self.counters.produced += len(records)


@dataclass
class _Reading:
    """One group's reading state in the consumer thread."""

    topic: DemoTopic
    group: DemoGroup
    #: records owed per partition (fractional, for paced groups)
    due: float = 0.0
    #: monotonic time of the next burst (bursty groups)
    next_burst: float = 0.0


#: the most a group reads per partition in one step when it reads everything
_READ_ALL = 10_000


class _Consumer(_Worker):
    """Reads for every demo group that reads, at its pace; commits what it read."""

    def __init__(self, traffic: DemoTraffic, stop: threading.Event) -> None:
        super().__init__(traffic, stop, "ebb-demo-consume")
        start = time.monotonic()
        self.readings = [
            _Reading(topic, group, next_burst=start + (group.burst_every_s or 0))
            for topic in traffic.topics
            for group in topic.groups
            if group.pace != 0
        ]
        self.last = start

    def step(self, broker: Broker) -> None:
        now = time.monotonic()
        elapsed, self.last = now - self.last, now
        for reading in self.readings:
            topic, group = reading.topic, reading.group
            try:
                # Not created yet by its producer, or deleted by the operator: left
                # alone (consume would create it, as a reader).
                broker.catalog.group(topic.name, group.name)
            except NotFound:
                continue
            if group.burst_every_s is not None:
                if now < reading.next_burst:
                    continue
                reading.next_burst = now + group.burst_every_s
                budget = _READ_ALL
            elif group.pace is None:
                budget = _READ_ALL
            else:
                reading.due += elapsed * topic.rate * group.pace
                budget = int(reading.due)
                reading.due -= budget
                if budget == 0:
                    continue
            for partition in range(topic.partitions):
                read = broker.consume(topic.name, group.name, partition=partition, max_records=budget)
                self.counters.consumed += len(read)
                self.counters.commits += bool(read)
