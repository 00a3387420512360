"""Prune now against a cycle of another process: from the confirm until its cycle ends
it holds the data directory's prune lock, says who it waits for while another process
holds it, applies exactly what it previewed once it has it, and stops waiting on esc.

The other process is real: a Python subprocess that takes the prune lock as a cycle
of ``ebb engine`` or ``ebb prune`` would, and lets it go when the test says so.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from console.modals.prune_now import PruneNowScreen
from console.model.plan_preview import GroupEffect, PartitionPreview, PlanPreview
from engine.broker import Broker
from engine.journal.journal import Journal
from tests.console.test_overview import until
from tests.support.console_fixtures import NOW, TERMINAL, settle

#: takes the prune lock of argv[1] as a cycle does, says so, holds it until stdin closes
HOLDER = """
import sys
from pathlib import Path
from engine.prune.executor import hold_prune_lock
with hold_prune_lock(Path(sys.argv[1]), patience=None):
    print("held", flush=True)
    sys.stdin.read()
"""


class OtherCycle:
    """A process holding the prune lock, until :meth:`release`."""

    def __init__(self, root: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None and self.process.stdout.readline().strip() == "held"

    @property
    def pid(self) -> int:
        return self.process.pid

    def release(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            self.process.wait(timeout=30)


@pytest.fixture
def other_cycle(console_data: Path) -> Iterator[Callable[[], OtherCycle]]:
    started: list[OtherCycle] = []

    def start() -> OtherCycle:
        started.append(OtherCycle(console_data))
        return started[-1]

    yield start
    for other in started:
        other.release()
        if other.process.poll() is None:
            other.process.kill()
            other.process.wait()


def status(dialog: PruneNowScreen) -> str:
    return str(dialog.query_one("#prune-status").render())


def journaled_cycles(root: Path) -> list[dict]:
    with Broker(root, clock=lambda: NOW) as broker:
        return Journal(broker.catalog).cycles()


async def previewed(app, pilot) -> PruneNowScreen:
    await settle(pilot)
    app.open_prune_now(["orders"])
    await settle(pilot)
    dialog = app.screen
    assert isinstance(dialog, PruneNowScreen) and dialog.phase == "preview"
    assert dialog.preview is not None and dialog.preview.plan.segments > 0
    return dialog


async def confirmed_while_another_cycle_runs(app, pilot, other_cycle) -> tuple[PruneNowScreen, OtherCycle]:
    """A preview of orders, another process taking the prune lock, then ``c``: until
    the dialog names that process (polling: settling would wait for the blocked worker)."""
    dialog = await previewed(app, pilot)
    other = other_cycle()
    await pilot.press("c")
    await until(pilot, lambda: f"pid {other.pid}" in status(dialog))
    return dialog, other


async def test_confirm_waits_for_another_process_cycle_then_applies_the_preview(
    make_console, spark_engine, console_data: Path, other_cycle
) -> None:
    app = make_console(spark=spark_engine)
    async with app.run_test(size=TERMINAL) as pilot:
        dialog, other = await confirmed_while_another_cycle_runs(app, pilot, other_cycle)
        assert "Waiting for the prune lock: a cycle of another process" in status(dialog)
        assert dialog.phase == "applying"
        assert journaled_cycles(console_data) == []  # nothing planned or applied meanwhile
        other.release()
        await settle(pilot)
        assert dialog.phase == "done" and dialog.outcome is not None
        assert dialog.outcome.applied == dialog.preview.plan.segments
        assert "Waiting" not in status(dialog) and "the preview showed" not in status(dialog)
    (cycle,) = journaled_cycles(console_data)
    assert (cycle.trigger, cycle.status, cycle.applied) == ("manual", "done", dialog.preview.plan.segments)


async def test_esc_stops_waiting_for_the_lock_and_nothing_is_deleted(
    make_console, spark_engine, console_data: Path, other_cycle
) -> None:
    app = make_console(spark=spark_engine)
    async with app.run_test(size=TERMINAL) as pilot:
        dialog, other = await confirmed_while_another_cycle_runs(app, pilot, other_cycle)
        await pilot.press("escape")
        await until(pilot, lambda: dialog.phase == "cancelled")
        assert status(dialog) == "Cancelled: nothing was deleted."
        other.release()
        await settle(pilot)
    assert journaled_cycles(console_data) == []


async def test_a_cycle_of_another_process_waits_for_the_confirmed_one(
    make_console, spark_engine, console_data: Path, monkeypatch
) -> None:
    """The lock is held from the re-plan to the end of the apply: a process that tries
    for it meanwhile (here, while the re-plan runs) gets it only after the cycle."""
    app = make_console(spark=spark_engine)
    tried: list[subprocess.CompletedProcess[str]] = []
    host = app.host
    plan = host.plan

    def replan_while_another_process_tries(*args, **kwargs):
        if args and args[0] == ["orders"] and "now" in kwargs:  # the confirm's re-plan
            tried.append(
                subprocess.run(
                    [sys.executable, "-c", TRY_LOCK, str(console_data)], capture_output=True, text=True, timeout=60
                )
            )
        return plan(*args, **kwargs)

    monkeypatch.setattr(host, "plan", replan_while_another_process_tries)
    async with app.run_test(size=TERMINAL) as pilot:
        dialog = await previewed(app, pilot)
        await pilot.press("c")
        await settle(pilot)
        assert dialog.phase == "done" and dialog.outcome is not None
    (attempt,) = tried
    assert attempt.returncode == 3, attempt.stderr
    assert f"pid {os.getpid()}" in attempt.stdout


#: tries the prune lock of argv[1] for 0.2 s; exit 3 naming the holder if it is taken
TRY_LOCK = """
import sys
from pathlib import Path
from engine.prune.executor import hold_prune_lock
from engine.store.lock import LockTimeout
try:
    with hold_prune_lock(Path(sys.argv[1]), patience=0.2):
        sys.exit(0)
