"""The Forecast view's group picker (``g``): the shown topic's groups, each with how
the forecast assumes it reads; choosing one assumes it stalled (``ebb forecast
--stalled``), or reading again."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList
from textual.widgets.option_list import Option


class StallPicker(ModalScreen[str | None]):
    """Dismissed with the group chosen (its stalled mark to flip), or None when cancelled."""

    DEFAULT_CSS = """
    StallPicker {
        align: center middle;
    }
    StallPicker > #stall-dialog {
        width: 60;
        height: auto;
        max-height: 90%;
        border: thick $primary;
        background: $surface;
    }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, groups: list[str], stalled: frozenset[str]) -> None:
        super().__init__()
        self.groups = groups
        self.stalled = stalled

    def compose(self) -> ComposeResult:
        with Vertical(id="stall-dialog") as dialog:
            dialog.border_title = "Assume stalled (enter flips)"
            options = [
                Option(f"{group}: {'assumed stalled' if group in self.stalled else 'as observed'}", id=group)
                for group in self.groups
            ]
            yield OptionList(*options, id="stall-groups")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)
