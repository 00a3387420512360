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
:mod:`~engine.prune.plan.query`, in the step that computes them; how they combine
(:data:`BOUNDS`, :func:`bound`, :func:`the_cut`, :func:`delete_reason`) is stated
here once, for the planner and for the forecast's timeline
(engine/forecast/timeline.py), each reading it in its own order (:class:`Holds`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine.prune.plan.layout import FLAG_BITS, GROUP_ROW, SEGMENT_ROW

#: the bytes of a segment and the partition's later ones
SUFFIX_FROM = "(suffix_after + size_bytes)"


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
        "e_time": flag(f"{sealed} AND max_timestamp < now - retention_time"),
        "e_size": flag(f"{sealed} AND suffix_after >= retention_size"),
        "e_max_time": flag(f"{sealed} AND max_timestamp < now - max_time"),
        "e_max_size": flag(f"{sealed} AND {SUFFIX_FROM} > max_partition_size"),
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

#: the cut's two bounds (docs/RETENTION.md, "Per partition, the cut"), each reached by
#: the prefix of live segments that any of its rules makes eligible: bound -> the
#: rules at segment granularity, and at message granularity (where the time rule
#: cuts at a record, :func:`bound`); ``time`` stands for ``e_time`` or its instant
BOUNDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "target": (("time", "size"), ("size",)),
    "hard": (("max_time", "max_size"), ("max_size",)),
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
