"""``ebb forecast``: bytes on disk, deletions and the first breach of each topic at
every step from now to the horizon, planned on Spark in one job
(engine/forecast/). With policy flags it is a what-if over time.

Spark, pyarrow and numpy are imported when the command runs, not when ``ebb``
starts.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from console.cli.parser import command, finite, warn
from console.cli.policy_flags import add_policy_flags, policy_changes
from console.cli.render import emit_json, instant, size, table
from console.cli.spark_flags import add_spark_flags, planning_pruner
from console.model.forecast_assumptions import ingest, pace, window
from console.model.forecast_breaches import breach_text, disk_budget_text
from engine.broker import Broker
from engine.clock import parse_instant
from engine.errors import InvalidInput
from engine.forecast.defaults import HORIZON_MS, STEP_MS, WINDOW_MS
from engine.policy.effective import merge_overrides
from engine.policy.units import describe_duration, parse_duration, parse_size

if TYPE_CHECKING:
    from engine.forecast.forecast import Request
    from engine.forecast.result import Forecast, TopicForecast


def register(commands: argparse._SubParsersAction) -> None:
    forecast = commands.add_parser(
        "forecast",
        help="bytes on disk, deletions and first breaches from now to a horizon (a what-if with policy flags)",
    )
    forecast.add_argument("topics", nargs="*", metavar="TOPIC", help="topics to forecast [default: all]")
    horizon, step, window_ = (describe_duration(ms) for ms in (HORIZON_MS, STEP_MS, WINDOW_MS))
    forecast.add_argument("--horizon", default=horizon, metavar="DURATION", help=f"how far ahead [default: {horizon}]")
    forecast.add_argument(
        "--step", default=step, metavar="DURATION", help=f"time between two instants [default: {step}]"
    )
    forecast.add_argument(
        "--window", default=window_, metavar="DURATION",
        help=f"observe each partition's ingest rate over this recent window [default: {window_}]",
    )  # fmt: skip
    forecast.add_argument(
        "--rate", metavar="SIZE", help="ingest per partition per second (e.g. 1MiB), instead of the observed rate"
    )
    forecast.add_argument(
        "--stalled", metavar="GROUP", action="append", default=[],
        help="assume this group reads nothing from now on (repeatable)",
    )  # fmt: skip
    forecast.add_argument(
        "--disk-budget",
        metavar="SIZE",
        help="report the first instant the topics together hold more than this [default: config [engine] disk_budget]",
    )
    forecast.add_argument("--now", help="forecast from this time (ISO 8601 or epoch ms) [default: now]")
    forecast.add_argument(
        "--by-plans", action="store_true",
        help="plan every instant with the planner's own query: the same forecast, many times slower (a cross-check)",
    )  # fmt: skip
    forecast.add_argument("--json", action="store_true")
    add_spark_flags(forecast)
    add_policy_flags(forecast, allow_reset=True)
    command(forecast, run_forecast, mutates=False)


def run_forecast(broker: Broker, args: argparse.Namespace) -> int:
    # Everything the operator typed is checked before Spark starts.
    from engine.forecast.forecast import Request, instants

    names = [broker.catalog.topic(name).name for name in args.topics] or [t.name for t in broker.catalog.topics()]
    if not names:
        raise InvalidInput("no topics to forecast; create one with `ebb topic create NAME`")
    changes = policy_changes(args)
    overrides = {name: merge_overrides(broker.catalog.overrides(name), changes) for name in names} if changes else None
    for name, what_if in (overrides or {}).items():
        broker.policy(name, what_if)  # an invalid what-if is refused here
    groups = {g.name for name in names for g in broker.catalog.groups(name)}
    for group in args.stalled:
        if group not in groups:
            raise InvalidInput(f"--stalled {group!r}: no such group on {', '.join(names) or 'any topic'}")
    step = finite("--step", args.step, parse_duration, "duration", above_zero=True)
    horizon = finite("--horizon", args.horizon, parse_duration, "duration")
    if 0 < horizon < step:
        warn(f"--step {args.step} is longer than --horizon {args.horizon}: one step, to the horizon")
    now = broker.clock() if args.now is None else parse_instant(args.now)
    request = Request(
        instants=instants(now, horizon, step),
        # A window of 0 observes no record: a forecast of no ingest, whatever came in.
        window_ms=finite("--window", args.window, parse_duration, "duration", above_zero=True),
        rate=None if args.rate is None else finite("--rate", args.rate, parse_size, "size"),
        stalled=frozenset(args.stalled),
        disk_budget=(
            broker.config.disk_budget
            if args.disk_budget is None
            else finite("--disk-budget", args.disk_budget, parse_size, "size")
        ),
        prune_interval_ms=broker.config.prune_interval_ms,
        by_plans=args.by_plans,
    )
    result = _run(broker, args, request, names, overrides)
    if args.json:
        emit_json({**result.to_json(), "what_if": changes})
    else:
        print(render(result, changes))
    return 0


def _run(
    broker: Broker,
    args: argparse.Namespace,
    request: Request,
    names: list[str],
    overrides: dict[str, dict[str, str]] | None,
) -> Forecast:
    from engine.forecast.forecast import forecast
    from engine.prune.record_times import StoreRecordTimes

    # The Spark session of --spark-master / --spark-remote, as prune and explain start it.
    pruner = planning_pruner(broker, args)
    try:
        return forecast(
            pruner.planner, broker.catalog, StoreRecordTimes(broker.data), request,
            defaults=broker.config.policy_defaults, topics=names, overrides=overrides,
            progress=_show_progress if sys.stderr.isatty() else None,
        )  # fmt: skip
    finally:
        if sys.stderr.isatty():
            print("\r\033[K", end="", file=sys.stderr, flush=True)  # the progress line goes
        pruner.spark.stop()


def _show_progress(done: int, batches: int) -> None:
    """A large catalog's forecast takes minutes: one line on the terminal, rewritten."""
    print(f"\rforecast: {done} of {batches} Spark jobs done", end="", file=sys.stderr, flush=True)


