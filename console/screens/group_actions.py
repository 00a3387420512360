"""The keys that act on one consumer group, shared by the views that have a group in
focus (Groups: the selected row; Topic: the selected row of its groups table).

- ``E`` expires the group (a capital, like ``T`` and ``D``: it cannot be undone; the
  dialog asks for the group's name to be typed);
- ``m`` moves its position on a partition (to an offset, earliest, latest or a time).

Neither key is used by the app (1-6 r p t z : ? / esc), the tables (s S) or the topic
keys (e x h T D), so a view may offer both sets. Both actions are in
``MUTATING_ACTIONS``: hidden and refused in read-only mode.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.binding import Binding
from textual.message_pump import MessagePump

from console.modals.group_ops import GroupExpireScreen, GroupMoveScreen

if TYPE_CHECKING:
    from textual import getters

    from console.app import EbbApp

GROUP_BINDINGS = [
    Binding("E", "expire_group", "Expire group", show=False),
    Binding("m", "move_group", "Move"),
]


class GroupActions(MessagePump):
    """Mixin for a LiveScreen: implement :meth:`focused_group`."""

    if TYPE_CHECKING:  # as a Screen's app, which the checker knows only as a plain App
        app = getters.app(EbbApp)

    def focused_group(self) -> tuple[str, str] | None:
        """(topic, group) under the cursor, or None."""
        raise NotImplementedError

    def _group_or_say(self) -> tuple[str, str] | None:
        focused = self.focused_group()
        if focused is None:
            self.app.notify("select a group first", severity="warning")
        return focused

    def action_expire_group(self) -> None:
        if (focused := self._group_or_say()) is not None and self.app.allowed("expire a group"):
            self.app.push_screen(GroupExpireScreen(*focused))

    def action_move_group(self) -> None:
        if (focused := self._group_or_say()) is not None and self.app.allowed("move a group"):
            self.app.push_screen(GroupMoveScreen(*focused))
