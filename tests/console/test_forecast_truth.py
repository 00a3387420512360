"""The Forecast view says what ``ebb forecast`` says (issue 14's one truth, issue 15's
Forecast view): the breach it marks on the chart is the first one its summary names,
the disk budget included; each breach is named with its limit, partition and group
in the CLI's words; and a per-partition size cap is drawn as what it is, so that a
skewed partition's breach is not marked where the topic's curve sits far under the
line drawn for the cap (fccheck6's findings)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from textual.widgets import Static

from console.cli.forecast import render
from console.model.capacity import week_ahead
from console.screens.forecast import HOUR, ForecastScreen, summary
from console.widgets.charts import Chart, ChartSpec, chart_legend
from console.widgets.forecast_chart import forecast_chart
from engine.broker import Broker
from engine.clock import parse_instant
from engine.config import DEFAULT_CONFIG
from engine.forecast.rates import Rate
from engine.forecast.result import Breach, Forecast, PartitionPoint, Point, TopicForecast
from engine.policy.units import describe_size
from tests.support.console_fixtures import NOW, TERMINAL, settle

KIB = 1 << 10
#: each partition's size cap in the skewed forecasts
CAP = 60 * KIB
#: a budget the skewed topic is over from now on
BUDGET = 50 * KIB
#: theme roles as colours, for the legend's text
VARIABLES = {"foreground": "#FFFFFF", "primary": "#00FF00", "secondary": "#0000FF", "error": "#FF0000",
             "warning": "#FFFF00", "accent": "#FF00FF"}  # fmt: skip


def skewed(topic: str, partitions: int, *, hours: int = 168, budget: int | None = BUDGET) -> Forecast:
    """Partition 0 takes far more ingest than the others: 40 KiB now, 20 KiB more an
    hour until its cap (60 KiB) deletes at +1 h and holds it there; the others 10 KiB,
    a quarter KiB more an hour, under their caps to the end. Together they are over
    ``budget`` at +0 h, and under the partitions' caps summed (60 KiB x ``partitions``)."""
    instants = [NOW + i * HOUR for i in range(hours + 1)]
    points = []
    for i, at in enumerate(instants):
        sizes = [min(CAP, 40 * KIB + i * 20 * KIB)] + [10 * KIB + i * KIB // 4] * (partitions - 1)
        parts = [PartitionPoint(p, size, i + 1, 0) for p, size in enumerate(sizes)]
        points.append(Point(at, sum(sizes), len(sizes) * (i + 1), parts, 0, 0, {}, False))
    breaches = [
        Breach("max_partition_size", NOW + HOUR, CAP, partition=0),
        Breach("backlog_quota", NOW + 2 * HOUR, HOUR, partition=1, group="billing", quota="backlog_age"),
        Breach("max_time", NOW + 5 * HOUR, 3 * 24 * HOUR, partition=1),
    ]
    rates = {p: Rate(1, 1000, 290, "observed", NOW - HOUR) for p in range(partitions)}
    disk = None if budget is None else Breach("disk_budget", NOW, budget)
    return Forecast(NOW, instants, HOUR, [TopicForecast(topic, rates, points, breaches)], budget, disk)


def _breach_marks(spec: ChartSpec) -> list[float]:
    """Where the chart marks a breach: its vertical lines but the one at now."""
    return [m.value for m in spec.marks if m.vertical and m.role == "error"]


#: ``... at +3 h ...``: an instant of the summary, in hours from now
HOURS = re.compile(r" at \+(\d+) h")


def _named_breaches(text: str) -> list[tuple[int, str]]:
    """(hours from now, line) of each breach the summary names, in its order."""
    lines = [line for line in text.splitlines() if not line.startswith(("peak ", "past: "))]
    return [(int(m.group(1)), line) for line in lines if (m := HOURS.search(line))]


def test_the_marker_sits_at_the_first_breach_the_summary_names() -> None:
    """The disk budget is exceeded at +0 h, the topic's cap at +1 h: the summary said
    "disk budget exceeded at +0 h" while the marker sat at +1 h."""
    result = skewed("orders", 4)
    spec = forecast_chart(result, "orders", cap=4 * CAP, partitions=4)
    named = _named_breaches(summary(result.topics[0], result))
    assert len(named) == 4, named
    # the summary names them earliest first; the chart marks the first
    assert [hours for hours, _ in named] == sorted(hours for hours, _ in named)
    assert named[0] == (0, "disk budget 50 KiB: exceeded at +0 h")
    assert _breach_marks(spec) == [0]
    # without a budget, the topic's own first breach is the first named and marked
    quiet = skewed("orders", 4, budget=None)
    named = _named_breaches(summary(quiet.topics[0], quiet))
    assert named[0][0] == 1 and _breach_marks(forecast_chart(quiet, "orders", cap=4 * CAP, partitions=4)) == [1]


def _as_hours(line: str) -> str:
    """A line of ``ebb forecast`` with its instants as the view says them: ``+3 h``."""

    def hours(match: re.Match[str]) -> str:
        return f"+{(parse_instant(match.group(0)) - NOW) // HOUR} h"

    return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", hours, line)


def test_the_summary_names_each_breach_as_ebb_forecast_does() -> None:
    """The limit, the partition and the group of each first breach, in the CLI's words
    (``(60 KiB) ... on partition 0``), where the view said only the kind."""
    result = skewed("orders", 4)
    cli = [_as_hours(line).strip() for line in render(result, {}).splitlines()]
    said = [line for _, line in _named_breaches(summary(result.topics[0], result))]
    assert said == [
        "disk budget 50 KiB: exceeded at +0 h",
        "first breach: max_partition_size (60 KiB) at +1 h on partition 0",
        "first breach: backlog_quota backlog_age (1h) at +2 h on partition 1 by group billing",
        "first breach: max_time (3d) at +5 h on partition 1",
    ]
    assert set(said) <= set(cli)


def test_a_per_partition_cap_is_drawn_as_what_it_is() -> None:
    """The line drawn for the size cap of a topic of 4 partitions is 4 caps summed:
    the legend says so, and when the breach marked is a partition's own cap, that
    partition is drawn, with that cap, so that the marker sits where its curve
    reaches the line."""
    result = skewed("orders", 4, budget=None)
    spec = forecast_chart(result, "orders", cap=4 * CAP, partitions=4)
    legend = chart_legend(spec, VARIABLES).plain.splitlines()
    assert "─ cap 60.0 KiB x 4 partitions = 240.0 KiB" in legend
    assert "─ partition 0's cap 60.0 KiB" in legend
    (partition,) = [s for s in spec.series if s.label == "partition 0"]
    assert partition.ys == tuple(p.partitions[0].bytes for p in result.topics[0].points)
    (its_cap,) = [m for m in spec.marks if m.label == "partition 0's cap"]
    assert its_cap.value == CAP and spec.on_chart(its_cap)
    # the partition's curve reaches its cap at the instant the summary names
    (hours, line), *_ = [
        named for named in _named_breaches(summary(result.topics[0], result)) if "max_partition" in named[1]
    ]
    assert partition.ys[partition.xs.index(hours)] >= its_cap.value > partition.ys[partition.xs.index(hours) - 1]
    assert _breach_marks(spec) == [hours]
    # the budget broken first is the breach marked: the curve it crosses is the topic's,
    # and no partition's is drawn (nor its cap, which could hide the budget's line)
    spec = forecast_chart(skewed("orders", 4), "orders", cap=4 * CAP, partitions=4)
    assert [s.label for s in spec.series] == ["projected"] and _breach_marks(spec) == [0]
    assert [m.label for m in spec.marks if m.label] == ["cap 60.0 KiB x 4 partitions =", "disk budget"]
    # a topic of one partition: its cap is the partition's, one line, as before
    single = skewed("metrics", 1)
    spec = forecast_chart(single, "metrics", cap=CAP)
    assert [m.label for m in spec.marks if m.label] == ["cap", "disk budget"]
    assert [s.label for s in spec.series] == ["projected"]
    spec = forecast_chart(skewed("metrics", 1, budget=None), "metrics", cap=CAP)
    assert [m.label for m in spec.marks if m.label] == ["cap"] and [s.label for s in spec.series] == ["projected"]


def _with_cap(data: Path, topic: str, cap: str) -> None:
    with Broker(data, clock=lambda: NOW) as broker:
        broker.alter_topic(topic, {"max_partition_size": cap})


async def test_the_view_marks_and_names_the_first_breach_at_120_columns(
    make_console, console_data: Path, monkeypatch
) -> None:
    """clickstream (2 partitions, a 60 KiB cap each) forecast skewed: the view marks
    +0 h (the budget), names every breach as the CLI does, and its legend and summary
    fit unwrapped under the chart."""
    _with_cap(console_data, "clickstream", "60KiB")
    app = make_console()
    monkeypatch.setattr(app.host, "forecast", lambda request, topics, **_: skewed(topics[0], 2))
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        for key in ("6", "enter"):
            await pilot.press(key)
            await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ForecastScreen) and screen.shown is not None
        assert screen.shown.topic == "clickstream"
        spec = screen.query_one("#forecast-chart", Chart).spec
        assert spec is not None and _breach_marks(spec) == [0]
        text = str(screen.query_one("#forecast-summary", Static).render())
        assert _named_breaches(text)[0] == (0, "disk budget 50 KiB: exceeded at +0 h")
        assert "first breach: max_partition_size (60 KiB) at +1 h on partition 0" in text
        legend = str(screen.query_one("#forecast-legend", Static).render())
        assert "cap 60.0 KiB x 2 partitions = 120.0 KiB" in legend
        assert "partition 0" not in legend  # the budget's breach is the one marked
        for name in ("#forecast-summary", "#forecast-legend"):
            static = screen.query_one(name, Static)
            lines = str(static.render()).splitlines()
            assert static.region.height == len(lines) > 0, f"{name} wraps: {lines}"


