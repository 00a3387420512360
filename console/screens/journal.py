"""Journal: the engine's cycles, actions and policy changes (SPEC §6, §8), newest
first, read-only, readable at 120 columns.

- each table shows what an operator reads first in full (an action's time, kind,
  topic/partition, reason, messages, bytes and status; a cycle's start, trigger,
  scope, status, deletions, bytes and time); the rest of the highlighted row is the
  detail line under the tables;
- newest first, following new rows while the cursor is on the first row; scrolled
  away, the cursor stays put and the table's subtitle counts the ``N new`` above;
- ``enter`` on a cycle (or on an action) shows only that cycle's actions (and no
  other filter); ``a`` picks an action kind from a list, policy changes included;
  ``o`` filters to the topic of the action under the cursor (again: every topic);
  ``x`` clears every filter (and the search). The active filters are in the header;
- ``tab`` moves between the two tables, ``/`` searches the one focused;
- ``w`` writes (exports) the actions on screen, after every filter and in the order
  shown, as CSV and JSON under ``<data dir>/exports/``; also in read-only mode, as it
  writes files, not the catalog (not ``E``: that expires a group in the group views).

Cycle, kind and topic filters run in SQL, so they reach actions older than the
loaded window of the newest :data:`~console.model.journal.ROW_LIMIT` rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from console import format
from console.errors import describe_error
from console.host import ConsoleHost
from console.modals.kind_picker import KindPicker
from console.model.journal import (
    KINDS,
    POLICY_CHANGE,
    JournalData,
    JournalFilter,
    cycle_time,
    cycle_took,
    export_actions,
    load_journal,
    policy_value,
    reason_text,
)
from console.screens.base import LiveScreen
from console.widgets.cells import Palette, state
from console.widgets.filter_bar import FilterBar
from console.widgets.live_table import Cell, Column, LiveRow, LiveTable
from engine.journal.rows import Action, Cycle

CYCLE_COLUMNS = (
    Column("id", "Cycle"),
    Column("started", "Started"),
    Column("trigger", "Trigger"),
    Column("scope", "Scope", width=16),
    Column("status", "Status"),
    Column("deleted", "Deleted"),
    Column("freed", "Freed"),
    Column("duration", "Took"),  # the whole cycle: planning and applying
)

#: the Engine view's: the whole cycle's time, then planning and applying apart
ENGINE_CYCLE_COLUMNS = (*CYCLE_COLUMNS, Column("plan", "Planning"), Column("apply", "Applying"))

# At 120 columns every one of these fits in full; the cycle, segment, offsets,
# trigger, actor and details are in the detail line of the highlighted action.
ACTION_COLUMNS = (
    Column("time", "Time"),
    Column("action", "Action"),
    Column("where", "Topic/part"),
    Column("reason", "Reason"),
    Column("messages", "Msgs"),
    Column("bytes", "Bytes"),
    Column("status", "Status"),
)

#: the policy-change kind's own (console/model/journal.py POLICY_CHANGE): what
#: changed, where and by whom, in full; it has no messages, bytes or status
POLICY_COLUMNS = (
    Column("time", "Time"),
    Column("topic", "Topic"),
    Column("field", "Field"),
    Column("old", "Old"),
    Column("new", "New"),
    Column("actor", "By"),
)


def scope_text(scope: Any) -> str:
    return "all" if scope == "all" else ", ".join(scope)


def cycle_row(cycle: Cycle, palette: Palette, *, split: bool = False) -> LiveRow:
    """One journaled cycle; ``split`` adds the planning and applying times (the Engine
    view's :data:`ENGINE_CYCLE_COLUMNS`)."""
    cells: tuple[Cell, ...] = (
        str(cycle.id),
        format.instant(cycle.began),
        cycle.trigger,
        scope_text(cycle.scope),
        state(cycle.status, palette),
        f"{format.count(cycle.applied)} of {format.count(cycle.planned)}",
        format.size(cycle.bytes_freed),
        cycle_time(cycle.duration_ms, cycle),
    )
    sorts: tuple[Any, ...] = (
        cycle.id,
        cycle.began,
        cycle.trigger,
        scope_text(cycle.scope),
        cycle.status,
        cycle.applied,
        cycle.bytes_freed,
        cycle.duration_ms,
    )
    if split:
        cells += (cycle_time(cycle.plan_ms, cycle), cycle_time(cycle.apply_ms, cycle))
        sorts += (cycle.plan_ms, cycle.apply_ms)
    return LiveRow(
        key=str(cycle.id),
        cells=cells,
        sort_values=sorts,
        search=" ".join((str(cycle.id), cycle.trigger, scope_text(cycle.scope), cycle.status, cycle.error or "")),
    )


def _offsets(action: Action) -> str:
    start, end = action.start_offset, action.end_offset
    return "" if start is None and end is None else f"{format.count(start)}..{format.count(end)}"


def where_text(action: Action) -> str:
    """``orders/0``, ``orders``, or empty for an action on no topic (a pause)."""
    topic = action.topic or ""
    return topic if action.partition is None else f"{topic}/{action.partition}"


def action_row(action: Action, palette: Palette) -> LiveRow:
    return LiveRow(
        key=str(action.id),
        cells=(
            format.instant(action.time),
            action.action,
            where_text(action),
            reason_text(action),
            "" if action.messages is None else format.count(action.messages),
            "" if action.bytes is None else format.size(action.bytes),
            state(action.status, palette),
        ),
        sort_values=(
            action.time,
            action.action,
            (action.topic, action.partition),
            reason_text(action),
            action.messages,
            action.bytes,
            action.status,
        ),
        search=" ".join(
            str(v)
            for v in (
                action.action,
                where_text(action),
                reason_text(action),
                action.status,
                action.trigger,
                action.actor,
                action.cycle,
            )
            if v is not None
        ),
    )


def policy_row(change: Action) -> LiveRow:
    """A policy change (:func:`~console.model.journal.policy_change_row`) in
    :data:`POLICY_COLUMNS`."""
    details = change.details or {}
    cells = (
        format.instant(change.time),
        change.topic or "",
        details.get("field", ""),
        policy_value(details.get("old")),
        policy_value(details.get("new")),
        change.actor,
    )
    return LiveRow(key=str(change.id), cells=cells, sort_values=(change.time, *cells[1:]), search=" ".join(cells[1:]))


def policy_detail(change: Action) -> str:
    return f"policy change of topic {change.topic} by {change.actor}, {format.instant(change.time)}: {change.reason}"


def action_detail(action: Action) -> str:
    """The rest of the action on one line: cycle, segment, offsets, who, details."""
    parts = [f"{action.action} by {action.actor} ({action.trigger})"]
    if action.cycle is not None:
        parts.append(f"cycle {action.cycle}")
    if action.segment is not None:
        parts.append(f"segment {action.segment}")
    if offsets := _offsets(action):
        parts.append(f"offsets {offsets}")
    if action.settled is not None and action.settled != action.time:
        parts.append(f"settled {format.instant(action.settled)}")
    if action.details:
        parts.append(json.dumps(action.details, sort_keys=True, separators=(", ", ": ")))
    return " · ".join(parts)


def cycle_detail(cycle: Cycle) -> str:
    parts = [f"cycle {cycle.id}: {cycle.trigger} by {cycle.actor}, scope {scope_text(cycle.scope)}"]
    if cycle.spark_master:
        parts.append(f"Spark {cycle.spark_master}")
    if cycle.finished is not None:
        parts.append(f"finished {format.instant(cycle.finished)} · took {cycle_took(cycle)}")
    if cycle.error:
        parts.append(f"error: {cycle.error}")
    return " · ".join(parts) + " · enter: its actions"


@dataclass(frozen=True)
class JournalRows:
    cycles: tuple[LiveRow, ...]
    actions: tuple[LiveRow, ...]
    #: the actions table's: an action's, or a policy change's
    action_columns: tuple[Column, ...]
    cycles_subtitle: str
    actions_subtitle: str
    #: the journal rows behind the action rows, by row key (export, topic filter)
    action_records: dict[str, Action]
    #: the detail line of each row, by table id and row key
    details: dict[tuple[str, str], str]


def journal_rows(data: JournalData, palette: Palette) -> JournalRows:
    def bound(count: int, hint: str = "") -> str:
        return f"only the newest {data.limit} loaded{hint}" if count >= data.limit else f"newest {data.limit} at most"

    policies = data.filter.action == POLICY_CHANGE
    cycles_subtitle = f"{len(data.cycles)} cycle(s) · {bound(len(data.cycles))}"
    actions_subtitle = (
        f"{len(data.actions)} {'policy change' if policies else 'action'}(s) · {data.filter.describe()} · "
        f"{bound(len(data.actions), ': filter to reach older ones')}"
    )
    details = {("cycles", str(c.id)): cycle_detail(c) for c in data.cycles}
    detail = policy_detail if policies else action_detail
    details.update({("actions", str(a.id)): detail(a) for a in data.actions})
    return JournalRows(
        cycles=tuple(cycle_row(c, palette) for c in data.cycles),
        actions=tuple(policy_row(a) if policies else action_row(a, palette) for a in data.actions),
        action_columns=POLICY_COLUMNS if policies else ACTION_COLUMNS,
        cycles_subtitle=cycles_subtitle,
        actions_subtitle=actions_subtitle,
        action_records={str(a.id): a for a in data.actions},
        details=details,
    )


class JournalScreen(LiveScreen[JournalRows]):
    VIEW_TITLE = "Journal"
    # Short words: with the app's keys they must all fit the footer at 120 columns
    # (the help says each in full).
    BINDINGS = [
        Binding("c", "all_cycles", "All cycles"),
        Binding("a", "pick_kind", "Kind"),
        Binding("o", "toggle_topic", "Topic"),
        Binding("x", "clear_filters", "Clear"),
        Binding("w", "export", "Export"),
    ]
    DEFAULT_CSS = """
    JournalScreen LiveTable {
        border: round $panel;
        border-title-color: $text-muted;
        border-subtitle-color: $text-muted;
    }
    JournalScreen LiveTable:focus {
        border: round $primary;
        border-title-color: $primary;
    }
    JournalScreen #journal-detail {
        height: 2;
        padding: 0 1;
        color: $text-muted;
    }
    """

    def __init__(self) -> None:
        super().__init__()
        #: what the next load asks of the journal (set on the UI thread, read by the worker)
        self.journal_filter = JournalFilter()
        self._rows: JournalRows | None = None

    def compose_view(self) -> ComposeResult:
        cycles = LiveTable(CYCLE_COLUMNS, id="cycles", follow=True)
        cycles.border_title = "Cycles"
        actions = LiveTable(ACTION_COLUMNS, id="actions", follow=True)
        actions.border_title = "Actions"
        yield cycles
        yield actions
        yield Static(id="journal-detail")

    def load(self, host: ConsoleHost) -> JournalRows:
        journal_filter = self.journal_filter
        with host.reading() as broker:
            data = load_journal(broker, journal_filter)
        return journal_rows(data, Palette.of(self.app))  # a dict read; a theme switch reloads

    def show(self, data: JournalRows) -> None:
        self._rows = data
        cycles = self.query_one("#cycles", LiveTable)
        actions = self.query_one("#actions", LiveTable)
        cycles.show(data.cycles)
        actions.use_columns(data.action_columns)
        actions.border_title = "Policy changes" if data.action_columns == POLICY_COLUMNS else "Actions"
        actions.show(data.actions)
        self._show_subtitles()
        self._show_detail()

    def _show_subtitles(self) -> None:
        if self._rows is None:
            return
        for name, subtitle in (("cycles", self._rows.cycles_subtitle), ("actions", self._rows.actions_subtitle)):
            table = self.query_one(f"#{name}", LiveTable)
            new = f" · {table.new_above} new ↑ (home)" if table.new_above else ""
            table.border_subtitle = subtitle + new

    def title_text(self) -> str:
        """The breadcrumb's part: ``Journal`` and, while any is on, every filter."""
        search = self.query_one("#actions", LiveTable).filter_text if self.is_mounted else ""
        active = [self.journal_filter.describe()] if self.journal_filter.active else []
        active += [f'search "{search}"'] if search else []
        return f"Journal [filtered: {' · '.join(active)} · x clears]" if active else "Journal"

    # -- the filters --------------------------------------------------------------------------

    def _refilter(self, journal_filter: JournalFilter) -> None:
        self.journal_filter = journal_filter
        self.ebb.sync_top_bar(self)
        self.ebb.refresh_view()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        key = str(event.row_key.value)
        if event.data_table.id == "cycles":
            self._show_cycle(int(key))
        elif self._rows is not None and (cycle := self._rows.action_records[key].cycle) is not None:
            self._show_cycle(cycle)  # enter on an action: the rest of its cycle

    def _show_cycle(self, cycle: int) -> None:
        """That cycle's actions, all of them: no kind, topic or search carries over."""
        self._clear_search()
        self._refilter(JournalFilter(cycle=cycle))

    def action_all_cycles(self) -> None:
        self._refilter(replace(self.journal_filter, cycle=None))

    def action_pick_kind(self) -> None:
        def picked(choice: tuple[str | None] | None) -> None:
            if choice is not None:
                self._refilter(replace(self.journal_filter, action=choice[0]))

        self.app.push_screen(KindPicker(KINDS, self.journal_filter.action), picked)

    def show_kind(self, kind: str | None) -> None:
        """Only actions of ``kind``, every other filter cleared."""
        self._clear_search()
        self._refilter(JournalFilter(action=kind))

    def action_clear_filters(self) -> None:
        self._clear_search()
        self._refilter(JournalFilter())

    def _clear_search(self) -> None:
        for table in self.query(LiveTable):
            table.filter_text = ""
        self.query_one(FilterBar).value = ""

    def on_filter_bar_applied(self, event: FilterBar.Applied) -> None:
        super().on_filter_bar_applied(event)
        self.ebb.sync_top_bar(self)  # the search is a filter the header names

    def action_toggle_topic(self) -> None:
        if self.journal_filter.topic is not None:
            self._refilter(replace(self.journal_filter, topic=None))
            return
        action = self._focused_action()
        if action is None or action.topic is None:
            self.notify("highlight an action of a topic first", severity="warning")
            return
        self._refilter(replace(self.journal_filter, topic=action.topic))

    def _focused_action(self) -> Action | None:
        key = self.query_one("#actions", LiveTable).selected_key
        return None if key is None or self._rows is None else self._rows.action_records.get(key)

    # -- export -------------------------------------------------------------------------------

    def action_export(self) -> None:
        if self._rows is None:
            return
        shown = [self._rows.action_records[row.key] for row in self.query_one("#actions", LiveTable).shown_rows]
        if not shown:
            self.notify("no actions on screen to export", severity="warning")
            return
        self._export(shown)

    @work(thread=True, exit_on_error=False, group="export")
    def _export(self, rows: list[Action]) -> None:
        host = self.ebb.host
        try:
            csv_path, json_path = export_actions(rows, host.root, host.clock())
        except Exception as error:  # noqa: BLE001 - a full disk is a notification, not a crash
            self.app.call_from_thread(
                self.notify, describe_error(error), title="Export failed", severity="error", markup=False
            )
            return
        self.app.call_from_thread(
            self.notify,
            f"{len(rows)} action(s) written to {csv_path} and {json_path.name}",
            title="Export",
            markup=False,
        )

    # -- search and detail --------------------------------------------------------------------

    def on_descendant_focus(self, _event: events.DescendantFocus) -> None:
        self._show_detail()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        table = event.data_table
        if isinstance(table, LiveTable) and table.cursor_row == 0 and table.new_above:
            table.new_above = 0  # back at the newest: everything above has been seen
            self._show_subtitles()
        self._show_detail()

    def _show_detail(self) -> None:
        table = self.focused if isinstance(self.focused, LiveTable) else self.filtered_table
        detail = ""
        if table is not None and self._rows is not None and table.selected_key is not None:
            detail = self._rows.details.get((str(table.id), table.selected_key), "")
        self.query_one("#journal-detail", Static).update(Text(detail, overflow="ellipsis"))
