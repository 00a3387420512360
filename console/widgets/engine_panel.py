"""The engine in a few lines: where plans run, the session, the last and next cycle,
and bytes freed per cycle as a sparkline (Overview and Engine views)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Sparkline, Static

from console import format
from console.host import EngineStatus
from console.model.journal import CycleTimes
from engine.journal.rows import Cycle


def last_cycle_line(cycle: Cycle | None, now: int) -> str:
    """``cycle 12 done 34s ago in 2.1 s: 4 of 4 deleted, 12.0 MiB freed``."""
    if cycle is None:
        return "no cycle journaled yet"
    took = CycleTimes.of(cycle).total_ms
    duration = "" if took is None else f" in {format.elapsed(took)}"
    line = (
        f"cycle {cycle.id} {cycle.status} {format.since(now, cycle.started)} ago{duration}: "
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
    EnginePanel Sparkline {
        height: 2;
        margin-top: 1;
    }
    /* Theme colours that read at 4.5:1 on the surface (tests/console/test_themes.py);
       Sparkline's own defaults fade to 1.6:1 on a light theme. */
    EnginePanel Sparkline > .sparkline--min-color {
        color: $secondary;
    }
    EnginePanel Sparkline > .sparkline--max-color {
        color: $primary;
    }
    """

    def compose(self) -> ComposeResult:
        self.border_title = "Engine"
        yield Static(id="engine-status")
        yield Static(id="engine-last")
        yield Sparkline([], id="engine-freed")

    def show(self, status: EngineStatus, cycles: Sequence[Cycle], now: int) -> None:
        """``cycles`` newest first, as the journal gives them."""
        self.query_one("#engine-status", Static).update(Text(status_line(status, now)))
        self.query_one("#engine-last", Static).update(Text(last_cycle_line(cycles[0] if cycles else None, now)))
        freed = [c.bytes_freed for c in reversed(cycles) if c.status == "done"]
        # An empty sparkline draws nothing; one of zeros would draw a full bar.
        self.query_one(Sparkline).data = freed if any(freed) else []
        self.border_subtitle = (
            f"freed {format.size(sum(freed))} over the last {len(freed)} cycle(s)" if freed else "no cycle yet"
        )
