"""A one-key confirmation (``y``) for actions that change what the engine deletes but
can be undone: releasing a hold, pausing or resuming deletion, moving a group. The
irreversible ones (truncate, purge, expire) ask for a typed name instead
(:mod:`console.modals.confirm`). ``n`` or ``esc`` backs out; the result is True only
for ``y``."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static


class AskScreen(ModalScreen[bool]):
    DEFAULT_CSS = """
    AskScreen {
        align: center middle;
    }
    AskScreen > #ask-dialog {
        width: 76;
        height: auto;
        border: thick $warning;
        background: $surface;
        padding: 1 2;
    }
    AskScreen #ask-keys {
        margin-top: 1;
        text-style: bold;
    }
    """
    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n", "answer(False)", "No"),
        Binding("escape", "answer(False)", "No", show=False),
    ]

    def __init__(self, heading: str, body: str) -> None:
        super().__init__()
        self.heading = heading
        self.body = body

    def compose(self) -> ComposeResult:
        with Vertical(id="ask-dialog") as dialog:
            dialog.border_title = self.heading
            yield Static(Text(self.body), id="ask-body")
            yield Static("y: yes · n or esc: no", id="ask-keys")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
