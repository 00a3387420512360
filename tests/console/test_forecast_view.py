"""The console's Forecast view: key 6 lists the topics; enter forecasts the selected
one in a worker (here the host's forecast is given, without Spark) and charts it,
with the first breach in the summary; a failing forecast says why in the view."""

from __future__ import annotations

import pytest
from textual.widgets import Static

from console.screens.forecast import HOUR, ForecastScreen, summary
from engine.forecast.forecast import Breach, Forecast, PartitionPoint, Point, Request, TopicForecast
from engine.forecast.rates import Rate
from tests.support.console_fixtures import NOW, TERMINAL, settle

pytestmark = pytest.mark.asyncio


def _forecast(request: Request, topics: list[str]) -> Forecast:
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

    def forecast(request: Request, topics: list[str]) -> Forecast:
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
        assert "first breach: max_partition_size at +3 h" in summary
        assert "peak after pruning 169.0 MiB at +168 h" in summary


async def test_a_failed_forecast_says_why(make_console, monkeypatch) -> None:
    app = make_console()

    def forecast(request: Request, topics: list[str]) -> Forecast:
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


async def test_a_backlog_breach_names_its_quota_in_the_summary() -> None:
    forecast = _forecast(Request([NOW + i * HOUR for i in range(4)], HOUR), ["orders"])
    breach = Breach("backlog_quota", NOW + 2 * HOUR, HOUR, partition=0, group="billing", quota="backlog_age")
    topic = forecast.topics[0]
    lines = summary(TopicForecast(topic.topic, topic.rates, topic.points, [breach]), forecast).splitlines()
    assert "first breach: backlog_quota backlog_age at +2 h (group billing)" in lines
