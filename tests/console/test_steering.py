"""Steering from the console: prune now (preview, confirm, cancel, result), truncate
and purge behind a typed confirmation, group expiry and moves, and read-only mode
refusing every one of them. Every outcome is checked in the catalog and the journal
through a Broker of its own, after the app is gone.

The group keys are driven from the Groups view (``2``), with orders' subscriber
``billing`` under the cursor.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.widget import Widget
from textual.widgets import Button, Input, Select
from textual.widgets._select import SelectOverlay

from console import format
from console.commands import EbbCommands
from console.modals.ask import AskScreen
from console.modals.confirm import ConfirmScreen
from console.modals.group_ops import GroupExpireScreen, GroupMoveScreen
from console.modals.manual_ops import PurgeScreen, TruncateScreen
from console.modals.prune_now import Preview, PruneNowScreen
from console.model.topic_facts import load_topic_facts
from console.screens.groups import GroupsScreen
from console.widgets.live_table import LiveTable
from console.widgets.top_bar import TopBar
from engine.broker import Broker
from engine.errors import InvalidInput, PlanCancelled
from engine.journal.journal import Journal
from engine.journal.state import EngineState
from engine.prune import operations
from tests.support.console_fixtures import NOW, TERMINAL, raised_toasts, settle


async def focus_billing(pilot) -> None:
    """The Groups view with orders' group billing under the cursor."""
    await pilot.press("2")
    await settle(pilot)
    screen = pilot.app.screen
    table = screen.query_one("#groups", LiveTable)
    table.move_cursor(row=[r.key for r in table.shown_rows].index("orders/billing"))
    await pilot.pause()
    assert screen.focused_group() == ("orders", "billing")


def text(widget: Widget) -> str:
    return str(widget.render())


def catalog_state(root: Path) -> dict[str, Any]:
    """Everything an action could change: policies, offsets, segments, groups, the
    pause switch and the whole journal."""
    with Broker(root, clock=lambda: NOW) as broker:
        catalog = broker.catalog
        journal = Journal(catalog)
        return {
            "topics": {
                t.name: (
                    catalog.overrides(t.name),
                    [
                        (
                            p.partition,
                            p.log_start_offset,
                            p.next_offset,
                            [(s.base_offset, s.next_offset) for s in catalog.segments(t.name, p.partition)],
                        )
                        for p in catalog.partitions(t.name)
                    ],
                    [(g.name, g.kind, g.positions) for g in catalog.groups(t.name)],
                )
                for t in catalog.topics()
            },
            "paused": EngineState(catalog).is_paused(),
            "cycles": journal.cycles(limit=None),
            "actions": journal.actions(limit=None),
            "policy_changes": journal.policy_changes(limit=None),
        }


async def type_into(pilot, selector: str, value: str) -> None:
    field = pilot.app.screen.query_one(selector, Input)
    field.value = ""
    field.focus()
    await pilot.press(*value)
    await pilot.pause()


# -- the models: what the dialogs say agrees with what the engine does -------------------------


def test_cut_effect_agrees_with_the_engines_truncate(console_data: Path) -> None:
    with Broker(console_data, clock=lambda: NOW) as broker:
        facts = load_topic_facts(broker, "orders")
        effect = facts.partition(0).cut_effect(48)
        done = operations.truncate(broker, "orders", 0, before_offset=48, actor="test")
    assert (effect.log_start_offset, effect.cut, effect.messages) == (0, 48, 48)
    assert (effect.segments, effect.bytes) == (done.segments_deleted, done.bytes_freed) and effect.segments > 0
    # billing (a subscriber at 30) is below the cut; audit-reader (a reader at the end) is not
    assert [g.group for g in effect.groups_moved] == [g.group for g in done.groups_moved] == ["billing"]


def test_oldest_cut_agrees_with_the_engines_delete_oldest(console_data: Path) -> None:
    with Broker(console_data, clock=lambda: NOW) as broker:
        partition = load_topic_facts(broker, "clickstream").partition(1)
        cut = partition.oldest_cut("2")
        done = operations.delete_oldest(broker, "clickstream", 1, 2, actor="test")
        assert broker.catalog.partition("clickstream", 1).log_start_offset == cut
    assert partition.cut_effect(cut).segments == done.segments_deleted == 2


