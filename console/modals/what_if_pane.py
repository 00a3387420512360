"""The policy editor's what-if pane: what the edited policy would delete now that the
saved one would not, which groups would skip data they have not consumed, and a
week's forecast of bytes on disk with the saved and with the edited policy, their
size caps and the disk budget as lines (one Spark job, run in the pane's own worker
thread; the chart draws from its message), and under the comparison what that
forecast assumed of the ingest and the groups' reading."""

from __future__ import annotations

from collections.abc import Mapping

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Static
from textual.worker import get_current_worker

from console import format
from console.errors import describe_error
from console.host import ConsoleHost
from console.model.capacity import WhatIfCaps, forecast_scope, week_ahead, what_if_caps
from console.model.what_if import WhatIf
from console.superseding import FromWorker, forecast_progress
from console.widgets.cells import Palette
from console.widgets.charts import Chart, ChartLegend
from console.widgets.forecast_assumptions import assumptions
from console.widgets.forecast_chart import forecast_chart
from engine.forecast.result import Forecast, TopicForecast

TITLE = "What-if"
#: what the chart's note says while the forecast runs
FORECASTING = "forecasting a week ahead on Spark"
INVITATION = (
    "ctrl+t plans this topic now with the policy in the form and with the saved one "
    "(on Spark), shows what the change would delete now and which groups would skip "
    "unconsumed data, and charts a week's forecast of bytes on disk with both. Saving "
    "does not need it."
)


def _table(*headers: str) -> Table:
    table = Table(box=None, padding=(0, 2, 0, 0), show_edge=False, header_style="bold")
    for header in headers:
        table.add_column(header, no_wrap=True, justify="left" if header in ("Group", "Kind", "Why") else "right")
    return table


def render_what_if(what_if: WhatIf, changes: str, palette: Palette) -> RenderableType:
    """The comparison as text and two small tables."""
    parts: list[RenderableType] = [Text(f"At {format.instant(what_if.now)} UTC, with {changes}:", style="bold")]
    goes = Text("Would go now, and not with the saved policy: ")
    goes.append(
        f"{format.count(what_if.segments)} segment(s), {format.size(what_if.bytes)}",
        style=palette.warning if what_if.segments else palette.success,
    )
    if what_if.spared_segments:
        goes.append(
            f"; kept that the saved policy deletes: {format.count(what_if.spared_segments)} "
            f"segment(s), {format.size(what_if.spared_bytes)}"
        )
    parts += [goes, Text("")]
    # Short headers: the tables share the pane's width with the forecast chart.
    partitions = _table("Part", "Go now", "Bytes", "Kept", "Log start", "→ saved", "→ new")
    for p in what_if.partitions:
        partitions.add_row(
            str(p.partition),
            Text(format.count(p.segments), style=palette.warning if p.segments else ""),
            format.size(p.bytes),
            format.count(p.spared_segments),
            format.count(p.log_start),
            format.count(p.saved_log_start),
            Text(format.count(p.new_log_start), style=palette.warning if p.new_log_start > p.saved_log_start else ""),
        )
    parts += [partitions, Text("")]
    if not what_if.groups:
        parts.append(Text("No group would skip unconsumed data.", style=palette.success))
        return Group(*parts)
    parts.append(Text("Groups that would skip unconsumed data:", style="bold"))
    groups = _table("Group", "Kind", "Part", "At", "→ new", "Skips", "Saved", "Why")
    for g in what_if.groups:
        groups.add_row(
            g.group,
            g.kind,
            str(g.partition),
            format.count(g.position),
            "removed" if g.new_position is None else format.count(g.new_position),
            Text(format.count(g.skipped), style=palette.error if g.worse else ""),
            format.count(g.saved_skipped),
            g.why,
        )
    parts.append(groups)
    return Group(*parts)


def peaks_line(result: Forecast, topic: str) -> str:
    """``peak 58.0 KiB saved, 41.0 KiB edited``: ``topic``'s over the week charted above
    it, on one line of the chart's width (each line under the chart is a line less of
    chart)."""
    edited = result.of(topic)
    saved = result.saved_of(topic) or edited
    peak = max(p.bytes for p in edited.points)
    saved_peak = max(p.bytes for p in saved.points)
    return f"peak {format.size(saved_peak)} saved, {format.size(peak)} edited"


