"""Prune planner on Spark against the reference model, on a large synthetic catalog.

A synthetic catalog (``bench/synthetic_catalog.py``; default 10,000 partitions of 100
segments = 1M segments, 1,000 topics, about 2 groups per topic, mixed policies) is
bulk-written into a fresh SQLite catalog, then, in one process:

- ``snapshot``: ``build_snapshot`` (SQLite -> Arrow in bulk, record-level time cuts
  included; record timestamps are linear inside each segment, so a cut is arithmetic,
  with no segment files), against the baseline of the rows way: the segments table
  fetched as Python rows and turned into Arrow (up to 2M segments);
- ``spark start``: a fresh local ``SparkEngine`` (``--master``, default ``local[2]``)
  until its session is ready;
- ``plan cold``: the first ``Planner.plan`` on that session;
- ``first cycle applied``: the cold plan's effect written into the bench's own
  catalog (its deleted segments' rows removed, log starts moved, expired groups
  removed), as the executor leaves a catalog after a cycle; segment files and rolls
  are not simulated (the synthetic catalog has no files);
- ``warm-up cycle``: ``--warm-up`` cycles as below, not counted: Spark's JIT
  compiles the plan's generated code over its first plans, and at 1M segments a
  session's plans take several times their steady time for the first half dozen
  (docs/SPARK_NOTES.md); a running engine's cycles are past that, so the warm
  cycles measure after it;
- ``warm cycle``: ``--repeat`` whole cycles of that steady-state catalog, each one
  second later than the one before (the instant is all that changes between two
  cycles, so each plan deletes little, as a running engine's cycles do): snapshot +
  plan + apply-nothing: the executor's dry run over the plan's work (what the plan
  changes selected into work items, the cycle journaled, nothing changed); median
  and min of each part and of the whole. The plan is a cycle's, as ``Pruner.cycle``
  makes it: only the deleted segments' rows leave Spark (the kept ones are there for
  explain and the console, not for applying); the last one is checked against a
  whole plan of the same snapshot (its deletions, partitions, groups and topics);
- memory: peak RSS of this Python process and of Spark's JVM (local masters only);
- ``model``: ``tests/reference/model.plan`` on the same data. The model is plain
  Python loops; above ``AUTO_MODEL_SEGMENTS`` segments it runs on an evenly spaced
  sample of whole topics (``--model-fraction``) and its time is extrapolated linearly
  by segment count, which is fair because its cost is per partition and the sample
  keeps the partitions whole. The output says when it did that.

Ratios: the warm cycle / its target and the warm plan / its target (issue 13: 2.5 s
and 1.5 s up to 1M segments; 30 s for the cycle above, where the plan has none),
warm plan / model (extrapolated to the full catalog).
Correctness: the plan's deletions (segments and bytes) on the model's topics equal
the model's (OK/MISMATCH), and every plan table is compared row by row on those
topics. A breakdown of one extra, instrumented plan (through files, whatever
``--transport`` says) shows where plan time goes: Parquet writing, the query's
parsing and analysis on the driver, the
optimizer and physical planning, execution with the Arrow collect (with Spark's
stages and SQL operator metrics), and the split into plan tables in Python.

Run from the repository root: ``python -m bench.plan`` (full size, about 3-6 minutes
on the 2-core machine), ``python -m bench.plan --partitions 100 --segments 10`` (a
quick check). The snapshot and the plan need about 1.5 GB of memory at full size.
The reference model comes from ``tests/reference`` (plain Python, no test extra
needed); ``--no-model`` skips it, which saves most of the run's time.

The machine's load average is printed before and after: other processes skew every
number. The script only reports: it never fails on a slow result.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from bench.synthetic_catalog import LinearRecordTimes, SyntheticCatalog, generate
from engine.broker import Broker
from engine.catalog.catalog import Catalog
from engine.prune import tables
from engine.prune.executor import execute
from engine.prune.plan import query
from engine.prune.plan.inputs import buckets_of, read_files, spark_inputs, write_inputs
from engine.prune.plan.output import split
from engine.prune.plan_work import work_from_plan
from engine.prune.planner import Plan, Planner
from engine.prune.pruner import Pruner
from engine.prune.session import SparkEngine
from engine.prune.snapshot import Snapshot, build_snapshot
from engine.prune.transport import Scratch, private_directory

#: issue 13's targets: at 1M segments the whole warm cycle and the plan alone; at 10M
#: the whole warm cycle only
TARGETS_1M = (2.5, 1.5)
TARGETS_10M = (30.0, None)


def targets(segments: int) -> tuple[float, float | None]:
    """The (cycle, plan) targets of a catalog's size: 1M's up to 1M segments, 10M's above."""
    return TARGETS_1M if segments <= 1_000_000 else TARGETS_10M


#: the rows-way baseline of the snapshot is measured up to this many segments
BASELINE_SEGMENTS = 2_000_000
#: the model runs on everything up to this many segments, else on a sample of topics
AUTO_MODEL_SEGMENTS = 100_000

#: key columns of each plan table (as in tests/prune/test_planner_property.py)
KEYS = {
    "segments": ("topic", "partition", "base_offset"),
    "partitions": ("topic", "partition"),
    "groups": ("topic", "group", "partition"),
    "topics": ("topic",),
}


def load() -> tuple[float, float, float]:
    return os.getloadavg()


def timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - start, result


# -- the reference model's input ---------------------------------------------------------


def sample_topics(data: SyntheticCatalog, fraction: float) -> list[int]:
    """Evenly spaced topic indices, about ``fraction`` of them (at least one)."""
    count = len(data.topics)
    wanted = max(1, min(count, round(count * fraction)))
    return sorted({int(i * count / wanted) for i in range(wanted)})


