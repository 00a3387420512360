"""How a producer spreads keyless records and acknowledges its appends
(engine/producing.py), unit by unit; the whole path through ``ebb produce`` is in
tests/cli/test_commands.py."""

from __future__ import annotations

import pytest

from engine.producing import KEYLESS_BATCH_SPAN_MS, Acked, AckedSpan, Acknowledgements, KeylessBatches
from engine.store.partition import MAX_BATCH_RECORDS

T0 = 1_800_000_000_000


def test_records_a_second_apart_go_round_robin_one_at_a_time() -> None:
    batches = KeylessBatches(start=2, partitions=3)
    assert [batches.partition_of(T0 + i * 1000) for i in range(7)] == [2, 0, 1, 2, 0, 1, 2]


def test_a_batch_holds_the_records_stamped_within_its_span() -> None:
    batches = KeylessBatches(start=0, partitions=2)
    step = KEYLESS_BATCH_SPAN_MS // 4
    assert [batches.partition_of(T0 + i * step) for i in range(10)] == [0] * 4 + [1] * 4 + [0] * 2


def test_records_stamped_alike_or_unstamped_end_a_batch_by_count() -> None:
    for stamp in (T0, None):
        batches = KeylessBatches(start=0, partitions=2)
        partitions = [batches.partition_of(stamp) for _ in range(2 * MAX_BATCH_RECORDS + 1)]
        assert partitions == [0] * MAX_BATCH_RECORDS + [1] * MAX_BATCH_RECORDS + [0]


def test_a_clock_stepping_back_a_span_ends_the_batch_too() -> None:
    batches = KeylessBatches(start=0, partitions=2)
    stamps = (T0, T0 - KEYLESS_BATCH_SPAN_MS, T0 - KEYLESS_BATCH_SPAN_MS + 1)
    assert [batches.partition_of(s) for s in stamps] == [0, 1, 1]


def _acks() -> tuple[Acknowledgements, list[Acked]]:
    seen: list[Acked] = []
    return Acknowledgements(seen.append), seen


def test_runs_are_acknowledged_in_production_order_once_durable() -> None:
    acks, seen = _acks()
    for partition in (0, 0, 1, 0, 1, 1):  # runs: p0 x2, p1, p0, p1 x2
        acks.produced(partition)
    acks.appended(1, 10, 13)  # p1's three records: the run before them is not durable
    assert seen == []
    assert acks.oldest_waiting() == 0
    acks.appended(0, 50, 53)
    assert seen == [Acked(0, 50, 52), Acked(1, 10, 11), Acked(0, 52, 53), Acked(1, 11, 13)]
    assert acks.oldest_waiting() is None
    assert acks.spans() == [AckedSpan(0, 50, 53, 3), AckedSpan(1, 10, 13, 3)]


def test_a_run_split_by_another_producers_records_is_acknowledged_in_pieces() -> None:
    acks, seen = _acks()
    for _ in range(5):
        acks.produced(0)
    acks.appended(0, 0, 3)
    # what of the oldest run is durable is acknowledged at once, not when all of it
    # is (a long run to one partition: an append at a time)
    assert seen == [Acked(0, 0, 3)]
    acks.appended(0, 7, 9)  # offsets 3..6 are another producer's
    assert seen == [Acked(0, 0, 3), Acked(0, 7, 9)]
    assert [a.count for a in seen] == [3, 2]
    # Summed up, the span holds the other producer's records; the count does not.
    assert acks.spans() == [AckedSpan(0, 0, 9, 5)]
    assert acks.spans()[0].describe() == "partition 0 offsets 0..8 (5 of them, between other producers' records)"


def test_a_stopped_producer_acknowledges_what_is_durable_behind_what_is_not() -> None:
    acks, seen = _acks()
    for partition in (0, 1, 2, 1):
        acks.produced(partition)
    acks.appended(1, 4, 6)
    acks.appended(2, 8, 9)
    acks.acknowledge_durable()  # p0's record was never written
    assert seen == [Acked(1, 4, 5), Acked(2, 8, 9), Acked(1, 5, 6)]
    assert acks.oldest_waiting() is None


def test_pieces_after_one_whose_acknowledgement_was_interrupted_are_still_given() -> None:
    """Ctrl-C while ``on_ack`` gives the first piece of a run split in two: the
    second was durable and counted, and a stopping producer still gives it."""
    seen: list[Acked] = []

    def on_ack(acked: Acked) -> None:
        seen.append(acked)
        if acked == Acked(0, 0, 2):
            raise KeyboardInterrupt

    acks = Acknowledgements(on_ack)
    for partition in (1, 0, 0, 0, 0):
        acks.produced(partition)
    acks.appended(0, 0, 2)
    acks.appended(0, 5, 7)  # offsets 2..4 are another producer's: the run is two pieces
    assert seen == []  # behind partition 1's run
    with pytest.raises(KeyboardInterrupt):
        acks.appended(1, 9, 10)
    assert seen == [Acked(1, 9, 10), Acked(0, 0, 2)]
    acks.acknowledge_durable()
    assert seen == [Acked(1, 9, 10), Acked(0, 0, 2), Acked(0, 5, 7)]
    assert acks.spans() == [AckedSpan(0, 0, 7, 4), AckedSpan(1, 9, 10, 1)]
