"""Quotas: every topic's backlog quota against its slowest subscriber (SPEC §4, §8).

Topics with a quota come first; the others follow, marked ``no quota`` (see
console/model/quotas.py). The state is :meth:`QuotaStatus.label`, the value every
view shows (console/model/quota.py). ``enter`` opens the topic."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable

from console import format
from console.host import ConsoleHost
from console.model.quotas import QuotasData, QuotaSummary, load_quotas
from console.screens.base import LiveScreen
from console.widgets.cells import Palette, gauge, tone
from console.widgets.live_table import Column, LiveRow, LiveTable

#: gauges narrower than the overview's: this table has two of them
GAUGE_WIDTH = 4

#: what each backlog policy does, in few enough words that every column fits at 120
POLICY_WORDS = {
    "producer_request_hold": "hold producers",
    "producer_exception": "fail producers",
    "consumer_backlog_eviction": "evict consumers",
}

# Whom to act on comes right after the topic, and the backlog policy (a fact of the
# policy, also in the Topic view) last: at 120 columns, with long names, it is the
# one that scrolls off, never the slowest subscriber or the state.
COLUMNS = (
    Column("topic", "Topic"),
    Column("slowest", "Slowest"),
    Column("backlog", "Backlog / size quota"),
    Column("oldest", "Age / quota"),
    Column("state", "State"),
    Column("policy", "Backlog policy"),
)


def against(figure: str, part: int | None, limit: int | None, limit_text: str, palette: Palette) -> Text:
    """``14.3 KiB / 4.0 KiB ████ 357%``; the figure alone against no limit."""
    if limit is None or part is None:
        return Text(figure)
    text = Text(f"{figure} / {limit_text} ")
    text.append_text(gauge(part, limit, palette, width=GAUGE_WIDTH))
    return text


def state_cell(topic: QuotaSummary, now: int, palette: Palette) -> Text:
    if topic.policy is None:
        return Text("invalid policy", style=palette.error)
    status = topic.status
    return Text(status.label(now), style=tone(status.word, palette))


def quota_row(topic: QuotaSummary, now: int, palette: Palette) -> LiveRow:
    status = topic.status
    quota = status.quota
    state = state_cell(topic, now, palette)
    policy = POLICY_WORDS.get(status.backlog_policy or "", status.backlog_policy)
    return LiveRow(
        key=topic.topic,
        cells=(
            topic.topic,
            topic.furthest_behind or "-",
            against(
                format.size(status.backlog_bytes),
                status.backlog_bytes,
                quota.size_bytes,
                format.size(quota.size_bytes),
                palette,
            ),
            against(
                format.age(status.oldest_ms), status.oldest_ms, quota.age_ms, format.duration(quota.age_ms), palette
            ),
            state,
            Text(policy or "-", style="" if policy else palette.muted),
        ),
        sort_values=(topic.topic, topic.furthest_behind, status.backlog_bytes, status.oldest_ms, state.plain, policy),
    )


@dataclass(frozen=True)
class QuotasRows:
    rows: tuple[LiveRow, ...]
    subtitle: str


class QuotasScreen(LiveScreen[QuotasRows]):
    VIEW_TITLE = "Quotas"
    BINDINGS = [Binding("enter", "open_topic", "Open topic", show=True)]

    def compose_view(self) -> ComposeResult:
        table = LiveTable(COLUMNS, id="quotas", classes="box")
        table.border_title = "Backlog quotas"
        yield table

    def load(self, host: ConsoleHost) -> QuotasRows:
        with host.reading() as broker:
            data: QuotasData = load_quotas(broker)
        palette = Palette.of(self.app)  # a dict read; a theme switch reloads the view
        with_quota = sum(1 for t in data.topics if t.status.quota.finite)
        alarming = sum(1 for t in data.topics if t.status.alarming)
        subtitle = (
            f"{with_quota} of {len(data.topics)} topic(s) with a quota · {alarming} over quota · "
            "backlog per partition, whole segments, subscribers only"
        )
        return QuotasRows(tuple(quota_row(t, data.now, palette) for t in data.topics), subtitle)

    def show(self, data: QuotasRows) -> None:
        table = self.query_one("#quotas", LiveTable)
        table.show(data.rows)
        table.border_subtitle = data.subtitle

    def action_open_topic(self) -> None:
        if (topic := self.query_one("#quotas", LiveTable).selected_key) is not None:
            self.ebb.open_topic(topic)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open_topic()
