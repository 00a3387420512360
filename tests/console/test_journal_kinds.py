"""The Journal at 120x40, kind by kind (issue 14, item 2): whatever kind is picked,
the columns fit the table without scrolling sideways and the highlighted row's detail
line fits its two lines. Policy changes have columns of their own (what changed,
where, from what to what, by whom) instead of an action's empty messages, bytes and
status; a group's move or expiry names the group in the Reason column."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from textual.widgets import Static

from console.model.journal import POLICY_CHANGE, reason_text
from console.screens.journal import ACTION_COLUMNS, POLICY_COLUMNS, action_detail
from console.widgets.live_table import LiveTable
from engine.broker import Broker
from engine.journal.rows import Action
from engine.prune.operations import expire_group, move_group, pause, purge, resume, set_hold, truncate
from tests.support.console_fixtures import NOW, TERMINAL, settle


def _every_kind(root: Path) -> None:
    """Manual operations of every kind an operator runs from the console, and policy
    changes with long values."""
    with Broker(root, clock=lambda: NOW) as broker:
        set_hold(broker, "orders", True, actor="console")
        set_hold(broker, "orders", False, actor="console")
        pause(broker, actor="console")
        resume(broker, actor="console")
        move_group(broker, "orders", "billing", 0, to_offset=60, actor="console")
        expire_group(broker, "payments", "ledger", actor="console")
        truncate(broker, "orders", 0, before_offset=50, actor="console")
        purge(broker, "sessions", actor="console")
        broker.alter_topic("orders", {"retention_time": "20s", "backlog_policy": "consumer_backlog_eviction"})


def _cells(table: LiveTable) -> list[dict[str, str]]:
    keys = [c.key for c in table.live_columns]
    return [dict(zip(keys, (str(c) for c in row.cells), strict=True)) for row in table.shown_rows]


async def test_every_kind_fits_at_120_columns(make_console, console_data: Path) -> None:
    _every_kind(console_data)
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await pilot.press("4")
        await settle(pilot)
        screen = app.screen
        actions = screen.query_one("#actions", LiveTable)
        detail = screen.query_one("#journal-detail", Static)
        kinds = {row["action"] for row in _cells(actions)}
        assert {"hold", "release", "pause", "resume", "manual_move", "group_expired", "truncate", "purge"} <= kinds
        for kind in sorted(kinds) + [POLICY_CHANGE]:
            await app.show_journal_kind(kind)
            await settle(pilot)
            shown = _cells(actions)
            assert shown, kind
            assert actions.virtual_size.width <= actions.scrollable_content_region.width, kind
            lines = 2 * detail.content_region.width
            assert all(len(text) <= lines for text in screen._rows.details.values()), kind

        # policy changes: their own columns, every one filled in
        assert [c.key for c in actions.live_columns] == [c.key for c in POLICY_COLUMNS]
        assert actions.border_title == "Policy changes"
        changed = {(r["topic"], r["field"]): r for r in reversed(shown)}  # the newest of each
        assert changed["orders", "backlog_policy"] == {
            **changed["orders", "backlog_policy"],
            "old": "(default)",
            "new": "consumer_backlog_eviction",
            "actor": "cli",
        }
        assert (changed["orders", "retention_time"]["old"], changed["orders", "retention_time"]["new"]) == (
            "30m",
            "20s",
        )
        assert all(all(r.values()) for r in shown)

        # back to every kind: the action columns, a group's move naming the group
        await pilot.press("x")
        await settle(pilot)
        assert [c.key for c in actions.live_columns] == [c.key for c in ACTION_COLUMNS]
        assert actions.border_title == "Actions"
        reasons = {r["action"]: r["reason"] for r in _cells(actions)}
        assert (reasons["manual_move"], reasons["group_expired"]) == ("group billing", "group ledger")
        # a moved log start has no plan's code: where it went, and what moved it
        assert reasons["move_log_start"] == "cycle's cut to 50"


def test_a_moved_log_start_says_where_to_and_why() -> None:
    """The executor's (its cycle's cut) records no reason; a repair's records REPAIR,
    its why in the details (the detail line); a row of neither says where it went."""
    moved = Action(1, 7, NOW, NOW, "schedule", "engine", "move_log_start", "orders", 0, None, 1000, 12_500,
                   11_500, None, None, None, "applied")  # fmt: skip
    repaired = replace(moved, cycle=None, trigger="manual", reason="REPAIR", details={"why": "lost offsets in front"})
    assert reason_text(moved) == "cycle's cut to 12,500"
    assert reason_text(repaired) == "REPAIR to 12,500"
    assert reason_text(replace(moved, cycle=None)) == "moved to 12,500"
    assert "lost offsets in front" in action_detail(repaired)
