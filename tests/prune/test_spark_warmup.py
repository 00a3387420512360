"""The warm-up of a new Spark service (engine/prune/spark_warmup.py): its synthetic
snapshot must exercise the planning query as a real catalog does."""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc

from engine.prune.planner import Planner
from engine.prune.session import SparkEngine
from engine.prune.spark_warmup import synthetic_snapshot

NOW = 1_700_000_000_000


def test_the_warm_up_snapshot_plans_deletions_keeps_and_groups(spark_engine: SparkEngine, tmp_path: Path) -> None:
    snapshot = synthetic_snapshot(NOW)
    plan = Planner(spark_engine, tmp_path / "scratch").plan(snapshot)
    segments = plan.tables["segments"]
    assert segments.num_rows == snapshot.tables["segments"].num_rows
    decisions = set(segments["decision"].to_pylist())
    assert decisions == {"delete", "keep"}
    reasons = set(segments["reason"].to_pylist())
    # time and size rules, and the subscribers' barrier, all take part
    assert {"DELETE_TIME", "DELETE_SIZE", "KEEP_BARRIER", "KEEP_ACTIVE"} <= reasons, reasons
    assert plan.tables["groups"].num_rows == snapshot.tables["positions"].num_rows
    assert pc.sum(plan.tables["partitions"]["segments_deleted"]).as_py() > 0