def render(result: Forecast, changes: dict[str, str | None]) -> str:
    span = result.instants[-1] - result.now
    step = result.instants[1] - result.now if len(result.instants) > 1 else 0
    what_if = ", ".join(f"{k}={v if v is not None else '(default)'}" for k, v in changes.items())
    when = (
        f"from {instant(result.now)} over {describe_duration(span)}, every {describe_duration(step)} "
        f"({len(result.instants)} instants)"
        if len(result.instants) > 1
        else f"at {instant(result.now)} only (a horizon of 0)"
    )
    given = any(rate.source == "given" for topic in result.topics for rate in topic.rates.values())
    rates = (
        f"ingest given with --rate; record sizes and groups' reading observed over the last "
        f"{describe_duration(result.window_ms)}"
        if given
        else f"{window(result.window_ms)} (--rate overrides them)"
    )
    out = [f"forecast {when}" + (f"; what-if: {what_if}" if what_if else ""), rates]
    out += [f"not forecast: {topic}: {why}" for topic, why in result.rejected.items()]
    if result.disk_budget is not None:
        breach = result.disk_breach
        out.append(disk_budget_text(result.disk_budget, None if breach is None else instant(breach.at)))
    saved = {t.topic: t for t in result.saved or []}
    for topic in result.topics:
        out += ["", *_render_topic(topic, saved.get(topic.topic))]
    return "\n".join(out)


def _peak(topic: TopicForecast) -> str:
    peak = max(topic.points, key=lambda p: p.bytes)
    return f"peaks at {size(peak.bytes)} on {instant(peak.at)}"


def _render_topic(topic: TopicForecast, saved: TopicForecast | None) -> list[str]:
    """The topic's rates, peak (against the saved policy's, in a what-if), breaches and points."""
    versus = f" (with its saved policy: {_peak(saved)})" if saved is not None else ""
    out = [f"topic {topic.topic}: {_peak(topic)}{versus}"]
    for partition, rate in sorted(topic.rates.items()):
        out.append(f"  partition {partition}: {ingest(rate, hint=', a longer --window may see one')}")
    for reading in topic.readings:
        out.append(f"  group {reading.group} on partition {reading.partition}: {pace(reading)}")
    out += _breaches(topic, "")
    if saved is not None:
        # the saved policy's breaches too: the what-if's "none" read as the topic's
        out += _breaches(saved, "with its saved policy, ")
    rows = [
        [
            instant(p.at), size(p.bytes), p.segments, size(p.bytes_deleted),
            " ".join(f"{reason}={size(n)}" for reason, n in p.deleted_by_reason.items()) or None,
            "exceeded" if p.quota_exceeded else None,
        ]
        for p in topic.points
    ]  # fmt: skip
    out += [
        "  " + line
        for line in table(["AT", "ON DISK", "SEGMENTS", "DELETED SINCE NOW", "BY RULE", "QUOTA"], rows).splitlines()
    ]
    return out


def _breaches(topic: TopicForecast, whose: str) -> list[str]:
    """A line per first breach of ``topic``, or one saying there is none."""
    out = [f"  {whose}{breach_text(breach, instant(breach.at))}" for breach in topic.breaches]
    return out or [f"  {whose}no cap or quota exceeded within the horizon"]