class WhatIfPane(Horizontal):
    """One message or one comparison (scrolling), and beside it the forecast chart."""

    DEFAULT_CSS = """
    WhatIfPane {
        height: 1fr;
        min-height: 6;
        border: round $primary;
        border-title-color: $primary;
        background: $surface;
        padding: 0 1;
    }
    WhatIfPane.-stale {
        border: round $warning;
        border-title-color: $warning;
    }
    WhatIfPane #what-if-text {
        width: 1fr;
    }
    WhatIfPane #what-if-text > Static.-failed {
        color: $error;
    }
    WhatIfPane #what-if-forecast {
        width: 36;
        display: none;
    }
    WhatIfPane #what-if-forecast-note {
        height: auto;
    }
    WhatIfPane #what-if-assumptions {
        display: none;
    }
    """

    class ForecastReady(FromWorker):
        def __init__(self, result: Forecast, edited: TopicForecast, caps: WhatIfCaps) -> None:
            super().__init__()
            self.result = result
            #: the topic edited, as forecast with the edited policy
            self.edited = edited
            self.caps = caps

    class ForecastFailed(FromWorker):
        def __init__(self, error: str) -> None:
            super().__init__()
            self.error = error

    #: the Spark jobs of the forecast running, cancelled when another is asked for
    _forecast_tag: str | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="what-if-text"):
            yield Static(INVITATION, id="what-if-body", classes="muted")
            # the chart's column is too narrow for these lines: they follow the comparison
            yield Static(id="what-if-assumptions")
        with Vertical(id="what-if-forecast"):
            yield Chart(id="what-if-chart")
            yield ChartLegend(id="what-if-forecast-note")

    def on_mount(self) -> None:
        self.border_title = TITLE

    def _content(self, content: RenderableType, *, failed: bool = False, muted: bool = False) -> None:
        body = self.query_one("#what-if-body", Static)
        body.update(content)
        body.set_class(failed, "-failed")
        body.set_class(muted, "muted")
        self.set_class(False, "-stale")
        self.border_title = TITLE

    def waiting(self, message: str) -> None:
        self._content(Text(message), muted=True)

    def failed(self, message: str) -> None:
        self._content(Text(f"No what-if: {message}"), failed=True)
        self.query_one("#what-if-forecast").display = False
        self.query_one("#what-if-assumptions").display = False

    def show(self, what_if: WhatIf, changes: str, palette: Palette) -> None:
        self._content(render_what_if(what_if, changes, palette))

    def stale(self) -> None:
        """The form changed after the comparison shown: it no longer describes it."""
        self.set_class(True, "-stale")
        self.border_title = f"{TITLE} — stale: the form changed since (ctrl+t again)"

    # -- the forecast ---------------------------------------------------------------------

    def forecast(self, host: ConsoleHost, topic: str, overrides: Mapping[str, str]) -> None:
        """Forecast ``topic`` a week ahead with ``overrides`` and with the saved policy
        (with a disk budget, beside every other topic: console.model.capacity.forecast_scope),
        in a worker; the chart shows it when done. The forecast it replaces stops."""
        self.query_one("#what-if-forecast").display = True
        self.query_one("#what-if-forecast-note", ChartLegend).show(None, f"{FORECASTING}…")
        self.query_one("#what-if-assumptions").display = False
        self._forecast_tag = host.replacing(self._forecast_tag)  # its worker: cancelled below (exclusive)
        self._forecast(host, topic, dict(overrides), self._forecast_tag)

    def _progress(self, done: int, jobs: int) -> None:
        self.query_one("#what-if-forecast-note", ChartLegend).show(None, f"{FORECASTING}: {done} of {jobs} jobs done…")

    @work(thread=True, exclusive=True, group="what-if-forecast", exit_on_error=False)
    def _forecast(self, host: ConsoleHost, topic: str, overrides: dict[str, str], tag: str) -> None:
        worker = get_current_worker()
        try:
            # The caps and the disk budget are drawn as lines, as in the Forecast view.
            with host.reading() as broker:
                caps, config = what_if_caps(broker, topic, overrides), broker.config
            result = host.forecast(
                week_ahead(host.clock(), config), forecast_scope(topic, config),
                overrides={topic: overrides}, progress=forecast_progress(self.app, worker, self._progress), tag=tag,
            )  # fmt: skip
            edited = result.of(topic)
        except Exception as error:  # noqa: BLE001 - shown in the pane, never a crash
            self.post_message(self.ForecastFailed(describe_error(error)))
            return
        self.post_message(self.ForecastReady(result, edited, caps))

    def on_what_if_pane_forecast_ready(self, message: ForecastReady) -> None:
        if message.superseded:
            return
        caps, edited = message.caps, message.edited
        spec = forecast_chart(message.result, edited.topic, cap=caps.edited, saved_cap=caps.saved)
        self.query_one("#what-if-chart", Chart).show(spec)
        self.query_one("#what-if-forecast-note", ChartLegend).show(spec, peaks_line(message.result, edited.topic))
        shown = self.query_one("#what-if-assumptions", Static)
        shown.update(
            Group(Text("\nThe forecast charted assumes:", style="bold"), assumptions(edited, message.result.window_ms))
        )
        shown.display = True

    def on_what_if_pane_forecast_failed(self, message: ForecastFailed) -> None:
        if message.superseded:
            return
        self.query_one("#what-if-forecast-note", ChartLegend).show(None, f"No forecast: {message.error}")
