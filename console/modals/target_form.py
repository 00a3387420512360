"""The form truncate and a group move share: pick a partition, pick how the target
point is given (an offset, a time, earliest...), type its value, read what it would
do or why it is refused as you type, then go.

A subclass says which modes it offers, how a value is checked against the loaded
:class:`~console.model.topic_facts.TopicFacts` (raising
:class:`~engine.errors.InvalidInput` with the one line to show), how a valid request
reads, and what going ahead does. Nothing is validated on the UI thread but against
facts already loaded; the engine checks again when the operation runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from rich.console import RenderableType
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, RadioButton, RadioSet, Select, Static

from console.modals.facts_loader import FactsLoader
from console.model.topic_facts import PartitionFacts, TopicFacts
from engine.errors import InvalidInput

Request = TypeVar("Request")

#: the partition select's value until the topic's partitions are read (no partition has it)
LOADING = -1


@dataclass(frozen=True)
class Mode:
    """One way of giving the target point."""

    key: str
    label: str


class TargetDialog(FactsLoader, ModalScreen[None], Generic[Request]):
    """See the module docstring."""

    DEFAULT_CSS = """
    TargetDialog {
        align: center middle;
    }
    TargetDialog > #target-dialog {
        width: 96;
        height: auto;
        max-height: 90%;
        border: thick $primary;
        background: $surface;
        padding: 1 2;
    }
    TargetDialog #target-intro {
        margin-bottom: 1;
    }
    TargetDialog .target-row {
        height: auto;
        margin-bottom: 1;
    }
    TargetDialog .target-row > Label {
        width: 12;
        padding: 1 0;
        color: $text-muted;
    }
    TargetDialog #target-partition, TargetDialog #target-value {
        width: 1fr;
    }
    TargetDialog #target-mode {
        layout: horizontal;
        width: 1fr;
        height: auto;
    }
    TargetDialog #target-echo {
        height: auto;
        min-height: 2;
    }
    TargetDialog #target-echo.-error {
        color: $error;
    }
    TargetDialog #target-buttons {
        height: auto;
        margin-top: 1;
    }
    TargetDialog #target-buttons Button {
        margin-right: 2;
    }
    """
    BINDINGS = [Binding("escape", "dismiss", "Cancel")]

    #: the ways of giving the target, the first one chosen at first
    MODES: tuple[Mode, ...] = ()
    #: the label of the row of modes
    MODE_LABEL = "Target"
    #: the label of the button that goes ahead
    VERB = "Go"

    def __init__(self, topic: str) -> None:
        super().__init__()
        self.topic = topic
        self.facts: TopicFacts | None = None
        #: the valid request the form shows, or None
        self.request: Request | None = None

    # -- what a subclass says ----------------------------------------------------------------

    def heading(self) -> str:
        raise NotImplementedError

    def intro(self) -> RenderableType:
        raise NotImplementedError

    def partition_label(self, partition: PartitionFacts) -> str:
        return partition.label()

    def placeholder(self, mode: str, partition: PartitionFacts) -> str | None:
        """The value's hint; None when ``mode`` takes no value."""
        raise NotImplementedError

    def refusal(self, facts: TopicFacts) -> str | None:
        """Why nothing can be done on this topic at all."""
        return None

    def check(self, partition: PartitionFacts, mode: str, text: str) -> Request:
        """The request for ``text``; :class:`InvalidInput` says what is wrong with it."""
        raise NotImplementedError

    def describe(self, request: Request) -> RenderableType:
        raise NotImplementedError

    def submit(self, request: Request) -> None:
        raise NotImplementedError

    # -- layout -------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        with Vertical(id="target-dialog") as dialog:
            dialog.border_title = self.heading()
            yield Static(self.intro(), id="target-intro")
            with Horizontal(classes="target-row"):
                yield Label("Partition")
                # No blank entry: a prompt stayed in the list as an option once loaded.
                yield Select[int](
                    [("loading…", LOADING)], id="target-partition", allow_blank=False, value=LOADING, disabled=True
                )
            with Horizontal(classes="target-row"):
                yield Label(self.MODE_LABEL)
                yield RadioSet(
                    *(RadioButton(m.label, value=i == 0, id=f"mode-{m.key}") for i, m in enumerate(self.MODES)),
                    id="target-mode",
                )
            with Horizontal(classes="target-row", id="target-value-row"):
                yield Label("Value")
                yield Input(id="target-value", disabled=True)
            yield Static("loading…", id="target-echo")
            with Horizontal(id="target-buttons"):
                yield Button(self.VERB, variant="error", id="target-go", disabled=True)
                yield Button("Cancel (esc)", id="target-cancel")

    def on_mount(self) -> None:
        self.load_facts()

    # -- facts ---------------------------------------------------------------------------------

    def show_facts(self, facts: TopicFacts) -> None:
        self.facts = facts
        select = self.query_one("#target-partition", Select)
        if facts.partitions:  # a topic has one at least; without, the select keeps "loading…"
            select.set_options([(self.partition_label(p), p.partition) for p in facts.partitions])
            select.value = facts.partitions[0].partition
        refused = self.refusal(facts)
        if refused is not None:
            self._echo(refused, error=True)
            return
        select.disabled = False
        self.query_one("#target-value", Input).disabled = False
        self.validate()
        self.query_one("#target-value", Input).focus()

    def show_load_error(self, error: str) -> None:
        self._echo(error, error=True)

    # -- validation as typed -------------------------------------------------------------------

    @property
    def mode(self) -> str:
        pressed = self.query_one("#target-mode", RadioSet).pressed_button
        return (pressed.id or "").removeprefix("mode-") if pressed is not None else self.MODES[0].key

    def selected_partition(self) -> PartitionFacts | None:
        value = self.query_one("#target-partition", Select).value
        if self.facts is None or not isinstance(value, int):
            return None
        return self.facts.partition(value)

    def validate(self) -> None:
        """Check the form as it stands; show the request or the error; arm the button."""
        self.request = None
        self.query_one("#target-go", Button).disabled = True
        partition = self.selected_partition()
        if partition is None or self.facts is None or self.refusal(self.facts) is not None:
            return
        hint = self.placeholder(self.mode, partition)
        value = self.query_one("#target-value", Input)
        self.query_one("#target-value-row").display = hint is not None
        value.placeholder = hint or ""
        if hint is not None and not value.value.strip():
            self._echo("")
            return
        try:
            self.request = self.check(partition, self.mode, value.value)
        except InvalidInput as error:
            self._echo(str(error), error=True)
            return
        self._echo(self.describe(self.request))
        self.query_one("#target-go", Button).disabled = False

    def _echo(self, text: RenderableType, *, error: bool = False) -> None:
        echo = self.query_one("#target-echo", Static)
        echo.update(text)
        echo.set_class(error, "-error")

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        self.validate()

    def on_radio_set_changed(self, event: RadioSet.Changed) -> None:
        event.stop()
        self.validate()

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.validate()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._go()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "target-go":
            self._go()
        else:
            self.dismiss()

    def _go(self) -> None:
        if self.request is not None:
            self.submit(self.request)
