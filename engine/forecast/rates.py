"""Ingest rates for the forecast: per partition, observed over a recent window of
its segments, or given by the operator.

A rate is a fraction, ``records`` per ``per_ms`` milliseconds, with records of
``record_bytes`` bytes, so that the synthetic future (engine/forecast/extend.py) is
integer arithmetic: the same records at the same instants on every machine and in
the reference model of the tests.

Observed: the partition's records from the first one in the window (at most
``window`` old, at or after the log start) to the end; the rate is their records
over the time from that first record to now (those after the first record's
timestamp over the time to their last record while the ingest is steady,
:func:`steady_span`), and a record's bytes are the bytes over the records
of the segments that hold them, in whole bytes (the records counted a little faster
where that rounds down, :func:`_in_whole_records`, so that the bytes per second are
the observed ones). A burst before the window does not count, even in the segment
that reaches into it. One batch in the window (its records stamped alike: one record
of a partition written every 45 minutes) is no rate: the count begins at the batch
before it, however old. With no record in the window the partition has no ingest.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.prune.record_times import EARLIEST, FirstRecord
from engine.store.batch import HEADER_SIZE

#: (topic, partition, offset, θ) -> the partition's first record at or after that
#: offset (and its log start) whose timestamp is >= θ
FirstRecordOf = Callable[[str, int, int, int], FirstRecord | None]

#: a record's bytes when a rate is given (``--rate``) for a partition with no records
DEFAULT_RECORD_BYTES = 1024


@dataclass(frozen=True)
class Rate:
    """``records`` synthetic records per ``per_ms`` ms (0 records: no ingest), each
    ``record_bytes`` bytes."""

    records: int
    per_ms: int
    record_bytes: int
    #: where it came from: "observed" (then ``since`` is the first timestamp counted),
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

    @property
    def records_per_second(self) -> float:
        """Records as written (not synthetic ones)."""
        return self.records * 1000 / self.per_ms * self.records_per_synthetic

    @property
    def bytes_per_second(self) -> float:
        return self.records * 1000 / self.per_ms * (self.record_bytes + self.header / self.batch)


NO_INGEST = Rate(0, 1, DEFAULT_RECORD_BYTES, "none")


def _reduced(records: int, per_ms: int, record_bytes: int, source: str, since: int | None) -> Rate:
    if records <= 0 or per_ms <= 0:
        return Rate(0, 1, record_bytes, source, since)
    common = math.gcd(records, per_ms)
    return Rate(records // common, per_ms // common, record_bytes, source, since)


def partition_rows(table: pa.Table, partitions: pa.Table) -> np.ndarray:
    """The row in ``partitions`` of each row of ``table`` (both with ``topic`` and
    ``partition``); -1 where there is none."""

    def keys(of: pa.Table) -> pa.Array:
        return pc.binary_join_element_wise(of["topic"], pc.cast(of["partition"], pa.string()), "\x00")

    return pc.index_in(keys(table), value_set=keys(partitions)).fill_null(-1).to_numpy()


def steady_span(records: int, at_first: int, first: int, last: int, now: int) -> tuple[int, int]:
    """``records`` from ``first`` to ``last``, the first ``at_first`` of them at
    ``first`` (a batch whose records share its timestamp), as a rate (count, per ms).
    The records after those span the time to the last one: while the time since the
    last is within a mean gap between batches (a steady ingest), the rate is theirs
    over that span (over the time since the first record it would overstate a steady
    rate: by 1/(N - 1) for N records a gap apart, by a batch in N for N batches); once
    the partition has been quiet for longer than that, the quiet time counts."""
    after = records - at_first
    if after > 0 and last > first and (now - last) * after <= (last - first) * at_first:
        return after, last - first
    return records, now - first


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
        start = np.flatnonzero(counted[lo:hi])
        if len(start) == 0:
            rates.append(NO_INGEST)
            continue
        k = lo + start[0]
        held_bytes, held_records = int(size[k:hi].sum()), max(int(next_[hi - 1] - base[k]), 1)
        since, offset = int(first[k]), int(base[k])
        # The segment began before the window, or before the log start (records of
        # it that a message-granularity cut deleted are not in the ingest).
        if since < now - window_ms or offset < log_starts[p]:
            found = first_record(names[p], numbers[p], log_starts[p], now - window_ms)
            if found is not None:
                offset, since = found
        later = first_record(names[p], numbers[p], max(offset, log_starts[p]), since + 1)
        if later is None:
            # One batch in the window is no rate: counted from the batch before
            # (a record every 45 minutes, the last 30 minutes ago, read 1.5 times fast)
            earlier = _batch_before(first_record, names[p], numbers[p], log_starts[p], offset, since)
            if earlier is not None:
                offset, since = earlier
                later = first_record(names[p], numbers[p], offset, since + 1)
        records = int(next_[hi - 1] - offset)
        at_first = records if later is None else later.offset - offset
        count, per_ms = steady_span(records, at_first, since, int(newest[k:hi].max()), now)
        batch = batch_of(records, at_first)
        # a steady batched producer's bytes are whole batches, each piece a header
        record_bytes, unaccounted = divmod(
            held_bytes - HEADER_SIZE * batch_pieces(base[k:hi], next_[k:hi], offset, batch), held_records
        )
        if batch > 1 and record_bytes > 0 and unaccounted == 0:
            rate = _reduced(count, per_ms, record_bytes, "observed", since)
            rates.append(replace(rate, batch=batch, header=HEADER_SIZE))
        else:
            rate = _in_whole_records(count, per_ms, held_bytes, held_records, since)
            rates.append(replace(rate, batch=batch))
    return rates


def _batch_before(
    first_record: FirstRecordOf, topic: str, partition: int, log_start: int, offset: int, since: int
) -> FirstRecord | None:
    """The first record of the batch before the one at ``offset`` (stamped
    ``since``): the first record at or after the log start stamped like the record
    just before ``offset``; None where there is none, or it is not older."""
    if offset <= log_start:
        return None
    before = first_record(topic, partition, offset - 1, EARLIEST)
    if before is None or before.timestamp >= since:
        return None
    return first_record(topic, partition, log_start, before.timestamp)


def batch_pieces(base: np.ndarray, next_: np.ndarray, origin: int, batch: int) -> int:
    """The pieces of batches of ``batch`` records from offset ``origin`` that the
    segments ``[base, next)`` hold: a batch split over two segments is two."""
    overlapped = -((origin - next_) // batch) - (base - origin) // batch
    return int(np.sum(np.where(next_ > base, overlapped, 0)))


def batch_of(records: int, at_first: int) -> int:
    """The records a producer sends stamped alike, from the ``at_first`` of the
    ``records`` counted that share the first one's timestamp: that many where they
    are a whole number of such batches (a steady batched producer: ``ebb produce
    --count N`` every few minutes), else one (batches of no one size)."""
    return at_first if 1 < at_first < records and records % at_first == 0 else 1


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


def given_rate(bytes_per_second: int, observed: Rate) -> Rate:
    """``--rate``: ``bytes_per_second`` in records of the observed size (with their
    share of a batch's header), one by one."""
    shared = observed.record_bytes + observed.header // observed.batch
    record_bytes = shared if observed.source == "observed" else DEFAULT_RECORD_BYTES
    return _reduced(bytes_per_second, 1000 * record_bytes, record_bytes, "given", None)
