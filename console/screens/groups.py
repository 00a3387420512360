"""Groups: every consumer group of every topic, how far behind it is, when
``subscription_expiry`` removes it and whether it is over the backlog quota (SPEC §8).
``enter`` opens the group's topic; the group keys act on the group under the cursor."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable

from console import format
from console.host import ConsoleHost
from console.model.groups import GroupsData, GroupSummary, load_groups
from console.screens.base import LiveScreen
from console.screens.group_actions import GROUP_BINDINGS, GroupActions
from console.widgets.cells import Palette
from console.widgets.live_table import Column, LiveRow, LiveTable

COLUMNS = (
    Column("topic", "Topic"),
    Column("group", "Group"),
    Column("kind", "Kind"),
    Column("partitions", "Parts"),
    Column("lag_messages", "Lag msgs"),
    Column("lag_bytes", "Backlog"),
    Column("lag_time", "Lag time"),
    Column("last_commit", "Last commit"),
    Column("expires", "Expires in"),
    Column("quota", "Over quota"),
)


def expires_cell(group: GroupSummary, now: int, palette: Palette) -> Text:
    if group.policy_error is not None:
        return Text("invalid policy", style=palette.error)
    if group.expires_at is None:
        return Text("never", style=palette.muted)
    left = group.expires_at - now
    if left < 0:
        # past due: the next cycle removes it (expiry is strict: ``now - commit > expiry``)
        return Text("next cycle", style=palette.error)
    return Text(format.age(left))


def quota_cell(group: GroupSummary, palette: Palette) -> Text:
    if group.over_quota is None:
        return Text("-", style=palette.muted)
    if not group.over_quota and group.topic_clearing:
        # within its quota, but the header still counts the topic until the next cycle
        return Text("no, clearing", style=palette.warning)
    if not group.over_quota:
        return Text("no", style=palette.success)
    return Text(f"yes: {' + '.join(group.over_quota)}", style=palette.error)


def group_row(group: GroupSummary, now: int, palette: Palette) -> LiveRow:
    commit_age = None if group.last_commit is None else now - group.last_commit
    quota = quota_cell(group, palette)
    expires = expires_cell(group, now, palette)
    return LiveRow(
        key=group.key,
        cells=(
            group.topic,
            group.group,
            group.kind,
            format.count(group.partitions),
            format.count(group.lag_messages),
            format.size(group.lag_bytes),
            format.age(group.lag_ms),
            format.ago(now, group.last_commit),
            expires,
            quota,
        ),
        sort_values=(
            group.topic,
            group.group,
            group.kind,
            group.partitions,
            group.lag_messages,
            group.lag_bytes,
            group.lag_ms,
            commit_age,
            group.expires_at,
            quota.plain,
        ),
        search=f"{group.topic} {group.group} {group.kind} {expires.plain} {quota.plain}",
    )


@dataclass(frozen=True)
class GroupsRows:
    rows: tuple[LiveRow, ...]
    subtitle: str


class GroupsScreen(GroupActions, LiveScreen[GroupsRows]):
    VIEW_TITLE = "Groups"
    BINDINGS = [Binding("enter", "open_topic", "Open topic", show=True), *GROUP_BINDINGS]

    def compose_view(self) -> ComposeResult:
        table = LiveTable(COLUMNS, id="groups", classes="box")
        table.border_title = "Consumer groups"
        yield table

    def load(self, host: ConsoleHost) -> GroupsRows:
        with host.reading() as broker:
            data: GroupsData = load_groups(broker)
        # The palette is a plain dict lookup of the running theme; a theme switch
        # refreshes the view, so cells are rebuilt in the new colours.
        palette = Palette.of(self.app)
        over = sum(1 for g in data.groups if g.over_quota)
        subtitle = f"{len(data.groups)} group(s) · {over} over quota"
        return GroupsRows(tuple(group_row(g, data.now, palette) for g in data.groups), subtitle)

    def show(self, data: GroupsRows) -> None:
        table = self.query_one("#groups", LiveTable)
        table.show(data.rows)
        table.border_subtitle = data.subtitle

    def focused_group(self) -> tuple[str, str] | None:
        key = self.query_one("#groups", LiveTable).selected_key
        if key is None:
            return None
        topic, group = key.split("/", 1)
        return topic, group

    def action_open_topic(self) -> None:
        if (focused := self.focused_group()) is not None:
            self.ebb.open_topic(focused[0])

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open_topic()