def to_reference(data: SyntheticCatalog, topic_ids: list[int]) -> Any:
    """The model's ``RefCatalog`` of those topics (record timestamps as ranges)."""
    from tests.reference.catalog import Group, Partition, Policy, Position, RefCatalog, Segment, Topic

    partitions_of: dict[int, list[int]] = {}
    for p, t in enumerate(data.part_topic.tolist()):
        partitions_of.setdefault(t, []).append(p)
    groups_of: dict[int, list[int]] = {}
    for g, group in enumerate(data.groups):
        groups_of.setdefault(group.topic, []).append(g)
    positions_of: dict[int, list[int]] = {}
    for row, g in enumerate(data.pos_group.tolist()):
        positions_of.setdefault(g, []).append(row)
    last = data.segments_per_partition - 1
    part_index = data.part_index.tolist()
    topics = []
    for t in topic_ids:
        spec = data.topics[t]
        partitions = []
        for p in partitions_of[t]:
            base, nxt, size = data.base[p].tolist(), data.next[p].tolist(), data.size[p].tolist()
            # The model only reads a segment's timestamps as a sequence (len, index, max,
            # iteration): a range where it declares a tuple keeps them out of memory.
            segments = tuple(
                Segment(base[k], nxt[k], size[k], k != last, data.timestamps(p, k))  # type: ignore[arg-type]
                for k in range(last + 1)
            )
            partitions.append(Partition(part_index[p], int(data.log_start[p]), segments))
        groups = []
        for g in groups_of.get(t, []):
            rows = positions_of.get(g, [])
            positions = tuple(
                Position(part_index[int(data.pos_partition[r])], int(data.position[r]), int(data.committed_at[r]))
                for r in rows
            )
            groups.append(Group(data.groups[g].name, data.groups[g].kind, positions))
        topics.append(
            Topic(
                spec.name, Policy(**spec.policy), tuple(partitions), tuple(groups), spec.overrides, spec.policy_version
            )
        )
    return RefCatalog(tuple(topics), data.now, {})


# -- comparisons -------------------------------------------------------------------------


def only_topics(table: pa.Table, names: list[str]) -> pa.Table:
    return table.filter(pc.is_in(table["topic"], value_set=pa.array(names, pa.string())))


def deletions(segments: pa.Table) -> tuple[int, int]:
    deleted = segments.filter(pc.equal(segments["decision"], "delete"))
    return deleted.num_rows, int(pc.sum(deleted["size_bytes"]).as_py() or 0)


def compare_rows(name: str, got: list[dict], want: list[dict]) -> tuple[int, str | None]:
    """Rows that differ (missing, extra or unequal) and the first difference."""
    keys = KEYS[name]
    got_by = {tuple(r[k] for k in keys): r for r in got}
    want_by = {tuple(r[k] for k in keys): r for r in want}
    differing, first = 0, None
    for key in sorted(set(got_by) | set(want_by)):
        g, w = got_by.get(key), want_by.get(key)
        if g == w:
            continue
        differing += 1
        if first is None:
            if g is None or w is None:
                first = f"{name} {key}: only in the {'model' if g is None else 'plan'}"
            else:
                diff = {c: (g.get(c), w[c]) for c in w if g.get(c) != w[c]}
                first = f"{name} {key}: (plan, model) differ in {diff}"
    return differing, first


# -- plan checks -------------------------------------------------------------------------


def plan_stats(plan: Plan) -> dict[str, Any]:
    segments, partitions = plan.tables["segments"], plan.tables["partitions"]
    groups, topics = plan.tables["groups"], plan.tables["topics"]
    count, size = deletions(segments)

    def total(table: pa.Table, column: str) -> int:
        return int(pc.sum(table[column]).as_py() or 0)

    return {
        "segments": segments.num_rows,
        "partitions": partitions.num_rows,
        "groups": groups.num_rows,
        "topics": topics.num_rows,
        "deleted_segments": count,
        "deleted_bytes": size,
        "reasons": dict(sorted(Counter(segments["reason"].to_pylist()).items())),
        "rolls": total(partitions, "roll"),
        "partitions_with_barrier": partitions.num_rows - partitions["barrier"].null_count,
        "partitions_moving_log_start": int(
            pc.sum(pc.not_equal(partitions["new_log_start_offset"], partitions["log_start_offset"])).as_py() or 0
        ),
        "expired_group_rows": total(groups, "expired"),
        "over_quota_group_rows": total(groups, "over_quota"),
        "ttl_skipped": total(groups, "ttl_skipped"),
        "evicted_skipped": total(groups, "evicted_skipped"),
        "moved_skipped": total(groups, "moved_skipped"),
        "topics_quota_exceeded": total(topics, "quota_exceeded"),
    }


