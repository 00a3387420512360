"""The one typed confirmation of the console: an irreversible action (purge, truncate,
expire a group) goes ahead only once the operator has typed a name (the topic's, or
the group's) exactly, as SPEC §8 asks for purge and truncate. ``esc`` or Cancel
backs out; the result is True only when confirmed.

Dialogs that need details loaded first (what a purge deletes) subclass it, fill the
body with :meth:`ConfirmScreen.set_body` from a worker's result, and may
:meth:`~ConfirmScreen.refuse` (a held topic) instead of asking; a subclass that acts
on its own overrides :meth:`ConfirmScreen.confirmed`.
"""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static


class ConfirmScreen(ModalScreen[bool]):
    """See the module docstring."""

    DEFAULT_CSS = """
    ConfirmScreen {
        align: center middle;
    }
    ConfirmScreen > #confirm-dialog {
        width: 84;
        height: auto;
        max-height: 90%;
        border: thick $error;
        background: $surface;
        padding: 1 2;
    }
    ConfirmScreen #confirm-body {
        margin-bottom: 1;
    }
    ConfirmScreen #confirm-error {
        color: $error;
        height: auto;
    }
    ConfirmScreen #confirm-buttons {
        height: auto;
        margin-top: 1;
    }
    ConfirmScreen #confirm-buttons Button {
        margin-right: 2;
    }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, heading: str, body: RenderableType, word: str, *, verb: str) -> None:
        """``word`` is what must be typed; ``verb`` labels the confirm button."""
        super().__init__()
        self.heading = heading
        self.word = word
        self.verb = verb
        self._body = body
        #: set by :meth:`refuse`: the action cannot go ahead at all
        self.refusal: str | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-dialog") as dialog:
            dialog.border_title = self.heading
            yield Static(self._body, id="confirm-body")
            yield Static(Text.assemble("Type ", (self.word, "bold"), " to confirm:"), id="confirm-prompt")
            yield Input(placeholder=self.word, id="confirm-word")
            yield Static("", id="confirm-error")
            with Horizontal(id="confirm-buttons"):
                yield Button(self.verb, variant="error", id="confirm", disabled=True)
                yield Button("Cancel (esc)", id="cancel")

    # -- for subclasses ---------------------------------------------------------------------

    def set_body(self, body: RenderableType) -> None:
        self.query_one("#confirm-body", Static).update(body)

    def refuse(self, reason: str) -> None:
        """Say why the action cannot be done, and take the way to confirm away."""
        self.refusal = reason
        self.query_one("#confirm-error", Static).update(reason)
        self.query_one("#confirm-word", Input).disabled = True
        self.query_one("#confirm", Button).disabled = True
        self.query_one("#cancel", Button).focus()

    def confirmed(self) -> None:
        """The word was typed and Confirm pressed."""
        self.dismiss(True)

    # -- typing and buttons -------------------------------------------------------------------

    @property
    def typed(self) -> str:
        return self.query_one("#confirm-word", Input).value

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.query_one("#confirm", Button).disabled = self.refusal is not None or event.value != self.word
        self.query_one("#confirm-error", Static).update(self.refusal or "")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._try_confirm()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "confirm":
            self._try_confirm()
        else:
            self.action_cancel()

    def _try_confirm(self) -> None:
        if self.refusal is not None:
            return
        if self.typed != self.word:
            # Exactly, case included: a near miss may be another topic.
            self.query_one("#confirm-error", Static).update(
                Text.assemble("type ", (self.word, "bold"), " exactly to confirm")
            )
            return
        self.confirmed()

    def action_cancel(self) -> None:
        self.dismiss(False)
