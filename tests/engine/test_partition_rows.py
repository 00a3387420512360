"""``partition_rows`` (engine/prune/by_partition.py): the forecast finds the partition of
millions of virtual rows with it, by one integer key per (topic, partition)."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.prune.by_partition import partition_rows

TOPICS = ["a", "b", "a/b", "a\x00b", "é"]
pairs = st.tuples(st.sampled_from(TOPICS), st.integers(0, 40))


def _table(rows: list[tuple[str, int]]) -> pa.Table:
    return pa.table(
        {
            "topic": pa.array([t for t, _ in rows], pa.string()),
            "partition": pa.array([p for _, p in rows], pa.int64()),
        }
    )


@settings(deadline=None)  # the first arrow compute call loads its kernels
@given(st.lists(pairs, unique=True, max_size=20), st.lists(pairs, max_size=40))
def test_each_row_finds_the_row_of_its_topic_and_partition_or_none(
    partitions: list[tuple[str, int]], rows: list[tuple[str, int]]
) -> None:
    row_of = {pair: i for i, pair in enumerate(partitions)}
    got = partition_rows(_table(rows), _table(partitions)).tolist()
    assert got == [row_of.get(pair, -1) for pair in rows]


def test_a_topic_or_partition_absent_from_the_partitions_is_none() -> None:
    partitions = _table([("a", 0), ("a", 1), ("b", 0)])
    rows = _table([("b", 0), ("c", 0), ("a", 7), ("a", 1), ("b", 1)])
    assert partition_rows(rows, partitions).tolist() == [2, -1, -1, 1, -1]
    assert partition_rows(rows, _table([])).tolist() == [-1] * 5
    assert partition_rows(_table([]), partitions).tolist() == []
