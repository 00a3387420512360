"""The console's Forecast view: key 6 lists the topics; enter forecasts the selected
one in a worker (here the host's forecast is given, without Spark) and charts it,
with the first breach in the summary and, under it, the rates and readings it assumed
in ``ebb forecast``'s words; a failing forecast says why in the view."""

from __future__ import annotations

import dataclasses
import io
import threading
from collections.abc import Callable
from contextlib import redirect_stdout
from pathlib import Path

from textual.widgets import Static

from console.cli import forecast as cli_forecast
from console.cli.forecast import render
from console.cli.main import main
from console.model.forecast_assumptions import ingest, pace
from console.screens import forecast as forecast_screen
from console.screens.forecast import CHART_MIN_WIDTH, HOUR, TOPICS_MIN_WIDTH, ForecastScreen, summary
from console.superseding import Superseded
from console.widgets.forecast_assumptions import assumptions
from console.widgets.live_table import LiveTable
from engine.broker import Broker
from engine.forecast.forecast import Request
from engine.forecast.rates import NO_INGEST, Rate
from engine.forecast.reading import Reading
from engine.forecast.result import Breach, Forecast, PartitionPoint, Point, TopicForecast
from engine.store.batch import NewRecord
from tests.support.console_fixtures import NOW, TERMINAL, settle
from tests.support.rich_text import plain_lines


def _forecast(request: Request, topics: list[str], **_: object) -> Forecast:
    """Grows by 1 MiB an hour until the cap deletes at +3 h."""
    (topic,) = topics
    points = [
        Point(at, (i + 1) << 20, i + 1, [PartitionPoint(0, (i + 1) << 20, i + 1, 0)], 0, 0, {}, False)
        for i, at in enumerate(request.instants)
    ]
    breach = Breach("max_partition_size", NOW + 3 * HOUR, 4 << 20, partition=0)
    rates = {0: Rate(1, 1000, 290, "observed", NOW - HOUR)}
    return Forecast(
        NOW, request.instants, request.window_ms, [TopicForecast(topic, rates, points, [breach])], None, None
    )


async def test_enter_forecasts_the_selected_topic_and_charts_it(make_console, monkeypatch) -> None:
    app = make_console()
    asked: list[tuple[int, list[str]]] = []

    def forecast(request: Request, topics: list[str], **_: object) -> Forecast:
        asked.append((len(request.instants), list(topics)))
        return _forecast(request, topics)

    monkeypatch.setattr(app.host, "forecast", forecast)
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        await pilot.press("6")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ForecastScreen)
        topics = screen.query_one("#forecast-topics")
        with app.host.reading() as broker:
            assert topics.row_count == len(broker.catalog.topics()) > 1
        await pilot.press("enter")
        await settle(pilot)
        assert asked == [(7 * 24 + 1, [screen.shown.topic])]
        assert len(screen.shown.points) == 7 * 24 + 1
        summary = str(screen.query_one("#forecast-summary").render())
        assert "first breach: max_partition_size (4 MiB) at +3 h on partition 0" in summary
        assert "peak after pruning 169.0 MiB at +168 h" in summary


async def test_a_failed_forecast_says_why(make_console, monkeypatch) -> None:
    app = make_console()

    def forecast(request: Request, topics: list[str], **_: object) -> Forecast:
        raise RuntimeError("Spark is not ready")

    monkeypatch.setattr(app.host, "forecast", forecast)
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        await pilot.press("6")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        summary = str(app.screen.query_one("#forecast-summary").render())
        assert "failed: Spark is not ready" in summary
        assert app.screen.shown is None


def _rows_of(static: Static) -> int:
    """The lines ``static`` takes on screen: more than its text has when it wraps."""
    return static.region.height


async def test_the_hint_and_the_summary_fit_under_the_chart_at_120_columns(make_console, monkeypatch) -> None:
    app = make_console()
    monkeypatch.setattr(app.host, "forecast", _forecast)
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        await pilot.press("6")
        await settle(pilot)
        summary = app.screen.query_one("#forecast-summary", Static)
        chart = app.screen.query_one("#forecast-chart")
        assert _rows_of(summary) == len(str(summary.render()).splitlines()) == 1
        # the hint is under the chart, as wide as it
        assert summary.region.y >= chart.region.bottom and summary.region.x == chart.region.x
        await pilot.press("enter")
        await settle(pilot)
        for name in ("#forecast-summary", "#forecast-legend"):
            static = app.screen.query_one(name, Static)
            lines = str(static.render()).splitlines()
            assert _rows_of(static) == len(lines) > 0, f"{name} wraps: {lines}"


