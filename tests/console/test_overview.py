"""The Overview's first paint: topic rows before the backlog, filled in when it arrives,
and never blanked again by a later refresh."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator

import pytest

from console.model.history import History, TopicHistory
from console.screens.overview import PENDING
from console.widgets.engine_panel import EnginePanel
from console.widgets.live_table import LiveTable
from engine.catalog import lag
from tests.support.console_fixtures import MINUTE, NOW, TERMINAL, settle

#: the Overview's columns, by index
SEGMENTS, BACKLOG, STATE = 2, 6, 7


class Gate:
    """Holds every backlog read (``partition_lags``) until opened."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.reads = 0

    def wrap(self, read: Callable[..., list[lag.PartitionLag]]) -> Callable[..., list[lag.PartitionLag]]:
        def held(*args: object, **kwargs: object) -> list[lag.PartitionLag]:
            self.reads += 1
            if not self.opened.wait(timeout=30):
                raise TimeoutError("the test never opened the gate")
            return read(*args, **kwargs)

        return held


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[Gate]:
    held = Gate()
    monkeypatch.setattr("console.model.overview.partition_lags", held.wrap(lag.partition_lags))
    yield held
    held.opened.set()  # a worker still waiting must not outlive the test by 30 s


def cells(table: LiveTable, column: int) -> dict[str, str]:
    return {row.key: str(getattr(row.cells[column], "plain", row.cells[column])) for row in table.shown_rows}


async def until(pilot, condition: Callable[[], bool]) -> None:
    """Poll for ``condition`` (for 20 s at most): settling would wait for a worker
    that a test holds on purpose."""
    for _ in range(1000):
        if condition():
            return
        await pilot.pause(0.02)
    raise AssertionError("the condition never held")


async def test_topic_rows_come_before_their_backlog_and_state(make_console, gate: Gate) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        table = app.screen.query_one("#topics", LiveTable)
        await until(pilot, lambda: table.row_count > 0)
        # The rows are there with what the topics table and the segments give...
        assert sorted(cells(table, 0)) == ["clickstream", "legal", "metrics", "orders", "payments", "sessions"]
        assert all(int(n) > 0 for n in cells(table, SEGMENTS).values())
        # ... and the backlog pending: no "ok" that the lags could still contradict.
        assert set(cells(table, BACKLOG).values()) == {PENDING}
        assert set(cells(table, STATE).values()) == {PENDING}
        assert app.screen.filled is False
        gate.opened.set()
        await settle(pilot)
        assert app.screen.filled is True
        state = cells(table, STATE)
        assert state["payments"] == "over quota" and state["legal"] == "held"
        assert PENDING not in cells(table, BACKLOG).values()


async def test_a_refresh_after_the_first_fill_never_blanks_the_backlog(make_console, gate: Gate) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        gate.opened.set()
        await settle(pilot)
        table = app.screen.query_one("#topics", LiveTable)
        filled = cells(table, BACKLOG), cells(table, STATE)
        gate.opened.clear()
        reads = gate.reads
        await pilot.press("r")
        await until(pilot, lambda: gate.reads > reads)  # the refresh is reading the lags now
        await asyncio.sleep(0.1)  # time for a partial frame, were one posted
        await pilot.pause()
        assert (cells(table, BACKLOG), cells(table, STATE)) == filled
        gate.opened.set()
        await settle(pilot)
        assert (cells(table, BACKLOG), cells(table, STATE)) == filled


async def test_the_engine_legend_names_every_charted_topic_at_120_columns(make_console) -> None:
    """The demo's five largest topics made a legend wider than the disk chart: the
    fifth name was cut, leaving its colour naming nothing (walk2 finding 3)."""
    names = ("demo-orders", "demo-clickstream", "demo-metrics", "demo-alerts", "demo-sessions")
    history = History(
        now=NOW,
        since=NOW - 10 * MINUTE,
        topics=tuple(TopicHistory(n, (NOW - MINUTE, NOW), (4096, 2048)) for n in names),
        freed=((NOW - MINUTE, 2048),),
    )
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        panel = app.screen.query_one(EnginePanel)
        panel.show(app.host.engine_status(), [], NOW, history)
        await settle(pilot)
        legend = panel.query_one("#engine-legend")
        shown = " ".join(strip.text for strip in legend.render_lines(legend.region.reset_offset))
        assert all(f"━ {name}" in shown for name in names), shown
