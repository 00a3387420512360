"""The planning query: docs/RETENTION.md as one Spark SQL query, its text fixed.

The plan is one SQL query, written once: Spark parses and analyses it in one call,
where the DataFrame API would cost a round trip to the JVM per column expression
(thousands per plan). Every row of a partition (the partition itself, its
segments, its group positions) is in one relation, tagged by ``row``, so that every
per-partition quantity (prefixes, barrier, cut, new log start) is a window
aggregate over ``pid`` attached to each row: no shuffle (the rows are bucketed by
``pid``), no sort (each bucket is in order), no joins back. Rows stay narrow: a
window operator copies every column of every row it passes, so the per-partition
facts never go through one; they are joined by broadcast (which keeps the
partitioning) before each step that reads them, and what a rule derives from them
is evaluated where it is needed. Two levels of window aggregates, the second
depending on the first: the furthest-behind subscriber and the prefixes; what is
deleted. The running sizes and ranks a third level would compute come with the rows.

The text is built once, at import, from the rules of :mod:`~engine.prune.plan.rules`
and the layouts of :mod:`~engine.prune.plan.layout`; no snapshot value is in it:
the planning instant is a fact. Spark compiles the generated code of each query
stage once per distinct source text, so the same text every cycle is compiled
once (``tests/prune/test_planner_codegen.py``); its rendering is reviewed as
``tests/prune/golden/plan_query.sql``.
"""

from __future__ import annotations

from typing import Any

from engine.prune import bucketed
from engine.prune.plan.expr import any_of, case, col, flag, least, lit, substituted
from engine.prune.plan.layout import (
    FACT_FIELDS,
    FLAG_BITS,
    GROUP_NUMBERS,
    GROUP_ROW,
    PACKED_FACTS,
    PARTITION_NUMBERS,
    PARTITION_ROW,
    REASONS,
    SEGMENT_ROW,
    code,
)
from engine.prune.plan.round_trips import sql_frame
from engine.prune.plan.rules import (
    BARRIER,
    CUT,
    ELIGIBILITY,
    FIRST_NOT,
    FITS_QUOTA,
    NEW_LOG_START,
    OFFSET_BOUNDS,
    OFFSETS,
    SUFFIX_FROM,
    WITHIN_BUDGET,
    delete_reason,
    marks,
    over_quotas,
    passed_by_record,
    position_after_eviction,
    row_rules,
    wanted,
)


def _names(columns: list[str]) -> str:
    return ", ".join(f"`{c}`" for c in columns)


def _with_facts(source: str) -> str:
    """``source`` with the per-partition facts as columns, by a broadcast join on
    ``pid``.

    The facts travel packed in one array (``packed``), so that every join
    broadcasts the very same relation and Spark reads and broadcasts it once: with
    separate columns it prunes each join's side to the facts that step reads, and
    then reads and broadcasts them once per join."""
    unpacked = ", ".join(
        f"CAST(f.facts[{PACKED_FACTS.index(field.name)}] AS {bucketed.SQL_TYPES[field.type]}) AS `{field.name}`"
        for field in FACT_FIELDS
    )
    return f"(SELECT /*+ BROADCAST(f) */ s.*, {unpacked} FROM {source} s JOIN packed f ON s.pid = f.pid)"


#: the snapshot's columns the query reads of its rows (each null on the row kinds
#: that do not have it)
_SNAPSHOT_COLUMNS = [
    "pid", "row", "base_offset", "next_offset", "size_bytes", "max_timestamp", "sealed",
    "gid", "kind", "position", "group_last_commit",
]  # fmt: skip


#: the instants from which each age rule holds of a segment (eligible_at's candidates)
_AGE_RULES_FROM = [col("max_timestamp") + col(rule.limit) + 1 for rule in ELIGIBILITY.values() if rule.measure == "age"]
#: what rows carry into level one (running sizes and ranks come with the rows)
_RANKED = [*_SNAPSHOT_COLUMNS, "suffix_after", "rn"]
#: what rows carry through level one: what ``flags`` stands for stays behind
_LEVEL_ONE_CARRIED = [
    "pid",
    "base_offset",
    "next_offset",
    "size_bytes",
    "gid",
    "position",
    "rn",
    "flags",
    "eligible_at",
]