def invariants(plan: Plan, snapshot: Snapshot, data: SyntheticCatalog) -> list[tuple[str, bool, str]]:
    """Properties of any correct plan, checked on the whole plan (not only the sample)."""
    seg, part = plan.tables["segments"], plan.tables["partitions"]
    groups = plan.tables["groups"]
    checks: list[tuple[str, bool, str]] = []

    def check(name: str, ok: bool, detail: str = "") -> None:
        checks.append((name, bool(ok), detail))

    check(
        "one plan row per snapshot segment",
        seg.num_rows == snapshot.tables["segments"].num_rows,
        f"{seg.num_rows} vs {snapshot.tables['segments'].num_rows}",
    )
    check("one plan row per partition", part.num_rows == data.partitions, f"{part.num_rows} vs {data.partitions}")
    check(
        "one plan row per position",
        groups.num_rows == snapshot.tables["positions"].num_rows,
        f"{groups.num_rows} vs {snapshot.tables['positions'].num_rows}",
    )
    check(
        "no active segment deleted",
        seg.filter(pc.and_(pc.invert(seg["sealed"]), pc.equal(seg["decision"], "delete"))).num_rows == 0,
    )
    # per partition, from the segments table: counts, bytes, prefix property
    sorted_seg = seg.sort_by([("topic", "ascending"), ("partition", "ascending"), ("base_offset", "ascending")])
    topic_col, part_col = sorted_seg["topic"].to_pylist(), sorted_seg["partition"].to_pylist()
    decision, size = sorted_seg["decision"].to_pylist(), sorted_seg["size_bytes"].to_pylist()
    per: dict[tuple[str, int], list[int]] = {}
    not_prefix = 0
    state: dict[tuple[str, int], bool] = {}  # key -> a kept segment was seen
    for t, p, d, s in zip(topic_col, part_col, decision, size):
        key = (t, p)
        counts = per.setdefault(key, [0, 0])
        if d == "delete":
            counts[0] += 1
            counts[1] += s
            if state.get(key):
                not_prefix += 1
        else:
            state[key] = True
    check("deletions are a prefix of each partition", not_prefix == 0, f"{not_prefix} deleted after a kept one")
    mismatched = 0
    for t, p, n, b in zip(
        part["topic"].to_pylist(),
        part["partition"].to_pylist(),
        part["segments_deleted"].to_pylist(),
        part["bytes_deleted"].to_pylist(),
    ):
        if per.get((t, p), [0, 0]) != [n, b]:
            mismatched += 1
    check("partition counts and bytes match its segments", mismatched == 0, f"{mismatched} partitions differ")
    h, h2, tt = part["log_start_offset"], part["new_log_start_offset"], part["next_offset"]
    outside = int(pc.sum(pc.or_(pc.less(h2, h), pc.greater(h2, tt))).as_py() or 0)
    check("H <= new log start <= T", outside == 0, f"{outside} partitions outside")
    live = groups.filter(pc.invert(groups["expired"]))
    starts = {(t, p): n for t, p, n in zip(part["topic"].to_pylist(), part["partition"].to_pylist(), h2.to_pylist())}
    below = sum(
        1
        for t, p, n in zip(live["topic"].to_pylist(), live["partition"].to_pylist(), live["new_position"].to_pylist())
        if n < starts[(t, p)]
    )
    check("no live group below the new log start", below == 0, f"{below} group rows below")
    return checks


# -- the instrumented plan ---------------------------------------------------------------


def _stage_ids(spark: Any) -> set[int]:
    return {s["stage"] for s in _stages(spark)}


def _stages(spark: Any) -> list[dict[str, Any]]:
    """Spark's stage records (through the JVM status store; empty if unavailable)."""
    try:
        sc = spark.sparkContext
        try:
            sc._jsc.sc().listenerBus().waitUntilEmpty()
        except Exception:  # noqa: BLE001 - a JVM internal that may be missing; a pause serves too
            time.sleep(0.5)
        jvm = sc._jvm
        stages = (
            sc._jsc.sc()
            .statusStore()
            .stageList(
                jvm.java.util.ArrayList(), False, False, sc._gateway.new_array(jvm.double, 0), jvm.java.util.ArrayList()
            )
        )
        out = []
        for i in range(stages.size()):
            s = stages.apply(i)
            sub, done = s.submissionTime(), s.completionTime()
            wall = (done.get().getTime() - sub.get().getTime()) / 1000 if sub.isDefined() and done.isDefined() else None
            out.append(
                {
                    "stage": s.stageId(),
                    "name": s.name(),
                    "status": s.status().toString(),
                    "tasks": s.numTasks(),
                    "wall_seconds": wall,
                    "task_seconds": s.executorRunTime() / 1000,
                    "input_records": s.inputRecords(),
                    "shuffle_read_mb": s.shuffleReadBytes() / 1e6,
                    "shuffle_write_mb": s.shuffleWriteBytes() / 1e6,
                    "spill_mb": (s.memoryBytesSpilled() + s.diskBytesSpilled()) / 1e6,
                }
            )
        return sorted(out, key=lambda s: s["stage"])
    except Exception:  # noqa: BLE001 - the status store is a JVM internal: no stage records then
        return []


#: SQL metrics worth showing per operator of the executed plan
_METRICS = ("duration", "sort time", "peak memory", "spill size", "data size", "scan time", "time to broadcast")


def _executions(spark: Any) -> Any:
    return spark._jsparkSession.sharedState().statusStore()


def _execution_count(spark: Any) -> int:
    try:
        return _executions(spark).executionsList().size()
    except Exception:  # noqa: BLE001 - the status store is a JVM internal: no count then
        return 0


def _operators(spark: Any, first: int) -> list[dict[str, Any]]:
    """Per operator of the SQL executions from index ``first`` on: its chosen SQL
    metrics, totals only (empty if the status store is unavailable)."""
    try:
        store = _executions(spark)
        executions = store.executionsList()
        out = []
        for i in range(first, executions.size()):
            execution_id = executions.apply(i).executionId()
            values = store.executionMetrics(execution_id)
            nodes = store.planGraph(execution_id).allNodes()
            for n in range(nodes.size()):
                node = nodes.apply(n)
                metrics = node.metrics()
                shown = {}
                for m in range(metrics.size()):
                    metric = metrics.apply(m)
                    value = values.get(metric.accumulatorId())
                    if metric.name() in _METRICS and value.isDefined():
                        text = value.get()
                        # "total (min, med, max (stageId: taskId))\n1.4 s (219 ms, ...)" -> "1.4 s"
                        text = text.split("\n")[-1].split(" (")[0].strip()
                        if text and not text.startswith("0") and text != "0.0 B":
                            shown[metric.name()] = text
                    elif (
                        metric.name() == "number of output rows"
                        and node.name().startswith("Scan")
                        and value.isDefined()
                    ):
                        shown["rows"] = value.get()
                if not shown:
                    continue
                contains = []
                if node.getClass().getSimpleName() == "SparkPlanGraphCluster":  # a WholeStageCodegen
                    children = node.nodes()
                    contains = [children.apply(c).name() for c in range(children.size())]
                out.append(
                    {
                        "execution": execution_id,
                        "node": node.id(),
                        "name": node.name(),
                        "metrics": shown,
                        "contains": contains,
                    }
                )
        return out
    except Exception:  # noqa: BLE001 - the status store is a JVM internal: no metrics then
        return []