def test_forecast_skewed_snapshot(snap_compare, make_console, console_data: Path, monkeypatch) -> None:
    """clickstream skewed, without a budget: its partition 0's cap at +1 h is the
    breach marked, and that partition is drawn reaching its cap."""
    _with_cap(console_data, "clickstream", "60KiB")
    app = make_console()
    monkeypatch.setattr(app.host, "forecast", lambda request, topics, **_: skewed(topics[0], 2, budget=None))

    async def run_before(pilot) -> None:
        await settle(pilot)
        for key in ("6", "enter"):
            await pilot.press(key)
            await settle(pilot)
        await pilot.pause(0.3)
        await settle(pilot)

    assert snap_compare(app, terminal_size=TERMINAL, run_before=run_before)


def test_a_what_if_marks_its_first_breach_alike() -> None:
    """The policy editor's what-if draws with the same function: its marker is the
    edited policy's first breach, the budget included."""
    result = skewed("orders", 4)
    what_if = dataclasses.replace(result, saved=result.topics)
    assert _breach_marks(forecast_chart(what_if, "orders", cap=4 * CAP, saved_cap=8 * CAP, partitions=4)) == [0]


async def test_the_disk_budget_is_held_to_every_topic_as_ebb_forecast_holds_it(
    make_console, console_data: Path, spark_engine
) -> None:
    """The disk budget is over the data directory's topics together: the view of one
    topic forecast that topic alone and found the budget broken when that topic
    alone held more than it (here never), not when the disk did. It now names and
    marks the breach ``ebb forecast`` finds (the same engine forecast, of every
    topic), and draws the topics' bytes together, the curve that crosses the line."""
    host = make_console(spark=spark_engine).host
    everything = host.forecast(week_ahead(NOW, DEFAULT_CONFIG), None)
    together = everything.bytes_on_disk()
    budget = together[24]  # the topics hold more than this later in the week, orders alone never
    assert max(together) > budget > max(p.bytes for p in everything.of("orders").points)
    (console_data / "ebb.toml").write_text(f'[engine]\ndisk_budget = "{budget}"\n')
    config = dataclasses.replace(DEFAULT_CONFIG, disk_budget=budget)
    breach = host.forecast(week_ahead(NOW, config), None).disk_breach
    assert breach is not None and breach.at > NOW + 24 * HOUR
    assert host.forecast(week_ahead(NOW, config), ["orders"]).disk_breach is None  # what the view used to find
    hours = (breach.at - NOW) // HOUR

    app = make_console(spark=spark_engine)
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        for key in ("6", "down", "down", "down", "enter"):
            await pilot.press(key)
            await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ForecastScreen) and screen.shown is not None
        assert screen.shown.topic == "orders"
        text = str(screen.query_one("#forecast-summary", Static).render())
        spec = screen.query_one("#forecast-chart", Chart).spec
    assert f"disk budget {describe_size(budget)}: exceeded at +{hours} h" in text.splitlines()
    assert spec is not None and _breach_marks(spec) == [hours]
    (drawn,) = [s for s in spec.series if s.label == f"all {len(everything.topics)} topics"]
    assert drawn.ys == tuple(together)
