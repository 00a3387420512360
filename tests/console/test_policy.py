"""The policy editor (SPEC §8): the form's logic, the what-if comparison, the editor's
flows in a Pilot (refusals, saving, a concurrent change, the what-if on Spark,
read-only mode) and snapshots."""

from __future__ import annotations

import dataclasses
import io
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from rich.console import Console
from textual.widgets import Input, Static

from console import format
from console.modals import policy_editor
from console.modals.policy_editor import FieldRow, PolicyEditorScreen, plan_what_if
from console.modals.what_if_pane import WhatIfPane
from console.model.policy_form import (
    PolicyChangedMeanwhile,
    PolicyForm,
    load_saved_policy,
    normal_form,
    save_policy,
)
from console.model.what_if import compare
from console.widgets.live_table import LiveTable
from engine.broker import Broker
from engine.errors import InvalidInput, InvalidPolicy
from engine.journal.journal import Journal
from engine.policy.fields import FIELDS
from engine.prune.planner import Plan
from engine.prune.pruner import Pruner
from engine.prune.tables import PLAN_TABLES
from tests.support.console_fixtures import NOW, TERMINAL, raised_toasts, settle

ORDERS = {"retention_time": "30m", "consumption": "protect", "segment_size": "2 KiB"}


def opened(console_data: Path, topic: str = "orders") -> PolicyForm:
    with Broker(console_data, clock=lambda: NOW) as broker:
        return PolicyForm.opened(load_saved_policy(broker, topic))


def alter_refusal(console_data: Path, changes: dict[str, str | None]) -> str:
    """What `ebb topic alter` (Broker.alter_topic) says to ``changes`` on orders."""
    with Broker(console_data, clock=lambda: NOW) as broker, pytest.raises(InvalidPolicy) as refused:
        broker.alter_topic("orders", changes)
    return str(refused.value)


def saved_state(console_data: Path, topic: str = "orders") -> tuple[dict[str, str], list[dict]]:
    with Broker(console_data, clock=lambda: NOW) as broker:
        return broker.catalog.overrides(topic), Journal(broker.catalog).policy_changes(topic=topic, limit=None)


# -- the form ----------------------------------------------------------------------------------


def test_the_form_opens_with_every_field_its_text_meaning_and_source(console_data: Path) -> None:
    form = opened(console_data)
    echoes = {e.name: e for e in form.echoes()}
    assert list(echoes) == list(FIELDS)
    assert (echoes["retention_time"].text, echoes["retention_time"].normalized, echoes["retention_time"].source) == (
        "30m",
        "30m = 1800 s",
        "topic",
    )
    assert (echoes["segment_size"].normalized, echoes["segment_size"].source) == ("2 KiB = 2048 B", "topic")
    assert (echoes["max_time"].text, echoes["max_time"].normalized, echoes["max_time"].source) == (
        "infinite",
        "infinite",
        "default",
    )
    assert echoes["backlog_policy"].text == "producer_request_hold"
    assert form.valid and form.changes() == {} and form.merged() == ORDERS


@pytest.mark.parametrize(
    ("field", "text", "normalized"),
    [
        ("retention_time", "1h", "1h = 3600 s"),
        ("retention_time", "72h3m0.5s", "3d 3m 500ms = 259380.5 s"),
        ("segment_size", "10M", "10 MiB = 10485760 B"),
        ("max_time", "-1", "infinite"),
        ("retention_time", "0", "0 s"),  # no "0s = 0 s": one form is enough
        ("consumption", "PROTECT", "protect"),
        ("hold", "on", "on"),
        ("max_deletes_per_cycle", "3", "3"),
    ],
)
def test_a_valid_text_is_echoed_in_normal_form(field: str, text: str, normalized: str) -> None:
    assert normal_form(field, text) == normalized