def instrumented_plan(engine: SparkEngine, scratch: Path, snapshot: Snapshot) -> dict[str, Any]:
    """``Planner.plan`` step by step, with the functions of its parts (:mod:`engine.prune.plan`)."""
    times: dict[str, float] = {}
    info: dict[str, Any] = {}

    start = time.perf_counter()
    inputs = spark_inputs(snapshot.tables, snapshot.now)
    times["Spark's input tables (Arrow)"] = time.perf_counter() - start

    def job(spark: Any) -> pa.Table:
        buckets = buckets_of(spark)
        with private_directory(Scratch.local(scratch)) as directory:
            start = time.perf_counter()
            write_inputs(inputs, directory, buckets)
            times["bucketed rows + facts -> Parquet"] = time.perf_counter() - start
            before = _stage_ids(spark)
            executions_before = _execution_count(spark)
            start = time.perf_counter()
            with read_files(spark, directory, buckets) as (rows, facts):
                frame = query.frame(spark, rows, facts)
                times["table registration + query parsing + analysis (driver)"] = time.perf_counter() - start
                start = time.perf_counter()
                executed = frame._jdf.queryExecution().executedPlan()
                times["optimizer + physical planning"] = time.perf_counter() - start
                start = time.perf_counter()
                table = frame.toArrow()
                times["execution + Arrow collect"] = time.perf_counter() - start
        # Adaptive execution shows the plan it ran, then the one it started from.
        text = executed.toString().split("== Initial Plan ==")[0]
        info["physical_plan"] = {
            "shuffles": text.count("Exchange hashpartitioning"),
            "windows": text.count("Window ["),
            "sorts": text.count("Sort ["),
            "broadcasts": text.count("BroadcastExchange"),
            "bucketed scan": "Bucketed: true" in text,
            "lines": text.count("\n") + 1,
        }
        info["stages"] = [s for s in _stages(spark) if s["stage"] not in before]
        info["operators"] = _operators(spark, executions_before)
        info["collected_rows"] = table.num_rows
        info["collected_mb"] = table.nbytes / 1e6
        return table

    frame = engine.run(job, f"bench-{uuid.uuid4().hex}")
    start = time.perf_counter()
    split(frame, snapshot.tables, inputs)
    times["split into plan tables (Python)"] = time.perf_counter() - start
    info["times"] = times
    info["total"] = sum(times.values())
    return info


# -- the run -----------------------------------------------------------------------------


def rows_way_segments(catalog: Catalog) -> tuple[float, float]:
    """The baseline: the segments table as the snapshot read it before it read in bulk,
    SQLite rows into Python tuples, then into Arrow: seconds of each step."""
    sql = (
        "SELECT topic, partition, base_offset, next_offset, size_bytes, first_timestamp, max_timestamp, sealed"
        " FROM segments ORDER BY topic, partition, base_offset"
    )
    with catalog.read():
        fetch_s, rows = timed(lambda: list(catalog.db.conn.execute(sql)))

    def to_arrow() -> pa.Table:
        columns = list(zip(*[(*r[:7], bool(r[7])) for r in rows]))
        return pa.Table.from_arrays(
            [pa.array(c, type=f.type) for c, f in zip(columns, tables.SEGMENTS)], schema=tables.SEGMENTS
        )

    arrow_s, _ = timed(to_arrow)
    return fetch_s, arrow_s


def jvm_peak_rss_mb(engine: SparkEngine) -> float | None:
    """Peak RSS of the local session's JVM (VmHWM), None if it is not ours."""
    proc = getattr(engine._gateway, "proc", None)
    if proc is None:
        return None
    try:
        with open(f"/proc/{proc.pid}/status") as status:
            return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmHWM:"))
    except (AttributeError, OSError, StopIteration):
        return None


def apply_first_cycle(catalog: Catalog, plan: Plan) -> tuple[int, int, int]:
    """The catalog as the executor leaves it after applying ``plan``: the deleted
    segments' rows gone, log starts moved, expired groups removed. Returns how many of
    each. In one write transaction, in bulk (a bench's own catalog: SQL is allowed)."""
    deleted = plan.deletions()
    partitions = plan.tables["partitions"]
    moved = partitions.filter(pc.not_equal(partitions["new_log_start_offset"], partitions["log_start_offset"]))
    groups = plan.tables["groups"]
    expired = sorted(set(zip(*(groups.filter(groups["expired"])[c].to_pylist() for c in ("topic", "group")))))
    with catalog.write():
        conn = catalog.db.conn
        conn.executemany(
            "DELETE FROM segments WHERE topic = ? AND partition = ? AND base_offset = ?",
            zip(*(deleted[c].to_pylist() for c in ("topic", "partition", "base_offset"))),
        )
        conn.executemany(
            "UPDATE partitions SET log_start_offset = ? WHERE topic = ? AND partition = ?",
            zip(*(moved[c].to_pylist() for c in ("new_log_start_offset", "topic", "partition"))),
        )
        for topic, group in expired:
            catalog.remove_group(topic, group)
    return deleted.num_rows, moved.num_rows, len(expired)


