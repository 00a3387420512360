"""The positional contracts between the planner's Python and SQL sides
(engine/prune/plan/layout.py): what one side packs, the other finds by name."""

from __future__ import annotations

import pyarrow as pa

from engine.prune.plan.layout import FLAG_BITS, GROUP_NUMBERS, PACKED_FACTS, PARTITION_NUMBERS, Packed
from engine.prune.plan.rules import marked, marks
from engine.prune.session import SparkEngine


def test_numbers_packed_in_sql_come_back_by_name_in_arrow(spark_engine: SparkEngine) -> None:
    for packed in (PARTITION_NUMBERS, GROUP_NUMBERS, PACKED_FACTS):
        # Each name's value is distinct (its name's length times 1000 plus its rank
        # among the sorted names): a name read at another's position shows.
        expected = {name: len(name) * 1000 + rank for rank, name in enumerate(sorted(packed.names))}
        query = f"SELECT {packed.array(lambda name, values=expected: str(values[name]))} AS numbers"
        frame = spark_engine.run(lambda spark, query=query: spark.sql(query).toArrow(), "layout-test")
        unpacked = packed.unpacked(frame, "numbers")
        assert {name: unpacked[name][0].as_py() for name in packed.names} == expected


def test_unpacked_reads_each_name_at_its_index() -> None:
    packed = Packed(("a", "b", "c"))
    table = pa.table({"numbers": pa.array([[1, 2, 3], None], pa.list_(pa.int64()))})
    unpacked = packed.unpacked(table, "numbers")
    assert unpacked.select(["a", "b", "c"]).to_pylist() == [{"a": 1, "b": 2, "c": 3}, {"a": None, "b": None, "c": None}]
    assert [packed.index(name) for name in ("c", "a")] == [2, 0]


def test_every_flagged_rule_has_a_bit_of_its_own() -> None:
    bits = list(FLAG_BITS.values())
    assert all(bit > 0 and bit & (bit - 1) == 0 for bit in bits) and len(set(bits)) == len(bits)
    assert set(marks()) == set(marked()) == set(FLAG_BITS)
