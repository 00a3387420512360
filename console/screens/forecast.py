"""Forecast: per topic, a chart of the bytes on disk over the past week (the
journal's samples, engine/journal/history.py) and projected over the next one
(``ebb forecast``, engine/forecast), with the caps drawn as lines and the first
breach marked; under it, what the forecast assumed of the ingest and of each group's
reading, as ``ebb forecast`` words it.

The topic list is a live view (a catalog read); the forecast of the selected topic
is one Spark job, run in a worker thread with the read of its past when a topic is
chosen (``enter``) and again with ``f``, never on the refresh tick. With a disk
budget the forecast is of every topic (the budget is over them all): another topic
chosen within :data:`REUSE_MS` is charted from it at once, and says how old it is
(a large catalog's forecast takes minutes); ``f`` forecasts anew. ``w`` widens the
rate window (``--window``: a partition written less often than the window shows no
ingest) and ``g`` assumes a group of the topic stalled (``--stalled``), each forecasting
again.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Static
from textual.worker import get_current_worker

from console import format
from console.host import ConsoleHost
from console.modals.stall_picker import StallPicker
from console.model.capacity import (
    HORIZON_MS,
    HOUR,
    WINDOW_MS,
    forecast_scope,
    next_window,
    size_cap,
    week_ahead,
)
from console.model.forecast_breaches import breach_text, breaches_in_order
from console.model.history import History, load_history
from console.screens.base import LiveScreen
from console.superseding import forecast_progress, on_ui_if_current
from console.widgets.charts import Chart, ChartLegend
from console.widgets.forecast_assumptions import assumptions
from console.widgets.forecast_chart import forecast_chart
from console.widgets.live_table import Column, LiveRow, LiveTable
from engine.catalog.stats import partition_stats
from engine.config import DEFAULT_CONFIG, Config
from engine.forecast.forecast import Request
from engine.forecast.result import Forecast, TopicForecast

COLUMNS = (Column("topic", "Topic"), Column("partitions", "Parts"), Column("bytes", "On disk"))

#: how long a forecast of every topic (a disk budget) charts another topic chosen,
#: rather than a new forecast: its hourly points are then minutes off at most
REUSE_MS = 5 * 60_000


@dataclass(frozen=True)
class _EveryTopic:
    """A forecast of every topic, and what it was asked under: it charts another topic
    chosen under the same (a topic chosen afresh has no group stalled)."""

    result: Forecast
    request: Request
    config: Config

    def charts(self, topic: str, request: Request, config: Config, now: int) -> bool:
        asked = (request.window_ms, request.stalled, config)
        same = asked == (self.request.window_ms, self.request.stalled, self.config)
        fresh = now - self.result.now < REUSE_MS
        return same and fresh and any(t.topic == topic for t in self.result.topics)


@dataclass(frozen=True)
class TopicsData:
    rows: tuple[LiveRow, ...]
    #: per topic: its size cap (console.model.capacity.size_cap; None: infinite)
    caps: dict[str, int | None]
    #: per topic: its partitions (whose caps the size cap sums)
    partitions: dict[str, int]
    #: the data directory's (its disk budget and prune interval shape the forecast)
    config: Config


#: the topic list's narrowest; it widens to its longest topic name and size
TOPICS_MIN_WIDTH = 34
#: what the topic list leaves the chart at least, so that its legend, summary and rate
#: lines fit under it unwrapped (a backlog quota's breach, in `ebb forecast`'s words,
#: takes 84: "first breach: backlog_quota backlog_age (1h) at +2 h on partition 1 by
#: group billing")
CHART_MIN_WIDTH = 86


class ForecastScreen(LiveScreen[TopicsData]):
    DEFAULT_CSS = f"""
    ForecastScreen #forecast-topics {{
        width: auto;
        min-width: {TOPICS_MIN_WIDTH};
    }}
    ForecastScreen #forecast-assumptions-box {{
        height: auto;
        max-height: 10;
    }}
    """
    VIEW_TITLE = "Forecast"
    BINDINGS = [
        Binding("enter", "forecast", "Forecast", show=True),
        Binding("f", "forecast_again", "Forecast anew", show=False),
        Binding("w", "window", "Rate window", show=True),
        Binding("g", "stall", "Stall a group", show=True),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._caps: dict[str, int | None] = {}
        self._partitions: dict[str, int] = {}
        self._config = DEFAULT_CONFIG
        #: the topic whose forecast is on screen, and the forecast
        self.shown: TopicForecast | None = None
        #: the rate window the forecasts observe ingest over (``--window``)
        self.window_ms = WINDOW_MS
        #: groups of the shown topic assumed stalled (``--stalled``); a topic chosen
        #: afresh starts with none (its groups are others)
        self.stalled: frozenset[str] = frozenset()
        #: the Spark jobs of the forecast running, cancelled when another is asked for
        self._forecast_tag: str | None = None
        #: the last forecast of every topic (a disk budget), which another topic reuses
        self._every_topic: _EveryTopic | None = None

    def compose_view(self) -> ComposeResult:
        with Horizontal():
            table = LiveTable(COLUMNS, id="forecast-topics", classes="box")
            table.border_title = "Topics"
            yield table
            with Vertical():
                yield Chart(id="forecast-chart")
                yield ChartLegend(id="forecast-legend")
                yield Static("choose a topic and press enter to forecast it", id="forecast-summary")
                # many partitions or groups scroll here rather than squeeze the chart
                with VerticalScroll(id="forecast-assumptions-box"):
                    yield Static(id="forecast-assumptions")

    def on_resize(self, event: events.Resize) -> None:
        # Long topic names widen the list, but never into the room the chart needs;
        # past that, the list scrolls sideways.
        topics = self.query_one("#forecast-topics", LiveTable)
        topics.styles.max_width = max(TOPICS_MIN_WIDTH, event.size.width - CHART_MIN_WIDTH)

    def load(self, host: ConsoleHost) -> TopicsData:
        with host.reading() as broker:
            with broker.catalog.read():
                stats = partition_stats(broker.catalog)
                policies = {t.name: broker.policy(t.name) for t in broker.catalog.topics()}
            config = broker.config
        sizes: dict[str, tuple[int, int]] = {}
        for s in stats:
            count, total = sizes.get(s.topic, (0, 0))
            sizes[s.topic] = (count + 1, total + s.size_bytes)
        rows = tuple(
            LiveRow(key=name, cells=(name, str(count), format.size(total)), sort_values=(name, count, total))
            for name, (count, total) in sorted(sizes.items())
        )
        caps = {name: size_cap(policy, sizes[name][0]) for name, policy in policies.items() if name in sizes}
        return TopicsData(rows, caps, {name: count for name, (count, _) in sizes.items()}, config)

    def show(self, data: TopicsData) -> None:
        self.query_one("#forecast-topics", LiveTable).show(data.rows)
        self._caps, self._partitions, self._config = data.caps, data.partitions, data.config

    def action_forecast(self, anew: bool = False) -> None:
        topic = self.query_one("#forecast-topics", LiveTable).selected_key
        if topic is not None:
            if self.shown is None or topic != self.shown.topic:
                self.stalled = frozenset()
            self._start(topic, anew)

    def action_forecast_again(self) -> None:
        self.action_forecast(anew=True)

    def _start(self, topic: str, anew: bool = True) -> None:
        config = self._config  # one config for the request and what it is said to do
        host = self.ebb.host
        request = week_ahead(host.clock(), config, self.window_ms, self.stalled)
        last = self._every_topic
        reused = None if anew or last is None or not last.charts(topic, request, config, host.clock()) else last
        doing = f"charting {topic}" if reused else _forecasting(topic, config)
        self.query_one("#forecast-summary", Static).update(f"{doing}…")
        self.query_one("#forecast-assumptions", Static).update("")
        self._forecast_tag = host.replacing(self._forecast_tag)  # its worker: cancelled below (exclusive)
        self._forecast(topic, request, config, self._forecast_tag, reused)

    def action_window(self) -> None:
        """The next rate window; the topic on screen forecast again under it."""
        self.window_ms = next_window(self.window_ms)
        if self.shown is None:
            self.notify(f"rate window {format.age(self.window_ms)}: press enter to forecast")
        else:
            self._start(self.shown.topic)

    def action_stall(self) -> None:
        shown = self.shown
        if shown is None:
            self.notify("forecast a topic first (enter)")
            return
        groups = list(dict.fromkeys(reading.group for reading in shown.readings))
        if not groups:
            self.notify(f"{shown.topic} has no groups")
            return

        def flip(group: str | None) -> None:
            if group is not None:
                self.stalled = self.stalled ^ {group}
                self._start(shown.topic)

        self.app.push_screen(StallPicker(groups, self.stalled), flip)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_forecast()

    def _progress(self, topic: str, config: Config, done: int, jobs: int) -> None:
        """A large catalog's forecast takes minutes: how many of its jobs are done."""
        self.query_one("#forecast-summary", Static).update(
            f"{_forecasting(topic, config)}: {done} of {jobs} jobs done…"
        )

    @work(thread=True, exclusive=True, group="forecast", exit_on_error=False)
    def _forecast(self, topic: str, request: Request, config: Config, tag: str, reused: _EveryTopic | None) -> None:
        """Forecast ``topic``, or chart it from ``reused``, with its past."""
        host, worker = self.ebb.host, get_current_worker()
        now = request.instants[0] if reused is None else reused.result.now
        every_topic = reused
        try:
            with host.reading() as broker, broker.catalog.read():
                past = load_history(broker.catalog, (), now, topic=topic, since=now - HORIZON_MS)
            if every_topic is None:
                scope = forecast_scope(topic, config)
                progress = forecast_progress(self.app, worker, partial(self._progress, topic, config))
                result = host.forecast(request, scope, progress=progress, tag=tag)
                every_topic = _EveryTopic(result, request, config) if scope is None else None
            else:
                result = every_topic.result
            shown = result.of(topic)
        except Exception as error:  # noqa: BLE001 - a forecast that fails says why, in the view
            on_ui_if_current(self.app, worker, self._failed, topic, str(error))
            return
        made_ago = None if reused is None else host.clock() - reused.result.now
        on_ui_if_current(self.app, worker, self._drawn, result, shown, past, every_topic, made_ago)

    def _drawn(
        self,
        result: Forecast,
        topic: TopicForecast,
        past: History,
        every_topic: _EveryTopic | None,
        made_ago: int | None,
    ) -> None:
        self._every_topic = every_topic
        self.draw(result, topic, past, made_ago)

    def _failed(self, topic: str, error: str) -> None:
        self.query_one("#forecast-summary", Static).update(f"forecast of {topic} failed: {error}")

    def draw(
        self, result: Forecast, topic: TopicForecast, past: History | None = None, made_ago: int | None = None
    ) -> None:
        """Chart ``topic`` (of ``result``): its past, then bytes on disk per hour from
        now, the topic's cap (max_partition_size x partitions, the legend says so) and
        disk budget as lines (and the bytes of all the topics forecast, which the
        budget is over), the first breach the summary names as a vertical line
        (widgets/forecast_chart.py); ``made_ago`` (ms): ``result`` was made for
        another topic that long ago."""
        self.shown = topic
        name = topic.topic
        spec = forecast_chart(
            result, name, past=past, cap=self._caps.get(name), partitions=self._partitions.get(name, 1)
        )
        self.query_one("#forecast-chart", Chart).show(spec)
        self.query_one("#forecast-legend", ChartLegend).show(spec)
        self.query_one("#forecast-summary", Static).update(summary(topic, result, past, made_ago))
        self.query_one("#forecast-assumptions", Static).update(assumptions(topic, result.window_ms))