@pytest.mark.parametrize(
    ("field", "text"),
    [
        ("retention_time", "3 fortnights"),
        ("retention_time", ""),
        ("retention_time", "-5s"),
        ("segment_size", "10 XB"),
        ("consumption", "sometimes"),
        ("hold", "maybe"),
        ("max_deletes_per_cycle", "-3"),
    ],
)
def test_an_invalid_text_is_refused_as_topic_alter_refuses_it(console_data: Path, field: str, text: str) -> None:
    form = opened(console_data).typed(field, text)
    echo = form.echo(field)
    assert echo.normalized is None and echo.source == "changed"
    assert echo.error == alter_refusal(console_data, {field: text})
    assert not form.valid and form.problem() == echo.error
    assert form.combination_error() is None  # the field's own error comes first


@pytest.mark.parametrize(
    ("changes", "rule"),
    [
        ({"max_time": "10m"}, "retention_time (30m) must be <= max_time (10m)"),
        ({"max_partition_size": "1 KiB"}, "max_partition_size (1 KiB) must be >= segment_size (2 KiB)"),
        ({"retention_time": "0", "retention_size": "1 KiB"}, "a lone 0 is invalid"),
        ({"segment_size": "0"}, "segment_size must be > 0"),
    ],
)
def test_a_broken_combination_is_refused_as_topic_alter_refuses_it(
    console_data: Path, changes: dict[str, str], rule: str
) -> None:
    form = opened(console_data)
    for field, text in changes.items():
        form = form.typed(field, text)
    assert all(e.error is None for e in form.echoes())  # every field is fine on its own
    assert rule in (form.combination_error() or "")
    assert form.combination_error() == alter_refusal(console_data, changes)
    assert not form.valid and form.problem() == form.combination_error()


def test_reset_removes_an_override_and_leaves_a_default_alone(console_data: Path) -> None:
    form = opened(console_data)
    reset = form.reset("retention_time")
    assert reset.text("retention_time") == "7d"
    assert reset.source("retention_time") == "reset"
    assert reset.changes() == {"retention_time": None}
    assert "retention_time" not in reset.merged()
    # the input then reports the default text it shows: still a reset, not an override
    assert reset.typed("retention_time", "7d").changes() == {"retention_time": None}
    # a field at its default: reset changes nothing
    assert form.reset("max_time").changes() == {}


def test_typing_back_the_saved_or_the_default_text_is_no_change(console_data: Path) -> None:
    form = opened(console_data)
    assert form.typed("retention_time", "1h").typed("retention_time", "30m").changes() == {}
    assert form.typed("max_time", "2h").typed("max_time", "infinite").changes() == {}
    assert form.typed("max_time", "2h").typed("max_time", "infinite").source("max_time") == "default"


def test_the_change_set_is_what_topic_alter_takes_in_field_order(console_data: Path) -> None:
    form = (
        opened(console_data)
        .typed("hold", "on")
        .typed("retention_time", "1h")
        .reset("consumption")
        .typed("max_time", "2h")
    )
    assert list(form.changes().items()) == [
        ("retention_time", "1h"),
        ("max_time", "2h"),
        ("consumption", None),
        ("hold", "on"),
    ]
    assert form.merged() == {"segment_size": "2 KiB", "retention_time": "1h", "max_time": "2h", "hold": "on"}
    assert {e.name: e.source for e in form.echoes() if e.source != "default"} == {
        "segment_size": "topic",
        "retention_time": "changed",
        "max_time": "changed",
        "consumption": "reset",
        "hold": "changed",
    }


def test_saving_journals_each_changed_field_as_console(console_data: Path) -> None:
    form = opened(console_data).typed("retention_time", "1h").reset("consumption")
    with Broker(console_data, clock=lambda: NOW) as broker:
        changes = save_policy(broker, form)
    assert changes == [("consumption", "protect", None), ("retention_time", "30m", "1h")]
    overrides, journal = saved_state(console_data)
    assert overrides == {"segment_size": "2 KiB", "retention_time": "1h"}
    newest = {(c["field"], c["old"], c["new"], c["actor"]) for c in journal[:2]}
    assert newest == {("consumption", "protect", None, "console"), ("retention_time", "30m", "1h", "console")}


