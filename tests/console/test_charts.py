"""The charts (console/widgets/charts.py and their specs): the engine panel's bytes on
disk per topic and freed per cycle, the Topic view's history, the Forecast view's
past and projection, in every theme's colours; snapshots at 120x40 on a journaled
past (tests/support/history_fixtures.py)."""

from __future__ import annotations

import dataclasses
import re
import threading
from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.content import Content
from textual.style import Style
from textual.widgets import Input, Static

from console import format
from console.modals.what_if_pane import WhatIfPane
from console.model.capacity import week_ahead
from console.model.history import load_history
from console.screens.forecast import ForecastScreen
from console.superseding import Superseded
from console.widgets.charts import (
    Chart,
    ChartSpec,
    Mark,
    Series,
    chart_legend,
    series_roles,
    size_unit,
    tick_labels,
    time_unit,
    x_ticks,
)
from console.widgets.engine_panel import EnginePanel
from console.widgets.forecast_assumptions import assumptions
from console.widgets.forecast_chart import forecast_chart
from engine.broker import Broker
from engine.config import DEFAULT_CONFIG
from engine.forecast.forecast import Request
from engine.forecast.rates import Rate
from engine.forecast.result import Breach, Forecast, PartitionPoint, Point, TopicForecast
from engine.journal.journal import Journal
from tests.support.console_fixtures import HOUR, NOW, TERMINAL, TOPICS, settle
from tests.support.history_fixtures import CYCLES, STEP_MS, write_disk_history
from tests.support.rich_text import plain_lines

#: the overrides orders is created with
ORDERS = TOPICS["orders"][1]
THEMES = ("ebbtide-dark", "ebbtide-light", "ebbtide-high-contrast")


def fake_forecast(request: Request, topics: list[str], overrides=None, **_: object) -> Forecast:
    """From 40 KiB now, 2 KiB more an hour until the 8 KiB/partition cap deletes at
    +30 h; with overrides (a what-if), the edited policy keeps half as much."""
    (topic,) = topics

    def points(share: float) -> list[Point]:
        out = []
        for i, at in enumerate(request.instants):
            size = int((40 << 10) + min(i, 30) * (2 << 10) * share)
            out.append(Point(at, size, i + 1, [PartitionPoint(0, size, i + 1, 0)], 0, 0, {}, False))
        return out

    breach = Breach("max_partition_size", NOW + 30 * HOUR, 8 << 10, partition=0)
    rates = {0: Rate(1, 1, 100, "observed", NOW - HOUR)}
    saved = [TopicForecast(topic, rates, points(1.0), [breach])] if overrides else None
    edited = TopicForecast(topic, rates, points(0.5 if overrides else 1.0), [breach])
    return Forecast(NOW, request.instants, request.window_ms, [edited], None, None, saved)


@pytest.fixture
def charted(console_data: Path) -> Path:
    write_disk_history(console_data)
    return console_data


# -- the specs, from the journal ---------------------------------------------------------------


def test_history_comes_from_the_samples_and_the_cycles(charted: Path) -> None:
    with Broker(charted, clock=lambda: NOW) as broker:
        cycles = Journal(broker.catalog).cycles(limit=60)
        history = load_history(broker.catalog, cycles, NOW)
        sizes = {t.name: sum(s.size_bytes for p in range(t.partitions) for s in broker.catalog.segments(t.name, p))
                 for t in broker.catalog.topics()}  # fmt: skip
        clicks = load_history(broker.catalog, cycles, NOW, topic="clickstream")
    assert history.since == NOW - CYCLES * STEP_MS
    assert [c.bytes_freed for c in reversed(cycles)] == [b for _, b in history.freed]
    assert sum(b for _, b in history.freed) > 0
    # one sample per cycle and topic; the last is what is on disk now, largest topic first
    assert {len(t.times) for t in history.topics} == {CYCLES}
    assert {t.topic: t.bytes[-1] for t in history.topics} == sizes
    assert [t.topic for t in history.topics][0] == max(sizes, key=lambda name: sizes[name])
    # clickstream alone: every cycle's freed bytes are its own (only it was cut)
    assert [t.topic for t in clicks.topics] == ["clickstream"]
    assert clicks.freed == history.freed