LONG_NAME = "payments-eu-west-1-settlement-events-v2"


async def test_a_long_topic_name_widens_the_list_but_leaves_the_chart_its_room(make_console, console_data) -> None:
    with Broker(console_data, clock=lambda: NOW) as broker:
        broker.create_topic(LONG_NAME, 1, {}, actor="test")
        broker.produce(LONG_NAME, [NewRecord(value=bytes(100), key=None, timestamp=NOW)], partition=0)
    app = make_console()
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        await pilot.press("6")
        await settle(pilot)
        topics = app.screen.query_one("#forecast-topics", LiveTable)
        # every column in view, none to scroll to sideways
        assert topics.virtual_size.width <= topics.scrollable_content_region.width
        assert topics.region.width > TOPICS_MIN_WIDTH
        assert app.screen.query_one("#forecast-chart").region.width >= CHART_MIN_WIDTH
        await pilot.resize_terminal(120, 40)
        await settle(pilot)
        assert app.screen.query_one("#forecast-chart").region.width >= CHART_MIN_WIDTH
        assert topics.region.width == TOPICS_MIN_WIDTH


async def test_a_backlog_breach_names_its_quota_in_the_summary() -> None:
    forecast = _forecast(Request([NOW + i * HOUR for i in range(4)], HOUR), ["orders"])
    breach = Breach("backlog_quota", NOW + 2 * HOUR, HOUR, partition=0, group="billing", quota="backlog_age")
    topic = forecast.topics[0]
    lines = summary(TopicForecast(topic.topic, topic.rates, topic.points, [breach]), forecast).splitlines()
    assert "first breach: backlog_quota backlog_age (1h) at +2 h on partition 0 by group billing" in lines


# -- what the forecast assumed ------------------------------------------------------------------

#: orders' groups, one way of reading each (the console forecasts with none stalled:
#: a stalled reading comes from ``ebb forecast --stalled``, drawn all the same)
READINGS = [
    Reading("audit-reader", 0, "stalled"),
    Reading("audit-reader", 1, "idle"),
    Reading("billing", 0, "observed", 1, 120_000),
    Reading("billing", 1, "keeps_up"),
]


def _orders(request: Request, topics: list[str], **_: object) -> Forecast:
    """:func:`_forecast` with two partitions, one batched and one quiet, and a group of each pace."""
    plain = _forecast(request, topics)
    (topic,) = plain.topics
    rates = {0: Rate(3, 1000, 290, "observed", NOW - HOUR, 0.75, batch=3), 1: NO_INGEST}
    return dataclasses.replace(plain, topics=[dataclasses.replace(topic, rates=rates, readings=READINGS)])


#: what the CLI says that the view does not: how to see the rate of a quiet partition
CLI_HINT = ", a longer --window may see one"


def _partitions(spans: str) -> list[int]:
    """``0-2, 5`` -> [0, 1, 2, 5]."""
    out: list[int] = []
    for span in spans.split(", "):
        first, _, last = span.partition("-")
        out += range(int(first), int(last or first) + 1)
    return out


def _as_cli_lines(lines: list[str]) -> list[str]:
    """The rate and group rows of the view's :func:`assumptions` (``lines``, plain) as
    the lines ``ebb forecast`` prints for them."""
    out, groups = [], False
    for row in lines[1:]:
        cells = [cell.strip() for cell in row.split("  ") if cell.strip()]
        if cells[:2] == ["Group", "Part"]:
            groups = True
        elif groups:
            group, partitions, words = cells
            out += [f"  group {group} on partition {p}: {words}" for p in _partitions(partitions)]
        else:
            partition, words = cells
            out.append(f"  partition {partition}: {words}")
    return out