def test_saving_refuses_when_the_policy_changed_since_it_was_read(console_data: Path) -> None:
    form = opened(console_data).typed("retention_time", "1h")
    with Broker(console_data, clock=lambda: NOW) as other:
        other.alter_topic("orders", {"segment_size": "4 KiB"}, actor="cli")
    before = saved_state(console_data)
    with Broker(console_data, clock=lambda: NOW) as broker, pytest.raises(PolicyChangedMeanwhile) as refused:
        save_policy(broker, form)
    assert "changed by cli at 2026-11-21 12:00:00 UTC since you opened the editor" in str(refused.value)
    assert saved_state(console_data) == before
    # rebased on the newer policy, the same edit saves on top of it
    with Broker(console_data, clock=lambda: NOW) as broker:
        newer = form.rebased(load_saved_policy(broker, "orders"))
        assert newer.changes() == {"retention_time": "1h"}
        save_policy(broker, newer)
    assert saved_state(console_data)[0] == {**ORDERS, "segment_size": "4 KiB", "retention_time": "1h"}


# -- the what-if comparison ----------------------------------------------------------------------


def plan_of(segments: list[tuple], partitions: list[tuple], groups: list[tuple]) -> Plan:
    """A plan of topic t from rows in PLAN_TABLES column order (topic omitted)."""

    def table(name: str, rows: list[tuple]) -> pa.Table:
        schema = PLAN_TABLES[name]
        return pa.Table.from_pylist([dict(zip(schema.names, ("t", *row))) for row in rows], schema=schema)

    return Plan(
        NOW,
        {
            "segments": table("segments", segments),
            "partitions": table("partitions", partitions),
            "groups": table("groups", groups),
            "topics": table("topics", []),
        },
        {},
    )


def segments_deciding(*decisions: str) -> list[tuple]:
    """Partition 0: segments of 10 offsets and 100 B, the last one active."""
    return [(0, 10 * i, 10 * i + 10, 100, i < len(decisions) - 1, d, "R", None, None) for i, d in enumerate(decisions)]


def test_what_if_counts_what_goes_only_with_the_proposed_policy_and_who_skips() -> None:
    saved = plan_of(
        segments_deciding("delete", "keep", "keep", "keep"),
        [(0, 0, 10, 40, False, 10, 1, 100)],
        [("sub", "subscriber", 0, 10, 10, False, 0, 0, 0, False), ("old", "reader", 0, 5, 10, False, 0, 0, 5, False)],
    )
    proposed = plan_of(
        segments_deciding("delete", "delete", "delete", "keep"),
        [(0, 0, 30, 40, False, None, 3, 300)],
        [("sub", "subscriber", 0, 10, 30, False, 0, 0, 20, False), ("old", "reader", 0, 5, 30, False, 0, 0, 25, False)],
    )
    what_if = compare("t", saved, proposed)
    assert (what_if.segments, what_if.bytes, what_if.spared_segments) == (2, 200, 0)
    (p0,) = what_if.partitions
    assert (p0.log_start, p0.saved_log_start, p0.new_log_start) == (0, 10, 30)
    skips = {g.group: (g.position, g.new_position, g.skipped, g.saved_skipped, g.why, g.worse) for g in what_if.groups}
    assert skips == {"sub": (10, 30, 20, 0, "log start", True), "old": (5, 30, 25, 5, "log start", True)}
    # the other way round: the saved policy deletes one segment the proposed keeps
    back = compare("t", proposed, saved)
    assert (back.segments, back.spared_segments, back.spared_bytes) == (0, 2, 200)
    assert {g.group: g.worse for g in back.groups} == {"old": False}


def test_what_if_names_expired_groups_and_ignores_other_topics() -> None:
    saved = plan_of(
        segments_deciding("keep", "keep"),
        [(0, 0, 0, 20, False, None, 0, 0)],
        [("idle", "subscriber", 0, 3, 3, False, 0, 0, 0, False)],
    )
    proposed = plan_of(
        segments_deciding("keep", "keep"),
        [(0, 0, 0, 20, False, None, 0, 0)],
        [("idle", "subscriber", 0, 3, 3, True, 0, 0, 0, False)],
    )
    (idle,) = compare("t", saved, proposed).groups
    assert (idle.expired, idle.new_position, idle.why, idle.worse) == (True, None, "expired", True)
    assert compare("other", saved, proposed) == compare("other", saved, saved)
    assert compare("other", saved, proposed).partitions == ()