def test_units_and_theme_roles() -> None:
    assert size_unit(1023) == ("B", 1) and size_unit(40 << 10) == ("KiB", 1024) and size_unit(3 << 30)[0] == "GiB"
    assert time_unit(60_000)[0] == "s" and time_unit(HOUR)[0] == "min" and time_unit(7 * 24 * HOUR)[0] == "d"
    variables = {"primary": "#FFFFFF", "foreground": "#FFFFFF", "secondary": "#00FFFF", "accent": "#FFFF00",
                 "error": "#FF5555", "success": "#00FFFF", "warning": "#FFD700"}  # fmt: skip
    # one colour a series: high contrast's foreground is its primary, its success its secondary
    assert series_roles(variables) == ("primary", "secondary", "accent", "error", "warning")


def _keys(*keys: str):
    async def run_before(pilot) -> None:
        await settle(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)
        # A table measures its new rows when idle: let it, before the picture (as screenshots/generate.py does).
        await pilot.pause(0.3)
        await settle(pilot)

    return run_before


# -- Pilot ----------------------------------------------------------------------------------------


class OneChart(App[None]):
    def compose(self) -> ComposeResult:
        yield Chart(id="chart")


@pytest.mark.parametrize(
    "series",
    [
        (Series("one sample, now", (0.0,), (2048,)),),
        (Series("one cycle, freed nothing", (0.0,), (0,), bars=True),),
        (Series("one cycle", (-1.0,), (512,), bars=True), Series("flat", (-1.0, 0.0), (0, 0))),
    ],
    ids=["one-point", "one-empty-bar", "zero-bytes"],
)
async def test_a_chart_of_a_single_instant_or_of_zeros_draws(series: tuple[Series, ...]) -> None:
    """The first cycle gives one point at now: plotext divided by the zero x span."""
    app = OneChart()
    async with app.run_test(size=(60, 12)) as pilot:
        chart = app.query_one(Chart)
        chart.show(ChartSpec("bytes", "min (0 = now)", series))
        await pilot.pause()
        assert "bytes" in "".join(strip.text for strip in chart.render_lines(chart.region.reset_offset))


async def test_the_engine_panel_charts_the_journal(make_console, charted: Path) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        panel = app.screen.query_one(EnginePanel)
        disk = panel.query_one("#engine-disk", Chart).spec
        freed = panel.query_one("#engine-freed", Chart).spec
        assert disk is not None and freed is not None
        assert len(disk.series) == 5 and "largest 5 of 6" in disk.title
        assert {len(s.xs) for s in disk.series} == {CYCLES}
        # minutes before now: the first cycle an hour ago, the last 5 minutes ago
        assert disk.series[0].xs[0] == -60 and disk.series[0].xs[-1] == -5 and disk.x_label == "min (0 = now)"
        (bars,) = freed.series
        assert bars.bars and sum(bars.ys) > 0 and len(bars.ys) == CYCLES
        legend = str(panel.query_one("#engine-legend").render())
        assert all(s.label in legend for s in disk.series)
        # the chart is drawn: plotext's axes carry the unit in the title
        assert "(KiB)" in str(panel.query_one("#engine-disk", Chart).render())


def _colours(chart: Chart) -> set[str]:
    """The colours the chart is drawn in, as ``#rrggbb``."""
    text = chart.render()
    styles = [s.style for s in text.spans if not isinstance(s.style, str)]
    return {s.color.triplet.hex for s in styles if s.color is not None and s.color.triplet is not None}


async def test_a_theme_switch_draws_the_charts_in_its_colours(make_console, charted: Path) -> None:
    app = make_console(theme="ebbtide-dark")
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        chart = app.screen.query_one("#engine-freed", Chart)
        before = app.theme_variables["accent"].lower()
        assert before in _colours(chart)
        await pilot.press("t")
        await settle(pilot)
        after = app.theme_variables["accent"].lower()
        assert app.theme != "ebbtide-dark" and after != before
        assert after in _colours(chart) and before not in _colours(chart)


