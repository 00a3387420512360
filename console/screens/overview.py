"""Overview: every topic at a glance, and the engine underneath (SPEC §8)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable

from console import format
from console.host import ConsoleHost
from console.messages import ViewLoaded
from console.model.history import History, load_history
from console.model.overview import OverviewData, TopicSummary, load_overview
from console.screens.base import LiveScreen
from console.screens.topic_actions import TOPIC_BINDINGS, TopicActions
from console.widgets.cells import Palette, meter, state
from console.widgets.engine_panel import EnginePanel
from console.widgets.live_table import Column, LiveRow, LiveTable

#: cells of the backlog gauge: narrower than a lone gauge, so the State column fits
GAUGE_WIDTH = 6

#: the Backlog and State cells of a topic whose backlog is still being read
PENDING = "…"

# Short headings where the values are shorter: at 120 columns the demo's widest row
# left State 17 cells, and ``quota exceeded, held`` (a held topic over quota) needs 20.
COLUMNS = (
    Column("topic", "Topic"),
    Column("partitions", "Parts"),
    Column("segments", "Segs"),
    Column("bytes", "Bytes"),
    Column("oldest", "Oldest"),
    Column("retention", "Retention"),
    Column("backlog", "Backlog/quota"),
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
    states = topic.states()
    quota = topic.quota
    backlog_order: float | int | None
    if quota is None or states is None:
        backlog, backlog_order = Text(PENDING, style=palette.muted), None
        state_cell = Text(PENDING, style=palette.muted)
    else:
        if not quota.quota.finite:
            backlog, backlog_order = Text(format.size(quota.backlog_bytes)), quota.backlog_bytes  # the figure alone
        else:  # the larger of size and age against quota
            backlog, backlog_order = meter(quota.fraction, palette, width=GAUGE_WIDTH), quota.fraction
        state_cell = state(", ".join(states), palette)
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
            state_cell,
        ),
        sort_values=(
            topic.name,
            topic.partitions,
            topic.segments,
            topic.size_bytes,
            oldest_age,
            retention,
            backlog_order,
            states,
        ),
    )


@dataclass(frozen=True)
class OverviewRows:
    data: OverviewData
    #: the topics table's rows, built in the worker (a 1,000-topic catalog is
    #: tens of ms of string work the UI thread must not do)
    rows: tuple[LiveRow, ...]
    #: None in the early rows, shown before the backlog and the history are read
    history: History | None


class OverviewScreen(TopicActions, LiveScreen[OverviewRows]):
    VIEW_TITLE = "Overview"
    BINDINGS = [Binding("enter", "open_topic", "Open", show=True), *TOPIC_BINDINGS]

    def compose_view(self) -> ComposeResult:
        yield LiveTable(COLUMNS, id="topics")
        yield EnginePanel()

    #: whether the table has shown every topic's backlog (read from the load's thread:
    #: a bool, written once by the UI thread)
    filled = False

    def load(self, host: ConsoleHost) -> OverviewRows:
        # The palette is read, not changed: a theme switch replaces the whole dict.
        palette = Palette.of(self.app)
        begun = time.perf_counter()

        def rows(data: OverviewData, history: History | None) -> OverviewRows:
            return OverviewRows(data, tuple(topic_row(t, data, palette) for t in data.topics), history)

        def early(data: OverviewData) -> None:
            # Until the table has been filled once, the topics go on screen before the
            # backlog is read; after that a refresh replaces whole rows, never blanks them.
            self.ebb.post_message(ViewLoaded(self, rows(data, None), (time.perf_counter() - begun) * 1000))

        with host.reading() as broker:
            data = load_overview(broker, None if self.filled else early)
            history = load_history(broker.catalog, data.cycles, data.now)
        return rows(data, history)

    def show(self, loaded: OverviewRows) -> None:
        data = loaded.data
        self.filled = self.filled or data.complete
        self.query_one("#topics", LiveTable).show(loaded.rows)
        if loaded.history is not None:  # the early rows come before the charts' history is read
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
