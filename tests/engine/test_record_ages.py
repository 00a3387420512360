"""The record at a group's position, as a lag reads it (engine/prune/record_times.py,
``RecordAges``): through the segment's offset index, the whole segment opened where
the index does not lead to it, kept until the topic is created again."""

from __future__ import annotations

from pathlib import Path

from engine.broker import Broker
from engine.catalog.lag import partition_lags
from engine.prune.record_times import RecordAges
from engine.store.batch import NewRecord
from engine.store.segment import Segment, segment_stem

T0 = 1_700_000_000_000


def _topic(broker: Broker, name: str = "t", start: int = T0) -> None:
    """Two segments of ten batches of ten records; the record at offset o has
    timestamp ``start + o``."""
    broker.create_topic(name, 1, {"segment_size": "12 KiB"})
    for b in range(20):
        broker.append(name, 0, [NewRecord(bytes(50), timestamp=start + 10 * b + i) for i in range(10)])


def _ages(broker: Broker, offsets: list[int], ages: RecordAges | None = None, name: str = "t") -> list[int | None]:
    ages = ages or RecordAges(broker.data)
    created = broker.catalog.topic(name).created_at
    with broker.catalog.read():
        return [ages.timestamp_at(broker.catalog, name, created, 0, o) for o in offsets]


def test_the_record_at_each_offset_in_every_segment(broker: Broker) -> None:
    _topic(broker)
    bases = [s.base_offset for s in broker.catalog.segments("t", 0)]
    assert len(bases) >= 2
    assert _ages(broker, list(range(200))) == [T0 + o for o in range(200)]
    assert _ages(broker, [200]) == [None]  # the partition's end


def test_an_index_that_does_not_lead_to_the_record_falls_back_to_opening_the_segment(broker: Broker) -> None:
    _topic(broker)
    directory = broker.data.partition_dir("t", 0)
    first = broker.catalog.segments("t", 0)[0].base_offset
    index = directory / (segment_stem(first) + ".index")
    assert Segment(directory, first).indexed_record(37) is not None
    stale = index.read_bytes()
    index.write_bytes(stale[16:32] + stale[16:])  # the first entry names the second batch's place
    assert Segment(directory, first).indexed_record(3) is None
    assert _ages(broker, [3, 37]) == [T0 + 3, T0 + 37]
    index.unlink()
    assert Segment(directory, first).indexed_record(37) is None
    assert _ages(broker, [37]) == [T0 + 37]


def test_a_topic_created_again_is_read_again(broker: Broker, data_dir: Path) -> None:
    _topic(broker)
    ages = RecordAges(broker.data)
    assert _ages(broker, [42], ages) == [T0 + 42]
    broker.delete_topic("t")
    with Broker(data_dir, clock=lambda: T0 + 3_600_000) as later:  # a later creation time
        _topic(later, start=T0 + 500_000)
        assert _ages(later, [42], ages) == [T0 + 500_042]


def test_a_lost_segment_file_reads_as_its_first_timestamp(broker: Broker) -> None:
    """No search of every later segment, and never a lag of 0 while a group is behind."""
    _topic(broker)
    broker.create_group("t", "g", "subscriber")
    broker.commit("t", "g", 0, 37)
    first = broker.catalog.segments("t", 0)[0]
    (broker.data.partition_dir("t", 0) / (segment_stem(first.base_offset) + ".log")).unlink()
    assert _ages(broker, [37]) == [None]
    with broker.catalog.read():
        (lag,) = partition_lags(broker.catalog, RecordAges(broker.data), "t")
    assert lag.oldest_unconsumed == first.first_timestamp == T0
