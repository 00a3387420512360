"""The Journal's kind picker (``a``): every action kind in one list to choose from,
instead of stepping through them one key press at a time."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList
from textual.widgets.option_list import Option

#: the option that clears the kind filter
EVERY_KIND = "every kind"


class KindPicker(ModalScreen[tuple[str | None] | None]):
    """Dismissed with ``(kind,)`` (``(None,)``: every kind), or None when cancelled."""

    DEFAULT_CSS = """
    KindPicker {
        align: center middle;
    }
    KindPicker > #kind-dialog {
        width: 40;
        height: auto;
        max-height: 90%;
        border: thick $primary;
        background: $surface;
    }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, kinds: tuple[str | None, ...], current: str | None) -> None:
        super().__init__()
        self.kinds = kinds
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="kind-dialog") as dialog:
            dialog.border_title = "Show actions of kind"
            options = [Option(kind or EVERY_KIND, id=kind or EVERY_KIND) for kind in self.kinds]
            picker = OptionList(*options, id="kinds")
            picker.highlighted = self.kinds.index(self.current) if self.current in self.kinds else 0
            yield picker

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        chosen = event.option.id
        self.dismiss((None if chosen == EVERY_KIND else chosen,))

    def action_cancel(self) -> None:
        self.dismiss(None)