@pytest.mark.parametrize(
    ("check", "error"),
    [
        (
            lambda p: p.offset("121", "truncate"),
            "invalid offset 121: truncate to an offset from the log start 0 to the log end 120",
        ),
        (lambda p: p.offset("ten", "truncate"), "invalid offset 'ten': a whole number is needed"),
        (lambda p: p.oldest_cut("0"), "invalid segment count '0': delete at least 1"),
        (lambda p: p.oldest_cut("99"), "fewer than 99"),
    ],
)
def test_bad_values_get_one_clear_line(console_data: Path, check, error: str) -> None:
    with Broker(console_data, clock=lambda: NOW) as broker:
        partition = load_topic_facts(broker, "orders").partition(0)
    with pytest.raises(InvalidInput, match=error):
        check(partition)


# -- prune now ------------------------------------------------------------------------------------


async def test_prune_now_previews_the_plan_then_prunes_it(make_console, spark_engine, console_data: Path) -> None:
    app = make_console(spark=spark_engine)
    direct = app.host.plan(["orders"])  # the same clock, computed directly (off the app)
    expected: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for row in direct.deletions().to_pylist():
        expected.setdefault((row["topic"], row["partition"]), []).append((row["base_offset"], row["size_bytes"]))
    assert expected, "the fixed catalog has orders segments past their retention"
    deleted = sum(len(v) for v in expected.values())

    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        await pilot.press("down", "down", "down", "x")  # the fourth topic: orders
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, PruneNowScreen) and dialog.topics == ["orders"]
        assert dialog.phase == "preview"
        assert "Scope: orders" in text(dialog.query_one("#prune-scope"))
        shown = {
            (r.cells[0], int(r.cells[1])): (r.cells[2], r.cells[3])
            for r in dialog.query_one("#prune-deletions", LiveTable).shown_rows
        }
        assert shown == {k: (format.count(len(v)), format.size(sum(b for _, b in v))) for k, v in expected.items()}
        status = text(dialog.query_one("#prune-status"))
        assert f"would delete {deleted} segment(s)" in status and format.instant(NOW) in status
        # billing (at 30 on partition 0) holds back segments the time rule wants
        assert any(
            "group billing at 30" in str(r.cells[6]) for r in dialog.query_one("#prune-deletions", LiveTable).shown_rows
        )
        with Broker(console_data, clock=lambda: NOW) as broker:
            assert Journal(broker.catalog).cycles() == []  # a preview journals nothing

        await pilot.press("c")
        await settle(pilot)
        assert dialog.phase == "done" and dialog.outcome is not None
        result = dialog.outcome
        assert f"Cycle {result.cycle_id} (done): deleted {deleted} segment(s)" in text(
            dialog.query_one("#prune-status")
        )
        # the result replaces the preview: its tables said what would go
        assert not dialog.query_one("#prune-deletions-box").display
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, PruneNowScreen)

    with Broker(console_data, clock=lambda: NOW) as broker:
        journal = Journal(broker.catalog)
        (cycle,) = journal.cycles()
        assert (cycle.id, cycle.trigger, cycle.actor, cycle.status) == (
            result.cycle_id,
            "manual",
            "console",
            "done",
        )
        assert cycle.scope == ["orders"] and cycle.applied == deleted
        actions = journal.actions(cycle=cycle.id, action="delete_segment", status="applied", limit=None)
        assert {(a.topic, a.partition, a.segment) for a in actions} == {
            (t, p, base) for (t, p), segments in expected.items() for base, _ in segments
        }
        assert all(a.actor == "console" and a.trigger == "manual" for a in actions)
        for (topic, partition), segments in expected.items():
            left = {s.base_offset for s in broker.catalog.segments(topic, partition)}
            assert not left & {base for base, _ in segments}


def _hold_orders(console_data: Path) -> None:
    with Broker(console_data, clock=lambda: NOW) as broker:
        operations.set_hold(broker, "orders", True, actor="test")


async def _confirm_a_changed_preview(
    app, pilot, console_data: Path, change: Callable[[Path], None] = _hold_orders
) -> tuple[PruneNowScreen, Preview | None]:
    """Prune now on orders, previewed; ``change`` the store before the confirm (by
    default a hold, so the plan no longer deletes what the preview showed). Returns the
    dialog and its first preview."""
    await settle(pilot)
    app.open_prune_now(["orders"])
    await settle(pilot)
    dialog = app.screen
    assert isinstance(dialog, PruneNowScreen) and dialog.phase == "preview"
    first = dialog.preview
    change(console_data)
    await pilot.press("c")
    await settle(pilot)
    return dialog, first