class CycleBetweenPlans:
    """A host whose first saved plan reads log start 0 and every later plan 10: a
    cycle of another process ran between the what-if's first two plans."""

    def __init__(self) -> None:
        self.planned: list[bool] = []

    def clock(self) -> int:
        return NOW

    def plan(self, topics, *, now, overrides=None, tag=None) -> Plan:
        edited = overrides is not None
        start = 0 if not self.planned else 10
        self.planned.append(edited)
        keep = 5 if edited else 0
        return plan_of(
            segments_deciding("keep", "keep"),
            [(0, start, start + keep, 20, False, None, 0, 0)],
            [],
        )


def test_the_what_if_plans_again_when_a_cycle_ran_between_its_two_plans() -> None:
    """Walk3 finding 3: the saved plan read the store before a cycle, the edited one
    after it, and the pane said the saved policy moved the log start from 836 to 772."""
    host = CycleBetweenPlans()
    what_if = plan_what_if(host, "t", {"retention_time": "30s"}, tag="x")  # type: ignore[arg-type]
    assert host.planned == [False, True, False, True]
    (p0,) = what_if.partitions
    assert (p0.log_start, p0.saved_log_start, p0.new_log_start) == (10, 10, 15)


# -- the editor in a Pilot ------------------------------------------------------------------------


async def open_editor(pilot) -> PolicyEditorScreen:
    """Overview, select orders (the 4th topic), ``e``."""
    await settle(pilot)
    await pilot.press("down", "down", "down", "e")
    await settle(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, PolicyEditorScreen) and screen.topic == "orders"
    return screen


async def test_the_view_under_the_editor_keeps_refreshing(make_console, console_data: Path) -> None:
    """Walk finding: the view behind a dialog kept what it showed when the dialog
    opened, in sight beside it: a retention changed meanwhile by the CLI was not
    followed until the dialog closed."""
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await open_editor(pilot)
        under = app.screen_stack[-2]
        with Broker(console_data, clock=lambda: NOW) as broker:
            broker.alter_topic("orders", {"retention_time": "45m"}, actor="cli")
        app.refresh_view()
        await settle(pilot)
        assert isinstance(app.screen, PolicyEditorScreen)
        rows = [[str(cell) for cell in row.cells] for row in under.query_one("#topics", LiveTable).shown_rows]
        orders = " | ".join(next(row for row in rows if row[0] == "orders"))
        assert "45m · cap" in orders and "30m" not in orders, orders


async def type_into(pilot, field: str, text: str) -> None:
    """Focus the field, clear it and type ``text`` key by key."""
    pilot.app.screen.query_one(f"#field-{field}", Input).focus()
    await pilot.press("end", "ctrl+u", *("space" if c == " " else c for c in text))
    await pilot.pause()


def status_of(screen: PolicyEditorScreen) -> str:
    return str(screen.query_one("#status", Static).render())


def shown_text(widget: Static, width: int = 110) -> str:
    """What ``widget`` shows (its Rich content), as plain text."""
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(widget.content)
    return console.export_text()