async def test_an_empty_journal_says_so_instead_of_a_chart(make_console) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        assert "no samples yet" in str(app.screen.query_one("#engine-disk", Chart).render())
        assert "no finished cycle yet" in str(app.screen.query_one("#engine-freed", Chart).render())


async def test_the_topic_view_charts_its_own_history(make_console, charted: Path) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        app.open_topic("clickstream")
        await settle(pilot)
        spec = app.screen.query_one("#topic-history", Chart).spec
        assert spec is not None
        line, bars = spec.series
        assert line.label == "on disk" and len(line.ys) == CYCLES and bars.bars and sum(bars.ys) > 0


async def test_the_forecast_draws_the_past_before_now(make_console, charted: Path, monkeypatch) -> None:
    app = make_console()
    monkeypatch.setattr(app.host, "forecast", fake_forecast)
    async with app.run_test(size=TERMINAL) as pilot:
        await _keys("6", "enter")(pilot)
        screen = app.screen
        assert isinstance(screen, ForecastScreen)
        spec = screen.query_one("#forecast-chart", Chart).spec
        assert spec is not None
        # clickstream has 2 partitions: the one that breaches its cap is drawn too
        past, projected, partition = spec.series
        assert past.label == "past" and max(past.xs) < 0 and len(past.xs) == CYCLES
        assert projected.xs[0] == 0 and projected.xs[-1] == 168
        assert partition.label == "partition 0" and partition.xs == projected.xs
        # now, and the first breach at +30 h, as vertical lines
        assert [m.value for m in spec.marks if m.vertical] == [0, 30]
        assert f"past: {CYCLES} sample(s) over the last 1h" in str(screen.query_one("#forecast-summary").render())


async def test_a_theme_switch_recolours_the_forecast_legend(make_console, charted: Path, monkeypatch) -> None:
    """The Forecast view's legend is text with the series' colours in it: after ``t``
    it kept the dark theme's, 1.8:1 on the light theme's surface (walk3 finding 2)."""
    app = make_console(theme="ebbtide-dark")
    monkeypatch.setattr(app.host, "forecast", fake_forecast)
    async with app.run_test(size=TERMINAL) as pilot:
        await _keys("6", "enter")(pilot)
        legend = app.screen.query_one("#forecast-legend", Static)

        def colours() -> set[str]:
            content = legend.render()
            assert isinstance(content, Content)
            styles = [s.style for s in content.spans if isinstance(s.style, Style)]
            return {style.foreground.hex.lower() for style in styles if style.foreground is not None}

        before = {app.theme_variables[role].lower() for role in ("primary", "secondary")}
        assert before <= colours()
        await pilot.press("t")
        await settle(pilot)
        after = {app.theme_variables[role].lower() for role in ("primary", "secondary")}
        assert after != before and after <= colours() and not before & colours()
        assert "projected" in str(legend.render())


async def _what_if(pilot, field: str, text: str) -> WhatIfPane:
    """Overview, orders (the 4th topic), ``e``, ``field`` set to ``text``, ``ctrl+t``."""
    await settle(pilot)
    await pilot.press("down", "down", "down", "e")
    await settle(pilot)
    pilot.app.screen.query_one(f"#field-{field}", Input).focus()
    await pilot.press("end", "ctrl+u", *text)
    await pilot.press("ctrl+t")
    await settle(pilot)
    return pilot.app.screen.query_one(WhatIfPane)