def test_the_console_says_what_the_cli_says_of_rates_and_readings() -> None:
    """Every partition's rate and every group's reading under the chart is the line
    ``ebb forecast`` prints for it, figures and words; the window is the forecast's."""
    result = dataclasses.replace(_orders(Request([NOW, NOW + HOUR], 4 * HOUR), ["orders"]), window_ms=4 * HOUR)
    cli = render(result, {}).replace(CLI_HINT, "").splitlines()
    lines = plain_lines(assumptions(result.topics[0], result.window_ms))
    assert lines[0].split("  ")[-1] == "Ingest rates observed over the last 4h"
    assert "ingest rates observed over the last 4h (--rate overrides them)" in cli
    view = _as_cli_lines(lines)
    assert len(view) == 2 + len(READINGS) and set(view) <= set(cli)
    assert "  partition 0: 870 B/s, 2.25 records/s in batches of 3 (observed since 2026-11-21T11:00:00.000Z)" in view
    assert "  group billing on partition 0: reads 0.00833 records/s (observed from its commits)" in view


async def test_the_view_forecasts_what_ebb_forecast_does_and_says_it_alike(
    make_console, console_data: Path, monkeypatch
) -> None:
    """The view's forecast of orders is the one ``ebb forecast orders`` asks for (a week
    hourly, the last hour's rates, the data directory's budget and prune interval), and
    the view shows its rates and readings as the CLI prints them."""
    asked: dict[str, Request] = {}

    def forecast(who: str) -> Callable[..., Forecast]:
        def run(request: Request, topics: list[str], overrides=None, **_: object) -> Forecast:
            asked[who] = request
            return _orders(request, list(topics))

        return run

    monkeypatch.setattr(
        cli_forecast, "_run", lambda broker, args, request, names, overrides: forecast("cli")(request, names)
    )
    printed = io.StringIO()
    with redirect_stdout(printed):
        assert main(["--data-dir", str(console_data), "forecast", "orders", "--now", str(NOW)]) == 0
    app = make_console()
    monkeypatch.setattr(app.host, "forecast", forecast("console"))
    async with app.run_test(size=TERMINAL) as pilot:
        await _press(pilot, "6", *ORDERS)
        shown = plain_lines(app.screen.query_one("#forecast-assumptions", Static).content)
    assert asked["console"] == asked["cli"]
    view = _as_cli_lines(shown)
    assert len(view) == 2 + len(READINGS) and set(view) <= set(printed.getvalue().replace(CLI_HINT, "").splitlines())


def test_a_topic_without_groups_says_nothing_of_groups() -> None:
    result = _forecast(Request([NOW, NOW + HOUR], HOUR), ["metrics"])
    lines = plain_lines(assumptions(result.topics[0], result.window_ms))
    assert lines[0].split() == ["Part", "Ingest", "rates", "observed", "over", "the", "last", "1h"]
    assert len(lines) == 2 and not any("Group" in line or "group" in line for line in lines)


#: from the Forecast view's topic list, forecast orders (the 4th topic)
ORDERS = ("down", "down", "down", "enter")


async def _press(pilot, *keys: str) -> None:
    """``keys`` on a settled console, one at a time, each settled."""
    await settle(pilot)
    for key in keys:
        await pilot.press(key)
        await settle(pilot)


async def test_the_view_shows_what_the_forecast_of_the_topic_assumed(make_console, monkeypatch) -> None:
    app = make_console()
    monkeypatch.setattr(app.host, "forecast", _orders)
    async with app.run_test(size=TERMINAL) as pilot:
        await _press(pilot, "6", *ORDERS)
        shown = app.screen.query_one("#forecast-assumptions", Static)
        text = "\n".join(plain_lines(shown.content))
        assert "Ingest rates observed over the last 1h" in text
        assert "reads 0.00833 records/s (observed from its commits)" in text
        assert "reads nothing (--stalled)" in text and "reads nothing (no commit in the window)" in text
        # under the chart, and all of it in view at the fixed size
        chart = app.screen.query_one("#forecast-chart")
        box = app.screen.query_one("#forecast-assumptions-box")
        assert box.region.y >= chart.region.bottom and box.region.height == shown.region.height


def test_forecast_assumptions_snapshot(snap_compare, make_console, monkeypatch) -> None:
    """orders: the rates of its two partitions, and a group of each pace."""
    app = make_console()
    monkeypatch.setattr(app.host, "forecast", _orders)

    async def run_before(pilot) -> None:
        await _press(pilot, "6", *ORDERS)
        # a table measures its new rows when idle: let it, before the picture
        await pilot.pause(0.3)
        await settle(pilot)

    assert snap_compare(app, terminal_size=TERMINAL, run_before=run_before)


