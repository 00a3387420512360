"""``?``: every key, in one place, in the order an operator needs them."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    (
        "Views",
        (
            ("1 … 6", "Overview, Groups, Quotas, Journal, Engine, Forecast"),
            ("enter", "open the selected topic"),
            (":", "command palette: views, topics, themes, prune, pause"),
            ("esc", "back (or clear the filter)"),
        ),
    ),
    ("Topic", (("v", "plan this topic now (a dry plan; allowed read-only)"),)),
    (
        "Forecast",
        (
            ("enter / f", "forecast the selected topic / again"),
            ("w", "rate window: 1h, 6h, 1d, 7d (ebb forecast --window)"),
            ("g", "assume a group stalled, or reading again (--stalled)"),
        ),
    ),
    (
        "Journal",
        (
            ("enter / c", "only the selected cycle's actions / every cycle again"),
            ("a", "pick an action kind (policy changes included)"),
            ("o", "only the highlighted action's topic (again: all)"),
            ("x", "clear every filter and the search"),
            ("w", "export the shown actions as CSV and JSON"),
        ),
    ),
    (
        "Tables",
        (
            ("/", "filter the rows as you type"),
            ("s / S", "sort by the next column / reverse (or click a header)"),
            ("tab", "next table of the view"),
            ("↑ ↓ pgup pgdn", "move"),
        ),
    ),
    (
        "Live",
        (
            ("r", "refresh now"),
            ("p", "pause or resume the automatic refresh"),
            ("t", "next theme (remembered)"),
        ),
    ),
    (
        "Steering (not in --read-only)",
        (
            ("e", "edit the topic's policy, with a what-if preview"),
            ("x", "prune now: dry-run preview, confirm, progress, cancel"),
            ("h", "hold the topic (at once) or release it (y confirms)"),
            ("T / D", "truncate a partition / purge the topic (type its name)"),
            ("E / m", "expire the group (type its name) / move its position (y confirms)"),
            ("z", "pause or resume all deletion (y confirms)"),
        ),
    ),
    (
        "Policy editor",
        (
            ("ctrl+t", "what-if: what would go now, which groups would skip data"),
            ("ctrl+s", "save (refused if someone changed the policy meanwhile)"),
            ("ctrl+r / ctrl+l", "reset the field to its default / reload the saved policy"),
        ),
    ),
    ("Leave", (("ctrl+q", "quit"),)),
)


def keys_table() -> Group:
    """Each section's heading on a line of its own (in the keys' column it was cut to
    16 cells), then its keys."""
    parts: list[RenderableType] = []
    for section, rows in KEYS:
        table = Table(show_header=False, box=None, padding=(0, 2), expand=True)
        table.add_column(style="bold", no_wrap=True, width=16)
        table.add_column(ratio=1)
        for key, meaning in rows:
            table.add_row(key, meaning)
        parts += [Text(section, style="underline"), table, Text("")]
    return Group(*parts)


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen {
        align: center middle;
    }
    HelpScreen > VerticalScroll {
        width: 76;
        height: auto;
        max-height: 90%;
        border: thick $primary;
        background: $surface;
        padding: 1 2;
    }
    """
    BINDINGS = [
        Binding("escape", "dismiss", "Close"),
        Binding("question_mark", "dismiss", "Close", show=False),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll() as scroll:
            scroll.border_title = "Ebbtide keys"
            yield Static(keys_table(), id="help-keys")
