"""The ``/`` filter: an input under a view's table, hidden until asked for."""

from __future__ import annotations

from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input


class FilterBar(Input):
    """Type to filter the view's table; ``enter`` keeps the filter, ``esc`` clears it."""

    DEFAULT_CSS = """
    FilterBar {
        dock: bottom;
        display: none;
        border: tall $accent;
        margin-bottom: 1;
    }
    FilterBar.-open {
        display: block;
    }
    """

    BINDINGS = [Binding("escape", "clear", "Clear filter", show=False)]

    class Applied(Message):
        """The filter text changed (sent as each key is typed)."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self) -> None:
        super().__init__(placeholder="filter: type to narrow the rows, enter to keep, esc to clear", id="filter")
        # Closed, it must not take the focus (nor the keys) from the view.
        self.can_focus = False

    @property
    def is_open(self) -> bool:
        return self.has_class("-open")

    def open(self) -> None:
        self.add_class("-open")
        self.can_focus = True
        self.focus()

    def close(self) -> None:
        self.remove_class("-open")
        self.can_focus = False
        if self.has_focus:
            self.screen.focus_next()

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.post_message(self.Applied(event.value))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self.value:
            self.screen.focus_next()
        else:
            self.close()

    def action_clear(self) -> None:
        self.value = ""  # posts Input.Changed, hence Applied("")
        self.close()
