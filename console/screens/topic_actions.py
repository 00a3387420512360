"""The keys that act on one topic, shared by the views that have a topic in focus
(Overview: the selected row; Topic: the topic shown)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.binding import Binding
from textual.message_pump import MessagePump

from console.modals.manual_ops import PurgeScreen, TruncateScreen
from engine.broker import Broker
from engine.prune.operations import SwitchResult, set_hold

if TYPE_CHECKING:
    from textual import getters

    from console.app import EbbApp

#: One word a label: the Topic view's footer holds these, the group keys, ``v`` and the
#: app's keys in 120 columns; the rare and destructive keys are in the help (``?``).
TOPIC_BINDINGS = [
    Binding("e", "edit_policy", "Edit policy"),
    Binding("x", "prune_now", "Prune"),
    Binding("h", "toggle_hold", "Hold"),
    Binding("T", "truncate", "Truncate", show=False),
    Binding("D", "purge", "Purge", show=False),
]


def _set_hold(topic: str, hold: bool) -> Callable[[Broker], SwitchResult]:
    def job(broker: Broker) -> SwitchResult:
        return set_hold(broker, topic, hold, actor="console")

    return job


def _describe_switch(result: SwitchResult) -> str:
    if not result.changed:
        return f"{result.topic}: already {'held' if result.operation == 'hold' else 'released'}"
    return f"{result.topic}: {'held: nothing of it is deleted' if result.operation == 'hold' else 'released'}"


class TopicActions(MessagePump):
    """Mixin for a LiveScreen: implement :meth:`focused_topic`."""

    if TYPE_CHECKING:  # as a Screen's app, which the checker knows only as a plain App
        app = getters.app(EbbApp)

    def focused_topic(self) -> str | None:
        raise NotImplementedError

    def _topic_or_say(self) -> str | None:
        topic = self.focused_topic()
        if topic is None:
            self.app.notify("select a topic first", severity="warning")
        return topic

    def action_edit_policy(self) -> None:
        if (topic := self._topic_or_say()) is not None and self.app.allowed("edit the policy"):
            # Imported when first opened: its what-if loads Arrow and numpy, which the
            # Overview's first paint does not need (console/app.py _forecast_screen).
            from console.modals.policy_editor import PolicyEditorScreen

            self.app.push_screen(PolicyEditorScreen(topic))

    def action_prune_now(self) -> None:
        if (topic := self._topic_or_say()) is not None:
            self.app.open_prune_now([topic])

    def action_toggle_hold(self) -> None:
        """Hold at once (it only keeps data); release once confirmed (``y``): the next
        cycle may delete what the hold kept."""
        if (topic := self._topic_or_say()) is None:
            return
        facts = self.app.header_facts
        if facts is None or topic not in facts.held:
            self.app.perform(f"Hold {topic}", _set_hold(topic, True), _describe_switch)
            return
        self.app.ask(
            f"Release {topic}?",
            f"The hold on {topic} ends: the next cycle deletes what its policy makes eligible, "
            "including everything the hold kept.",
            lambda: self.app.perform(f"Release {topic}", _set_hold(topic, False), _describe_switch),
        )

    def action_truncate(self) -> None:
        if (topic := self._topic_or_say()) is not None and self.app.allowed("truncate"):
            self.app.push_screen(TruncateScreen(topic))

    def action_purge(self) -> None:
        if (topic := self._topic_or_say()) is not None and self.app.allowed("purge"):
            self.app.push_screen(PurgeScreen(topic))
