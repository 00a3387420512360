"""The engine in a few lines: where plans run, the session, the last and next cycle,
and two charts, bytes on disk per topic and bytes freed per cycle, over the span of
the recent cycles (Overview and Engine views)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from console import format
from console.host import EngineStatus
from console.model.history import History
from console.model.journal import cycle_took
from console.widgets.charts import Chart, legend, series_roles
from console.widgets.history_charts import disk_chart, freed_chart
from engine.journal.rows import Cycle


def last_cycle_line(cycle: Cycle | None, now: int) -> str:
    """``cycle 12 done 34s ago, took 2.1 s (plan 1.6 s, apply 500 ms): 4 of 4 deleted,
    12.0 MiB freed``: the whole cycle's time, as the Journal and Engine views show it
    (``took unknown`` for a cycle an older journal did not time whole)."""
    if cycle is None:
        return "no cycle journaled yet"
    duration = "" if cycle.finished is None else f", took {cycle_took(cycle)}"
    line = (
        f"cycle {cycle.id} {cycle.status} {format.since(now, cycle.began)} ago{duration}: "
        f"{cycle.applied} of {cycle.planned} deleted, {format.size(cycle.bytes_freed)} freed"
    )
    if cycle.error:
        line += f" ({cycle.error})"
    return line


def cycle_phrase(status: EngineStatus, now: int) -> str:
    """Where the console's schedule stands, in a few words."""
    if not status.scheduling:
        return "no schedule in this console"
    if status.cycle_running:
        return "cycle running" if status.session == "ready" else "first cycle waits for Spark"
    if status.next_cycle_at is not None:
        return f"next cycle in {format.age(max(0, status.next_cycle_at - now))}"
    return "first cycle waits for Spark" if status.session in ("stopped", "starting") else "schedule stopped"


def status_line(status: EngineStatus, now: int) -> str:
    session = status.session if status.error is None else f"{status.session}: {status.error}"
    return " · ".join(
        (f"Spark {status.master}: {session}", cycle_phrase(status, now), f"every {format.duration(status.interval_ms)}")
    )


class EnginePanel(Vertical):
    DEFAULT_CSS = """
    EnginePanel {
        height: auto;
        border: round $primary;
        border-title-color: $primary;
        padding: 0 1;
    }
    EnginePanel #engine-charts {
        height: 12;
        margin-top: 1;
    }
    EnginePanel #engine-disk {
        width: 3fr;
        margin-right: 2;
    }
    EnginePanel #engine-freed {
        width: 2fr;
    }
    /* Under both charts, the panel's whole width: under the disk chart alone five
       topic names did not fit at 120 columns and the fifth was cut. Longer names wrap. */
    EnginePanel #engine-legend {
        height: auto;
    }
    /* On a short terminal the topics come first: the panel keeps its two lines. */
    Screen.-short EnginePanel #engine-charts, Screen.-short EnginePanel #engine-legend {
        display: none;
    }
    """

    def compose(self) -> ComposeResult:
        self.border_title = "Engine"
        yield Static(id="engine-status")
        yield Static(id="engine-last")
        with Horizontal(id="engine-charts"):
            yield Chart(id="engine-disk")
            yield Chart(id="engine-freed")
        yield Static(id="engine-legend")

    def show(self, status: EngineStatus, cycles: Sequence[Cycle], now: int, history: History) -> None:
        """``cycles`` newest first, as the journal gives them; ``history`` over their span."""
        self.query_one("#engine-status", Static).update(Text(status_line(status, now)))
        self.query_one("#engine-last", Static).update(Text(last_cycle_line(cycles[0] if cycles else None, now)))
        variables = self.app.theme_variables
        disk = disk_chart(history, series_roles(variables))
        self.query_one("#engine-disk", Chart).show(disk)
        self.query_one("#engine-legend", Static).update(legend(disk.series, variables))
        self.query_one("#engine-freed", Chart).show(freed_chart(history))
        freed = [b for _, b in history.freed]
        self.border_subtitle = (
            f"freed {format.size(sum(freed))} over the last {len(freed)} cycle(s)" if freed else "no cycle yet"
        )