async def test_prune_now_shows_what_changed_since_the_preview_and_asks_again(
    make_console, spark_engine, console_data: Path
) -> None:
    app = make_console(spark=spark_engine)
    async with app.run_test(size=TERMINAL) as pilot:
        dialog, first = await _confirm_a_changed_preview(app, pilot, console_data)
        assert first is not None and dialog.phase == "preview" and dialog.outcome is None
        assert text(dialog.query_one("#prune-status")).startswith(
            "Nothing was deleted: the store changed since the preview."
        )
        note = text(dialog.query_one("#prune-note"))
        assert "Changed since the preview:" in note and "orders/0:" in note
        with Broker(console_data, clock=lambda: NOW) as broker:
            assert Journal(broker.catalog).cycles() == []  # nothing applied, nothing journaled
        assert dialog.preview is not None and dialog.preview.plan.segments < first.plan.segments
        # The schedule waits for the answer: a cycle would change the store again.
        assert "scheduled cycles wait until you answer" in text(dialog.query_one("#prune-status"))
        assert app.host._cycle_gate.locked()
        await pilot.press("c")
        await settle(pilot)
        assert dialog.phase == "done" and dialog.outcome is not None
        assert dialog.outcome.applied == dialog.preview.plan.segments
        assert not app.host._cycle_gate.locked()


async def test_prune_now_applies_the_preview_when_the_store_only_grew_past_it(
    make_console, spark_engine, console_data: Path
) -> None:
    """billing reads on between the preview and the confirm, so the new plan deletes
    more of orders/0 (as appends make a size cap or an eviction reach further on a live
    topic; on the demo every confirm met a changed plan and never applied, walk3
    finding 1): the preview is applied, exactly, and the rest left to the next cycle."""

    def billing_reads_on(root: Path) -> None:
        with Broker(root, clock=lambda: NOW) as broker:
            broker.commit("orders", "billing", 0, 90, at_ms=NOW)

    app = make_console(spark=spark_engine)
    async with app.run_test(size=TERMINAL) as pilot:
        dialog, first = await _confirm_a_changed_preview(app, pilot, console_data, billing_reads_on)
        assert first is not None
        assert dialog.phase == "done" and dialog.outcome is not None
        assert dialog.outcome.applied == first.plan.segments
        assert "changed since the preview" not in text(dialog.query_one("#prune-status"))
        assert not app.host._cycle_gate.locked()
    previewed = {(p.topic, p.partition): p.new_log_start_offset for p in first.plan.partitions}
    with Broker(console_data, clock=lambda: NOW) as broker:
        (cycle,) = Journal(broker.catalog).cycles()
        assert (cycle.trigger, cycle.applied) == ("manual", first.plan.segments)
        for (topic, partition), log_start in previewed.items():
            assert broker.catalog.partition(topic, partition).log_start_offset == log_start


@pytest.mark.parametrize("leave", ["close the dialog", "quit the console"])
async def test_a_changed_prune_now_lets_the_schedule_go_when_left_unanswered(
    make_console, spark_engine, console_data: Path, leave: str
) -> None:
    app = make_console(spark=spark_engine)
    async with app.run_test(size=TERMINAL) as pilot:
        dialog, _ = await _confirm_a_changed_preview(app, pilot, console_data)
        assert dialog.phase == "preview" and app.host._cycle_gate.locked()
        if leave == "close the dialog":
            await pilot.press("escape")
            await settle(pilot)
            assert not isinstance(app.screen, PruneNowScreen)
            assert not app.host._cycle_gate.locked()
    assert not app.host._cycle_gate.locked()


