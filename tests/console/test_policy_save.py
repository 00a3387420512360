"""A save that was not previewed with the what-if still warns when the change deletes
data at the next cycle: the console plans the topic with the policy before and after
the save (at one instant) once it is saved, and toasts what goes that would have stayed."""

from __future__ import annotations

from pathlib import Path

from console import format
from console.modals.policy_editor import PolicyEditorScreen
from engine.broker import Broker
from engine.prune.planner import Plan
from engine.prune.pruner import Pruner
from tests.console.test_policy import ORDERS, open_editor, saved_state, type_into
from tests.support.console_fixtures import NOW, TERMINAL, settle


def deleted(plan: Plan) -> dict[tuple[int, int], int]:
    return {(r["partition"], r["base_offset"]): r["size_bytes"] for r in plan.deletions().to_pylist()}


async def save_without_preview(make_console, spark, field: str, text: str) -> dict[str, str]:
    """Edit ``field`` of orders, ``ctrl+s`` at once; every toast by title (recorded as
    sent: a toast may time out while the check plans on a loaded machine)."""
    app = make_console(spark=spark)
    toasts: dict[str, str] = {}
    notify = app.notify

    def recorded(message: str, **kwargs) -> None:
        toasts[kwargs.get("title", "")] = str(message)
        notify(message, **kwargs)

    app.notify = recorded
    async with app.run_test(size=TERMINAL) as pilot:
        await open_editor(pilot)
        await type_into(pilot, field, text)
        await pilot.press("ctrl+s")
        await settle(pilot)  # the check is the app's worker: settle waits for it too
        assert not isinstance(app.screen, PolicyEditorScreen)
    return toasts


async def test_a_save_that_deletes_now_warns_without_a_preview(make_console, console_data: Path, spark_engine) -> None:
    toasts = await save_without_preview(make_console, spark_engine, "max_time", "1h")
    assert saved_state(console_data)[0]["max_time"] == "1h"
    with Broker(console_data, clock=lambda: NOW) as broker:
        pruner = Pruner(broker, spark_engine)
        before = deleted(pruner.plan(topics=["orders"], overrides={"orders": ORDERS}))
        after = deleted(pruner.plan(topics=["orders"]))  # the saved policy
    extra = after.keys() - before.keys()
    assert extra  # max_time overrides billing's barrier on partition 0
    assert toasts["Policy saved"] == "orders: max_time (default) → 1h"
    assert toasts["orders: deletes data now"] == (
        f"this change deletes {len(extra)} more segment(s), {format.size(sum(after[k] for k in extra))}, "
        "at the next cycle"
    )


async def test_a_save_that_deletes_nothing_more_does_not_warn(make_console, console_data: Path, spark_engine) -> None:
    toasts = await save_without_preview(make_console, spark_engine, "retention_time", "2h")
    assert saved_state(console_data)[0]["retention_time"] == "2h"
    assert toasts["Policy saved"] == "orders: retention_time 30m → 2h"
    assert "orders: deletes data now" not in toasts and "orders: saved" not in toasts


async def test_without_spark_the_save_says_it_could_not_check(make_console, console_data: Path) -> None:
    toasts = await save_without_preview(make_console, None, "max_time", "1h")
    assert saved_state(console_data)[0]["max_time"] == "1h"
    assert (
        toasts["orders: saved"]
        == "what the change deletes now was not checked: the Spark engine is off in this console"
    )
    assert "orders: deletes data now" not in toasts