async def test_an_invalid_policy_is_refused_and_nothing_is_saved(make_console, console_data: Path) -> None:
    before = saved_state(console_data)
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        screen = await open_editor(pilot)
        await type_into(pilot, "retention_time", "3 fortnights")
        row = screen.query_one("#row-retention_time", FieldRow)
        assert "unknown unit 'fortnights'" in str(row.query_one(".echo", Static).render())
        assert row.query_one(".echo", Static).has_class("-invalid")
        assert "invalid value for retention_time" in status_of(screen)
        await pilot.press("ctrl+s")  # never silent: it says why it saves nothing
        await settle(pilot)
        assert isinstance(app.screen, PolicyEditorScreen)
        assert status_of(screen).startswith("✗ not saved: invalid value for retention_time")
        assert [n.severity for n in raised_toasts(app) if str(n.message).startswith("not saved")] == ["error"]
        # a valid field, a broken combination: refused the same way, at the bottom
        await type_into(pilot, "retention_time", "30m")
        await type_into(pilot, "max_time", "10m")
        assert "retention_time (30m) must be <= max_time (10m)" in status_of(screen)
        assert screen.query_one("#status", Static).has_class("-error")
        screen.action_save()  # even asked directly
        await settle(pilot)
        assert isinstance(app.screen, PolicyEditorScreen)
        assert any("not saved" in str(n.message) for n in raised_toasts(app))
    assert saved_state(console_data) == before


async def test_a_valid_edit_is_saved_and_journaled_as_console(make_console, console_data: Path) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        screen = await open_editor(pilot)
        assert screen.focused is screen.query_one("#field-segment_size", Input)
        await pilot.press("enter")  # enter goes to the next field
        assert screen.focused is screen.query_one("#field-segment_roll", Input)
        await type_into(pilot, "retention_time", "1h")
        row = screen.query_one("#row-retention_time", FieldRow)
        assert str(row.query_one(".echo", Static).render()) == "1h = 3600 s"
        assert str(row.query_one(".source", Static).render()) == "changed"
        screen.query_one("#field-consumption", Input).focus()
        await pilot.press("ctrl+r")  # reset the focused field: the override goes
        await pilot.pause()
        assert screen.query_one("#field-consumption", Input).value == "ignore"
        assert str(screen.query_one("#row-consumption", FieldRow).query_one(".source", Static).render()) == "reset"
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert not isinstance(app.screen, PolicyEditorScreen)
        assert any("retention_time 30m → 1h" in str(n.message) for n in raised_toasts(app))
    overrides, journal = saved_state(console_data)
    assert overrides == {"segment_size": "2 KiB", "retention_time": "1h"}
    assert {(c["field"], c["old"], c["new"], c["actor"]) for c in journal[:2]} == {
        ("retention_time", "30m", "1h", "console"),
        ("consumption", "protect", None, "console"),
    }


async def test_a_concurrent_change_makes_the_save_refuse_and_reload_keeps_the_edits(
    make_console, console_data: Path
) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        screen = await open_editor(pilot)
        with Broker(console_data, clock=lambda: NOW) as other:
            other.alter_topic("orders", {"segment_size": "4 KiB"}, actor="cli")
        await type_into(pilot, "retention_time", "1h")
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert app.screen is screen  # still open, the edit still there
        assert "changed by cli at 2026-11-21 12:00:00 UTC since you opened the editor" in status_of(screen)
        assert screen.query_one("#field-retention_time", Input).value == "1h"
        assert saved_state(console_data)[0] == {**ORDERS, "segment_size": "4 KiB"}  # nothing overwritten
        await pilot.press("ctrl+l")
        await settle(pilot)
        assert screen.query_one("#field-segment_size", Input).value == "4 KiB"
        assert str(screen.query_one("#row-segment_size", FieldRow).query_one(".source", Static).render()) == "topic"
        assert screen.query_one("#field-retention_time", Input).value == "1h"
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert app.screen is not screen
    overrides, journal = saved_state(console_data)
    assert overrides == {**ORDERS, "segment_size": "4 KiB", "retention_time": "1h"}
    assert [(c["field"], c["actor"]) for c in journal[:2]] == [("retention_time", "console"), ("segment_size", "cli")]


async def test_escape_with_unsaved_changes_asks_once_then_discards(make_console, console_data: Path) -> None:
    before = saved_state(console_data)
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        screen = await open_editor(pilot)
        await type_into(pilot, "retention_time", "1h")
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen
        assert "esc again discards them" in status_of(screen)
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is not screen
        assert any("nothing saved" in str(n.message) for n in raised_toasts(app))
        # without changes, esc closes at once
        await pilot.press("e")  # orders is still selected
        await settle(pilot)
        assert isinstance(app.screen, PolicyEditorScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, PolicyEditorScreen)
    assert saved_state(console_data) == before