async def test_prune_now_cancel_stops_a_running_plan(
    make_console, spark_engine, console_data: Path, monkeypatch
) -> None:
    """Escape while the plan's Spark job runs: Spark cancels it, the dialog says so,
    and nothing is journaled or deleted."""
    job_running = threading.Event()
    outcomes: list[str] = []
    run = spark_engine.run

    def watched_run(job, tag):
        def job_that_signals(spark):
            job_running.set()  # inside run(): the plan is registered under its tag
            return job(spark)

        try:
            result = run(job_that_signals, tag)
        except PlanCancelled:
            outcomes.append("cancelled")
            raise
        outcomes.append("finished")
        return result

    monkeypatch.setattr(spark_engine, "run", watched_run)
    before = catalog_state(console_data)
    app = make_console(spark=spark_engine)
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        app.open_prune_now(None)
        await pilot.pause()
        assert await asyncio.to_thread(job_running.wait, 300)
        dialog = app.screen
        assert isinstance(dialog, PruneNowScreen) and dialog.phase == "previewing"
        # progress: the bar, what runs on which Spark, and for how long
        assert dialog.query_one("#prune-progress").display
        status = text(dialog.query_one("#prune-status"))
        assert status.startswith(("Planning a dry run on Spark (local[2]", "Waiting for Spark (local[2]) to start"))
        assert status.endswith(" s")
        await pilot.press("escape")
        await settle(pilot)
        assert dialog.phase == "cancelled" and text(dialog.query_one("#prune-status")) == "Cancelled."
        assert outcomes == ["cancelled"]  # Spark's run ended with PlanCancelled, not a result
        assert dialog.query_one("#prune-confirm", Button).disabled
        await pilot.press("c")  # no preview: nothing to confirm
        await settle(pilot)
        assert dialog.phase == "cancelled"
        await pilot.press("escape")
        assert not isinstance(app.screen, PruneNowScreen)
    assert catalog_state(console_data) == before


async def test_prune_now_while_paused_deletes_nothing_and_says_so(
    make_console, spark_engine, console_data: Path
) -> None:
    with Broker(console_data, clock=lambda: NOW) as broker:
        operations.pause(broker, actor="test")
    before = catalog_state(console_data)["topics"]
    app = make_console(spark=spark_engine)
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        app.open_prune_now(["clickstream"])
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, PruneNowScreen) and dialog.phase == "preview"
        assert "Deletion is paused" in text(dialog.query_one("#prune-note"))
        await pilot.press("c")
        await settle(pilot)
        assert dialog.phase == "done"
        status = text(dialog.query_one("#prune-status"))
        assert "(paused): deletion is paused, nothing was deleted" in status
    assert catalog_state(console_data)["topics"] == before
    with Broker(console_data, clock=lambda: NOW) as broker:
        (cycle,) = Journal(broker.catalog).cycles()
        assert (cycle.status, cycle.actor, cycle.applied) == ("paused", "console", 0)


async def test_prune_now_without_spark_says_why(make_console, console_data: Path) -> None:
    before = catalog_state(console_data)
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        await pilot.press("x")
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, PruneNowScreen) and dialog.phase == "failed"
        assert text(dialog.query_one("#prune-status")) == "the Spark engine is off in this console"
        assert dialog.query_one("#prune-confirm", Button).disabled
    assert catalog_state(console_data) == before


# -- truncate and purge -----------------------------------------------------------------------------


async def test_truncate_is_refused_until_the_topic_is_typed_exactly(make_console, console_data: Path) -> None:
    before = catalog_state(console_data)
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        await pilot.press("down", "down", "down", "T")  # orders
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, TruncateScreen) and dialog.topic == "orders"
        go = dialog.query_one("#target-go", Button)

        await type_into(pilot, "#target-value", "121")
        assert go.disabled and "invalid offset 121" in text(dialog.query_one("#target-echo"))
        await pilot.press("enter")  # an invalid value goes nowhere
        assert app.screen is dialog

        await type_into(pilot, "#target-value", "48")
        assert not go.disabled
        assert "log start 0 → 48 (48 message(s)); 3 whole segment(s) deleted" in text(dialog.query_one("#target-echo"))
        await pilot.press("enter")
        await settle(pilot)
        confirm = app.screen
        assert isinstance(confirm, ConfirmScreen) and confirm.word == "orders"
        await type_into(pilot, "#confirm-word", "Orders")
        assert confirm.query_one("#confirm", Button).disabled
        await pilot.press("enter")
        await settle(pilot)
        assert app.screen is confirm and "type orders exactly" in text(confirm.query_one("#confirm-error"))
        assert catalog_state(console_data) == before  # nothing written yet

        await type_into(pilot, "#confirm-word", "orders")
        await pilot.press("enter")
        await settle(pilot)
        assert not isinstance(app.screen, (ConfirmScreen, TruncateScreen))

    with Broker(console_data, clock=lambda: NOW) as broker:
        assert broker.catalog.partition("orders", 0).log_start_offset == 48
        assert broker.catalog.group("orders", "billing").positions[0][0] == 48
        (request,) = Journal(broker.catalog).actions(action="truncate")
        assert (request.topic, request.partition, request.actor, request.trigger) == (
            "orders",
            0,
            "console",
            "manual",
        )
        assert (request.start_offset, request.end_offset, request.details["before_offset"]) == (0, 48, 48)
        assert request.cycle is not None


