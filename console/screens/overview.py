"""Overview: every topic at a glance, and the engine underneath (SPEC §8)."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable

from console import format
from console.host import ConsoleHost
from console.model.history import History, load_history
from console.model.overview import OverviewData, TopicSummary, load_overview
from console.screens.base import LiveScreen
from console.screens.topic_actions import TOPIC_BINDINGS, TopicActions
from console.widgets.cells import Palette, meter, state
from console.widgets.engine_panel import EnginePanel
from console.widgets.live_table import Column, LiveRow, LiveTable

#: cells of the backlog gauge: narrower than a lone gauge, so the State column fits
GAUGE_WIDTH = 6

COLUMNS = (
    Column("topic", "Topic"),
    Column("partitions", "Parts"),
    Column("segments", "Segments"),
    Column("bytes", "Bytes"),
    Column("oldest", "Oldest"),
    Column("retention", "Retention"),
    Column("backlog", "Backlog / quota"),
    Column("state", "State"),
)


def retention_text(topic: TopicSummary) -> str:
    """Every finite limit in force, compactly: the targets (time, size), then the
    hard caps (``cap 7d``, ``cap 8.0 KiB/p`` per partition); ``infinite`` when none."""
    policy = topic.policy
    if policy is None:
        return "-"
    limits = []
    if policy["retention_time"] is not None:
        limits.append(format.duration(policy["retention_time"]))  # type: ignore[arg-type]
    if policy["retention_size"] is not None:
        limits.append(_compact_size(policy["retention_size"]))  # type: ignore[arg-type]
    if policy["max_time"] is not None:
        limits.append(f"cap {format.duration(policy['max_time'])}")  # type: ignore[arg-type]
    if policy["max_partition_size"] is not None:
        limits.append(f"cap {_compact_size(policy['max_partition_size'])}/p")  # type: ignore[arg-type]
    return " · ".join(limits) or "infinite"


def _compact_size(value: int) -> str:
    """``100 GiB`` rather than ``100.0 GiB``: four limits share one column."""
    return format.size(value).replace(".0 ", " ")


def topic_row(topic: TopicSummary, data: OverviewData, palette: Palette) -> LiveRow:
    retention = retention_text(topic)
    oldest_age = None if topic.oldest_timestamp is None else data.now - topic.oldest_timestamp
    states = topic.states(data.paused)
    quota = topic.quota
    if not quota.quota.finite:
        backlog = Text(format.size(quota.backlog_bytes))  # no quota: the figure alone
    else:
        backlog = meter(quota.fraction, palette, width=GAUGE_WIDTH)  # the larger of size and age against quota
    return LiveRow(
        key=topic.name,
        cells=(
            topic.name,
            format.count(topic.partitions),
            format.count(topic.segments),
            format.size(topic.size_bytes),
            format.age(oldest_age),
            retention,
            backlog,
            state(", ".join(states), palette) if len(states) > 1 else state(states[0], palette),
        ),
        sort_values=(
            topic.name,
            topic.partitions,
            topic.segments,
            topic.size_bytes,
            oldest_age,
            retention,
            quota.fraction if quota.quota.finite else quota.backlog_bytes,
            states,
        ),
    )


@dataclass(frozen=True)
class OverviewRows:
    data: OverviewData
    #: the topics table's rows, built in the worker (a 1,000-topic catalog is
    #: tens of ms of string work the UI thread must not do)
    rows: tuple[LiveRow, ...]
    history: History


class OverviewScreen(TopicActions, LiveScreen[OverviewRows]):
    VIEW_TITLE = "Overview"
    BINDINGS = [Binding("enter", "open_topic", "Open", show=True), *TOPIC_BINDINGS]

    def compose_view(self) -> ComposeResult:
        yield LiveTable(COLUMNS, id="topics")
        yield EnginePanel()

    def load(self, host: ConsoleHost) -> OverviewRows:
        with host.reading() as broker:
            data = load_overview(broker)
            history = load_history(broker.catalog, data.cycles, data.now)
        # The palette is read, not changed: a theme switch replaces the whole dict.
        palette = Palette.of(self.app)
        return OverviewRows(data, tuple(topic_row(t, data, palette) for t in data.topics), history)

    def show(self, loaded: OverviewRows) -> None:
        data = loaded.data
        self.query_one("#topics", LiveTable).show(loaded.rows)
        self.query_one(EnginePanel).show(self.ebb.host.engine_status(), data.cycles, data.now, loaded.history)
        self.ebb.known_topics = [t.name for t in data.topics]

    def focused_topic(self) -> str | None:
        return self.query_one("#topics", LiveTable).selected_key

    def action_open_topic(self) -> None:
        if (topic := self.focused_topic()) is not None:
            self.ebb.open_topic(topic)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.ebb.open_topic(str(event.row_key.value))