async def test_the_what_if_needs_spark_and_says_so(make_console) -> None:
    app = make_console()  # no Spark lent: the engine is off
    async with app.run_test(size=TERMINAL) as pilot:
        screen = await open_editor(pilot)
        await type_into(pilot, "max_time", "1h")
        await pilot.press("ctrl+t")
        await settle(pilot)
        pane = screen.query_one(WhatIfPane)
        assert "the Spark engine is off" in shown_text(pane.query_one(Static))
        assert pane.query_one(Static).has_class("-failed")
        assert app.is_running


async def test_a_what_if_asked_for_again_is_not_overwritten_by_the_one_before(make_console, monkeypatch) -> None:
    """ctrl+t, then ctrl+t again with another edit: the first preview's plan is
    cancelled, and its failure ("cancelled") was shown over the second preview, and
    cleared the tag by which a third ctrl+t cancels the second."""
    started, release = threading.Event(), threading.Event()

    def plan(host, topic: str, overrides: dict[str, str], *, tag: str, before=None):
        if overrides.get("max_time") == "1h":
            started.set()
            release.wait(30)
            raise InvalidInput("the first preview was cancelled")
        raise InvalidInput("the second preview's own failure")

    monkeypatch.setattr(policy_editor, "plan_what_if", plan)
    app = make_console()
    # No Spark here: the host says it is ready, plans nothing and forecasts nothing.
    status = app.host.engine_status

    def forecast(*args: object, **kwargs: object) -> None:
        raise InvalidInput("no forecast in this test")

    monkeypatch.setattr(app.host, "engine_status", lambda: dataclasses.replace(status(), session="ready"))
    monkeypatch.setattr(app.host, "cancel", lambda tag: None)
    monkeypatch.setattr(app.host, "forecast", forecast)
    async with app.run_test(size=TERMINAL) as pilot:
        screen = await open_editor(pilot)
        await type_into(pilot, "max_time", "1h")
        await pilot.press("ctrl+t")
        for _ in range(400):  # the first preview's thread is waiting
            if started.is_set():
                break
            await pilot.pause(0.05)
        assert started.is_set()
        await type_into(pilot, "max_time", "2h")
        await pilot.press("ctrl+t")
        pane_text = screen.query_one(WhatIfPane).query_one(Static)
        for _ in range(400):
            if "second" in shown_text(pane_text):
                break
            await pilot.pause(0.05)
        release.set()
        await settle(pilot)
        shown = shown_text(pane_text)
    assert "the second preview's own failure" in shown and "cancelled" not in shown


async def test_the_what_if_shows_what_would_go_and_who_would_skip(
    make_console, console_data: Path, spark_engine
) -> None:
    app = make_console(spark=spark_engine)
    async with app.run_test(size=TERMINAL) as pilot:
        screen = await open_editor(pilot)
        await type_into(pilot, "max_time", "1h")
        await pilot.press("ctrl+t")
        await settle(pilot)
        text = shown_text(screen.query_one(WhatIfPane).query_one(Static))
        await pilot.press("ctrl+s")  # saved as previewed: the toast warns what goes now
        await settle(pilot)
        toasts = {n.title: str(n.message) for n in raised_toasts(app)}
    # the same two plans, computed here directly
    with Broker(console_data, clock=lambda: NOW) as broker:
        pruner = Pruner(broker, spark_engine)
        saved = pruner.plan(topics=["orders"], overrides={"orders": ORDERS})  # as before the save
        proposed = pruner.plan(topics=["orders"], overrides={"orders": {**ORDERS, "max_time": "1h"}})

    def deleted(plan: Plan) -> dict[tuple[int, int], int]:
        rows = plan.deletions().to_pylist()
        return {(r["partition"], r["base_offset"]): r["size_bytes"] for r in rows}

    extra = deleted(proposed).keys() - deleted(saved).keys()
    extra_bytes = sum(deleted(proposed)[k] for k in extra)
    assert extra and {p for p, _ in extra} == {0}  # max_time overrides billing's barrier on partition 0
    groups = proposed.tables["groups"]
    billing = groups.filter(pc.and_(pc.equal(groups["group"], "billing"), pc.equal(groups["partition"], 0)))
    (row,) = billing.to_pylist()
    assert row["moved_skipped"] > 0
    assert f"Would go now, and not with the saved policy: {len(extra)} segment(s), {format.size(extra_bytes)}" in text
    assert toasts["Policy saved"] == "orders: max_time (default) → 1h"
    assert toasts["orders: deletes data now"] == (
        f"this change deletes {len(extra)} more segment(s), {format.size(extra_bytes)}, at the next cycle"
    )
    assert "with max_time 1h" in text
    billing_line = next(line for line in text.splitlines() if line.lstrip().startswith("billing"))
    assert billing_line.split()[:6] == [
        "billing",
        "subscriber",
        "0",
        str(row["position"]),
        str(row["new_position"]),
        str(row["moved_skipped"]),
    ]
    assert "audit-reader" not in text  # a reader at the end of the log skips nothing