async def test_the_what_if_charts_the_week_with_both_policies(make_console, spark_engine) -> None:
    app = make_console(spark=spark_engine)
    async with app.run_test(size=TERMINAL) as pilot:
        pane = await _what_if(pilot, "max_partition_size", "4KiB")
        spec = pane.query_one("#what-if-chart", Chart).spec
        note = str(pane.query_one("#what-if-forecast-note").render())
        shown = pane.query_one("#what-if-forecast").display
        assumed = plain_lines(pane.query_one("#what-if-assumptions", Static).content)
        # the same forecast, asked directly: the chart shows its figures
        direct = app.host.forecast(
            week_ahead(NOW, DEFAULT_CONFIG),
            ["orders"],
            overrides={"orders": {**ORDERS, "max_partition_size": "4KiB"}},
        )
    assert spec is not None and shown
    saved, edited = spec.series
    assert (saved.label, edited.label) == ("saved policy", "edited policy")
    assert direct.saved is not None
    assert saved.ys == tuple(p.bytes for p in direct.saved[0].points)
    assert edited.ys == tuple(p.bytes for p in direct.topics[0].points)
    assert len(edited.xs) == 7 * 24 + 1 and edited.xs[-1] == 168
    # a size cap keeps less, at every instant, and less than the saved one at some
    assert all(e <= s for e, s in zip(edited.ys, saved.ys)) and edited.ys != saved.ys
    assert f"peak {format.size(max(saved.ys))} saved, {format.size(max(edited.ys))} edited" in note
    # each policy's size cap (2 partitions), as lines: the saved 100 GiB default far above the data
    caps = [(m.label, m.value, spec.on_chart(m)) for m in spec.marks if not m.vertical]
    assert caps == [("saved cap", 2 * (100 << 30), False), ("edited cap", 2 * 4096, True)]
    assert "\n─ saved cap 200.0 GiB (above)\n─ edited cap 8.0 KiB\n" in note
    # under the comparison, what the forecast charted assumed: its rates and billing's reading
    (topic,) = direct.topics
    assert assumed[:2] == ["", "The forecast charted assumes:"]
    assert assumed[2:] == plain_lines(assumptions(topic, direct.window_ms))
    assert {r.group for r in topic.readings} >= {"billing"} and len(topic.rates) == 2


