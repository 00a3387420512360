"""What crosses between Python and Spark by position, defined once.

The planner packs values where Spark would otherwise carry columns (docs/SPARK_NOTES.md):
the row kind and the reason are small integers, the per-partition facts travel as
one array, a row's own rules as the bits of one number, and the numbers of partition
and group rows as one array. Each layout here is read by the side that packs and
the side that unpacks: :mod:`~engine.prune.plan.inputs` and
:mod:`~engine.prune.plan.output` in Arrow, :mod:`~engine.prune.plan.query` in SQL.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from engine.prune import tables

# Row kinds of the planning frame (the ``row`` column going in and coming out).
PARTITION_ROW, SEGMENT_ROW, GROUP_ROW = 0, 1, 2

#: numeric policy fields the planner reads (null: infinite)
POLICY_NUMBERS = [
    "segment_roll", "retention_time", "retention_size", "max_time", "max_partition_size",
    "subscription_expiry", "message_ttl", "backlog_size", "backlog_age", "max_deletes_per_cycle",
]  # fmt: skip

#: per-partition facts (:func:`engine.prune.plan.inputs.spark_inputs`): the planning
#: instant, extent, record-level time cuts (null: none), topic policy (numbers as in
#: the snapshot, choices as flags)
FACTS = pa.schema(
    [
        ("pid", pa.int64()),
        ("now", pa.int64()),
        ("H", pa.int64()),
        ("T", pa.int64()),
        *((f"tc_{kind}", pa.int64()) for kind in tables.TIME_CUT_KINDS),
        *((name, pa.int64()) for name in POLICY_NUMBERS),
        ("hold", pa.bool_()),
        ("message", pa.bool_()),  # granularity = message
        ("protect", pa.bool_()),  # consumption = protect
        ("evicting", pa.bool_()),  # backlog_policy = consumer_backlog_eviction
    ]
)
#: the facts' columns after the pid, in the order they are packed (``packed.facts``)
FACT_FIELDS = [field for field in FACTS if field.name != "pid"]


@dataclass(frozen=True)
class Packed:
    """Named numbers that travel as one ``BIGINT`` array, each at its name's index."""

    names: tuple[str, ...]

    def array(self, expression: Callable[[str], str]) -> str:
        """The array, each element ``expression(name)``."""
        return "array(" + ", ".join(f"CAST({expression(name)} AS BIGINT)" for name in self.names) + ")"

    def index(self, name: str) -> int:
        return self.names.index(name)

    def unpacked(self, table: pa.Table, column: str) -> pa.Table:
        """``table`` with each element of its array ``column`` as a column of its name."""
        for i, name in enumerate(self.names):
            table = table.append_column(name, pc.list_element(table[column], i))
        return table


#: the facts of a partition, as every join broadcasts them
PACKED_FACTS = Packed(tuple(field.name for field in FACT_FIELDS))

#: What a row is, and a segment's own eligibility (and whether its timestamps are in
#: the future), are computed once, before level one, and carried as the bits of one
#: number, ``flags`` (:func:`engine.prune.plan.rules.marks`).
FLAG_BITS = {
    "segment": 1, "group": 2, "is_sealed": 4, "subscriber": 8, "expired": 16,
    "e_time": 32, "e_size": 64, "e_max_time": 128, "e_max_size": 256, "future": 512,
}  # fmt: skip

# What leaves Spark is what Spark decided, and as narrow as it can be: the Arrow
# conversion and collect of a million rows cost as much as both window levels, in
# proportion to the columns. A segment row carries its rank and its decision; the
# rest of its plan row is the snapshot's (:meth:`SparkInputs.snapshot_rows`), its
# decision and detail follow from its reason. The numbers of partition rows and of
# group rows travel packed in one array column, ``numbers``: a null array costs a
# segment row 4 bytes, where a dozen null columns would cost 100.
PARTITION_NUMBERS = Packed(
    ("H", "new_log_start_offset", "T", "roll", "barrier", "barrier_group", "segments_deleted", "bytes_deleted")
)
GROUP_NUMBERS = Packed(
    (
        "gid", "subscriber", "position", "new_position", "expired", "ttl_skipped", "evicted_skipped",
        "moved_skipped", "over_backlog_size", "over_backlog_age", "quota_blocks_producers",
    )
)  # fmt: skip

#: reason codes (docs/RETENTION.md); Spark computes an index into this tuple, the
#: plan tables carry the names
REASONS = (
    "DELETE_BELOW_LOG_START", "DELETE_TIME", "DELETE_SIZE", "DELETE_MAX_TIME", "DELETE_MAX_SIZE",
    "KEEP_HOLD", "KEEP_ACTIVE", "KEEP_BUDGET", "KEEP_BARRIER", "KEEP_PREFIX", "KEEP_FUTURE_TIMESTAMP",
    "KEEP_WITHIN_TIME", "KEEP_SIZE_TARGET", "KEEP_NO_LIMIT",
)  # fmt: skip
_REASON_CODES = {name: code for code, name in enumerate(REASONS)}


def code(reason: str) -> int:
    """``reason``'s code: its index in :data:`REASONS`."""
    return _REASON_CODES[reason]