async def test_read_only_the_editor_does_not_open_and_nothing_is_saved(make_console, console_data: Path) -> None:
    before = saved_state(console_data)
    app = make_console(read_only=True)
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        await pilot.press("down", "down", "down", "e")
        await settle(pilot)
        assert not isinstance(app.screen, PolicyEditorScreen)
        app.screen.action_edit_policy()  # even asked directly
        await settle(pilot)
        assert not isinstance(app.screen, PolicyEditorScreen)
        assert any("read-only" in str(n.message) for n in raised_toasts(app))
        # pushed by some other path, it still cannot save
        await app.push_screen(PolicyEditorScreen("orders"))
        await settle(pilot)
        screen = app.screen
        await type_into(pilot, "retention_time", "1h")
        assert screen.check_action("save", ()) is False
        await pilot.press("ctrl+s")
        screen.action_save()
        await settle(pilot)
        assert app.screen is screen
    assert saved_state(console_data) == before


# -- snapshots ----------------------------------------------------------------------------------


@pytest.mark.parametrize("theme", ["ebbtide-dark", "ebbtide-light", "ebbtide-high-contrast"])
def test_editor_snapshot(snap_compare, make_console, theme: str) -> None:
    assert snap_compare(make_console(theme=theme), terminal_size=TERMINAL, run_before=open_editor)


def test_editor_invalid_value_snapshot(snap_compare, make_console) -> None:
    async def invalid(pilot) -> None:
        await open_editor(pilot)
        await type_into(pilot, "retention_time", "3 fortnights")
        await type_into(pilot, "max_time", "10m")
        await settle(pilot)

    assert snap_compare(make_console(), terminal_size=TERMINAL, run_before=invalid)


def test_editor_combination_error_snapshot(snap_compare, make_console) -> None:
    async def broken(pilot) -> None:
        await open_editor(pilot)
        await type_into(pilot, "max_time", "10m")
        await settle(pilot)

    assert snap_compare(make_console(), terminal_size=TERMINAL, run_before=broken)


def test_editor_what_if_snapshot(snap_compare, make_console, spark_engine) -> None:
    async def preview(pilot) -> None:
        await open_editor(pilot)
        await type_into(pilot, "max_time", "1h")
        await pilot.press("ctrl+t")
        await settle(pilot)

    assert snap_compare(make_console(spark=spark_engine), terminal_size=TERMINAL, run_before=preview)


async def test_the_longest_value_shows_whole_in_its_field(make_console) -> None:
    """``consumer_backlog_eviction`` (payments' backlog policy) was cut to ``…evictio``."""
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        await pilot.press("down", "down", "down", "down", "e")
        await settle(pilot)
        field = pilot.app.screen.query_one("#field-backlog_policy", Input)
        assert field.value == "consumer_backlog_eviction"
        assert field.content_region.width > len(field.value)  # and room for the cursor after it
