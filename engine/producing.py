"""How one producer's records reach the partitions and are acknowledged.

Keyless records go round-robin a short batch at a time (:class:`KeylessBatches`): a
backfill stamped a second apart (``ebb produce --count N --timestamp-step 1s``)
reaches the partitions a record at a time, as it would have arrived. That spreading
must not cost an append a record, so a partition's records are still appended up to
a store batch (1000) at a time, and :class:`Acknowledgements` matches the appends
back to the runs of records produced one after another to one partition, which it
acknowledges in production order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from engine.store.partition import MAX_BATCH_RECORDS

#: how much record time one keyless batch spans at most: a producer's batch holds
#: what arrives while it lingers, so records stamped a step apart reach the
#: partitions in turn, a second of them at a time, not 1000 at a time (a partition
#: written in bursts of minutes and pauses as long reads a wrong ingest rate in ``ebb
#: forecast``: 1.77 records/s for 1 produced, over 4 partitions, a record a second)
KEYLESS_BATCH_SPAN_MS = 1_000


#: how much memory one producer's pending records may take (its partitions' batches
#: not appended yet), as :func:`pending_cost` reckons it. Records spread a second at
#: a time over many partitions fill each partition's batch slowly: a bound of 8000
#: records appended them about 75 at a time over 200 partitions, 14 times the appends
#: (and fsyncs) of the same backfill to one partition (13.1 s against 2.0 s for
#: 500000 records); this one appends them in 600 appends against 500 (about 5 s, 93
#: MB of RSS against 32), and holds values of 64 MiB one at a time, where fewer
#: than 1000 of any size were all held (a bound in records alone).
MAX_PENDING_BYTES = 64 << 20
#: what Python spends on a pending record beyond its bytes: the record object, its
#: timestamp, its slot in the partition's list and its share of a run
PENDING_RECORD_OVERHEAD = 300


def pending_cost(record_bytes: int) -> int:
    """The memory a pending record of ``record_bytes`` (its size in a batch) takes."""
    return record_bytes + PENDING_RECORD_OVERHEAD


class Lull:
    """In a producer's records: write what is held now (a pipe that stays open, a
    moment after its first line not yet written). What it holds is written and
    acknowledged, and its keyless batch ends, as a Kafka producer sends a batch once
    ``linger.ms`` has passed."""


LULL = Lull()


class InterruptedWaiting(KeyboardInterrupt):
    """Ctrl-C while a producer's records waited for input, holding nothing they had
    read and not given: once what was given is written, every record read was."""


class KeylessBatches:
    """Where a producer's keyless records go: round-robin a batch at a time, from
    ``start``; a batch ends at :data:`MAX_BATCH_RECORDS` records or
    :data:`KEYLESS_BATCH_SPAN_MS` of record time (Kafka's sticky partitioner, whose
    batches end at ``batch.size`` or ``linger.ms``)."""

    def __init__(self, start: int, partitions: int) -> None:
        self._partition = start
        self._partitions = partitions
        self._first_stamp: int | None = None
        self._records = 0

    def partition_of(self, stamp: int | None) -> int:
        """The partition of the next record, stamped ``stamp`` (None: when appended,
        which the batch it joins decides: such records end a batch by count alone)."""
        if self._records >= MAX_BATCH_RECORDS or (
            stamp is not None
            and self._first_stamp is not None
            and abs(stamp - self._first_stamp) >= KEYLESS_BATCH_SPAN_MS
        ):
            self._partition = (self._partition + 1) % self._partitions
            self._first_stamp, self._records = None, 0
        if self._first_stamp is None:
            self._first_stamp = stamp
        self._records += 1
        return self._partition

    def end_batch(self) -> None:
        """The next record begins a batch, on the next partition."""
        self._records = MAX_BATCH_RECORDS


@dataclass(frozen=True, slots=True)
class Acked:
    """Records acknowledged together: durable, produced one after another to one
    partition, at consecutive offsets."""

    partition: int
    base_offset: int
    next_offset: int

    @property
    def count(self) -> int:
        return self.next_offset - self.base_offset


@dataclass(frozen=True, slots=True)
class AckedSpan:
    """All a producer acknowledged on one partition: ``count`` records from
    ``first_offset`` to before ``next_offset``, which hold other producers' records
    too where ``count`` is less than the span."""

    partition: int
    first_offset: int
    next_offset: int
    count: int

    def describe(self) -> str:
        where = f"partition {self.partition} offsets {self.first_offset}..{self.next_offset - 1}"
        if self.count == self.next_offset - self.first_offset:
            return where
        return f"{where} ({self.count} of them, between other producers' records)"


def described(spans: Sequence[AckedSpan]) -> tuple[int, str]:
    """How many records ``spans`` hold (counted record by record: another
    producer's records between ours are not ours), and where, for a message."""
    return sum(span.count for span in spans), ", ".join(span.describe() for span in spans)


class Acknowledgements:
    """A producer's runs (records produced one after another to one partition) and
    its appends, matched: each run is acknowledged once the appends holding it are
    durable, in production order (a run waits for the runs before it). A run the
    appends split (a batch boundary, or another producer's records between two
    appends) is acknowledged in as many pieces."""

    def __init__(self, on_ack: Callable[[Acked], None] | None) -> None:
        self._on_ack = on_ack
        self._runs: deque[list[int]] = deque()  # [partition, records], production order
        self._durable: dict[int, deque[list[int]]] = {}  # partition -> [base, next) ranges not yet acknowledged
        # partition -> [first, next, count]: what was acknowledged, summed up as it is
        # (a list of every run would grow with the records: a run a record long
        # over many partitions)
        self._spans: dict[int, list[int]] = {}
        self._unsaid: deque[Acked] = deque()  # acknowledged, not yet given to on_ack

    def spans(self) -> list[AckedSpan]:
        """What was acknowledged, partition by partition."""
        return [AckedSpan(p, *span) for p, span in sorted(self._spans.items())]

    def produced(self, partition: int) -> None:
        """One more record produced to ``partition``."""
        if self._runs and self._runs[-1][0] == partition:
            self._runs[-1][1] += 1
        else:
            self._runs.append([partition, 1])

    def oldest_waiting(self) -> int | None:
        """The partition of the oldest run not acknowledged yet (None: all are)."""
        return self._runs[0][0] if self._runs else None

    def appended(self, partition: int, base_offset: int, next_offset: int) -> None:
        """The records ``[base_offset, next_offset)`` of ``partition``, the next ones
        of its runs, are durable: acknowledge what now can be, in production order,
        the durable part of a run as soon as the runs before it are (a long run to one
        partition is acknowledged an append at a time, not once it has all been
        written)."""
        self._durable.setdefault(partition, deque()).append([base_offset, next_offset])
        while self._runs:
            # the runs are told what is acknowledged before it is given: an
            # ``on_ack`` interrupted must not leave them to give it again
            oldest, records = self._runs[0]
            ready = min(records, self._durable_records(oldest))
            if ready < records:
                self._runs[0][1] -= ready
            else:
                self._runs.popleft()
            if ready:
                self._acknowledge(oldest, ready)
            if ready < records:
                return

    def acknowledge_durable(self) -> None:
        """Acknowledge every durable record, those behind a run that is not (a
        producer that stopped: what it wrote is acknowledged, not left unsaid)."""
        self._say()
        blocked: set[int] = set()
        while self._runs:
            partition, records = self._runs.popleft()
            if partition in blocked:
                continue  # a partition's records are durable in order
            ready = min(records, self._durable_records(partition))
            if ready < records:
                blocked.add(partition)
            if ready:
                self._acknowledge(partition, ready)

    def _durable_records(self, partition: int) -> int:
        """Records of ``partition`` durable and not acknowledged yet."""
        return sum(next_ - base for base, next_ in self._durable.get(partition, ()))

    def _acknowledge(self, partition: int, records: int) -> None:
        # The pieces are taken off the durable ranges and counted before any is
        # given, and given from a queue: an ``on_ack`` interrupted (Ctrl-C while it
        # prints) neither leaves a piece's offsets behind, to be given again as the
        # next run's, nor loses the pieces after it (``acknowledge_durable`` gives them).
        for piece in list(self._pieces(partition, records)):
            span = self._spans.setdefault(partition, [piece.base_offset, piece.next_offset, 0])
            span[0], span[1] = min(span[0], piece.base_offset), max(span[1], piece.next_offset)
            span[2] += piece.count
            self._unsaid.append(piece)
        self._say()

    def _say(self) -> None:
        while self._unsaid:
            piece = self._unsaid.popleft()
            if self._on_ack is not None:
                self._on_ack(piece)

    def _pieces(self, partition: int, records: int) -> Iterator[Acked]:
        ranges = self._durable[partition]
        while records:
            base, next_ = ranges[0]
            taken = min(records, next_ - base)
            records -= taken
            if base + taken == next_:
                ranges.popleft()
            else:
                ranges[0][0] = base + taken
            yield Acked(partition, base, base + taken)
