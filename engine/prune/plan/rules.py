"""The retention rules, each stated once as an expression (:mod:`~engine.prune.plan.expr`).

Each rule names its function in ``tests/reference/model.py`` and its section of
docs/RETENTION.md. A rule of :data:`~engine.prune.plan.layout.FLAG_BITS` is evaluated
once, over the snapshot's columns (:func:`marks`), before level one, where the
columns it reads are at hand; every later step tests its bit of ``flags`` instead:
the largest generated stage is a fifth smaller, and the columns those rules read
(the row kind, timestamps, sizes after, the group's kind and last commit) go
through no window: a window copies every column of every row, and four fewer
columns make level one a seventh cheaper (docs/SPARK_NOTES.md). The rules that
read window values (the barrier, the bounds, the cut, the new log start) are
evaluated by :mod:`~engine.prune.plan.query` in the step that computes them.

One statement for the planner and for the forecast (engine/forecast/): the planner
renders each rule into its query and asks it at its instant; the forecast evaluates
the same expression over numpy arrays at every instant (the barrier, eviction, the
quotas, the roll, the new log start), solves it for the first instant it holds (the
eligibility measures, the roll's cycle: engine/forecast/thresholds.py) or searches
for that instant (the budget), and renders how the rules combine into the cut in
instants for its own query (:class:`Holds`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from engine.prune.plan.expr import Expr, Sql, case, coalesce, col, flag, greatest, least
from engine.prune.plan.layout import FLAG_BITS, GROUP_ROW, SEGMENT_ROW

#: stands for "no limit" where a number is compared (the budget)
UNLIMITED = 1 << 62

H, T, NOW = col("H"), col("T"), col("now")
#: the bytes of a segment and the partition's later ones
SUFFIX_FROM = col("suffix_after") + col("size_bytes")


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

#: each measure past its limit at the instant ``now``, over a segment's columns
PASSED: dict[str, Callable[[Expr], Expr]] = {
    "age": lambda limit: col("max_timestamp") < NOW - limit,
    "after": lambda limit: col("suffix_after") >= limit,
    "from": lambda limit: SUFFIX_FROM > limit,
}


def passed_by_record(rule: Eligibility) -> Expr:
    """An ``age`` rule at message granularity: its record cut has passed the segment."""
    return flag(col("next_offset") <= col(f"tc_{rule.record_cut}"))


#: idle_roll ("Per topic, before the cut" 4): the active segment's first record is
#: ``segment_roll`` old
ROLL = flag(NOW - col("active_first_ts") >= col("segment_roll"))


def marks() -> dict[str, Expr]:
    """The rules of :data:`~engine.prune.plan.layout.FLAG_BITS` over the snapshot's
    columns and the facts."""
    segment = col("row").eq(SEGMENT_ROW)
    sealed = flag(segment & col("sealed"))
    return {
        "segment": segment,
        "group": col("row").eq(GROUP_ROW),
        "is_sealed": sealed,
        "subscriber": flag(col("row").eq(GROUP_ROW) & col("kind").eq("subscriber")),  # GroupState.is_subscriber
        # is_group_expired; "Per topic, before the cut" 1
        "expired": flag(NOW - col("group_last_commit") > col("subscription_expiry")),
        # e_time, e_size, e_max_time, e_max_size; "Per partition, the cut", eligibility table
        **{f"e_{name}": flag(sealed & PASSED[rule.measure](col(rule.limit))) for name, rule in ELIGIBILITY.items()},
        # keep_reason's KEEP_FUTURE_TIMESTAMP; "Decision and reason per segment"
        "future": flag(col("retention_time").is_not_null() & (col("max_timestamp") > NOW)),
    }


def marked() -> dict[str, Expr]:
    """The rules of :func:`marks` as bits of ``flags``."""
    return {name: Sql(f"((flags & {bit}) <> 0)") for name, bit in FLAG_BITS.items()}


def row_rules(before_flags: bool) -> dict[str, Expr]:
    """The row-level rules of docs/RETENTION.md by name: those of :func:`marks`
    (evaluated ``before_flags``, or else tested as bits of ``flags``), and the
    others.

    They read snapshot columns, per-partition facts and window values of earlier
    levels by name: each step evaluates the ones it needs on its own rows rather
    than carrying their results (or the facts) through the windows. The forecast
    evaluates them ``before_flags`` over its own columns at each instant
    (engine/forecast/backlog.py)."""
    rules = marks() if before_flags else marked()
    subscriber, expired = rules["subscriber"], rules["expired"]
    pos_eff = greatest(col("position"), H)
    return {
        **rules,
        "pos_eff": pos_eff,  # pos_eff; "Inputs"
        # pos_after_ttl; "Per topic, before the cut" 2
        "pos_ttl": case(
            (subscriber & col("message_ttl").is_not_null(), greatest(pos_eff, col("tc_ttl"))), otherwise=pos_eff
        ),
        # barrier's candidates; "Per partition, the cut", Barrier
        "holding": subscriber & ~expired & col("protect"),
        "roll": ROLL,
        "live": flag(rules["segment"] & (col("next_offset") > H)),  # first_not's candidates
    }


def _first_not(name: str) -> Expr:
    """first_not: the base of the first live segment outside a prefix (``name``, its
    window minimum), the log end if none, at least the log start."""
    return greatest(H, coalesce(col(name), T))


#: a segment whose bytes and the later ones' (``bytes_from``: :data:`SUFFIX_FROM` in a
#: plan) fit the backlog size quota
FITS_QUOTA = col("bytes_from") <= col("backlog_size")
#: size_evict_cut ("Per topic, before the cut" 3): the first segment that fits the
#: quota (``fits_quota``: the least base of those of :data:`FITS_QUOTA`), else the log end
SIZE_EVICT_CUT = coalesce(col("fits_quota"), T)
#: where eviction lifts a subscriber to for each backlog quota (null: not set)
_FLOORS = (
    case((col("backlog_size").is_not_null(), SIZE_EVICT_CUT)),
    case((col("backlog_age").is_not_null(), col("tc_backlog_age"))),
)


def evicted(position: Expr) -> Expr:
    """pos_after_eviction: ``position`` lifted to each backlog quota's cut."""
    return greatest(position, *_FLOORS)