def _level_one() -> str:
    """Over the partition: the subscriber furthest behind (after TTL), the active
    segment's first timestamp, the first live segment outside each prefix and the
    first segment that fits the backlog size quota (before their bounds, see
    :func:`_decide`); per row its ``flags`` and ``eligible_at`` (:data:`FLAG_BITS`).

    One window operator, over the partition without an order: the running sizes
    it would need one for are in the rows already. Of the subscribers at the
    lowest position, the one first by name is named as the barrier."""
    rules = row_rules(before_flags=True)

    def outside(eligibility: tuple[str, ...]) -> str:
        eligible = any_of(*(rules[name] for name in eligibility))
        return str(case((rules["live"] & ~eligible, col("base_offset"))))

    # barrier's candidate, lowest first; "Per partition, the cut", Barrier
    holding = f"CASE WHEN {rules['holding']} THEN named_struct('pos', {rules['pos_ttl']}, 'gid', gid) END"
    # size_evict_cut's candidates; "Per topic, before the cut" 3
    fits_quota = case((rules["segment"] & substituted(FITS_QUOTA, {"bytes_from": SUFFIX_FROM}), col("base_offset")))
    flags = " + ".join(f"CASE WHEN {rules[name]} THEN {bit} ELSE 0 END" for name, bit in FLAG_BITS.items())
    inputs = ", ".join(
        [
            _names([*_RANKED, "active_first_ts"]),
            f"{flags} AS flags",
            # eligible_at; "Decision and reason per segment": the first instant an age rule holds
            f"{case((rules['is_sealed'], least(*_AGE_RULES_FROM)))} AS eligible_at",
            f"{holding} AS holding",
            *(f"{outside(eligibility)} AS {name}" for name, eligibility in FIRST_NOT.items()),
            f"{fits_quota} AS fits_quota",
        ]
    )
    minima = ", ".join(f"min({name}) OVER whole AS {name}" for name in (*FIRST_NOT, "fits_quota"))
    return f"""SELECT {_names(_LEVEL_ONE_CARRIED)},
    min(holding) OVER whole AS behind,
    max(active_first_ts) OVER whole AS active_first_ts,
    {minima}
  FROM (SELECT {inputs} FROM {_with_facts("rows")})
  WINDOW whole AS (PARTITION BY pid)"""


#: what rows carry out of :func:`_decide` (the output and the group rules read them)
_DECIDED_CARRIED = ["pid", "gid", "position", "rn", "flags", "eligible_at"]
#: a group row's two backlog quotas: is it over each (before eviction)
_QUOTAS = ("over_backlog_size", "over_backlog_age")


def _decide() -> str:
    """Per row, with the facts: the quota, eviction, barrier (and its group),
    target, hard cut and cut; per segment decision, reason and eligibility time
    (RETENTION.md tables); per group row its position after eviction and its quota
    state.

    Three projections, each naming what the next reads; Spark merges them into one
    operator."""
    rules = row_rules(before_flags=False)
    # barrier (size_evict_cut, pos_after_eviction), then the_cut's target and hard;
    # RETENTION.md "Per topic, before the cut" 3 and "Per partition, the cut".
    limits = f"""SELECT *,
    {BARRIER} AS barrier,
    {OFFSET_BOUNDS["target"]} AS target,
    {OFFSET_BOUNDS["hard"]} AS hard
  FROM {_with_facts("level_one")}"""
    cuts = f"SELECT *, {CUT} AS cut FROM limits"
    # plan_partition's wanted and deleted (within_budget); "Per partition, the cut"
    wanted_here = wanted(rules["is_sealed"])
    chosen = f"SELECT *, {wanted_here} AS wanted, {wanted_here & WITHIN_BUDGET} AS deleted FROM cuts"

    next_offset = col("next_offset")
    by_target = next_offset <= OFFSETS.both(col("target"), col("barrier"))
    time_rule, max_time_rule = (
        case((col("message"), passed_by_record(ELIGIBILITY[name])), otherwise=rules[f"e_{name}"])
        for name in ("time", "max_time")
    )
    # delete_reason and keep_reason; "Decision and reason per segment"
    why_deleted = delete_reason(next_offset <= col("H"), by_target, time_rule, max_time_rule, lambda r: lit(code(r)))
    held_by_barrier = (next_offset <= col("target")) & flag(next_offset > col("barrier"))
    eligible_itself = any_of(*(rules[name] for name in ("e_time", "e_size", "e_max_time", "e_max_size")))
    why_kept = f"""CASE WHEN hold THEN {code("KEEP_HOLD")}
      WHEN NOT {rules["is_sealed"]} THEN {code("KEEP_ACTIVE")}
      WHEN wanted THEN {code("KEEP_BUDGET")}
      WHEN {held_by_barrier} THEN {code("KEEP_BARRIER")}
      WHEN {eligible_itself} THEN {code("KEEP_PREFIX")}
      WHEN {rules["future"]} THEN {code("KEEP_FUTURE_TIMESTAMP")}
      WHEN retention_time IS NOT NULL THEN {code("KEEP_WITHIN_TIME")}
      WHEN retention_size IS NOT NULL THEN {code("KEEP_SIZE_TARGET")}
      ELSE {code("KEEP_NO_LIMIT")} END"""
    # pos_after_eviction and backlog's over_size and over_age; "Per topic, before the cut" 3
    quotas = ",\n    ".join(f"{rule} AS {name}" for name, rule in over_quotas(rules).items())
    decided = f"""SELECT {_names(_DECIDED_CARRIED)}, {rules["roll"]} AS roll, barrier, behind.gid AS barrier_group,
    cut, wanted, deleted, base_offset, next_offset, size_bytes,
    CASE WHEN deleted THEN {why_deleted} ELSE {why_kept} END AS reason_code,
    {position_after_eviction(rules)} AS pos_new,
    {quotas}
  FROM chosen"""
    return f"limits AS ({limits}),\ncuts AS ({cuts}),\nchosen AS ({chosen}),\ndecided AS ({decided})"