async def test_the_what_if_holds_the_disk_budget_to_every_topic(make_console, console_data: Path, spark_engine) -> None:
    """As the Forecast view does: with a disk budget, the what-if forecasts every topic
    (the one edited with its edited policy) and marks the budget's breach by them
    together, where a forecast of the topic alone never breaks it."""
    edited = {"orders": {**ORDERS, "retention_time": "20m"}}  # no cap to break before the budget
    host = make_console(spark=spark_engine).host
    together = host.forecast(week_ahead(NOW, DEFAULT_CONFIG), None, overrides=edited).bytes_on_disk()
    budget = together[24]
    (console_data / "ebb.toml").write_text(f'[engine]\ndisk_budget = "{budget}"\n')
    config = dataclasses.replace(DEFAULT_CONFIG, disk_budget=budget)
    breach = host.forecast(week_ahead(NOW, config), None, overrides=edited).disk_breach
    assert breach is not None and breach.at > NOW + 24 * HOUR
    app = make_console(spark=spark_engine)
    async with app.run_test(size=TERMINAL) as pilot:
        pane = await _what_if(pilot, "retention_time", "20m")
        spec = pane.query_one("#what-if-chart", Chart).spec
    assert spec is not None
    assert [m.value for m in spec.marks if m.vertical and m.role == "error"] == [(breach.at - NOW) // HOUR]
    (drawn,) = [s for s in spec.series if s.label.startswith("all ")]
    assert drawn.ys == tuple(together)


def test_the_forecast_chart_draws_caps_and_budget_and_names_those_above_it() -> None:
    """One chart for the Forecast view and the what-if: a cap line per policy when the
    edited one differs, the disk budget, each named with its value in the legend."""
    request = week_ahead(NOW, dataclasses.replace(DEFAULT_CONFIG, disk_budget=30 << 10))
    what_if = dataclasses.replace(fake_forecast(request, ["orders"], overrides={"x": "y"}), disk_budget=30 << 10)
    spec = forecast_chart(what_if, "orders", cap=16 << 10, saved_cap=1 << 30)
    lines = {m.label: (m.value, m.role, spec.on_chart(m)) for m in spec.marks if not m.vertical}
    assert lines == {
        "edited cap": (16 << 10, "error", True),
        "saved cap": (1 << 30, "secondary", False),
        "disk budget": (30 << 10, "warning", True),
    }
    variables = {"foreground": "#FFFFFF", "primary": "#00FF00", "secondary": "#0000FF", "error": "#FF0000",
                 "warning": "#FFFF00"}  # fmt: skip
    legend = chart_legend(spec, variables).plain
    assert legend.endswith("\n─ saved cap 1.0 GiB (above)\n─ edited cap 16.0 KiB\n─ disk budget 30.0 KiB")
    # the same cap under both policies is one line; the Forecast view's is just "cap"
    same = forecast_chart(what_if, "orders", cap=16 << 10, saved_cap=16 << 10)
    assert [m.label for m in same.marks if not m.vertical] == ["cap", "disk budget"]
    plain = forecast_chart(fake_forecast(request, ["orders"]), "orders", cap=16 << 10)
    assert [m.label for m in plain.marks if not m.vertical] == ["cap"]


def _top_tick(chart: Chart) -> float:
    """The highest value plotext labels on the y axis."""
    ticks = re.findall(r"^\s*([\d.]+)[┤├]", chart.render().plain, re.MULTILINE)
    return float(ticks[0])


async def test_a_line_far_above_the_data_leaves_the_y_axis_to_the_data() -> None:
    app = OneChart()
    async with app.run_test(size=(60, 12)) as pilot:
        chart = app.query_one(Chart)
        series = (Series("projected", (0.0, 1.0), (10 << 10, 20 << 10)),)
        chart.show(ChartSpec("bytes", "h", series, (Mark(100 << 30, "error", label="cap"),)))
        await pilot.pause()
        assert "(KiB)" in chart.render().plain and _top_tick(chart) < 25
        # within reach of the data, the line is drawn and the axis reaches it
        chart.show(ChartSpec("bytes", "h", series, (Mark(60 << 10, "error", label="cap"),)))
        await pilot.pause()
        assert "(KiB)" in chart.render().plain and _top_tick(chart) >= 60


def test_tick_labels_never_read_minus_zero() -> None:
    assert tick_labels([-2.0, -1e-12, 2.0]) == ["-2", "0", "2"]
    assert tick_labels([-0.0, 0.5, 1.0]) == ["0.0", "0.5", "1.0"]
    assert tick_labels([-0.1, -1e-17, 0.1]) == ["-0.1", "0.0", "0.1"]
    # as many decimals as keep each label within a tenth of a step of its tick
    assert tick_labels([-1.0, -0.75, -0.5, -0.25, 0.0]) == ["-1.00", "-0.75", "-0.50", "-0.25", "0.00"]
    assert tick_labels(x_ticks(-60.0, 0.0)) == ["-60", "-45", "-30", "-15", "0"]


def _x_ticks(chart: Chart) -> list[str]:
    """The labels under the x axis (the line after the axis's corner)."""
    lines = chart.render().plain.splitlines()
    (axis,) = [i for i, line in enumerate(lines) if "└" in line]
    return lines[axis + 1].split()


async def test_the_x_axis_never_labels_zero_negative() -> None:
    """A past that starts a little over a day ago (-24.01 h) puts plotext's second
    tick at -0.0075 h, which it labelled ``-0.0``."""
    app = OneChart()
    async with app.run_test(size=(60, 12)) as pilot:
        chart = app.query_one(Chart)
        chart.show(ChartSpec("bytes", "hours (0 = now)", (Series("past", (-24.01, 0.0, 72.0), (1, 2, 3)),)))
        await pilot.pause()
        assert _x_ticks(chart) == ["-24", "0", "24", "48", "72"]


async def test_without_spark_the_what_if_says_so_and_charts_nothing(make_console) -> None:
    app = make_console()  # no Spark lent: the engine is off
    async with app.run_test(size=TERMINAL) as pilot:
        pane = await _what_if(pilot, "max_partition_size", "4KiB")
        assert "the Spark engine is off" in str(pane.query_one(Static).render())
        assert not pane.query_one("#what-if-forecast").display
        assert pane.query_one("#what-if-chart", Chart).spec is None
        assert not pane.query_one("#what-if-assumptions").display  # no forecast, nothing it assumed


# -- snapshots ----------------------------------------------------------------------------------


@pytest.mark.parametrize("theme", THEMES)
def test_overview_charts_snapshot(snap_compare, make_console, charted: Path, theme: str) -> None:
    assert snap_compare(make_console(theme=theme), terminal_size=TERMINAL, run_before=_keys())


def test_what_if_chart_snapshot(snap_compare, make_console, spark_engine) -> None:
    async def run_before(pilot) -> None:
        await _what_if(pilot, "max_partition_size", "4KiB")

    assert snap_compare(make_console(spark=spark_engine), terminal_size=TERMINAL, run_before=run_before)


def test_topic_history_snapshot(snap_compare, make_console, charted: Path) -> None:
    assert snap_compare(make_console(), terminal_size=TERMINAL, run_before=_keys("enter"))


@pytest.mark.parametrize("theme", THEMES)
def test_forecast_snapshot(snap_compare, make_console, console_data: Path, monkeypatch, theme: str) -> None:
    write_disk_history(console_data, step_ms=4 * HOUR)  # two days of past
    app = make_console(theme=theme)
    monkeypatch.setattr(app.host, "forecast", fake_forecast)
    assert snap_compare(app, terminal_size=TERMINAL, run_before=_keys("6", "down", "down", "enter"))


async def test_a_what_if_forecast_asked_for_again_is_not_overwritten_by_the_one_before(
    make_console, monkeypatch
) -> None:
    """ctrl+t, then ctrl+t again with another edit: the first forecast's thread ran on
    after the second was charted, what it found replaced the chart of the edit asked
    for last, and its remaining jobs held the engine. Its job is now cancelled (by
    its tag) and it stops at its next; the one charted says its progress meanwhile."""
    host = make_console().host
    started, release = threading.Event(), threading.Event()
    tags: list[str] = []
    cancelled: list[str] = []
    stopped: list[type[BaseException]] = []
    notes: list[str] = []

    def note() -> str:
        return str(app.query_one("#what-if-forecast-note").render())

    def forecast(request: Request, topics: list[str], overrides=None, *, progress, tag, **_: object) -> Forecast:
        tags.append(tag)
        result = fake_forecast(request, topics, overrides)
        if overrides["orders"]["retention_time"] != "1m":
            progress(1, 2)
            notes.append(app.call_from_thread(note))
            return result
        started.set()
        release.wait(30)  # the first edit's: slow, and unlike the second's
        try:
            progress(1, 2)
        except BaseException as stop:
            stopped.append(type(stop))
            raise
        (edited,) = result.topics
        doubled = [dataclasses.replace(p, bytes=2 * p.bytes) for p in edited.points]
        return dataclasses.replace(result, topics=[dataclasses.replace(edited, points=doubled)])

    monkeypatch.setattr(host, "forecast", forecast)
    monkeypatch.setattr(host, "cancel", cancelled.append)

    class Pane(App):
        def compose(self) -> ComposeResult:
            yield WhatIfPane()

    app = Pane()
    async with app.run_test(size=TERMINAL) as pilot:
        pane = app.query_one(WhatIfPane)
        chart = pane.query_one("#what-if-chart", Chart)
        pane.forecast(host, "orders", {"retention_time": "1m"})
        for _ in range(400):  # the first forecast's thread is waiting
            if started.is_set():
                break
            await pilot.pause(0.05)
        assert started.is_set()
        pane.forecast(host, "orders", {"retention_time": "2m"})
        for _ in range(200):
            if chart.spec is not None:
                break
            await pilot.pause(0.05)
        assert chart.spec is not None
        charted = chart.spec.series
        release.set()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert chart.spec.series == charted
    second = fake_forecast(week_ahead(NOW, DEFAULT_CONFIG), ["orders"], {"orders": {}})
    assert charted[-1].ys == tuple(p.bytes for p in second.topics[0].points)
    assert stopped == [Superseded] and cancelled == tags[:1] and len(set(tags)) == 2
    assert notes == ["forecasting a week ahead on Spark: 1 of 2 jobs done…"]
