"""The capacity forecast (``ebb forecast``) against single plans, on the synthetic catalog.

The synthetic catalog of ``bench/synthetic_catalog.py`` (default 10,000 partitions of
100 segments = 1M segments) is bulk-written into a fresh SQLite catalog; then, in one
process and on one local Spark session:

- ``plan``: ``Planner.plan`` of today's snapshot, after a warm-up plan; ``--repeat``
  plans before the forecast and as many after it (the machine's load drifts over a
  forecast of minutes), and the median of them all is the baseline; with the median
  time to build that snapshot
  from the catalog added, a second one (what a cycle or ``ebb explain`` pays, and
  the forecast builds its snapshot too);
- ``forecast``: :func:`engine.forecast.forecast.forecast` over ``--instants``
  instants (default 168: a week, hourly), ingest rates observed over ``--window``:
  the timeline of every topic, one Spark job (engine/forecast/timeline.py);
- with ``--by-plans``, the same forecast asked by plans (the planner's own query over
  a virtual topic per topic and instant, in batches of at most ``MAX_VIRTUAL_ROWS``
  virtual segments, one Spark job each): its time, against the timeline's, and
  whether the two forecasts are equal. Slow: some 60 jobs at 1M segments.

Printed: the times, the forecast / plan ratio (the goal: under 10), and the churn:
the segments deleted after now's cycle and how often a log start moves
(docs/FORECAST_COST.md). Run it smaller for a quick figure, e.g. ``python -m
bench.forecast --partitions 1000`` from the repository root. The load average is
printed before and after: other processes skew every number.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.synthetic_catalog import HOUR, LinearRecordTimes, generate
from engine.catalog.catalog import Catalog
from engine.forecast import forecast as forecasting
from engine.forecast.result import Forecast
from engine.prune.planner import Planner
from engine.prune.session import SparkEngine
from engine.prune.snapshot import build_snapshot


def timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn(*args, **kwargs)
    return time.perf_counter() - start, value


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def churn(result: Forecast, today: int) -> str:
    """What changes over the horizon (docs/FORECAST_COST.md): the segments deleted
    after now's cycle, against ``today``'s, and at how many instants after now a
    partition's log start moves (median)."""
    gone = sum(topic.points[-1].segments_deleted - topic.points[0].segments_deleted for topic in result.topics)
    moves = [
        sum(a != b for a, b in zip(starts, starts[1:]))
        for topic in result.topics
        for starts in zip(*([p.log_start for p in point.partitions] for point in topic.points))
    ]
    median = statistics.median(moves) if moves else 0
    return (
        f"  churn:      {gone:,} segments deleted after now's cycle ({gone / max(1, today):.2f}x today's); "
        f"a partition's log start moves at {median:g} of {len(result.instants) - 1} later instants (median)"
    )


def run(args: argparse.Namespace, workdir: Path, engine: SparkEngine | None = None) -> None:
    """The benchmark in ``workdir``, on ``engine`` (left running) if given, else on a
    local engine of ``args.master`` started and stopped here."""
    own = engine is None
    if engine is None:
        engine = SparkEngine(master=args.master, log_dir=workdir / "spark-logs")
    P, S = args.partitions, args.segments
    K = args.topics or max(1, P // 10)
    print(
        f"synthetic catalog: {P:,} partitions x {S} segments = {P * S:,} segments, {K:,} topics; "
        f"{args.instants} instants every {args.step} h; master {engine.description}; load {load()}",
        flush=True,
    )
    data = generate(P, S, K, seed=args.seed, plain=args.plain)
    catalog = Catalog.open(workdir / "catalog.db")
    data.write(catalog)
    records = LinearRecordTimes(data)
    try:
        engine.start()
        engine.session()
        planner = Planner(engine, workdir / "scratch")
        snapshot = build_snapshot(catalog, records, defaults={}, now=data.now)
        planner.plan(snapshot)  # warm-up: the session's first plan compiles the query
        before = [timed(planner.plan, snapshot)[0] for _ in range(args.repeat)]
        print(f"plan:         {', '.join(f'{s:.2f}' for s in before)} s before the forecast", flush=True)
        snapshots = [timed(build_snapshot, catalog, records, defaults={}, now=data.now)[0] for _ in range(args.repeat)]
        snapshot_s = statistics.median(snapshots)
        print(f"  its snapshot (as a cycle or ebb explain makes it): {snapshot_s:7.2f} s", flush=True)

        instants = forecasting.instants(data.now, (args.instants - 1) * args.step * HOUR, args.step * HOUR)
        request = forecasting.Request(instants, args.window * HOUR)
        total_s, result = timed(forecasting.forecast, planner, catalog, records, request, defaults={})
        print(f"forecast:     {total_s:7.2f} s for {len(instants)} instants ({len(result.topics)} topics)",
              flush=True)  # fmt: skip
        print(churn(result, snapshot.tables["segments"].num_rows), flush=True)
        after = [timed(planner.plan, snapshot)[0] for _ in range(args.repeat)]
        plan_s = statistics.median(before + after)
        with_snapshot_s = plan_s + snapshot_s
        print(f"plan:         {', '.join(f'{s:.2f}' for s in after)} s after it; median {plan_s:.2f} s, "
              f"{with_snapshot_s:.2f} s with its snapshot", flush=True)  # fmt: skip
        if args.by_plans:
            by_plans = replace(request, by_plans=True)
            plans_s, planned = timed(forecasting.forecast, planner, catalog, records, by_plans, defaults={})
            print(f"by plans:     {plans_s:7.2f} s ({plans_s / total_s:.1f}x the timeline's); "
                  f"{'the same forecast' if planned == result else 'A DIFFERENT FORECAST'}", flush=True)  # fmt: skip
        print(f"ratio:        forecast / plan = {total_s / plan_s:.1f} (goal: < 10); forecast / plan with "
              f"its snapshot = {total_s / with_snapshot_s:.1f}; load {load()}", flush=True)  # fmt: skip
    finally:
        if own:
            engine.stop()
        catalog.close()


def main(argv: list[str] | None = None, engine: SparkEngine | None = None) -> None:
    """The command line (``argv``, else the process's); ``engine`` as in :func:`run`."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000, help="partitions in all (default 10000)")
    parser.add_argument("--segments", type=int, default=100, help="segments per partition (default 100)")
    parser.add_argument("--topics", type=int, default=None, help="topics (default: partitions / 10)")
    parser.add_argument("--instants", type=int, default=168, help="instants forecast, now included (default 168)")
    parser.add_argument("--step", type=int, default=1, help="hours between instants (default 1)")
    parser.add_argument("--window", type=int, default=1, help="hours of the ingest-rate window (default 1)")
    parser.add_argument("--repeat", type=int, default=3, help="single plans timed; the median is the baseline")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--plain", action="store_true",
        help="policies of time, size and caps only, at segment granularity",
    )  # fmt: skip
    parser.add_argument(
        "--by-plans", action="store_true", help="the forecast asked by plans too, timed and compared (slow)"
    )
    parser.add_argument("--dir", type=Path, default=None, help="parent of the temporary directory")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ebb-bench-forecast-", dir=args.dir) as tmp:
        run(args, Path(tmp), engine)


if __name__ == "__main__":
    main()