def warm_cycle(
    broker: Broker, planner: Planner, records: LinearRecordTimes, now: int, since: Snapshot | None
) -> tuple[dict[str, float], Snapshot, Plan]:
    """One whole cycle at ``now``, as ``Pruner.cycle`` makes it: snapshot (re-reading
    only the partitions written since ``since``, the engine's previous cycle; all of
    them without), plan (the deleted segments' rows only), apply-nothing; seconds of
    each, the snapshot and the plan."""
    times = {}
    times["snapshot"], snapshot = timed(
        build_snapshot, broker.catalog, records, defaults={}, now=now, since=None if since is None else since.read
    )
    times["plan"], plan = timed(planner.plan, snapshot, every_segment=Pruner.cycle_plans_every_segment)
    times["apply-nothing"], _ = timed(
        lambda: execute(
            broker,
            work_from_plan(plan.tables),
            now=now,
            trigger="manual",
            actor="bench",
            spark_master=planner.engine.description,
            dry_run=True,
        )
    )
    times["cycle"] = sum(times.values())
    return times, snapshot, plan


def append_to(catalog: Catalog, partitions: pa.Table, share: float, now: int, rng: random.Random) -> int:
    """Appends to ``share`` of ``partitions`` (chosen at random), as producers leave the
    catalog between two cycles: each one's active segment and next offset grow by
    100 records of 1 KB at ``now``. Returns how many partitions. One write
    transaction, in bulk (a bench's own catalog: SQL is allowed)."""
    keys = list(zip(partitions["topic"].to_pylist(), partitions["partition"].to_pylist()))
    chosen = rng.sample(keys, round(share * len(keys)))
    with catalog.write():
        conn = catalog.db.conn
        conn.executemany(
            "UPDATE segments SET next_offset = next_offset + 100, size_bytes = size_bytes + 102400,"
            " first_timestamp = COALESCE(first_timestamp, ?), max_timestamp = ?"
            " WHERE topic = ? AND partition = ? AND sealed = 0",
            [(now, now, topic, partition) for topic, partition in chosen],
        )
        conn.executemany(
            "UPDATE partitions SET next_offset = next_offset + 100 WHERE topic = ? AND partition = ?", chosen
        )
    return len(chosen)


#: the counted cycles' kinds, taken in turn: the share of partitions appended to before
#: each, and whether the snapshot re-reads only what changed since the previous cycle
#: (as the engine's does) or everything (as every snapshot did before: the baseline)
CYCLE_KINDS = {
    "unchanged": (0.0, True),
    "1% appended": (0.01, True),
    "10% appended": (0.10, True),
    "unchanged, read whole": (0.0, False),
}


def same_snapshot(since: Snapshot, whole: Snapshot) -> tuple[str, bool, str]:
    """Whether the last cycle's snapshot (read since the one before) equals one read whole."""
    differ = [name for name, table in whole.tables.items() if not since.tables[name].equals(table)]
    return ("the last cycle's snapshot, read since the one before = one read whole", not differ, ", ".join(differ))


