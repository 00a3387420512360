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
"""

from __future__ import annotations

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