def _level_two() -> str:
    """Over the partition: what the cycle deletes (plan_partition's totals and the
    inputs of new_log_start; "Per partition, the cut")."""
    return """SELECT *,
    max(CASE WHEN deleted THEN next_offset END) OVER whole AS last_deleted_next,
    min(CASE WHEN wanted AND NOT deleted THEN base_offset END) OVER whole AS first_kept_by_budget,
    count(CASE WHEN deleted THEN true END) OVER whole AS segments_deleted,
    coalesce(sum(CASE WHEN deleted THEN size_bytes END) OVER whole, 0) AS bytes_deleted
  FROM decided
  WINDOW whole AS (PARTITION BY pid)"""


def _output() -> str:
    """What leaves Spark, with the facts: on segment rows the rank, reason and
    eligibility time; the packed numbers of partition and group rows: the new log
    start H' and each group's final position and what moved it."""
    rules = row_rules(before_flags=False)
    live = ~rules["expired"]
    final = f"""SELECT *, {NEW_LOG_START} AS new_log_start_offset FROM {_with_facts("level_two")}"""
    new_position = f"CASE WHEN {live} THEN greatest(pos_new, new_log_start_offset) ELSE `position` END"
    numbers = {
        **{name: f"`{name}`" for name in (*PARTITION_NUMBERS.names, "gid", "position", *_QUOTAS)},
        "subscriber": str(rules["subscriber"]),
        "new_position": new_position,
        "expired": str(rules["expired"]),
        "ttl_skipped": f"CASE WHEN {live} THEN {rules['pos_ttl']} - {rules['pos_eff']} ELSE 0 END",
        "evicted_skipped": f"CASE WHEN {live} THEN pos_new - {rules['pos_ttl']} ELSE 0 END",
        "moved_skipped": f"CASE WHEN {live} THEN {new_position} - pos_new ELSE 0 END",
        "quota_blocks_producers": f"({' OR '.join(_QUOTAS)}) AND NOT evicting",
    }

    segment, group = rules["segment"], rules["group"]
    columns = [
        f"CAST(CASE WHEN {segment} THEN {SEGMENT_ROW} WHEN {group} THEN {GROUP_ROW}"
        f" ELSE {PARTITION_ROW} END AS TINYINT)"
        " AS `row`",
        "CAST(pid AS INT) AS pid",
        f"CAST(CASE WHEN {segment} THEN rn END AS INT) AS rn",
        f"CAST(CASE WHEN {segment} THEN reason_code END AS TINYINT) AS reason_code",
        f"CASE WHEN {segment} THEN eligible_at END AS eligible_at",
        f"""CASE WHEN {group} THEN {GROUP_NUMBERS.array(numbers.__getitem__)}
      WHEN NOT {segment} THEN {PARTITION_NUMBERS.array(numbers.__getitem__)} END AS numbers""",
    ]
    return f"final AS ({final})\nSELECT {', '.join(columns)} FROM final"


def _plan_query() -> str:
    """The planning query over the inputs ``{rows}`` (:data:`~engine.prune.plan.inputs.BUCKETED_ROWS`) and
    ``{facts}`` (:data:`~engine.prune.plan.layout.FACTS`); ``SparkSession.sql`` puts them in. Of the
    segments' first timestamps only the active segment's is read (idle roll)."""
    packed = PACKED_FACTS.array(lambda name: f"`{name}`")
    active_first_ts = f"CASE WHEN {marks()['segment']} AND NOT sealed AND size_bytes > 0 THEN first_timestamp END"
    return f"""WITH
packed AS (SELECT pid, {packed} AS facts FROM {{facts}}),
rows AS (SELECT {_names(_RANKED)}, {active_first_ts} AS active_first_ts FROM {{rows}}),
level_one AS ({_level_one()}),
{_decide()},
level_two AS ({_level_two()}),
{_output()}"""


#: the planning query; the same text every plan, so Spark's compiled code is reused
PLAN_QUERY = _plan_query()

#: The rows of the planning frame that change something: partition and group rows,
#: and the segments deleted. A cycle needs no more; a million kept segments' rows cost
#: their Arrow conversion, collect and split (the larger part of a warm plan's output).
CHANGES = (
    f"`row` <> {SEGMENT_ROW} OR reason_code IN ({', '.join(str(code(r)) for r in REASONS if r.startswith('DELETE_'))})"
)


def frame(spark: Any, rows: Any, facts: Any, *, every_segment: bool = True) -> Any:
    """The plan as one DataFrame: :data:`PLAN_QUERY` over the DataFrames ``rows``
    (:data:`~engine.prune.plan.inputs.BUCKETED_ROWS`) and ``facts``
    (:data:`~engine.prune.plan.layout.FACTS`); without ``every_segment``, only its
    :data:`CHANGES` (the windows still see every row: they run before the filter)."""
    plan = sql_frame(spark, PLAN_QUERY, rows=rows, facts=facts)
    return plan if every_segment else plan.where(CHANGES)