def same_changes(cycle_plan: Plan, whole: Plan) -> tuple[str, bool, str]:
    """Whether a cycle's plan (deleted segments only) holds exactly the whole plan's
    deletions and the same partition, group and topic rows."""
    differ = [
        name
        for name, table in cycle_plan.tables.items()
        if not table.equals(whole.deletions() if name == "segments" else whole.tables[name])
    ]
    return ("the cycle's plan = the whole plan's deletions, partitions, groups, topics", not differ, ", ".join(differ))


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    result: dict[str, Any] = {"load_before": load()}
    P, S, K = args.partitions, args.segments, args.topics
    print(
        f"synthetic catalog: {P:,} partitions x {S} segments = {P * S:,} segments, {K:,} topics, seed {args.seed}; "
        f"master {args.master}; {os.cpu_count()} CPUs; load average {fmt_load(result['load_before'])}",
        flush=True,
    )

    # catalog (not part of the comparison): the data directory's, in the work directory
    gen_s, data = timed(generate, P, S, K, seed=args.seed)
    catalog = Catalog.open(workdir / "catalog.db")
    write_s, _ = timed(data.write, catalog)
    result["generate_seconds"], result["write_seconds"] = gen_s, write_s
    result["groups"], result["positions"] = len(data.groups), len(data.pos_group)
    print(
        f"catalog:      generate {gen_s:6.2f} s, SQLite bulk insert {write_s:6.2f} s "
        f"({len(data.groups):,} groups, {len(data.pos_group):,} positions)",
        flush=True,
    )

    # snapshot
    records = LinearRecordTimes(data)
    snap_s, snapshot = timed(build_snapshot, catalog, records, defaults={}, now=data.now)
    result.update(
        snapshot_seconds=snap_s,
        time_cuts=snapshot.tables["time_cuts"].num_rows,
        record_reads=records.reads,
        rejected=len(snapshot.rejected),
    )
    print(
        f"snapshot:     {snap_s:6.2f} s  ({len(snapshot.rejected)} topics rejected; "
        f"{result['time_cuts']:,} time cuts, {records.reads:,} record reads)",
        flush=True,
    )
    if data.segment_count <= BASELINE_SEGMENTS:
        fetch_s, arrow_s = rows_way_segments(catalog)
        result.update(baseline_segments_fetch_seconds=fetch_s, baseline_segments_arrow_seconds=arrow_s)
        print(
            f"  baseline, the rows way, segments table only: SQLite rows {fetch_s:.2f} s + rows -> Arrow "
            f"{arrow_s:.2f} s = {fetch_s + arrow_s:.2f} s; "
            f"whole bulk snapshot / that {snap_s / (fetch_s + arrow_s):.2f}",
            flush=True,
        )
    catalog.close()

    # spark
    engine = SparkEngine(master=args.master, conf=dict(args.conf), log_dir=workdir / "spark-logs")
    try:
        start = time.perf_counter()
        engine.start()
        engine.session()
        result["spark_start_seconds"] = time.perf_counter() - start
        print(f"spark start:  {result['spark_start_seconds']:6.2f} s", flush=True)

        planner = Planner(engine, workdir / "scratch", args.transport)
        cold_s, plan = timed(planner.plan, snapshot)
        result["plan_cold_seconds"] = cold_s
        result["transport"] = planner.chosen
        print(f"plan cold:    {cold_s:6.2f} s (snapshot transport: {planner.chosen})", flush=True)
        cycles = []
        with Broker(workdir) as broker:
            apply_s, (deleted, moved, expired) = timed(apply_first_cycle, broker.catalog, plan)
            result.update(first_cycle_deleted=deleted, first_cycle_apply_seconds=apply_s)
            print(
                f"first cycle applied to the bench's catalog ({apply_s:.2f} s, not counted): {deleted:,} segments "
                f"deleted, {moved:,} log starts moved, {expired:,} groups expired; the warm cycles run on that "
                "steady state",
                flush=True,
            )
            warm_up: list[dict[str, float]] = []
            kinds: dict[str, list[dict[str, float]]] = {kind: [] for kind in CYCLE_KINDS}
            rng = random.Random(args.seed)
            previous: Snapshot | None = None
            counted = [None] * args.warm_up + [kind for _ in range(args.repeat) for kind in CYCLE_KINDS]
            for i, kind in enumerate(counted, start=1):
                # Each cycle is at a later instant, as the scheduler's are: a planner
                # whose compiled code depended on the instant would pay for compiling
                # it again every time, and this would show it.
                now = snapshot.now + i * 1000
                share, since = CYCLE_KINDS.get(kind or "unchanged", (0.0, True))
                appended = append_to(broker.catalog, snapshot.tables["partitions"], share, now - 500, rng)
                times, previous, cycle_plan = warm_cycle(broker, planner, records, now, previous if since else None)
                (warm_up if kind is None else kinds[kind]).append(times)
                print(
                    ("warm-up cycle: " if kind is None else f"{kind + ':':<23}")
                    + ", ".join(f"{k} {v:5.2f} s" for k, v in times.items())
                    + f"; {cycle_plan.deletions().num_rows:,} deletions selected"
                    + (f"; {appended:,} partitions appended to before" if appended else ""),
                    flush=True,
                )
            result["warm_up_cycles"] = warm_up
            result["cycle_kinds"] = {
                kind: {part: statistics.median(c[part] for c in runs) for part in runs[0]}
                for kind, runs in kinds.items()
            }
            assert previous is not None
            result["cycle_plan_check"] = same_changes(cycle_plan, planner.plan(previous))
            result["snapshot_check"] = same_snapshot(
                previous, build_snapshot(broker.catalog, records, defaults={}, now=previous.now)
            )
            cycles = kinds["unchanged"]
        warm = [c["plan"] for c in cycles]
        result["warm_cycles"] = cycles
        result["plan_warm_seconds"] = warm
        result["plan_warm_median"] = statistics.median(warm)
        result["plan_warm_min"] = min(warm)
        result["cycle_medians"] = {part: statistics.median(c[part] for c in cycles) for part in cycles[0]}
        result["cycle_min"] = min(c["cycle"] for c in cycles)
        breakdown = instrumented_plan(engine, workdir / "scratch", snapshot)
        result["breakdown"] = breakdown
        result["jvm_peak_rss_mb"] = jvm_peak_rss_mb(engine)
    except BaseException:
        print_log_tail(engine.log_file)
        raise
    finally:
        engine.stop()

    if args.model:
        compare_with_model(args, data, plan, result)

    # the whole plan
    stats = plan_stats(plan)
    checks = [*invariants(plan, snapshot, data), result["cycle_plan_check"], result["snapshot_check"]]
    result["plan"], result["invariants"] = stats, [{"name": n, "ok": o, "detail": d} for n, o, d in checks]
    result["load_after"] = load()
    result["python_peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


def compare_with_model(args: argparse.Namespace, data: SyntheticCatalog, plan: Plan, result: dict[str, Any]) -> None:
    """The reference model on (a sample of) the catalog, and the plan checked against it."""
    P, S = args.partitions, args.segments
    fraction = args.model_fraction
    if fraction is None:
        fraction = min(1.0, AUTO_MODEL_SEGMENTS / (P * S))
    topic_ids = sample_topics(data, fraction)
    names = [data.topics[t].name for t in topic_ids]
    convert_s, reference = timed(to_reference, data, topic_ids)
    sample_segments = sum(len(p.segments) for t in reference.topics for p in t.partitions)
    from tests.reference import model

    model_s, expected = timed(model.plan, reference, data.now)
    scale = data.segment_count / sample_segments
    result.update(
        model_topics=len(topic_ids),
        model_segments=sample_segments,
        model_convert_seconds=convert_s,
        model_seconds=model_s,
        model_scale=scale,
        model_seconds_full=model_s * scale,
    )
    sampled = len(topic_ids) < len(data.topics)
    if sampled:
        print(
            f"model:        {model_s:6.2f} s on {len(topic_ids):,} of {len(data.topics):,} topics "
            f"({sample_segments:,} segments, every ~{len(data.topics) / len(topic_ids):.0f}th topic); "
            f"extrapolated linearly x{scale:.1f} to the full catalog: {model_s * scale:.1f} s "
            f"(conversion to the model's input {convert_s:.2f} s, not counted)",
            flush=True,
        )
    else:
        print(
            f"model:        {model_s:6.2f} s on the whole catalog "
            f"(conversion to the model's input {convert_s:.2f} s, not counted)",
            flush=True,
        )

    # correctness on the model's topics
    got_count, got_bytes = deletions(only_topics(plan.tables["segments"], names))
    want = [r for r in expected["segments"] if r["decision"] == "delete"]
    want_count, want_bytes = len(want), sum(r["size_bytes"] for r in want)
    ok = (got_count, got_bytes) == (want_count, want_bytes)
    result["check"] = {
        "ok": ok,
        "plan_deletions": got_count,
        "plan_bytes": got_bytes,
        "model_deletions": want_count,
        "model_bytes": want_bytes,
        "tables": {},
    }
    where = f"on the model's {len(topic_ids):,} topics" if sampled else "on the whole catalog"
    print(
        f"check:        {'OK' if ok else 'MISMATCH'} {where}: plan deletes {got_count:,} segments / "
        f"{got_bytes:,} bytes, model {want_count:,} / {want_bytes:,}"
    )
    for name in KEYS:
        differing, first = compare_rows(name, only_topics(plan.tables[name], names).to_pylist(), expected[name])
        result["check"]["tables"][name] = {"rows": len(expected[name]), "differing": differing, "first": first}
        print(
            f"              {name:<10} {len(expected[name]):>9,} rows, "
            f"{'identical' if differing == 0 else f'{differing:,} DIFFER; first: {first}'}"
        )


def print_log_tail(path: Path, lines: int = 40) -> None:
    """The end of Spark's log (the work directory is removed on the way out)."""
    try:
        tail = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return
    print(f"--- last {len(tail)} lines of {path} ---", file=sys.stderr)
    print("\n".join(tail), file=sys.stderr)


def fmt_load(values: tuple[float, float, float] | list[float]) -> str:
    return " ".join(f"{v:.2f}" for v in values)


def report(args: argparse.Namespace, r: dict[str, Any]) -> None:
    warm = r["plan_warm_median"]
    b = r["breakdown"]
    print()
    print(f"plan breakdown (one more warm plan, instrumented: {b['total']:.2f} s):")
    for step, seconds in b["times"].items():
        print(f"  {step:<56}{seconds:7.2f} s")
    plan_info = b.get("physical_plan", {})
    print(
        f"  physical plan: {plan_info.get('shuffles')} shuffles, {plan_info.get('broadcasts')} broadcasts, "
        f"{plan_info.get('windows')} window operators, {plan_info.get('sorts')} sorts, "
        f"bucketed scan {'yes' if plan_info.get('bucketed scan') else 'NO'}; "
        f"collected {b['collected_rows']:,} rows, {b['collected_mb']:.0f} MB of Arrow"
    )
    if b["stages"]:
        print(f"  Spark stages of the execution ({len(b['stages'])}):")
        print(
            f"    {'stage':>5} {'status':<9}{'tasks':>6}{'wall s':>8}{'task s':>8}{'in rows':>10}"
            f"{'shuf rd MB':>11}{'shuf wr MB':>11}{'spill MB':>9}  name"
        )
        for s in b["stages"]:
            wall = "" if s["wall_seconds"] is None else f"{s['wall_seconds']:.2f}"
            print(
                f"    {s['stage']:>5} {s['status']:<9}{s['tasks']:>6}{wall:>8}{s['task_seconds']:>8.2f}"
                f"{s['input_records']:>10,}{s['shuffle_read_mb']:>11.1f}{s['shuffle_write_mb']:>11.1f}"
                f"{s['spill_mb']:>9.1f}  {s['name'][:40]}"
            )
    if b.get("operators"):
        print("  SQL operators with metrics (totals over tasks; Window operators report none; a WholeStageCodegen's")
        print("  duration is the wall time its iterator was open, consumers included: they overlap, do not add them):")
        for o in b["operators"]:
            metrics = ", ".join(f"{k} {v}" for k, v in o["metrics"].items())
            contains = ", ".join(o.get("contains") or [])
            contains = f"  [{contains if len(contains) <= 70 else contains[:67] + '...'}]" if contains else ""
            print(f"    {o['name'][:26]:<26} {metrics}{contains}")
    p = r["plan"]
    print()
    print(
        f"plan output: {p['segments']:,} segment rows, {p['partitions']:,} partitions, {p['groups']:,} group rows, "
        f"{p['topics']:,} topics; deletes {p['deleted_segments']:,} segments ({p['deleted_bytes'] / 1e9:.2f} GB)"
    )
    print("  reasons: " + ", ".join(f"{k} {v:,}" for k, v in p["reasons"].items()))
    print(
        f"  partitions: {p['rolls']:,} rolls, {p['partitions_with_barrier']:,} with a barrier, "
        f"{p['partitions_moving_log_start']:,} moving the log start; groups: {p['expired_group_rows']:,} expired rows, "
        f"{p['over_quota_group_rows']:,} over quota; skipped by TTL {p['ttl_skipped']:,}, eviction "
        f"{p['evicted_skipped']:,}, moves {p['moved_skipped']:,}; {p['topics_quota_exceeded']:,} topics quota-exceeded"
    )
    for item in r["invariants"]:
        print(f"  {'ok  ' if item['ok'] else 'FAIL'} {item['name']}" + ("" if item["ok"] else f" ({item['detail']})"))
    print()
    c = r["cycle_medians"]
    jvm = "n/a (not a local master)" if r["jvm_peak_rss_mb"] is None else f"{r['jvm_peak_rss_mb']:,.0f} MB"
    print(
        f"summary ({args.partitions * args.segments:,} segments, {args.master}, snapshot as {r['transport']}, "
        f"load average {fmt_load(r['load_before'])} before, {fmt_load(r['load_after'])} after):"
    )
    print(
        f"  first snapshot {r['snapshot_seconds']:.2f} s; spark start {r['spark_start_seconds']:.2f} s; "
        f"plan cold {r['plan_cold_seconds']:.2f} s"
    )
    print(
        f"  warm cycle median {c['cycle']:.2f} s, min {r['cycle_min']:.2f} s (of {args.repeat}, after "
        f"{args.warm_up} warm-up cycles; steady state after "
        f"the first cycle's {r['first_cycle_deleted']:,} deletions): snapshot {c['snapshot']:.2f} s + plan "
        f"{c['plan']:.2f} s + apply-nothing {c['apply-nothing']:.2f} s (medians)"
    )
    print(f"  plan warm median {warm:.2f} s, min {r['plan_warm_min']:.2f} s")
    cycle_target, plan_target = targets(args.partitions * args.segments)
    whole = r["cycle_kinds"]["unchanged, read whole"]
    for kind, k in r["cycle_kinds"].items():
        print(
            f"  {kind + ':':<23} cycle {k['cycle']:5.2f} s = snapshot {k['snapshot']:.2f} + plan {k['plan']:.2f} + "
            f"apply-nothing {k['apply-nothing']:.2f} (medians of {args.repeat}); snapshot / read whole's "
            f"{k['snapshot'] / whole['snapshot']:.2f}, cycle / {cycle_target:g} s target "
            f"{k['cycle'] / cycle_target:.2f}"
        )
    if "baseline_segments_fetch_seconds" in r:
        rows_way = r["baseline_segments_fetch_seconds"] + r["baseline_segments_arrow_seconds"]
        print(f"  warm snapshot / the rows way's segments table alone {c['snapshot'] / rows_way:6.2f}")
    print(f"  warm cycle / {cycle_target:g} s target {c['cycle'] / cycle_target:6.2f}")
    if plan_target is not None:
        print(f"  warm plan / {plan_target:g} s target  {warm / plan_target:6.2f}")
    if args.model:
        model_full = r["model_seconds_full"]
        sampled = r["model_topics"] < args.topics
        print(f"  model {model_full:.2f} s" + (" (extrapolated from a sample)" if sampled else ""))
        print(f"  warm plan / model      {warm / model_full:6.2f}")
        print(f"  correctness: {'OK' if r['check']['ok'] else 'MISMATCH'}")
    print(f"  peak RSS: this Python process {r['python_peak_rss_mb']:,.0f} MB, Spark's JVM {jvm}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10_000, help="partitions in all (default 10000)")
    parser.add_argument(
        "--segments", type=int, default=100, help="segments per partition, active included (default 100)"
    )
    parser.add_argument("--topics", type=int, default=None, help="topics (default: partitions / 10)")
    parser.add_argument("--repeat", type=int, default=3, help="warm plans; median and min are reported (default 3)")
    parser.add_argument(
        "--warm-up", type=int, default=6, help="cycles before the warm ones, not counted: the JIT's (default 6)"
    )
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic catalog (default 0)")
    parser.add_argument(
        "--model-fraction",
        type=float,
        default=None,
        help=f"fraction of topics the reference model runs on (default: all up to {AUTO_MODEL_SEGMENTS:,} segments, "
        "else that many segments' worth)",
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        type=lambda text: tuple(text.split("=", 1)),
        metavar="KEY=VALUE",
        help="a Spark setting on top of the engine's defaults (repeatable), as [spark.conf] in ebb.toml",
    )
    parser.add_argument(
        "--transport",
        choices=("auto", "files", "arrow"),
        default="auto",
        help="how the snapshot reaches Spark, as [spark] transport in ebb.toml (default auto)",
    )
    parser.add_argument(
        "--no-model",
        dest="model",
        action="store_false",
        help="skip the reference model (which needs the test extra, for hypothesis)",
    )
    parser.add_argument(
        "--dir", type=Path, default=None, help="parent of the temporary directory (default: system temp)"
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON after the report")
    args = parser.parse_args()
    if args.topics is None:
        args.topics = max(1, args.partitions // 10)
    if args.partitions < 1 or args.segments < 1 or args.repeat < 1 or not 1 <= args.topics <= args.partitions:
        parser.error("need --partitions, --segments, --repeat >= 1 and 1 <= --topics <= --partitions")
    if args.warm_up < 0:
        parser.error("need --warm-up >= 0")
    if args.model_fraction is not None and not 0 < args.model_fraction <= 1:
        parser.error("--model-fraction must be in (0, 1]")
    return args


def main() -> None:
    args = parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-plan-", dir=args.dir))
    try:
        result = run(args, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    cycle_target, plan_target = targets(args.partitions * args.segments)
    result["ratios"] = {"warm_cycle_to_target": result["cycle_medians"]["cycle"] / cycle_target}
    if plan_target is not None:
        result["ratios"]["warm_plan_to_target"] = result["plan_warm_median"] / plan_target
    if args.model:
        result["ratios"]["warm_plan_to_model"] = result["plan_warm_median"] / result["model_seconds_full"]
    report(args, result)
    if args.json:
        print(
            json.dumps(
                {"args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}, **result}, indent=2
            )
        )


if __name__ == "__main__":
    main()