#: barrier ("Per partition, the cut", Barrier): the lowest protecting position after
#: TTL (``behind.pos``, null: none), lifted as eviction lifts every subscriber
BARRIER = case(
    (col("behind.pos").is_not_null() & col("evicting"), evicted(col("behind.pos"))), otherwise=col("behind.pos")
)


def over_quotas(rules: dict[str, Expr]) -> dict[str, Expr]:
    """backlog's over_size and over_age ("Per topic, before the cut" 3): a live
    subscriber below each quota's cut, before eviction; over ``rules``
    (:func:`row_rules`)."""
    subscriber, pos_ttl, live = rules["subscriber"], rules["pos_ttl"], ~rules["expired"]
    return {
        "over_backlog_size": live & flag(subscriber & col("backlog_size").is_not_null() & (pos_ttl < SIZE_EVICT_CUT)),
        "over_backlog_age": live & flag(subscriber & (pos_ttl < col("tc_backlog_age"))),
    }


def position_after_eviction(rules: dict[str, Expr]) -> Expr:
    """pos_after_eviction of a group row, over ``rules`` (:func:`row_rules`)."""
    return case((rules["subscriber"] & col("evicting"), evicted(rules["pos_ttl"])), otherwise=rules["pos_ttl"])


#: plan_partition's budget: a cycle deletes no segment under a hold, and no more than
#: ``max_deletes_per_cycle`` (``rn``: the segment's rank in its partition)
NOT_HELD = ~col("hold")
WITHIN_BUDGET = flag(col("rn") <= coalesce(col("max_deletes_per_cycle"), UNLIMITED))


def wanted(is_sealed: Expr) -> Expr:
    """plan_partition's wanted: a sealed segment (``is_sealed``: the rule, or its flag)
    at most the cut, and no hold; the budget decides which of them go."""
    return flag(is_sealed & NOT_HELD & (col("next_offset") <= col("cut")))