except LockTimeout as held:
    print(f"held by pid {held.holder}")
    sys.exit(3)
"""


def test_the_differences_say_what_each_plan_deletes_and_never_unchanged_for_a_moved_log_start() -> None:
    """A cycle that ran between preview and confirm moved the log start itself: the new
    plan deletes nothing there, which must not read "log start 1,268 → unchanged"."""

    def plan(*partitions: PartitionPreview) -> PlanPreview:
        return PlanPreview(now=0, partitions=partitions, groups=(), held_topics=(), rejected={})

    previewed = plan(PartitionPreview("payments", 0, 4, 4096, 1000, 1268), PartitionPreview("orders", 1, 1, 10, 5, 9))
    now = plan(PartitionPreview("orders", 1, 2, 20, 5, 12))
    assert previewed.differences(now) == [
        "orders/1: 1 → 2 segment(s) to delete, log start to 9 → to 12",
        "payments/0: 4 → 0 segment(s) to delete, log start to 1,268 → not moved",
    ]
    assert previewed.differences(previewed) == []


def test_a_later_plan_that_reaches_further_drops_nothing_of_the_preview() -> None:
    """What a confirm checks: the new plan still does all the preview did (appends since
    make it reach further), or it says which part it no longer does."""

    def plan(*partitions: PartitionPreview, groups: tuple[GroupEffect, ...] = ()) -> PlanPreview:
        return PlanPreview(now=0, partitions=partitions, groups=groups, held_topics=(), rejected={})

    def evict(to: int) -> GroupEffect:
        return GroupEffect("payments", "ledger", "subscriber", 0, 1000, to, False, 0, to - 1000, 0)

    previewed = plan(PartitionPreview("metrics", 0, 1, 4096, 3314, 3328), groups=(evict(1028),))
    further = plan(PartitionPreview("metrics", 0, 2, 8192, 3314, 3342), groups=(evict(1060),))
    assert previewed.differences(further) != [] and previewed.dropped(further) == []
    pruned_since = plan(PartitionPreview("metrics", 0, 1, 4096, 3328, 3342), groups=(evict(1060),))
    assert previewed.dropped(pruned_since) == ["metrics/0: 1 → 1 segment(s) to delete, log start to 3,328 → to 3,342"]
    held = plan()
    assert previewed.dropped(held) == [
        "metrics/0: 1 → 0 segment(s) to delete, log start to 3,328 → not moved",
        "group ledger on payments/0: to 1,028 → not moved",
    ]


async def test_the_preview_shows_every_topic_and_group_name_whole(make_console) -> None:
    """``demo-clickstream`` was cut to ``demo-clickstre`` in the table that says what is
    about to be deleted (walk2 finding 1): names take the width they need."""
    from textual.widgets.data_table import ColumnKey

    from console.modals.prune_now import Preview
    from console.model.plan_preview import GroupEffect
    from console.widgets.live_table import LiveTable

    topic, group = "demo-clickstream", "dashboard"  # the demo's longest names
    plan = PlanPreview(
        now=NOW,
        partitions=(PartitionPreview(topic, 1, 2, 8192, 1598, 1632, {"DELETE_TIME": 2}),),
        groups=(GroupEffect(topic, group, "reader", 1, 1590, 1632, False, 0, 0, 42),),
        held_topics=(),
        rejected={},
    )
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        app.open_prune_now(None)
        await settle(pilot)  # no Spark here: the dialog's own preview fails, this one replaces it
        dialog = app.screen
        assert isinstance(dialog, PruneNowScreen)
        dialog._show_preview(Preview(plan, paused=False, source=None))  # type: ignore[arg-type]
        await settle(pilot)
        for table_id, key, name in (
            ("#prune-deletions", "topic", topic),
            ("#prune-groups", "topic", topic),
            ("#prune-groups", "group", group),
        ):
            table = dialog.query_one(table_id, LiveTable)
            column = table.columns[ColumnKey(key)]
            assert column.get_render_width(table) - 2 * table.cell_padding >= len(name), (table_id, key)
            # and the table still fits the dialog: nothing scrolls out of sight at 120 columns
            assert table.virtual_size.width <= table.scrollable_content_region.width, table_id