def test_rates_read_without_an_exponent() -> None:
    """``.3g`` printed a thousand records a second as ``1e+03`` (and a record a day as
    ``1.16e-05``), in the CLI as in the view."""
    fast = Rate(1, 1, 100, "observed", NOW - HOUR)
    assert ingest(fast) == "97.7 KiB/s, 1,000 records/s (observed since 2026-11-21T11:00:00.000Z)"
    assert pace(Reading("billing", 0, "observed", 1, 86_400_000)) == (
        "reads 0.0000116 records/s (observed from its commits)"
    )
    assert pace(Reading("billing", 0, "observed", 123_456, 1)).startswith("reads 123,000,000 records/s")


def test_a_group_reading_partitions_alike_is_one_row() -> None:
    """Under the chart a group takes a row for the partitions it reads alike, where
    the CLI prints a line each: the same lines once spread out again."""
    keeps_up = [Reading("billing", p, "keeps_up") for p in (0, 1, 2, 5)]
    readings = [*keeps_up, Reading("billing", 3, "observed", 1, 1000), Reading("billing", 4, "idle")]
    readings.sort(key=lambda r: r.partition)
    plain = _forecast(Request([NOW, NOW + HOUR], HOUR), ["orders"])
    result = dataclasses.replace(plain, topics=[dataclasses.replace(plain.topics[0], readings=readings)])
    lines = plain_lines(assumptions(result.topics[0], result.window_ms))
    groups = [line.split()[:2] for line in lines[3:]]
    assert groups == [["billing", "0-2,"], ["billing", "3"], ["billing", "4"]] and lines[3].split()[2] == "5"
    cli = render(result, {}).splitlines()
    view = _as_cli_lines(lines)
    assert sorted(view) == sorted(line for line in cli if line.startswith(("  partition ", "  group ")))
    assert len(view) == 1 + len(readings)


def test_a_group_no_consumer_committed_for_says_why_it_reads_nothing_as_the_cli_does() -> None:
    """Idle for want of any commit since it was created (its creation's time may be in
    the window) is said apart from idle for want of one in the window, in the view's
    words as in the CLI's."""
    never = [Reading("audit", p, "idle", never_committed=True) for p in (0, 1)]
    readings = [*never, Reading("billing", 0, "idle"), Reading("billing", 1, "idle")]
    plain = _forecast(Request([NOW, NOW + HOUR], HOUR), ["orders"])
    result = dataclasses.replace(plain, topics=[dataclasses.replace(plain.topics[0], readings=readings)])
    lines = plain_lines(assumptions(result.topics[0], result.window_ms))
    view = _as_cli_lines(lines)
    cli = render(result, {}).splitlines()
    assert sorted(view) == sorted(line for line in cli if line.startswith(("  partition ", "  group ")))
    assert "  group audit on partition 1: reads nothing (no commit since it was created)" in view
    assert "  group billing on partition 1: reads nothing (no commit in the window)" in view
    assert len(lines) == 2 + 1 + 2  # a row per group: each reads its partitions alike


# -- steering the forecast: the rate window and stalled groups -----------------------------------


def _honouring(asked: list[Request]) -> Callable[[Request, list[str]], Forecast]:
    """:func:`_orders`, recording each request, with the groups it names stalled."""

    def run(request: Request, topics: list[str], **_: object) -> Forecast:
        asked.append(request)
        result = _orders(request, topics)
        (topic,) = result.topics
        readings = [
            Reading(r.group, r.partition, "stalled") if r.group in request.stalled else r for r in topic.readings
        ]
        return dataclasses.replace(result, topics=[dataclasses.replace(topic, readings=readings)])

    return run


