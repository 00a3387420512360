"""The row-level retention rules as SQL expressions, by name.

Each rule names its function in ``tests/reference/model.py`` and its section of
docs/RETENTION.md. A rule of :data:`~engine.prune.plan.layout.FLAG_BITS` is evaluated
once, over the snapshot's columns (:func:`marks`), before level one, where the
columns it reads are at hand; every later step tests its bit of ``flags`` instead:
the largest generated stage is a fifth smaller, and the columns those rules read
(the row kind, timestamps, sizes after, the group's kind and last commit) go
through no window: a window copies every column of every row, and four fewer
columns make level one a seventh cheaper (docs/SPARK_NOTES.md). The rules that
decide a partition's cut and a segment's reason read window values and sit in
:mod:`~engine.prune.plan.query`, in the step that computes them.

Stated here once for the planner and for the forecast's timeline
(engine/forecast/timeline.py): which limit each eligibility rule reads and how it
measures it (:data:`ELIGIBILITY`), and how the rules combine into the cut
(:data:`BOUNDS`, :func:`bound`, :func:`the_cut`, :func:`delete_reason`). The planner
asks whether each holds at its instant; the timeline asks from which instant it
holds, and reads the combination in its own order (:class:`Holds`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from engine.prune.plan.layout import FLAG_BITS, GROUP_ROW, SEGMENT_ROW

#: the bytes of a segment and the partition's later ones
SUFFIX_FROM = "(suffix_after + size_bytes)"


@dataclass(frozen=True)
class Eligibility:
    """An eligibility rule (docs/RETENTION.md, "Per partition, the cut", eligibility
    table): a sealed segment is eligible once ``measure`` passes the topic's
    ``limit``: the time since its newest record (``age``, more than the limit), or
    the partition's bytes after it (``after``, at least the limit) or from it on
    (``from``, more than the limit). At message granularity an ``age`` rule cuts at a
    record instead: the time cut of kind ``record_cut`` (tables.TIME_CUT_LIMITS)."""

    limit: str
    measure: Literal["age", "after", "from"]
    record_cut: str | None = None


#: the eligibility rules by name: ``e_time`` in the planner, ``k_time`` in the timeline
ELIGIBILITY = {
    "time": Eligibility("retention_time", "age", "retention"),
    "size": Eligibility("retention_size", "after"),
    "max_time": Eligibility("max_time", "age", "max_time"),
    "max_size": Eligibility("max_partition_size", "from"),
}

#: each measure past its limit at the planning instant, over the snapshot's columns
_PASSED_AT_NOW = {
    "age": "max_timestamp < now - {limit}",
    "after": "suffix_after >= {limit}",
    "from": SUFFIX_FROM + " > {limit}",
}


def flag(condition: str) -> str:
    """A rule with an infinite limit compares with null: never true."""
    return f"coalesce({condition}, false)"


def marks() -> dict[str, str]:
    """The rules of :data:`~engine.prune.plan.layout.FLAG_BITS` over the snapshot's
    columns and the facts."""
    segment = f"(`row` = {SEGMENT_ROW})"
    sealed = flag(f"{segment} AND sealed")
    return {
        "segment": segment,
        "group": f"(`row` = {GROUP_ROW})",
        "is_sealed": sealed,
        "subscriber": flag(f"`row` = {GROUP_ROW} AND kind = 'subscriber'"),  # GroupState.is_subscriber
        # is_group_expired; "Per topic, before the cut" 1
        "expired": flag("now - group_last_commit > subscription_expiry"),
        # e_time, e_size, e_max_time, e_max_size; "Per partition, the cut", eligibility table
        **{
            f"e_{name}": flag(f"{sealed} AND {_PASSED_AT_NOW[rule.measure].format(limit=rule.limit)}")
            for name, rule in ELIGIBILITY.items()
        },
        # keep_reason's KEEP_FUTURE_TIMESTAMP; "Decision and reason per segment"
        "future": flag("retention_time IS NOT NULL AND max_timestamp > now"),
    }


def marked() -> dict[str, str]:
    """The rules of :func:`marks` as bits of ``flags``."""
    return {name: f"((flags & {bit}) <> 0)" for name, bit in FLAG_BITS.items()}


def row_rules(before_flags: bool) -> dict[str, str]:
    """The row-level rules of docs/RETENTION.md by name: those of :func:`marks`
    (evaluated ``before_flags``, or else tested as bits of ``flags``), and the
    others.

    They read snapshot columns, per-partition facts and window values of earlier
    levels by name: each step evaluates the ones it needs on its own rows rather
    than carrying their results (or the facts) through the windows."""
    rules = marks() if before_flags else marked()
    subscriber, expired = rules["subscriber"], rules["expired"]
    pos_eff = "greatest(`position`, H)"
    return {
        **rules,
        "pos_eff": pos_eff,  # pos_eff; "Inputs"
        # pos_after_ttl; "Per topic, before the cut" 2
        "pos_ttl": f"(CASE WHEN {subscriber} AND message_ttl IS NOT NULL"
        f" THEN greatest({pos_eff}, tc_ttl) ELSE {pos_eff} END)",
        # barrier's candidates; "Per partition, the cut", Barrier
        "holding": f"({subscriber} AND NOT {expired} AND protect)",
        "roll": flag("now - active_first_ts >= segment_roll"),  # idle_roll; "Per topic, before the cut" 4
        "live": flag(f"{rules['segment']} AND next_offset > H"),  # first_not's candidates
    }


@dataclass(frozen=True)
class Holds:
    """Where a query says the rules of a cut hold, and so how it combines them. The
    planner asks at one instant which offsets a rule reaches: a segment below the
    offset goes, and either of two rules reaches the higher offset, both the lower
    (:data:`OFFSETS`). The forecast's timeline asks of each segment from which instant
    a rule holds: either holds from the earlier instant, both from the later
    (:data:`INSTANTS`). Every rule only reaches further as time passes, so the two
    readings of one formula agree (engine/forecast/extend.py argues it)."""

    either_of: str
    both_of: str

    def either(self, *terms: str) -> str:
        return terms[0] if len(terms) == 1 else f"{self.either_of}({', '.join(terms)})"

    def both(self, *terms: str) -> str:
        return terms[0] if len(terms) == 1 else f"{self.both_of}({', '.join(terms)})"


OFFSETS = Holds(either_of="greatest", both_of="least")
INSTANTS = Holds(either_of="least", both_of="greatest")


@dataclass(frozen=True)
class Bound:
    """One of the cut's two bounds (docs/RETENTION.md, "Per partition, the cut"):
    reached by the prefix of live segments that any of its rules makes eligible
    (``by_segment``, names of :data:`ELIGIBILITY`); at message granularity by the
    prefix of ``at_message`` or by the record cut of ``by_record``, whichever reaches
    further (:func:`bound`)."""

    by_segment: tuple[str, ...]
    at_message: tuple[str, ...]
    by_record: str


BOUNDS = {
    "target": Bound(("time", "size"), ("size",), "time"),
    "hard": Bound(("max_time", "max_size"), ("max_size",), "max_time"),
}


def bound(holds: Holds, by_record: str, prefix_at_message: str, prefix: str) -> str:
    """The target or the hard cut (``message``: the topic cuts at a record): there,
    the record cut or the prefix by size, whichever reaches further."""
    return f"CASE WHEN message THEN {holds.either(by_record, prefix_at_message)}\n      ELSE {prefix} END"


def the_cut(holds: Holds, below_start: str, hard: str, target: str, barrier: str) -> str:
    """the_cut: a segment goes below the log start, below the hard cut, or below the
    target where the barrier has passed it (``max(H, hard, min(target, barrier))``)."""
    return holds.either(below_start, hard, holds.both(target, barrier))


def delete_reason(
    below_start: str, by_target: str, by_time: str, by_max_time: str, reason: Callable[[str], str]
) -> str:
    """delete_reason ("Decision and reason per segment"), over where a deleted segment
    is below the log start, below the target and barrier, and the time rule or the
    hard time rule holds; ``reason`` writes a reason's name as the query holds it."""
    return f"""CASE WHEN {below_start} THEN {reason("DELETE_BELOW_LOG_START")}
      WHEN {by_target} AND {by_time} THEN {reason("DELETE_TIME")}
      WHEN {by_target} THEN {reason("DELETE_SIZE")}
      WHEN {by_max_time} THEN {reason("DELETE_MAX_TIME")}
      ELSE {reason("DELETE_MAX_SIZE")} END"""
