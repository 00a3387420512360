"""The line at the top of every view: where we are, what the engine is doing, and
the badges an operator must never miss (read-only, live paused, deletion paused)."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from console.host import EngineStatus
from console.widgets.engine_panel import cycle_phrase


class TopBar(Widget):
    DEFAULT_CSS = """
    TopBar {
        dock: top;
        height: 1;
        background: $panel;
        color: $foreground;
    }
    """

    view_title: reactive[str] = reactive("")
    """The view's name and context, e.g. ``Topic orders``."""

    status: reactive[EngineStatus | None] = reactive(None)
    """The engine as last seen (no I/O to read it)."""

    now: reactive[int] = reactive(0)
    """The console clock, for the next-cycle countdown."""

    read_only: reactive[bool] = reactive(False)
    live: reactive[bool] = reactive(True)
    """Whether views refresh on their own."""
    paused: reactive[bool] = reactive(False)
    """Whether the engine's deletion is paused (from the catalog)."""

    def render(self) -> Text:
        variables = self.app.theme_variables
        text = Text(" Ebbtide ", style=f"bold {variables.get('primary', 'cyan')}")
        text.append(f"│ {self.view_title} ")
        status = self.status
        if status is not None:
            text.append(f"│ Spark {status.master}: {status.session} │ {cycle_phrase(status, self.now)} ")
        if self.paused:
            text.append(" DELETION PAUSED ", style=f"bold reverse {variables.get('warning', 'yellow')}")
            text.append(" ")
        if not self.live:
            text.append(" LIVE OFF ", style=f"reverse {variables.get('warning', 'yellow')}")
            text.append(" ")
        if self.read_only:
            text.append(" READ-ONLY ", style=f"bold reverse {variables.get('error', 'red')}")
        return text