async def test_truncate_by_time_and_by_oldest_segments(make_console, console_data: Path) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        app.push_screen(TruncateScreen("clickstream"))
        await settle(pilot)
        dialog = app.screen
        await pilot.click("#mode-time")
        await type_into(pilot, "#target-value", "yesterday")
        assert "invalid time 'yesterday'" in text(dialog.query_one("#target-echo"))
        await type_into(pilot, "#target-value", "2026-11-21T10:30:00Z")
        assert "before 2026-11-21 10:30:00 UTC" in text(dialog.query_one("#target-echo"))
        await pilot.press("enter")
        await type_into(pilot, "#confirm-word", "clickstream")
        await pilot.press("enter")
        await settle(pilot)

        app.push_screen(TruncateScreen("clickstream"))
        await settle(pilot)
        dialog = app.screen
        dialog.query_one("#target-partition").value = 1
        await pilot.click("#mode-oldest")
        await type_into(pilot, "#target-value", "99")
        assert "has 7 sealed segment(s), fewer than 99" in text(dialog.query_one("#target-echo"))
        await type_into(pilot, "#target-value", "2")
        await pilot.press("enter")
        await type_into(pilot, "#confirm-word", "clickstream")
        await pilot.press("enter")
        await settle(pilot)

    with Broker(console_data, clock=lambda: NOW) as broker:
        # records every minute from NOW - 2h: the one at 10:30 is offset 30
        assert broker.catalog.partition("clickstream", 0).log_start_offset == 30
        assert broker.catalog.partition("clickstream", 1).log_start_offset == 32  # two segments of 16
        journal = Journal(broker.catalog)
        by_time, by_count = sorted(journal.actions(action="truncate"), key=lambda a: a.id)
        assert by_time.details["before_time"] == NOW - 90 * 60_000 and by_time.actor == "console"
        assert by_count.details == {**by_count.details, "oldest_segments": 2, "operation": "delete_oldest"}


async def test_purge_is_refused_until_the_topic_is_typed_exactly(make_console, console_data: Path) -> None:
    before = catalog_state(console_data)
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        await pilot.press("D")  # the first topic: clickstream
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, PurgeScreen) and dialog.topic == "clickstream"
        assert "2 partition(s)" in text(dialog.query_one("#confirm-body"))
        await type_into(pilot, "#confirm-word", "clickstrea")
        await pilot.press("enter")
        await settle(pilot)
        assert app.screen is dialog and catalog_state(console_data) == before
        await type_into(pilot, "#confirm-word", "clickstream")
        await pilot.press("enter")
        await settle(pilot)
        assert app.screen is not dialog

    with Broker(console_data, clock=lambda: NOW) as broker:
        for p in broker.catalog.partitions("clickstream"):
            assert p.log_start_offset == p.next_offset == 120
            assert [s.size_bytes for s in broker.catalog.segments("clickstream", p.partition)] == [0]
        (request,) = Journal(broker.catalog).actions(action="purge")
        assert (request.topic, request.actor, request.messages) == ("clickstream", "console", 240)


async def test_a_held_topic_refuses_truncate_and_purge(make_console, console_data: Path) -> None:
    before = catalog_state(console_data)
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        await pilot.press("down", "T")  # legal, on hold
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, TruncateScreen)
        assert text(dialog.query_one("#target-echo")).startswith("topic legal is on hold: release it first")
        assert dialog.query_one("#target-value", Input).disabled and dialog.query_one("#target-go", Button).disabled
        await pilot.press("escape", "D")
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, PurgeScreen)
        assert dialog.refusal is not None and "on hold" in text(dialog.query_one("#confirm-error"))
        assert dialog.query_one("#confirm-word", Input).disabled
        await pilot.press("escape")
        # the engine's own refusal, had the hold come after the dialog opened: one line
        app.perform(
            "Truncate legal/0", lambda b: operations.truncate(b, "legal", 0, before_offset=10, actor="console"), str
        )
        await settle(pilot)
        (note,) = [n for n in raised_toasts(app) if n.title == "Truncate legal/0"]
        assert (
            note.severity == "error"
            and note.message == "topic legal is on hold: release it first (`ebb release legal`)"
        )
    assert catalog_state(console_data) == before


