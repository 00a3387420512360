"""``ebb prune`` and ``ebb explain``: one cycle, and every segment's decision.

Both plan on Spark (SPEC §5); ``--spark-master`` / ``--spark-remote`` choose where.
Spark and Arrow are imported by the functions that plan (see console/cli/main.py).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from console.cli.parser import command, non_negative_int, warn
from console.cli.policy_flags import add_policy_flags, policy_changes
from console.cli.render import emit_json, instant, size, table
from console.cli.spark_flags import add_spark_flags, planning_pruner
from engine.broker import Broker
from engine.clock import format_instant, parse_instant
from engine.journal.journal import Journal
from engine.policy.effective import merge_overrides

if TYPE_CHECKING:
    import pyarrow as pa

    from engine.prune.planner import Plan


def register(commands: argparse._SubParsersAction) -> None:
    prune = commands.add_parser("prune", help="run one prune cycle now (or plan it with --dry-run)")
    prune.add_argument("--topic", action="append", dest="topics", metavar="TOPIC", help="only this topic (repeatable)")
    prune.add_argument("--dry-run", action="store_true", help="plan and print, delete nothing")
    prune.add_argument(
        "--now",
        help="run the cycle as of this time (ISO 8601 or epoch ms): in the future it deletes what retention "
        "keeps until then, unless --dry-run (then it is a forecast)",
    )
    prune.add_argument("--json", action="store_true")
    add_spark_flags(prune)
    # A dry run journals its cycle (SPEC §6), so it writes too: `explain` plans without writing.
    command(prune, run_prune, mutates=True)

    explain = commands.add_parser("explain", help="every segment's decision, reason and eligibility time")
    explain.add_argument("topic")
    explain.add_argument("--partition", type=non_negative_int)
    explain.add_argument("--now", help="plan as of this time (ISO 8601 or epoch ms)")
    explain.add_argument("--json", action="store_true")
    add_spark_flags(explain)
    add_policy_flags(explain, allow_reset=True)
    command(explain, run_explain, mutates=False)


def _now(args: argparse.Namespace) -> int | None:
    return None if args.now is None else parse_instant(args.now)


def _rows(table_: pa.Table) -> list[dict[str, Any]]:
    return table_.to_pylist()


def run_prune(broker: Broker, args: argparse.Namespace) -> int:
    for name in args.topics or ():
        broker.catalog.topic(name)
    now = _now(args)  # refuse a bad --now before starting Spark
    if now is not None and now > broker.clock() and not args.dry_run:
        # SPEC: --now simulates time, so the cycle runs; but not without a word.
        warn(
            f"--now {format_instant(now)} is in the future: this cycle deletes what retention keeps until then "
            "(--dry-run plans it without deleting)"
        )
    pruner = planning_pruner(broker, args)
    try:
        # It prints and applies deletions and log start moves: no kept segment's row.
        plan = pruner.plan(now=now, topics=args.topics, every_segment=False)
        result = pruner.cycle(topics=args.topics, dry_run=args.dry_run, trigger="manual", actor="cli", plan=plan)
    finally:
        pruner.spark.stop()
    # A paused cycle applies nothing; what it planned is still the answer to "what
    # would go", as `ebb pause` promises (cycles still plan and report).
    paused = not args.dry_run and result.status == "paused"
    if args.dry_run or paused:
        actions = _planned_actions(plan)
    else:
        assert result.cycle_id is not None  # the executor journals every cycle it runs
        actions = _applied_actions(broker, result.cycle_id)
    if args.dry_run:
        deleted = len([a for a in actions if a["action"] == "delete_segment"])
        freed = sum(a["bytes"] for a in actions if a["action"] == "delete_segment")
    else:
        deleted, freed = result.applied, result.bytes_freed
    if args.json:
        emit_json(
            {
                "cycle_id": result.cycle_id,
                "dry_run": args.dry_run,
                "now": plan.now,
                "status": result.status,
                "actions": actions,
                "segments_deleted": deleted,
                "bytes_freed": freed,
                "skipped": result.skipped,
                # a topic whose effective policy is invalid was never planned: it failed
                "failed": {**plan.rejected, **result.failed},
            }
        )
        return 0
    verb = "would delete" if args.dry_run else "deleted"
    print(
        f"cycle {result.cycle_id} ({result.status}) at {instant(plan.now)}: {verb} {deleted} segment(s), {size(freed)}"
    )
    if paused and actions:
        print("deletion is paused: the plan below is not applied (`ebb resume`)")
    if actions:
        print(
            table(
                ["ACTION", "TOPIC", "PARTITION", "FROM", "TO", "BYTES", "REASON"],
                [
                    [
                        a["action"],
                        a["topic"],
                        a["partition"],
                        a["base_offset"],
                        a["next_offset"],
                        a["bytes"],
                        a["reason"],
                    ]
                    for a in actions
                ],
            )
        )
    for where, why in {**result.skipped, **plan.rejected, **result.failed}.items():
        print(f"not applied to {where}: {why}")
    return 0


def _planned_actions(plan: Plan) -> list[dict[str, Any]]:
    """What a dry run would do: segment deletions and log start moves."""
    import pyarrow.compute as pc

    deletions = plan.deletions()
    actions = [
        {
            "action": "delete_segment",
            "topic": r["topic"],
            "partition": r["partition"],
            "base_offset": r["base_offset"],
            "next_offset": r["next_offset"],
            "bytes": r["size_bytes"],
            "reason": r["reason"],
        }
        for r in _rows(deletions)
    ]
    partitions = plan.tables["partitions"]
    moved = partitions.filter(pc.greater(partitions["new_log_start_offset"], partitions["log_start_offset"]))
    actions += [
        {
            "action": "move_log_start",
            "topic": r["topic"],
            "partition": r["partition"],
            "base_offset": r["log_start_offset"],
            "next_offset": r["new_log_start_offset"],
            "bytes": 0,
            "reason": None,
        }
        for r in _rows(moved)
    ]
    return actions


def _applied_actions(broker: Broker, cycle_id: int) -> list[dict[str, Any]]:
    """What the cycle did, from its journal rows, oldest first."""
    rows = Journal(broker.catalog).actions(cycle=cycle_id, status="applied", limit=None)
    return [
        {
            "action": a.action,
            "topic": a.topic,
            "partition": a.partition,
            "base_offset": a.start_offset,
            "next_offset": a.end_offset,
            "bytes": a.bytes or 0,
            "reason": a.reason,
        }
        for a in reversed(rows)
        if a.action in ("delete_segment", "move_log_start")
    ]


def run_explain(broker: Broker, args: argparse.Namespace) -> int:
    topic = broker.catalog.topic(args.topic).name
    if args.partition is not None:
        broker.catalog.partition(topic, args.partition)
    changes = policy_changes(args)
    what_if = merge_overrides(broker.catalog.overrides(topic), changes) if changes else None
    if what_if is not None:
        broker.policy(topic, what_if)  # refuse an invalid what-if before starting Spark
    now = _now(args)
    pruner = planning_pruner(broker, args)
    try:
        saved = pruner.plan(now=now, topics=[topic])
        proposed = (
            pruner.plan(now=saved.now, topics=[topic], overrides={topic: what_if}) if what_if is not None else None
        )
    finally:
        pruner.spark.stop()
    segments = _explained(saved, args.partition)
    if proposed is not None:
        for row, new in zip(segments, _explained(proposed, args.partition)):
            row["saved_decision"], row["saved_reason"] = row["decision"], row["reason"]
            row.update({k: new[k] for k in ("decision", "reason", "eligible_at", "detail")})
    if args.json:
        emit_json({"topic": topic, "now": saved.now, "what_if": proposed is not None, "segments": segments})
        return 0
    label = "what-if" if proposed is not None else "plan"
    print(f"{topic} {label} at {instant(saved.now)}")
    headers = ["PARTITION", "BASE", "NEXT", "DECISION", "REASON", "ELIGIBLE AT", "DETAIL"]
    if proposed is not None:
        headers.insert(5, "SAVED")
    rows = []
    for s in segments:
        cells = [
            s["partition"],
            s["base_offset"],
            s["next_offset"],
            s["decision"],
            s["reason"],
            instant(s["eligible_at"]) if s["eligible_at"] is not None else None,
            s["detail"],
        ]
        if proposed is not None:
            cells.insert(5, f"{s['saved_decision']} {s['saved_reason']}")
        rows.append(cells)
    print(table(headers, rows))
    return 0


def _explained(plan: Plan, partition: int | None) -> list[dict[str, Any]]:
    import pyarrow.compute as pc

    segments = plan.tables["segments"]
    if partition is not None:
        segments = segments.filter(pc.equal(segments["partition"], partition))
    segments = segments.sort_by([("partition", "ascending"), ("base_offset", "ascending")])
    return [
        {
            "partition": r["partition"],
            "base_offset": r["base_offset"],
            "next_offset": r["next_offset"],
            "size_bytes": r["size_bytes"],
            "sealed": r["sealed"],
            "decision": r["decision"],
            "reason": r["reason"],
            "eligible_at": r["eligible_at"],
            "detail": r["detail"],
        }
        for r in _rows(segments)
    ]
