"""A modal list to choose one option from (the Journal's kind picker, the Forecast
view's group picker): enter chooses, escape cancels."""

from __future__ import annotations

from typing import Generic, TypeVar

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList
from textual.widgets.option_list import Option

Chosen = TypeVar("Chosen")


class OptionPicker(ModalScreen[Chosen | None], Generic[Chosen]):
    """``options`` under ``title``; dismissed with :meth:`chosen` of the option picked,
    or None when cancelled."""

    DEFAULT_CSS = """
    OptionPicker {
        align: center middle;
    }
    OptionPicker > .picker-dialog {
        height: auto;
        max-height: 90%;
        border: thick $primary;
        background: $surface;
    }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, options: list[Option], *, width: int, highlighted: int = 0, list_id: str) -> None:
        super().__init__()
        self._heading = title
        self._choices = options
        self._dialog_width = width
        self._first = highlighted
        self._list_id = list_id

    def compose(self) -> ComposeResult:
        with Vertical(classes="picker-dialog") as dialog:
            dialog.border_title = self._heading
            dialog.styles.width = self._dialog_width
            picker = OptionList(*self._choices, id=self._list_id)
            picker.highlighted = self._first
            yield picker

    def chosen(self, option_id: str) -> Chosen:
        """What the dialog is dismissed with when the option ``option_id`` is picked."""
        raise NotImplementedError

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        assert event.option.id is not None  # every option is made with one
        self.dismiss(self.chosen(event.option.id))

    def action_cancel(self) -> None:
        self.dismiss(None)