def _forecasting(topic: str, config: Config) -> str:
    """What the view is doing while it forecasts ``topic``."""
    if forecast_scope(topic, config) is None:
        return f"forecasting every topic on Spark (the disk budget is over them all) to chart {topic}"
    return f"forecasting {topic} on Spark"


def summary(topic: TopicForecast, result: Forecast, past: History | None = None, made_ago: int | None = None) -> str:
    """The lines under the chart: peak, first breaches (as ``ebb forecast`` words
    them, earliest first), the past charted, and how old ``result`` is where it was
    made for another topic (``made_ago``, ms; the rates and readings assumed follow,
    :func:`assumptions`)."""
    peak = max(topic.points, key=lambda p: p.bytes)
    # "after pruning": the forecast at +0 h is the plan of now applied, so its peak can
    # read below the bytes on disk the topic list shows (walk3 finding 10)
    lines = [f"peak after pruning {format.size(peak.bytes)} at +{(peak.at - result.now) // HOUR} h"]
    # Earliest first, the disk budget among them: the chart marks the first of these
    # (forecast_breaches.first_breach), in the words `ebb forecast` prints them.
    breaches = breaches_in_order(topic, result)
    lines += [breach_text(breach, f"+{(breach.at - result.now) // HOUR} h") for breach in breaches]
    if not breaches:
        lines.append("no cap, quota or budget exceeded within a week")
    samples = past.topics[0].times if past is not None and past.topics else ()
    lines.append(
        f"past: {len(samples)} sample(s) over the last {format.age(result.now - samples[0])}"
        if samples
        else "past: no samples yet (each prune cycle adds one)"
    )
    if made_ago is not None:
        lines.append(f"from the forecast of every topic made {format.age(made_ago)} ago (f: forecast anew)")
    return "\n".join(lines)