async def test_w_widens_the_rate_window_and_forecasts_again(make_console, monkeypatch) -> None:
    """1h, 6h, 1d, 7d, then 1h again: each the window of a new forecast of the shown
    topic, and the one the view says its rates were observed over."""
    app = make_console()
    asked: list[Request] = []
    monkeypatch.setattr(app.host, "forecast", _honouring(asked))
    async with app.run_test(size=TERMINAL) as pilot:
        await _press(pilot, "6", *ORDERS)
        for _ in range(4):
            await _press(pilot, "w")
        text = "\n".join(plain_lines(app.screen.query_one("#forecast-assumptions", Static).content))
    assert [r.window_ms // HOUR for r in asked] == [1, 6, 24, 168, 1]
    assert {len(r.instants) for r in asked} == {7 * 24 + 1}
    assert "Ingest rates observed over the last 1h" in text


async def test_g_assumes_a_group_stalled_and_again_reading(make_console, monkeypatch) -> None:
    """The picker lists the topic's groups; choosing billing forecasts with billing
    stalled, and the view says so; choosing it again forecasts it reading. Another
    topic starts with none stalled."""
    app = make_console()
    asked: list[Request] = []
    monkeypatch.setattr(app.host, "forecast", _honouring(asked))
    async with app.run_test(size=TERMINAL) as pilot:
        await _press(pilot, "6", *ORDERS, "g")
        picker = app.screen.query_one("#stall-groups")
        assert [str(picker.get_option_at_index(i).prompt) for i in range(picker.option_count)] == [
            "audit-reader: as observed",
            "billing: as observed",
        ]
        await _press(pilot, "down", "enter")
        text = "\n".join(plain_lines(app.screen.query_one("#forecast-assumptions", Static).content))
        assert "reads 0.00833 records/s" not in text and "billing" in text
        await _press(pilot, "g", "down", "enter")
        await _press(pilot, "up", "enter")
    assert [sorted(r.stalled) for r in asked] == [[], ["billing"], [], []]


def test_stall_picker_snapshot(snap_compare, make_console, monkeypatch) -> None:
    """orders forecast with billing stalled, the picker open over it again."""
    app = make_console()
    monkeypatch.setattr(app.host, "forecast", _honouring([]))

    async def run_before(pilot) -> None:
        await _press(pilot, "6", *ORDERS, "g", "down", "enter", "g")
        await pilot.pause(0.3)
        await settle(pilot)

    assert snap_compare(app, terminal_size=TERMINAL, run_before=run_before)


def test_a_sparse_partitions_bytes_read_beside_its_records() -> None:
    """A 950-byte record an hour is 0.264 B/s: rounded to whole bytes it read
    ``0 B/s`` beside ``0.000278 records/s``."""
    hourly = Rate(1, HOUR, 950, "observed", NOW - HOUR)
    assert ingest(hourly) == "0.264 B/s, 0.000278 records/s (observed since 2026-11-21T11:00:00.000Z)"


def test_a_what_if_says_the_saved_policys_breaches_too() -> None:
    """A what-if that breaches nothing said only that, while the saved policy breached
    a cap (in the JSON's ``saved``, not in the text)."""
    saved = _forecast(Request([NOW + i * HOUR for i in range(4)], HOUR), ["orders"])
    what_if = dataclasses.replace(saved.topics[0], breaches=[])
    lines = render(dataclasses.replace(saved, topics=[what_if], saved=saved.topics), {"retention_time": "1h"})
    assert "  no cap or quota exceeded within the horizon" in lines.splitlines()
    assert any(
        line.startswith("  with its saved policy, first breach: max_partition_size (4 MiB) at ")
        for line in lines.splitlines()
    )
    assert "DELETED SINCE NOW" in lines


async def test_a_long_forecast_says_how_many_of_its_jobs_are_done(make_console, monkeypatch) -> None:
    """A large catalog's forecast is many Spark jobs and takes minutes: the view says
    how many are done, as ``ebb forecast`` does at a terminal."""
    app = make_console()
    seen: list[str] = []

    def summary_now() -> str:
        return str(app.screen.query_one("#forecast-summary").render())

    def forecast(request: Request, topics: list[str], overrides=None, *, progress=None, **_: object) -> Forecast:
        for done in (1, 2, 3):
            progress(done, 3)
            seen.append(app.call_from_thread(summary_now))
        return _orders(request, topics)

    monkeypatch.setattr(app.host, "forecast", forecast)
    async with app.run_test(size=TERMINAL) as pilot:
        await _press(pilot, "6", *ORDERS)
        assert app.screen.shown is not None and app.screen.shown.topic == "orders"
    # the last job done is followed by the chart at once
    assert seen[:2] == [
        "forecasting orders on Spark: 1 of 3 jobs done…",
        "forecasting orders on Spark: 2 of 3 jobs done…",
    ]
    assert seen[2] == seen[1]


async def test_a_forecast_asked_for_again_is_not_overwritten_by_the_one_before(make_console, monkeypatch) -> None:
    """Enter on a topic whose forecast is slow, then on another: the first one's thread
    ran on after the second was charted, what it found (or its progress) replaced the
    chart asked for last, and its remaining Spark jobs held the engine from the newer
    forecast. Its running job is now cancelled (by its tag) and it stops at its next."""
    app = make_console()
    started, release = threading.Event(), threading.Event()
    tags: list[str] = []
    cancelled: list[str] = []
    stopped: list[type[BaseException]] = []

    def forecast(
        request: Request, topics: list[str], overrides=None, *, progress=None, tag=None, **_: object
    ) -> Forecast:
        tags.append(tag)
        if topics == ["clickstream"]:
            started.set()
            release.wait(30)
            try:
                progress(1, 2)
            except BaseException as stop:
                stopped.append(type(stop))
                raise
        return _forecast(request, topics)

    monkeypatch.setattr(app.host, "forecast", forecast)
    monkeypatch.setattr(app.host, "cancel", cancelled.append)
    async with app.run_test(size=TERMINAL) as pilot:
        await _press(pilot, "6")
        screen = app.screen
        assert isinstance(screen, ForecastScreen)
        await pilot.press("enter")  # clickstream, the first row: waits
        for _ in range(400):  # the first forecast's thread is waiting
            if started.is_set():
                break
            await pilot.pause(0.05)
        assert started.is_set()
        await pilot.press("down", "enter")  # legal
        for _ in range(200):
            if screen.shown is not None:
                break
            await pilot.pause(0.05)
        assert screen.shown is not None and screen.shown.topic == "legal"
        release.set()
        await settle(pilot)
        assert screen.shown.topic == "legal"
        summary_text = str(screen.query_one("#forecast-summary").render())
    assert "jobs done" not in summary_text and "peak after pruning" in summary_text
    assert stopped == [Superseded] and cancelled == tags[:1] and len(set(tags)) == 2


async def test_a_topic_deleted_before_its_forecast_says_so(make_console, monkeypatch) -> None:
    """The topic list is a refresh old: a topic deleted since is not in the forecast,
    and the view stayed on "forecasting…" (its worker died of a StopIteration)."""
    app = make_console()

    def forecast(request: Request, topics: list[str], **_: object) -> Forecast:
        return dataclasses.replace(_forecast(request, ["elsewhere"]), topics=[])

    monkeypatch.setattr(app.host, "forecast", forecast)
    async with app.run_test(size=TERMINAL) as pilot:
        await _press(pilot, "6", "enter")
        said = str(app.screen.query_one("#forecast-summary").render())
    assert said == "forecast of clickstream failed: topic 'clickstream' does not exist"


async def test_with_a_disk_budget_another_topic_is_charted_from_the_forecast_of_every_topic(
    make_console, console_data: Path, monkeypatch
) -> None:
    """With a budget the view forecasts every topic (minutes on a large catalog):
    another topic chosen within REUSE_MS is charted from that forecast, and says how
    old it is; ``f`` forecasts anew, and so does a topic chosen after REUSE_MS."""
    (console_data / "ebb.toml").write_text('[engine]\ndisk_budget = "1 GiB"\n')
    app = make_console()
    asked: list[list[str] | None] = []

    def forecast(request: Request, topics: list[str] | None, **_: object) -> Forecast:
        asked.append(topics)
        with app.host.reading() as broker:
            names = [t.name for t in broker.catalog.topics()]
        every = [_forecast(request, [name]).topics[0] for name in names]
        return dataclasses.replace(_forecast(request, names[:1]), topics=every, disk_budget=1 << 30)

    monkeypatch.setattr(app.host, "forecast", forecast)

    def said() -> str:
        return str(app.screen.query_one("#forecast-summary").render())

    async with app.run_test(size=TERMINAL) as pilot:
        await _press(pilot, "6", "enter")
        screen = app.screen
        assert isinstance(screen, ForecastScreen) and screen.shown is not None
        first = screen.shown.topic
        assert asked == [None] and "from the forecast of every topic" not in said()
        await _press(pilot, "down", "enter")
        assert asked == [None] and screen.shown.topic != first
        assert "from the forecast of every topic made 0s ago (f: forecast anew)" in said()
        assert "peak after pruning" in said()
        await _press(pilot, "f")
        assert asked == [None, None] and "from the forecast of every topic" not in said()
        monkeypatch.setattr(app.host, "clock", lambda: NOW + forecast_screen.REUSE_MS)
        await _press(pilot, "up", "enter")
        assert asked == [None, None, None] and screen.shown.topic == first
        assert "from the forecast of every topic" not in said()
