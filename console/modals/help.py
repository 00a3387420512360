"""``?``: every key, in one place, in the order an operator needs them."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    (
        "Views",
        (
            ("1 … 5", "Overview, Groups, Quotas, Journal, Engine"),
            ("enter", "open the selected topic"),
            (":", "command palette: views, topics, themes, prune, pause"),
            ("esc", "back (or clear the filter)"),
        ),
    ),
    ("Topic", (("v", "plan this topic now (a dry plan; allowed read-only)"),)),
    (
        "Journal",
        (
            ("enter / c", "only the selected cycle's actions / every cycle again"),
            ("a / A", "next / previous action kind"),
            ("o", "only the highlighted action's topic (again: all)"),
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
            ("h", "hold or release the topic"),
            ("T / D", "truncate a partition / purge the topic (type its name)"),
            ("E / m", "expire the group / move its position (Groups, Topic views)"),
            ("z", "pause or resume all deletion"),
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


def keys_table() -> Table:
    table = Table(show_header=False, box=None, padding=(0, 2), expand=True)
    table.add_column(style="bold", no_wrap=True, width=16)
    table.add_column(ratio=1)
    for section, rows in KEYS:
        table.add_row(f"[underline]{section}[/]", "")
        for key, meaning in rows:
            table.add_row(key, meaning)
        table.add_row("", "")
    return table


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
            yield Static(keys_table())
