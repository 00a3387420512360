"""Warms a freshly started Spark service: a few plans of a small synthetic snapshot.

A new server's JVM interprets Spark's analyser, optimiser and code generator until its
JIT has compiled them: the first plans of a small topic took 1.5-3 s each where a
warm server takes well under a second (README, performance). So the supervisor runs
this process once its server is ready. It waits for the first client's plan (or a
few seconds without one), so that the client which started the server does not
share the cores with it, then plans :data:`WARM_UP_PLANS` times, at the lowest CPU
priority for its own Python side, and exits.

The snapshot is synthetic, not the data directory's: the planning query's text and
its input schemas are the same for every snapshot, so it compiles and warms the same
code, and it needs no catalog, takes no lock and works on an empty data directory.
It runs as a plain Connect client of the server: its plans are not counted as served
and do not keep the server from stopping when idle. Whatever goes wrong goes to the
log; it never fails anything else.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from engine.prune import tables
from engine.prune.snapshot import Snapshot

if TYPE_CHECKING:
    from engine.prune.planner import Planner
    from engine.prune.spark_service import ServerState

#: plans run to warm the server; the tenth of a small topic ran at about half the
#: first's time (measured), later ones gain little more
WARM_UP_PLANS = 10
#: how long the warm-up waits for the first client's plan before it starts anyway
FIRST_PLAN_WAIT_SECONDS = 10.0
_POLL_SECONDS = 0.2
_TOPICS, _PARTITIONS, _SEGMENTS = 2, 4, 10
_HOUR_MS = 3_600_000


def synthetic_snapshot(now: int) -> Snapshot:
    """A small catalog at ``now``: a topic with a size limit, one with a time limit
    only, each with a subscriber, so that every kind of row and most rules of the
    planning query are exercised."""
    policy = dict.fromkeys(tables.TOPICS.names)
    policy.update(granularity="segment", consumption="protect", backlog_policy="consumer_backlog_eviction")
    topics, partitions, segments, positions = [], [], [], []
    for t in range(_TOPICS):
        topic = f"warm-up-{t}"
        topics.append(
            {**policy, "topic": topic, "partitions": _PARTITIONS, "retention_time": _HOUR_MS if t else None,
             "retention_size": None if t else 4096, "hold": False, "policy_version": 0}
        )  # fmt: skip
        for p in range(_PARTITIONS):
            partitions.append({"topic": topic, "partition": p, "log_start_offset": 0, "next_offset": _SEGMENTS * 10})
            for s in range(_SEGMENTS):
                at = now - (_SEGMENTS - s) * _HOUR_MS // 2
                segments.append(
                    {"topic": topic, "partition": p, "base_offset": s * 10, "next_offset": s * 10 + 10,
                     "size_bytes": 1024, "first_timestamp": at, "max_timestamp": at + 1000,
                     "sealed": s < _SEGMENTS - 1}
                )  # fmt: skip
            positions.append(
                {"topic": topic, "group": "warm-up", "kind": "subscriber", "partition": p, "position": 30 + p,
                 "committed_at": now, "group_last_commit": now}
            )  # fmt: skip
    rows = {"topics": topics, "partitions": partitions, "segments": segments, "positions": positions, "time_cuts": []}
    return Snapshot(
        now,
        {name: pa.Table.from_pylist(rows[name], schema=schema) for name, schema in tables.SNAPSHOT_TABLES.items()},
        {},
    )


def _first_plan_or_timeout(service_dir: Path) -> None:
    from engine.prune.spark_service import ServiceDir

    service, deadline = ServiceDir(service_dir.parent), time.monotonic() + FIRST_PLAN_WAIT_SECONDS
    while service.plans_served() == 0 and time.monotonic() < deadline:
        time.sleep(_POLL_SECONDS)


def service_planner(service_dir: Path, log_dir: Path) -> tuple[ServerState, str, Planner] | None:
    """The running server of ``service_dir``, its token, and a planner on it as a plain
    Connect client that sends the snapshot as the data directory's clients do (files
    in its scratch directory, where the service runs locally); None if none runs."""
    from engine.prune.planner import Planner
    from engine.prune.scratch import scratch_dir
    from engine.prune.session import SparkEngine
    from engine.prune.spark_service import ServiceDir, running

    state = running(ServiceDir(service_dir.parent))
    if state is None:
        return None
    token = Path(state.token_file).read_text().strip()
    engine = SparkEngine(remote=f"{state.address}/;token={token}", log_dir=log_dir, service_client=True)
    transport = "files" if state.master.startswith("local") else "auto"
    return state, token, Planner(engine, scratch_dir(service_dir.parent, "snapshots"), transport)


def warm_up(service_dir: Path, log_dir: Path, plans: int) -> int:
    """Plan ``plans`` times on the server of ``service_dir``; 0 if all went well."""
    from engine.prune.spark_service import ServiceDir

    found = service_planner(service_dir, log_dir)
    if found is None:
        return 1
    service, (_state, _token, planner) = ServiceDir(service_dir.parent), found
    engine = planner.engine
    try:
        began = time.monotonic()
        for plan in range(plans):
            # Whole plans (explain, the console) and cycles' plans (deletions only)
            # end in different generated code: warm both.
            planner.plan(synthetic_snapshot(int(time.time() * 1000)), every_segment=plan % 2 == 0)
        outcome, code = f"Spark service warmed up: {plans} plans in {time.monotonic() - began:.1f} s", 0
    except Exception as error:  # noqa: BLE001 - a warm-up that fails costs only its gain
        outcome, code = f"Spark service warm-up stopped: {type(error).__name__}: {str(error)[:300]}", 1
    finally:
        engine.stop()
    engine.note(outcome)
    service.record_warm_up(outcome)
    return code


def main() -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {__name__}")
    parser.add_argument("service_dir", type=Path)
    parser.add_argument("--log-dir", type=Path, required=True)
    parser.add_argument("--plans", type=int, default=WARM_UP_PLANS)
    args = parser.parse_args()
    os.nice(19)
    _first_plan_or_timeout(args.service_dir)
    return warm_up(args.service_dir, args.log_dir, args.plans)


if __name__ == "__main__":
    sys.exit(main())
