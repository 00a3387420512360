"""Engine: where plans run and how the engine is doing (SPEC §8): the Spark master,
the session (warming, ready, or failed with its error), Spark's log file, whether this
console runs the prune schedule and how often, the deletion switch (``z`` toggles it),
the last and next cycle with bytes freed per cycle (the overview's engine panel, with a
taller charts), and the recent cycles of any process."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from console import format
from console.host import ConsoleHost, EngineStatus
from console.model.engine import EngineData, load_engine
from console.model.history import History, load_history
from console.screens.base import LiveScreen
from console.screens.journal import ENGINE_CYCLE_COLUMNS, cycle_row
from console.widgets.cells import Palette, state
from console.widgets.engine_panel import EnginePanel
from console.widgets.live_table import LiveRow, LiveTable

SESSION_MEANING = {
    "off": "off: this console starts no Spark engine",
    "stopped": "stopped",
    "starting": "starting: warming up",
    "ready": "ready",
    "failed": "failed",
}


def session_cell(status: EngineStatus, palette: Palette) -> Text:
    # the colour of the state word, the words of its meaning
    text = Text(SESSION_MEANING.get(status.session, status.session), style=state(status.session, palette).style)
    if status.error is not None:
        text.append(f": {status.error}")
    return text


def facts(data: EngineData, palette: Palette) -> Table:
    """The engine's facts as label/value pairs, two pairs a line."""
    status = data.status
    schedule = (
        Text("runs here", style=palette.success)
        if status.scheduling
        else Text("not in this console (read-only, or engine off)", style=palette.muted)
    )
    deletion = (
        Text("PAUSED: cycles plan and report, nothing is deleted (z resumes)", style=palette.warning)
        if data.paused
        else Text("running (z pauses)", style=palette.success)
    )
    pairs: list[tuple[str, Any]] = [
        ("Spark master", status.master),
        ("Session", session_cell(status, palette)),
        ("Spark log", str(data.log_file)),
        ("Schedule", schedule),
        ("Prune interval", format.duration(status.interval_ms)),
        ("Deletion", deletion),
    ]
    table = Table.grid(padding=(0, 2), expand=True)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(ratio=1)
    for label, value in pairs:
        table.add_row(label, value)
    return table


@dataclass(frozen=True)
class EngineRows:
    data: EngineData
    facts: Table
    cycles: tuple[LiveRow, ...]
    history: History


class EngineScreen(LiveScreen[EngineRows]):
    VIEW_TITLE = "Engine"
    # The app's z, shown here where the Deletion line names it (hidden read-only by
    # the app's check_action, refused with a toast by its on_key).
    BINDINGS = [Binding("z", "app.toggle_pause", "Pause/resume")]
    DEFAULT_CSS = """
    EngineScreen #engine-facts {
        height: auto;
        border: round $primary;
        border-title-color: $primary;
        padding: 0 1;
    }
    EngineScreen EnginePanel #engine-charts {
        height: 15;
    }
    """

    def compose_view(self) -> ComposeResult:
        facts_box = Static(id="engine-facts")
        facts_box.border_title = "Spark and schedule"
        yield facts_box
        yield EnginePanel()
        cycles = LiveTable(ENGINE_CYCLE_COLUMNS, id="engine-cycles", classes="box")
        cycles.border_title = "Recent cycles (any process)"
        yield cycles

    def load(self, host: ConsoleHost) -> EngineRows:
        data = load_engine(host)
        with host.reading() as broker:
            history = load_history(broker.catalog, data.cycles, data.now)
        palette = Palette.of(self.app)  # a dict read; a theme switch reloads the view
        return EngineRows(
            data, facts(data, palette), tuple(cycle_row(c, palette, split=True) for c in data.cycles), history
        )

    def show(self, rows: EngineRows) -> None:
        data = rows.data
        self.query_one("#engine-facts", Static).update(rows.facts)
        self.query_one(EnginePanel).show(data.status, data.cycles, data.now, rows.history)
        table = self.query_one("#engine-cycles", LiveTable)
        table.show(rows.cycles)
        table.border_subtitle = f"newest {len(rows.cycles)}"
