"""Ingest rates for the forecast: per partition, observed over a recent window of
its segments, or given by the operator.

A rate is a fraction, ``records`` per ``per_ms`` milliseconds, with records of
``record_bytes`` bytes, so that the synthetic future (engine/forecast/extend.py) is
integer arithmetic: the same records at the same instants on every machine and in
the reference model of the tests.

Observed, for a partition with a record in the window (at most ``window`` old): its
records stamped less than ``window`` before its last one (at or after the log
start), over the time from the record before them (however old: one batch in the
window, of a partition written every 90 minutes, is a rate too) to their last one
while the ingest is steady, or to now once it is quiet (:func:`steady_span`);
``since`` is where that time begins.
A record's bytes are the bytes over the records of the segments that hold them, in
whole bytes (the records counted a little faster where that rounds down,
:func:`_in_whole_records`, so that the bytes per second are the observed ones). A
burst before the window does not count, even in the segment that reaches into it.
With no record in the window the partition has no ingest.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from engine.prune.by_partition import partition_rows
from engine.prune.record_times import EARLIEST, FirstRecord
from engine.store.batch import HEADER_SIZE, RECORD_OVERHEAD
from engine.store.partition import MAX_BATCH_RECORDS, largest_record

#: (topic, partition, offset, θ) -> the partition's first record at or after that
#: offset (and its log start) whose timestamp is >= θ
FirstRecordOf = Callable[[str, int, int, int], FirstRecord | None]

#: a record's bytes when a rate is given (``--rate``) for a topic with no records in the window
DEFAULT_RECORD_BYTES = 1024


@dataclass(frozen=True)
class Rate:
    """``records`` synthetic records per ``per_ms`` ms (0 records: no ingest), each
    ``record_bytes`` bytes."""

    records: int
    per_ms: int
    record_bytes: int
    #: where it came from: "observed" (then ``since`` is where the time it is measured over begins),
    #: "given" (``--rate``) or "none" (no data in the window)
    source: str
    since: int | None = None
    #: records written per synthetic record: below 1 where the observed record's
    #: bytes are a fraction, rounded down to ``record_bytes`` (:func:`_in_whole_records`)
    records_per_synthetic: float = 1.0
    #: records that arrive together, stamped alike (a producer's batch): the
    #: synthetic records come ``batch`` at a time, every ``batch * per_ms / records`` ms
    batch: int = 1
    #: bytes each piece of a batch adds to its records' (the store's batch header: a
    #: batch split over two segments has two), where the observed bytes are whole
    #: batches of records of ``record_bytes``; else 0 and a record's bytes hold its
    #: share of the header
    header: int = 0
    #: records that share a header where they are not stamped alike: a backfill
    #: (``ebb produce --count N --timestamp-step 7s``) is appended up to
    #: :data:`MAX_BATCH_RECORDS` records to a batch, whatever their stamps, so its
    #: segments hold one header a piece of an append (0: ``batch``'s records share it)
    appended: int = 0
    #: ms of the first gap already gone at now: a steady partition's next record is
    #: due a gap after its last one, not after now (a keyless backfill's partitions
    #: were last written 2, 1 and 0 s before now, each every 3 s, and the copy fed
    #: on goes on so: begun a gap after now, a segment stamped at a time rule's edge
    #: was kept where the copy's, 2 s older, goes); 0 where the rate is measured to now
    lead: int = 0

    @property
    def header_run(self) -> int:
        """The records each header is shared by (a piece of them in a segment pays it)."""
        return self.appended or self.batch

    @property
    def records_per_second(self) -> float:
        """Records as written (not synthetic ones)."""
        return self.records * 1000 / self.per_ms * self.records_per_synthetic

    @property
    def bytes_per_second(self) -> float:
        return self.records * 1000 / self.per_ms * (self.record_bytes + self.header / self.header_run)


NO_INGEST = Rate(0, 1, DEFAULT_RECORD_BYTES, "none")


def _reduced(records: int, per_ms: int, record_bytes: int, source: str, since: int | None) -> Rate:
    if records <= 0 or per_ms <= 0:
        return Rate(0, 1, record_bytes, source, since)
    common = math.gcd(records, per_ms)
    return Rate(records // common, per_ms // common, record_bytes, source, since)


#: how many mean gaps between batches a gap may be and the ingest still be steady:
#: a key's partition is written at irregular gaps (1 and 5 minutes apart in turn)
STEADY_GAPS = 2


class Span(NamedTuple):
    """A rate: ``records`` per ``per_ms`` ms, measured over the time from ``since``."""

    records: int
    per_ms: int
    since: int

    @property
    def until(self) -> int:
        """Where the measured time ends: at the last record, or at now where the
        partition has been quiet since (the quiet time counted)."""
        return self.since + self.per_ms


def steady_span(records: int, at_first: int, first: int, last: int, now: int, previous: int | None) -> Span:
    """``records`` from ``first`` to ``last``, the first ``at_first`` of them at
    ``first`` (a batch whose records share its timestamp), as a rate.

    N batches span the N gaps from the record before them (stamped ``previous``, if
    older than ``first``) to the last one: paired so, records a gap apart count
    exactly, and so do irregular gaps that repeat (a key's partition written 1 and 5
    minutes apart in turn: from the first to the last record, a window spans one gap
    fewer than it holds, a short or a long one). The gap before the first counts where it is at most
    :data:`STEADY_GAPS` mean gaps of those in the window (or the window holds one
    batch: a partition written every 90 minutes); a longer one is a start, not a gap,
    and the records after the first batch span the time from it to the last. Once
    the time since the last is more than :data:`STEADY_GAPS` mean gaps, the partition
    has been quiet and the quiet time counts."""
    after = records - at_first
    inside = last - first  # the window's gaps: after / at_first of them
    if previous is not None and previous < first and (first - previous) * after <= STEADY_GAPS * inside * at_first:
        span = last - previous
        if (now - last) * records <= STEADY_GAPS * span * at_first:
            return Span(records, span, previous)
        return Span(records, now - previous, previous)
    if after > 0 and inside > 0 and (now - last) * after <= inside * at_first:
        return Span(after, inside, first)
    return Span(records, now - first, first)


def observed_rates(
    segments: pa.Table, partitions: pa.Table, now: int, window_ms: int, first_record: FirstRecordOf
) -> list[Rate]:
    """The observed rate of each row of ``partitions`` (a snapshot's, with its
    ``segments`` in (topic, partition, offset) order); ``first_record`` finds records
    by their timestamps inside segments: where the window begins, and where the
    records stamped like the first one end."""
    row = partition_rows(segments, partitions)
    names = partitions["topic"].to_pylist()
    numbers = partitions["partition"].to_pylist()
    log_starts = partitions["log_start_offset"].to_pylist()
    base = segments["base_offset"].to_numpy()
    next_ = segments["next_offset"].to_numpy()
    size = segments["size_bytes"].to_numpy()
    first = segments["first_timestamp"].fill_null(0).to_numpy()
    newest = segments["max_timestamp"].fill_null(np.iinfo(np.int64).min).to_numpy()
    counted = (next_ > base) & (newest >= now - window_ms)
    rates = []
    bounds = np.searchsorted(row, np.arange(partitions.num_rows + 1), side="left")
    for p in range(partitions.num_rows):
        lo, hi = bounds[p], bounds[p + 1]
        if not counted[lo:hi].any():
            rates.append(NO_INGEST)
            continue
        # The window ends at the last record: a pattern of gaps that repeats within it
        # (a key's partition) is counted whole, whatever the time since the last.
        held = next_[lo:hi] > base[lo:hi]
        last = int(newest[lo:hi][held].max())
        opens_after = min(last - window_ms, last - 1)  # the window holds the last record at least
        k = lo + int(np.flatnonzero(held & (newest[lo:hi] > opens_after))[0])
        held_bytes, held_records = int(size[k:hi].sum()), max(int(next_[hi - 1] - base[k]), 1)
        since, offset = int(first[k]), int(base[k])
        # The segment began before the window, or before the log start (records of
        # it that a message-granularity cut deleted are not in the ingest).
        if since <= opens_after or offset < log_starts[p]:
            found = first_record(names[p], numbers[p], log_starts[p], opens_after + 1)
            if found is not None:
                offset, since = found
        later = first_record(names[p], numbers[p], max(offset, log_starts[p]), since + 1)
        records = int(next_[hi - 1] - offset)
        at_first = records if later is None else later.offset - offset
        previous = _stamp_before(first_record, names[p], numbers[p], log_starts[p], offset)
        span = steady_span(records, at_first, since, last, now, previous)
        count, per_ms = span.records, span.per_ms
        batch = batch_of(records, at_first, preceded=span.since < since)
        measured_to_last = span.until == last
        since = span.since
        # a steady batched producer's bytes are whole batches, each piece a header
        record_bytes, unaccounted = divmod(
            held_bytes - HEADER_SIZE * batch_pieces(base[k:hi], next_[k:hi], offset, batch), held_records
        )
        if batch > 1 and record_bytes > 0 and unaccounted == 0:
            rate = _reduced(count, per_ms, record_bytes, "observed", since)
            rate = replace(rate, batch=batch, header=HEADER_SIZE)
        elif batch == 1 and (appended_bytes := _appended_record_bytes(base[k:hi], next_[k:hi], held_bytes)):
            rate = _reduced(count, per_ms, appended_bytes, "observed", since)
            rate = replace(rate, header=HEADER_SIZE, appended=MAX_BATCH_RECORDS)
        else:
            rate = replace(_in_whole_records(count, per_ms, held_bytes, held_records, since), batch=batch)
        rates.append(replace(rate, lead=_lead_of(rate, now - last) if measured_to_last else 0))
    return rates


def _lead_of(rate: Rate, since_last: int) -> int:
    """The part of ``rate``'s first gap already gone at now, ``since_last`` ms after
    the last record: all of it while that is less than a gap (a batch's), else none
    (a partition late for its next record: begun from now, as before)."""
    if since_last <= 0 or since_last * rate.records >= rate.batch * rate.per_ms:
        return 0
    return since_last


def _stamp_before(first_record: FirstRecordOf, topic: str, partition: int, log_start: int, offset: int) -> int | None:
    """The timestamp of the record just before ``offset``, at or after the log start;
    None where there is none."""
    if offset <= log_start:
        return None
    before = first_record(topic, partition, offset - 1, EARLIEST)
    return None if before is None else before.timestamp


def batch_pieces(base: np.ndarray, next_: np.ndarray, origin: int, batch: int) -> int:
    """The pieces of batches of ``batch`` records from offset ``origin`` that the
    segments ``[base, next)`` hold: a batch split over two segments is two."""
    overlapped = -((origin - next_) // batch) - (base - origin) // batch
    return int(np.sum(np.where(next_ > base, overlapped, 0)))


def _appended_record_bytes(base: np.ndarray, next_: np.ndarray, held_bytes: int) -> int | None:
    """A record's bytes where the segments ``[base, next)`` (together
    ``held_bytes``) hold records stamped apart, appended many to a batch (a backfill
    in one ``ebb produce``): one header a segment, and one more for each append of
    :data:`MAX_BATCH_RECORDS` that ends inside one; None where no count of those
    leaves whole records, or where the records fill whole bytes already (a record
    its own batch: its header is in its bytes).

    Read as a fraction instead (117.4 bytes), the synthetic records were laid 35 of
    117 bytes to a 4 KiB segment where the store lays 34 of 116 and a header, and
    the segments ended a record later each time: the size target kept a segment
    more or less than a copy fed in one ``ebb produce``."""
    held = next_ > base
    records = int((next_ - base)[held].sum())
    if records == 0 or held_bytes % records == 0:
        return None
    pieces = int(held.sum())
    for ends_inside in range(records // MAX_BATCH_RECORDS + 2):
        record_bytes, unaccounted = divmod(held_bytes - HEADER_SIZE * (pieces + ends_inside), records)
        if unaccounted == 0 and record_bytes >= RECORD_OVERHEAD:
            return record_bytes
    return None


def batch_of(records: int, at_first: int, *, preceded: bool) -> int:
    """The records a producer sends stamped alike, from the ``at_first`` of the
    ``records`` counted that share the first one's timestamp: that many where they
    are a whole number of such batches (a steady batched producer: ``ebb produce
    --count N`` every few minutes), all of them where they all do and an older record
    ``preceded`` them (one batch in the window), else one (batches of no one size)."""
    if 1 < at_first < records and records % at_first == 0:
        return at_first
    return records if 1 < at_first == records and preceded else 1


def _in_whole_records(count: int, per_ms: int, held_bytes: int, held_records: int, since: int) -> Rate:
    """``count`` records per ``per_ms`` ms as synthetic records of whole bytes: a
    record's bytes are ``held_bytes / held_records``, a fraction when batch headers
    are shared by several records, and rounding it down alone would make the bytes
    per second low (2% for 20.4-byte records, hours over a week). Then the records
    are counted a little faster instead, so that the bytes per second are the
    observed ones; the fraction keeps its denominator at most ``per_ms``, as large as
    an integral size gives."""
    record_bytes = max(1, held_bytes // held_records)
    if held_bytes % held_records == 0 or count <= 0 or per_ms <= 0:
        return _reduced(count, per_ms, record_bytes, "observed", since)
    rate = Fraction(count * held_bytes, per_ms * held_records * record_bytes).limit_denominator(per_ms)
    synthetic = _reduced(rate.numerator, rate.denominator, record_bytes, "observed", since)
    return replace(synthetic, records_per_synthetic=held_records * record_bytes / held_bytes)


def shared_bytes(observed: Rate) -> int:
    """An observed record's bytes with its share of a batch's header."""
    return observed.record_bytes + observed.header // observed.header_run


def unobserved_record_bytes(siblings: Sequence[Rate], segment_size: int) -> int:
    """A record's bytes for ``--rate`` on a partition with no observed record: those
    of the topic's first partition that has one (``siblings``: the topic's partitions'
    observed rates, in order), as its producers write them; else
    :data:`DEFAULT_RECORD_BYTES`, or as many as a record alone in a segment of
    ``segment_size`` may take (a 1 KiB record a segment of 1000 bytes cannot hold
    was forecast as a segment of its own, over the size no segment of the store
    passes)."""
    for rate in siblings:
        if rate.source == "observed":
            return shared_bytes(rate)
    alone = HEADER_SIZE + largest_record(segment_size)  # with its batch's header, as the store writes it
    return max(min(DEFAULT_RECORD_BYTES, alone), HEADER_SIZE + RECORD_OVERHEAD)


def given_rate(bytes_per_second: int, observed: Rate, unobserved_bytes: int) -> Rate:
    """``--rate``: ``bytes_per_second`` in records of the observed size (with their
    share of a batch's header), one by one; ``unobserved_bytes`` each where the
    partition has no observed record (:func:`unobserved_record_bytes`)."""
    record_bytes = shared_bytes(observed) if observed.source == "observed" else unobserved_bytes
    return _reduced(bytes_per_second, 1000 * record_bytes, record_bytes, "given", None)