# -- groups ------------------------------------------------------------------------------------------


async def moving_billing(pilot) -> Any:
    """The move dialog of billing (on orders), loaded."""
    await settle(pilot)
    await focus_billing(pilot)
    await pilot.press("m")
    await settle(pilot)
    return pilot.app.screen


async def test_the_partition_list_offers_only_partitions(make_console) -> None:
    """Loaded, the move dialog's partition list still offered its ``loading…`` prompt as
    an entry (walk3 finding 7): only the topic's partitions remain, the first chosen."""
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        select = (await moving_billing(pilot)).query_one("#target-partition", Select)
        assert not select.disabled and select.value == 0
        offered = select.query_one(SelectOverlay)
        labels = [str(offered.get_option_at_index(i).prompt) for i in range(offered.option_count)]
        assert [label.split(" ")[0] for label in labels] == ["0", "1"]


async def test_group_move_and_expire(make_console, console_data: Path) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        dialog = await moving_billing(pilot)
        assert isinstance(dialog, GroupMoveScreen)
        await type_into(pilot, "#target-value", "130")
        assert "invalid offset 130: move the group to an offset from the log start 0" in text(
            dialog.query_one("#target-echo")
        )
        await type_into(pilot, "#target-value", "60")
        assert text(dialog.query_one("#target-echo")) == (
            "Moves billing on orders/0 from 30 to 60: forward 30 message(s), which it will not read"
        )
        await pilot.press("enter")
        await settle(pilot)
        ask = app.screen  # a move forward skips messages: one key confirms it
        assert isinstance(ask, AskScreen) and ask.heading == "Move group billing?"
        assert "forward 30 message(s)" in ask.body
        await pilot.press("y")
        await settle(pilot)
        assert isinstance(app.screen, GroupsScreen)

        await pilot.press("m")
        await settle(pilot)
        dialog = app.screen
        dialog.query_one("#target-partition").value = 1
        await pilot.click("#mode-earliest")
        await pilot.pause()
        assert not dialog.query_one("#target-value-row").display  # earliest takes no value
        assert "from 90 to 0: back 90 message(s)" in text(dialog.query_one("#target-echo"))
        await pilot.click("#target-go")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)

        await pilot.press("E")
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, GroupExpireScreen) and dialog.word == "billing"
        assert "positions: 0: 60, 1: 0" in text(dialog.query_one("#confirm-body"))
        await type_into(pilot, "#confirm-word", "billin")
        assert dialog.query_one("#confirm", Button).disabled
        await type_into(pilot, "#confirm-word", "billing")
        await pilot.press("enter")
        await settle(pilot)

    with Broker(console_data, clock=lambda: NOW) as broker:
        assert [g.name for g in broker.catalog.groups("orders")] == ["audit-reader"]
        journal = Journal(broker.catalog)
        moves = sorted(journal.actions(action="manual_move"), key=lambda a: a.id)
        assert [(a.partition, a.start_offset, a.end_offset, a.messages, a.actor) for a in moves] == [
            (0, 30, 60, 30, "console"),
            (1, 90, 0, -90, "console"),
        ]
        (expired,) = journal.actions(action="group_expired")
        assert expired.details["group"] == "billing" and expired.details["positions"] == {"0": 60, "1": 0}
        assert expired.actor == "console" and expired.cycle is None


# -- read-only ----------------------------------------------------------------------------------------