#: new_log_start ("Per partition, the cut", New log start): past the last segment
#: deleted; at message granularity the cut, held back to the first segment the
#: budget kept (``first_kept_by_budget``)
NEW_LOG_START = case(
    (col("hold"), H),
    (col("message"), greatest(H, least(col("cut"), col("first_kept_by_budget")))),
    otherwise=greatest(H, coalesce(col("last_deleted_next"), H)),
)


@dataclass(frozen=True)
class Holds:
    """Where a query says the rules of a cut hold, and so how it combines them. The
    planner asks at one instant which offsets a rule reaches: a segment below the
    offset goes, and either of two rules reaches the higher offset, both the lower
    (:data:`OFFSETS`). The forecast's timeline asks of each segment from which instant
    a rule holds: either holds from the earlier instant, both from the later
    (:data:`INSTANTS`). Every rule only reaches further as time passes, so the two
    readings of one formula agree (engine/forecast/extend.py argues it)."""

    either: Callable[..., Expr]
    both: Callable[..., Expr]


OFFSETS = Holds(either=greatest, both=least)
INSTANTS = Holds(either=least, both=greatest)


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


def bound(holds: Holds, by_record: Expr, prefix_at_message: Expr, prefix: Expr) -> Expr:
    """The target or the hard cut (``message``: the topic cuts at a record): there,
    the record cut or the prefix by size, whichever reaches further."""
    return case((col("message"), holds.either(by_record, prefix_at_message)), otherwise=prefix)


def the_cut(holds: Holds, below_start: Expr, hard: Expr, target: Expr, barrier: Expr) -> Expr:
    """the_cut: a segment goes below the log start, below the hard cut, or below the
    target where the barrier has passed it (``max(H, hard, min(target, barrier))``)."""
    return holds.either(below_start, hard, holds.both(target, barrier))


def _record_cut(rule: str) -> Expr:
    """A time rule's record cut (``tc_…``), the log start where its limit is infinite."""
    limit = ELIGIBILITY[rule]
    return case((col(limit.limit).is_not_null(), col(f"tc_{limit.record_cut}")), otherwise=H)


#: level one's prefixes (first_not's candidates; "Per partition, the cut", target and
#: hard): name -> the rules of :data:`ELIGIBILITY` that make a segment part of it:
#: each bound's at segment granularity, named by the bound, and at message
#: granularity, named by its rules
PREFIXES = {f"fn_{name}": b.by_segment for name, b in BOUNDS.items()}
PREFIXES_AT_MESSAGE = {f"fn_{'_'.join(b.at_message)}": b.at_message for b in BOUNDS.values()}
#: the prefixes by the flags of their rules, each bound's two together
FIRST_NOT = {
    name: tuple(f"e_{rule}" for rule in rules)
    for both in zip(PREFIXES.items(), PREFIXES_AT_MESSAGE.items())
    for name, rules in both
}

#: the target and the hard cut in offsets, over level one's prefixes (:data:`FIRST_NOT`)
#: and the record cuts
OFFSET_BOUNDS = {
    name: bound(OFFSETS, _record_cut(b.by_record), _first_not(f"fn_{'_'.join(b.at_message)}"), _first_not(f"fn_{name}"))
    for name, b in BOUNDS.items()
}
#: the_cut in offsets: ``min(T, max(H, hard, min(target, barrier)))``
CUT = least(T, the_cut(OFFSETS, H, col("hard"), col("target"), col("barrier")))


def delete_reason(
    below_start: Expr, by_target: Expr, by_time: Expr, by_max_time: Expr, reason: Callable[[str], Expr]
) -> Expr:
    """delete_reason ("Decision and reason per segment"), over where a deleted segment
    is below the log start, below the target and barrier, and the time rule or the
    hard time rule holds; ``reason`` writes a reason's name as the query holds it."""
    return case(
        (below_start, reason("DELETE_BELOW_LOG_START")),
        (by_target & by_time, reason("DELETE_TIME")),
        (by_target, reason("DELETE_SIZE")),
        (by_max_time, reason("DELETE_MAX_TIME")),
        otherwise=reason("DELETE_MAX_SIZE"),
    )