async def test_read_only_refuses_every_mutating_action(make_console, console_data: Path) -> None:
    before = catalog_state(console_data)
    app = make_console(read_only=True)
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        # the topic keys on the Overview (orders selected) and on the Topic view, and pause
        await pilot.press("down", "down", "down", *"exhTDz")
        await settle(pilot)
        assert app.screen_stack[-1].__class__.__name__ == "OverviewScreen"
        await pilot.press("enter")
        await settle(pilot)
        assert app.screen.__class__.__name__ == "TopicScreen"
        await pilot.press(*"exhTD")
        await settle(pilot)
        assert app.screen.__class__.__name__ == "TopicScreen"
        # the group keys, on the Topic view (a group of orders is under the cursor) and the Groups view
        assert app.screen.focused_group() is not None
        await pilot.press("E", "m", "escape")
        await settle(pilot)
        await focus_billing(pilot)
        await pilot.press("E", "m")
        await settle(pilot)
        assert isinstance(app.screen, GroupsScreen)
        # the palette offers neither prune, pause nor resume...
        provider = EbbCommands(app.screen)
        offered = [hit.text async for hit in provider.discover()]
        assert "refresh" in offered and not {"prune", "pause", "resume"} & set(offered)
        # ...and what they would call refuses
        app.open_prune_now(None)
        app.set_deletion_paused(True)
        app.set_deletion_paused(False)
        await settle(pilot)
        assert isinstance(app.screen, GroupsScreen)
        # a dialog opened all the same cannot act: the operation is refused
        app.push_screen(PurgeScreen("orders"))
        await settle(pilot)
        await type_into(pilot, "#confirm-word", "orders")
        await pilot.press("enter")
        await settle(pilot)
        refusals = [n.message for n in raised_toasts(app) if n.title == "Read-only"]
        assert refusals and all("refused: the console is read-only" in m for m in refusals)
    assert catalog_state(console_data) == before


# -- snapshots ----------------------------------------------------------------------------------------


def test_prune_now_preview_snapshot(snap_compare, make_console, spark_engine) -> None:
    async def preview_all(pilot) -> None:
        await settle(pilot)
        pilot.app.open_prune_now(None)
        await settle(pilot)

    assert snap_compare(make_console(spark=spark_engine), terminal_size=TERMINAL, run_before=preview_all)


def test_truncate_confirmation_snapshot(snap_compare, make_console) -> None:
    async def confirm_truncate(pilot) -> None:
        await settle(pilot)
        await pilot.press("down", "down", "down", "T")
        await settle(pilot)
        await type_into(pilot, "#target-value", "48")
        await pilot.press("enter")
        await settle(pilot)
        await type_into(pilot, "#confirm-word", "ord")
        await pilot.press("enter")
        await settle(pilot)

    assert snap_compare(make_console(), terminal_size=TERMINAL, run_before=confirm_truncate)


def test_group_move_snapshot(snap_compare, make_console) -> None:
    async def move_billing(pilot) -> None:
        await settle(pilot)
        await focus_billing(pilot)
        await pilot.press("m")
        await settle(pilot)
        await type_into(pilot, "#target-value", "60")
        await settle(pilot)

    assert snap_compare(make_console(), terminal_size=TERMINAL, run_before=move_billing)


# -- one-key confirmations --------------------------------------------------------------------------


async def test_pause_release_and_moves_wait_for_y_and_the_header_follows(make_console, console_data: Path) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        await pilot.press("z")
        await settle(pilot)
        assert isinstance(app.screen, AskScreen) and app.screen.heading == "Pause all deletion?"
        await pilot.press("n")  # no: nothing changes
        await settle(pilot)
        assert not app.deletion_paused
        await pilot.press("z")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        assert app.deletion_paused
        assert "DELETION PAUSED" in app.screen.query_one(TopBar).render().plain  # at once, no view switch
        await pilot.press("4")  # and on every other view
        await settle(pilot)
        assert "DELETION PAUSED" in app.screen.query_one(TopBar).render().plain
        await pilot.press("z")
        await settle(pilot)
        assert app.screen.heading == "Resume deletion?"
        await pilot.press("y")
        await settle(pilot)
        assert "DELETION PAUSED" not in app.screen.query_one(TopBar).render().plain

        await pilot.press("1")
        await settle(pilot)
        await pilot.press("down", "h")  # legal is held: releasing asks first
        await settle(pilot)
        assert isinstance(app.screen, AskScreen) and app.screen.heading == "Release legal?"
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("up", "h")  # clickstream is not: holding only keeps data, at once
        await settle(pilot)
        assert not isinstance(app.screen, AskScreen)
    with Broker(console_data, clock=lambda: NOW) as broker:
        assert broker.policy("legal")["hold"] and broker.policy("clickstream")["hold"]
        assert not EngineState(broker.catalog).is_paused()
