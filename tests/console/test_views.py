"""The Groups, Quotas, Journal and Engine views (SPEC §8): their models on the fixed
catalog, the keys that reach and steer them (Pilot), and one snapshot each."""

from __future__ import annotations

import csv
import io
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console
from rich.style import Style
from rich.text import Text
from textual.widgets import OptionList, Static
from textual.widgets._footer import FooterKey
from textual.widgets.data_table import ColumnKey

from console.host import ConsoleHost
from console.modals.ask import AskScreen
from console.modals.kind_picker import KindPicker
from console.model.engine import load_engine
from console.model.groups import load_groups
from console.model.journal import KINDS, POLICY_CHANGE, JournalFilter, export_actions, load_journal
from console.model.quotas import load_quotas
from console.screens.engine import EngineScreen
from console.screens.groups import GroupsScreen, group_row
from console.screens.journal import POLICY_COLUMNS, JournalScreen, journal_rows
from console.screens.quotas import QuotasScreen
from console.screens.topic import TopicScreen
from console.widgets.cells import Palette
from console.widgets.live_table import LiveTable
from console.widgets.top_bar import TopBar
from engine.broker import Broker
from engine.journal.export import write_csv
from engine.journal.journal import ACTION_KINDS, Entry, Journal
from engine.journal.rows import ACTION_FIELDS
from engine.journal.state import EngineState
from engine.prune.operations import pause, set_hold
from engine.store.batch import NewRecord
from tests.support.console_fixtures import HOUR, MINUTE, NOW, TERMINAL, raised_toasts, settle

#: the segments of clickstream/0 the fake scheduled cycle deletes (base, next, bytes)
DELETED = ((0, 16, 1936), (16, 32, 1976))


def write_history(root: Path) -> None:
    """A journal and steering to show: a scheduled cycle that deleted two segments, a
    manual cycle that failed, a hold and a pause; and on ``orders`` an expiry and an
    age quota the engine found exceeded 20 minutes ago."""
    with Broker(root, clock=lambda: NOW - MINUTE) as broker:
        journal = Journal(broker.catalog)
        done = journal.start_cycle(
            trigger="schedule",
            actor="engine",
            scope="all",
            now=NOW - 30 * MINUTE,
            started=NOW - 30 * MINUTE,
            spark_master="local[2]",
            plan_ms=1200,
        )
        journal.append(
            [
                Entry("delete_segment", "clickstream", 0, base, base, end, end - base, size, "DELETE_TIME")
                for base, end, size in DELETED
            ],
            time=NOW - 30 * MINUTE + 800,
            trigger="schedule",
            actor="engine",
            status="applied",
            cycle=done,
        )
        journal.finish_cycle(
            done,
            status="done",
            finished=NOW - 30 * MINUTE + 1500,
            planned=2,
            applied=2,
            bytes_freed=sum(size for _b, _e, size in DELETED),
        )
        failed = journal.start_cycle(
            trigger="manual",
            actor="console",
            scope=["orders"],
            now=NOW - 10 * MINUTE,
            started=NOW - 10 * MINUTE,
            spark_master="local[2]",
            plan_ms=400,
        )
        journal.finish_cycle(
            failed,
            status="failed",
            finished=NOW - 10 * MINUTE + 2500,
            planned=0,
            applied=0,
            bytes_freed=0,
            error="Spark session failed: no Java runtime",
        )
        set_hold(broker, "legal", False, actor="cli")
        pause(broker, actor="console")
        broker.alter_topic("orders", {"subscription_expiry": "1h", "backlog_age": "1h"}, actor="test")
        EngineState(broker.catalog).set_quota_state("orders", True, NOW - 20 * MINUTE)


@pytest.fixture
def history(console_data: Path) -> Path:
    write_history(console_data)
    return console_data


def reader(root: Path) -> Broker:
    return Broker(root, clock=lambda: NOW)


def rows_of(app, table_id: str) -> list[tuple[str, ...]]:
    table = app.screen.query_one(f"#{table_id}", LiveTable)
    return [tuple(str(c) for c in row.cells) for row in table.shown_rows]


# -- models -----------------------------------------------------------------------------------


def test_groups_model_on_the_fixed_catalog(console_data: Path) -> None:
    with reader(console_data) as broker:
        groups = {(g.topic, g.group): g for g in load_groups(broker).groups}
    assert sorted(groups) == [
        ("orders", "audit-reader"),
        ("orders", "billing"),
        ("payments", "ledger"),
        ("sessions", "tracker"),
    ]
    billing = groups["orders", "billing"]
    # positions 30 and 90 of 120; whole segments from the one holding each position
    assert (billing.kind, billing.partitions, billing.lag_messages) == ("subscriber", 2, 120)
    assert billing.lag_bytes == (1976 + 1936 * 3 + 1976 * 2 + 968) + (1936 + 1976 + 968)
    assert billing.lag_ms == 90 * MINUTE  # the record at offset 30 (minute 30); its segment began at minute 16
    assert billing.last_commit == NOW - 5 * MINUTE
    assert billing.expires_at is None and billing.over_quota is None  # no expiry, no quota on orders
    ledger = groups["payments", "ledger"]
    assert ledger.lag_bytes == 14640 and ledger.over_quota == ("size",)  # 4 KiB quota
    assert groups["orders", "audit-reader"].over_quota is None  # a reader holds no quota
    assert groups["sessions", "tracker"].lag_messages == 0


def test_groups_model_expiry_and_age_quota(history: Path) -> None:
    with reader(history) as broker:
        groups = {(g.topic, g.group): g for g in load_groups(broker).groups}
    billing = groups["orders", "billing"]
    assert billing.expires_at == NOW - 5 * MINUTE + HOUR
    assert billing.over_quota == ("age",)  # 1h 44m of backlog against 1h
    assert groups["orders", "audit-reader"].expires_at == NOW + HOUR  # readers expire too
    assert groups["orders", "audit-reader"].over_quota is None


PLAIN = Palette(*(Style() for _ in range(5)))


def test_group_rows_count_down_to_expiry(history: Path) -> None:
    with reader(history) as broker:
        billing = next(g for g in load_groups(broker).groups if g.group == "billing")
    assert group_row(billing, NOW, PLAIN).cells[7:] == ("5m ago", Text("55m"), Text("yes: age"))
    late = group_row(billing, NOW + HOUR, PLAIN).cells  # past due: the next cycle removes it
    assert (late[7], late[8].plain) == ("1h 5m ago", "next cycle")


def test_quotas_model_on_the_fixed_catalog(console_data: Path) -> None:
    with reader(console_data) as broker:
        topics = load_quotas(broker).topics
    assert [t.topic for t in topics] == ["payments", "clickstream", "legal", "metrics", "orders", "sessions"]
    payments = topics[0].status
    assert (payments.quota.size_bytes, payments.quota.age_ms) == (4096, None)
    assert payments.backlog_policy == "consumer_backlog_eviction"
    assert payments.backlog_bytes == 14640 and payments.oldest_ms == 110 * MINUTE  # the record at offset 10
    assert topics[0].furthest_behind == "ledger"
    assert payments.breaches == ("size",) and not payments.engine.exceeded
    assert payments.label(NOW) == "over quota (size)"
    orders = next(t for t in topics if t.topic == "orders")
    assert not orders.status.quota.finite and orders.status.word == "no quota"
    # the largest per-partition backlog (partition 0), not the sum over partitions
    assert orders.status.backlog_bytes == 1976 + 1936 * 3 + 1976 * 2 + 968 and orders.furthest_behind == "billing"
    sessions = next(t for t in topics if t.topic == "sessions")
    assert sessions.status.backlog_bytes == 0 and sessions.furthest_behind is None  # caught up


def test_quotas_model_reports_the_engine_verdict(history: Path) -> None:
    with reader(history) as broker:
        topics = load_quotas(broker).topics
    assert [t.topic for t in topics][:2] == ["orders", "payments"]  # now two topics with a quota
    orders = topics[0].status
    assert orders.quota.age_ms == HOUR and orders.breaches == ("age",)
    assert orders.engine.exceeded and orders.engine.since == NOW - 20 * MINUTE
    assert orders.label(NOW) == "quota exceeded 20m"


def test_journal_model_filters_in_sql_and_bounds_the_rows(history: Path) -> None:
    with reader(history) as broker:
        everything = load_journal(broker, JournalFilter())
        assert [c.status for c in everything.cycles] == ["failed", "done"]
        assert [a.action for a in everything.actions] == [
            "pause",
            "release",
            "delete_segment",
            "delete_segment",
            "hold",
        ]
        done = everything.cycles[1].id
        of_cycle = load_journal(broker, JournalFilter(cycle=done)).actions
        assert [(a.segment, a.cycle) for a in of_cycle] == [(16, done), (0, done)]
        assert [a.action for a in load_journal(broker, JournalFilter(action="pause")).actions] == ["pause"]
        assert {a.topic for a in load_journal(broker, JournalFilter(topic="legal")).actions} == {"legal"}
        newest = load_journal(broker, JournalFilter(), limit=1)
        assert len(newest.cycles) == 1 and [a.action for a in newest.actions] == ["pause"]


def test_journal_subtitles_say_how_many_rows_are_loaded(history: Path) -> None:
    with reader(history) as broker:
        full = journal_rows(load_journal(broker, JournalFilter(action="delete_segment")), PLAIN)
        bounded = journal_rows(load_journal(broker, JournalFilter(), limit=1), PLAIN)
    assert full.actions_subtitle == "2 action(s) · delete_segment · newest 500 at most"
    assert bounded.cycles_subtitle == "1 cycle(s) · only the newest 1 loaded"
    assert bounded.actions_subtitle == "1 action(s) · all · only the newest 1 loaded: filter to reach older ones"


def test_journal_policy_changes_are_a_kind_of_their_own(history: Path) -> None:
    with reader(history) as broker:
        changes = load_journal(broker, JournalFilter(action=POLICY_CHANGE, topic="orders")).actions
        of_a_cycle = load_journal(broker, JournalFilter(cycle=1, action=POLICY_CHANGE)).actions
        everything = load_journal(broker, JournalFilter()).actions
    assert {"subscription_expiry (default) → 1h", "backlog_age (default) → 1h"} <= {a.reason for a in changes}
    assert [a.time for a in changes] == sorted((a.time for a in changes), reverse=True)  # newest first
    assert {a.action for a in changes} == {POLICY_CHANGE} and all(a.id < 0 for a in changes)
    assert of_a_cycle == () and POLICY_CHANGE not in {a.action for a in everything}
    assert KINDS[:2] == (None, POLICY_CHANGE) and set(KINDS[2:]) == ACTION_KINDS
    assert JournalFilter(3, "hold", "orders").describe() == "cycle 3 · hold · topic orders"
    assert not JournalFilter().active and JournalFilter(topic="orders").active


def test_export_writes_csv_and_json_without_overwriting(history: Path) -> None:
    with reader(history) as broker:
        actions = Journal(broker.catalog).actions(limit=None)
    first = export_actions(actions, history, NOW)
    second = export_actions(actions[:1], history, NOW)
    assert [p.name for p in first] == ["journal-20261121T120000Z.csv", "journal-20261121T120000Z.json"]
    assert [p.name for p in second] == ["journal-20261121T120000Z-2.csv", "journal-20261121T120000Z-2.json"]
    expected = io.StringIO()
    write_csv([a.to_json() for a in actions], ACTION_FIELDS, expected)
    assert first[0].read_text() == expected.getvalue()
    assert [row["id"] for row in json.loads(first[1].read_text())] == [a.id for a in actions]


def test_a_connect_token_is_never_shown_even_before_the_engine_is_built(history: Path) -> None:
    """Before the engine exists, the header names where plans will run from the flags:
    a Connect URL's token is hidden there as the engine hides it."""
    host = ConsoleHost(history, engine=False, clock=lambda: NOW, spark_remote="sc://spark:15002/;token=s3cret;x=1")
    try:
        master = host.engine_status().master
    finally:
        host.close()
    assert master == "sc://spark:15002/;token=<hidden>;x=1"


def test_engine_model(history: Path) -> None:
    host = ConsoleHost(history, engine=False, clock=lambda: NOW)
    try:
        data = load_engine(host)
    finally:
        host.close()
    assert data.paused and data.now == NOW
    assert [c.status for c in data.cycles] == ["failed", "done"]
    assert data.log_file == history / "logs" / "spark.log"
    assert (data.status.session, data.status.scheduling) == ("off", False)


# -- Pilot --------------------------------------------------------------------------------------


async def test_keys_reach_every_view(make_console, history: Path) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        expected = {
            "2": (GroupsScreen, "groups", 4),
            "3": (QuotasScreen, "quotas", 6),
            "4": (JournalScreen, "actions", 5),
            "5": (EngineScreen, "engine-cycles", 2),
        }
        for key, (screen, table, count) in expected.items():
            await pilot.press(key)
            await settle(pilot)
            assert isinstance(app.screen, screen)
            assert len(rows_of(app, table)) == count
        assert app.deletion_paused  # the Engine view read the switch


async def test_groups_enter_opens_the_topic(make_console) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, GroupsScreen)
        await pilot.press("down", "down")  # audit-reader, billing, ledger
        assert screen.focused_group() == ("payments", "ledger")
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, TopicScreen) and app.screen.topic == "payments"


async def test_journal_cycle_selection_filters_the_actions(make_console, history: Path) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await pilot.press("4")
        await settle(pilot)
        cycles = app.screen.query_one("#cycles", LiveTable)
        assert app.screen.focused is cycles
        await pilot.press("tab", "slash", *"pause", "enter")  # a search that would hide the cycle's actions
        await settle(pilot)
        await pilot.press("shift+tab", "down", "enter")  # the older cycle: the scheduled one that deleted
        await settle(pilot)
        done = cycles.selected_key
        # the drill-down shows the whole cycle: no earlier search or kind carries over
        assert [r[1] for r in rows_of(app, "actions")] == ["delete_segment", "delete_segment"]
        assert f"cycle {done}" in str(app.screen.query_one("#actions", LiveTable).border_subtitle)
        assert app.screen.query_one(TopBar).view_title == f"Journal [filtered: cycle {done} · x clears]"
        assert "cycle 1 · segment 16 · offsets 16..32" in await detail_of(pilot, "actions", 0)
        await pilot.press("c")
        await settle(pilot)
        assert len(rows_of(app, "actions")) == 5


async def detail_of(pilot, table_id: str, row: int) -> str:
    screen = pilot.app.screen
    screen.query_one(f"#{table_id}", LiveTable).focus()
    screen.query_one(f"#{table_id}", LiveTable).move_cursor(row=row)
    await pilot.pause()
    return str(screen.query_one("#journal-detail", Static).render())


async def test_journal_kind_picker_topic_filter_and_clearing(make_console, history: Path) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await pilot.press("4")
        await settle(pilot)
        await pilot.press("a")
        await settle(pilot)
        picker = app.screen
        assert isinstance(picker, KindPicker)
        options = picker.query_one(OptionList)
        options.highlighted = KINDS.index("release")
        await pilot.press("enter")
        await settle(pilot)
        assert [r[1] for r in rows_of(app, "actions")] == ["release"]
        assert app.screen.query_one(TopBar).view_title == "Journal [filtered: release · x clears]"
        await pilot.press("x")  # one key clears every filter
        await settle(pilot)
        assert len(rows_of(app, "actions")) == 5 and app.screen.query_one(TopBar).view_title == "Journal"
        await pilot.press("tab", "down", "down", "down", "o")  # the last action's topic: clickstream
        await settle(pilot)
        assert {r[2] for r in rows_of(app, "actions")} == {"clickstream/0"} and len(rows_of(app, "actions")) == 2
        await pilot.press("o")
        await settle(pilot)
        assert len(rows_of(app, "actions")) == 5
        # "/" searches the focused table (the actions), not the first one
        await pilot.press("slash", *"release", "enter")
        await settle(pilot)
        assert [r[1] for r in rows_of(app, "actions")] == ["release"]
        assert app.screen.query_one(TopBar).view_title == 'Journal [filtered: search "release" · x clears]'
        assert len(rows_of(app, "cycles")) == 2
        actions = app.screen.query_one("#actions", LiveTable)
        assert app.screen.focused is actions
        await pilot.press("escape")  # clears the search, stays on the actions
        await settle(pilot)
        assert len(rows_of(app, "actions")) == 5 and app.screen.focused is actions


async def test_journal_columns_fit_again_after_policy_changes(make_console, history: Path) -> None:
    """Policy changes have columns of their own; once the kind filter is cleared, the
    action columns fit the rows shown again, so Msgs, Bytes and Status stay on screen
    at 120 columns instead of scrolled off to the right."""
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await pilot.press("4")
        await settle(pilot)
        actions = app.screen.query_one("#actions", LiveTable)
        before = {key: column.content_width for key, column in actions.columns.items()}
        await app.show_journal_kind(POLICY_CHANGE)
        await settle(pilot)
        assert [c.key for c in actions.live_columns] == [c.key for c in POLICY_COLUMNS]
        await pilot.press("x")
        await settle(pilot)
        reasons = [r[3] for r in rows_of(app, "actions")]
        assert actions.columns["reason"].content_width == max(len(r) for r in [*reasons, "Reason"])
        assert {key: column.content_width for key, column in actions.columns.items()} == before


async def test_quotas_columns_an_operator_acts_on_fit_at_120(make_console, history: Path) -> None:
    """Whom to act on (the slowest subscriber) and the state, a clearing one included,
    are on screen in full at 120 columns; only the backlog policy, a fact of the
    policy, may scroll."""
    with Broker(history, clock=lambda: NOW) as broker:
        broker.create_group("payments", "audit-reconciler", "subscriber")
        broker.commit("payments", "audit-reconciler", 0, 0, at_ms=NOW - MINUTE)  # ties with ledger (at 10), named first
        broker.alter_topic("sessions", {"backlog_size": "4 KiB"}, actor="test")
        EngineState(broker.catalog).set_quota_state("sessions", True, NOW - 20 * MINUTE)  # caught up since
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await pilot.press("3")
        await settle(pilot)
        table = app.screen.query_one("#quotas", LiveTable)
        rows = {r[0]: r for r in rows_of(app, "quotas")}
        keys = [c.key for c in table.live_columns]
        assert rows["payments"][keys.index("slowest")] == "audit-reconciler"
        assert rows["sessions"][keys.index("state")] == "quota exceeded 20m, clearing"
        needed = keys[: keys.index("policy")] if keys[-1] == "policy" else keys
        widths = [table.columns[ColumnKey(k)].get_render_width(table) for k in needed]
        assert sum(widths) <= table.scrollable_content_region.width


async def test_overview_columns_fit_at_120_with_a_held_topic_over_quota(make_console, history: Path) -> None:
    """``quota exceeded, held``, the longest state, was cut to ``quota exceeded, h`` at
    120 columns on the demo (walk3 re-walk): every column is on screen in full, with the
    demo's widths (its longest name, a hundred KiB, half an hour old)."""
    with Broker(history, clock=lambda: NOW) as broker:
        broker.create_topic("demo-clickstream", 2, {}, actor="test")
        broker.produce("demo-clickstream", [NewRecord(bytes(100 << 10), None, NOW - 31 * MINUTE - 30_000)], partition=0)
        broker.alter_topic("sessions", {"backlog_size": "1 GiB", "hold": "on"}, actor="test")
        broker.alter_topic("orders", {"max_time": "3m", "retention_time": "20s"}, actor="test")
        EngineState(broker.catalog).set_quota_state("sessions", True, NOW - 20 * MINUTE)
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#topics", LiveTable)
        keys = [c.key for c in table.live_columns]
        rows = {r[0]: r for r in rows_of(app, "topics")}
        assert rows["sessions"][keys.index("state")] == "quota exceeded, held"
        widths = [table.columns[ColumnKey(k)].get_render_width(table) for k in keys]
        assert sum(widths) <= table.scrollable_content_region.width


async def test_groups_columns_fit_at_120_with_a_clearing_topic(make_console, history: Path) -> None:
    """A subscriber within its quota while its topic is still in the exceeded state
    reads ``no, clearing`` (walk3 finding 4): the widest Over quota cell, in full at
    120 columns with a long group name."""
    with Broker(history, clock=lambda: NOW) as broker:
        broker.create_group("payments", "audit-reconciler", "subscriber")
        broker.commit("payments", "audit-reconciler", 0, 0, at_ms=NOW - MINUTE)
        broker.alter_topic("sessions", {"backlog_size": "1 GiB"}, actor="test")
        EngineState(broker.catalog).set_quota_state("sessions", True, NOW - 20 * MINUTE)
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await pilot.press("2")
        await settle(pilot)
        table = app.screen.query_one("#groups", LiveTable)
        keys = [c.key for c in table.live_columns]
        quota = {(r[0], r[1]): r[keys.index("quota")] for r in rows_of(app, "groups")}
        assert "no, clearing" in {cell for (topic, _group), cell in quota.items() if topic == "sessions"}
        widths = [table.columns[ColumnKey(k)].get_render_width(table) for k in keys]
        assert sum(widths) <= table.scrollable_content_region.width


async def test_the_header_keeps_crumb_badges_and_spark_at_120(make_console, history: Path) -> None:
    """A filtered Journal in read-only mode with four badges on: the header drops what
    matters least (the name, the Spark master, then the schedule) instead of cutting
    the Spark state off at 120 columns."""
    app = make_console(read_only=True)
    async with app.run_test(size=TERMINAL) as pilot:
        await pilot.press("4")
        await settle(pilot)
        await app.show_journal_kind(POLICY_CHANGE)
        await settle(pilot)
        bar = app.screen.query_one(TopBar)
        header = bar.render().plain
        assert bar.view_title == "Journal [filtered: policy_change · x clears]" and bar.view_title in header
        assert all(badge in header for badge, _variable in bar.badges()) and len(bar.badges()) == 4
        assert header.rstrip().endswith("LIVE OFF  │ Spark off")
        assert len(header) <= bar.size.width == TERMINAL[0]


async def test_policy_changes_from_the_palette(make_console, history: Path) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        await app.show_journal_kind(POLICY_CHANGE)
        await settle(pilot)
        rows = rows_of(app, "actions")  # time, topic, field, old, new, by
        assert ("orders", "backlog_age", "(default)", "1h", "test") in {r[1:] for r in rows}


async def test_the_journal_follows_new_rows_until_scrolled_away(make_console, history: Path) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await pilot.press("4", "tab")
        await settle(pilot)
        actions = app.screen.query_one("#actions", LiveTable)
        assert actions.cursor_row == 0
        with Broker(history, clock=lambda: NOW) as broker:
            set_hold(broker, "orders", True, actor="cli")
        app.refresh_view()
        await settle(pilot)
        assert actions.cursor_row == 0 and rows_of(app, "actions")[0][1] == "hold"  # followed
        await pilot.press("down", "down")
        with Broker(history, clock=lambda: NOW) as broker:
            set_hold(broker, "orders", False, actor="cli")
            set_hold(broker, "clickstream", True, actor="cli")
        app.refresh_view()
        await settle(pilot)
        assert actions.cursor_row == 4 and actions.new_above == 2  # stayed on its row
        assert str(actions.border_subtitle).endswith("· 2 new ↑ (home)")
        await pilot.press("home")
        await settle(pilot)
        assert actions.new_above == 0 and "↑" not in str(actions.border_subtitle)


async def test_journal_export_matches_the_journal_in_read_only_mode(make_console, history: Path) -> None:
    app = make_console(read_only=True)
    async with app.run_test(size=TERMINAL) as pilot:
        await pilot.press("4")
        await settle(pilot)
        await pilot.press("w")
        await settle(pilot)
    exported = sorted((history / "exports").glob("journal-*.csv"))
    assert len(exported) == 1 and exported[0].with_suffix(".json").exists()
    with reader(history) as broker:
        journal = Journal(broker.catalog).actions(limit=None)
    rows = list(csv.DictReader(exported[0].open()))
    assert [int(r["id"]) for r in rows] == [a.id for a in journal]
    assert [(r["action"], r["topic"], r["bytes"]) for r in rows] == [
        (a.action, a.topic or "", "" if a.bytes is None else str(a.bytes)) for a in journal
    ]


async def test_engine_view_shows_the_switch_and_cycles(make_console, history: Path) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await pilot.press("5")
        await settle(pilot)
        console = Console(width=TERMINAL[0], record=True, file=io.StringIO())
        console.print(app.screen.query_one("#engine-facts", Static).content)
        facts = console.export_text()
        assert "PAUSED" in facts and "spark.log" in facts
        assert [r[4] for r in rows_of(app, "engine-cycles")] == ["failed", "done"]


# -- snapshots ----------------------------------------------------------------------------------


def view(key: str):
    async def run_before(pilot) -> None:
        await settle(pilot)
        await pilot.press(key)
        await settle(pilot)

    return run_before


@pytest.fixture
def fixed_data(console_catalog: Path) -> Iterator[Path]:
    """The fixed catalog with its history at a fixed path: the Engine view shows the
    Spark log's path, which must not change between runs."""
    root = Path(tempfile.gettempdir()) / "ebbtide-views-snapshot"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(console_catalog, root / "data")
    with Broker(root / "data", clock=lambda: NOW) as broker:  # older cycles: a sparkline with a shape
        journal = Journal(broker.catalog)
        for hour, freed in enumerate((4096, 0, 12288, 8192, 2048)):
            started = NOW - (8 - hour) * HOUR
            cycle = journal.start_cycle(
                trigger="schedule",
                actor="engine",
                scope="all",
                now=started,
                started=started,
                spark_master="local[2]",
                plan_ms=1600,
            )
            journal.finish_cycle(cycle, status="done", finished=started + 900, planned=3, applied=3, bytes_freed=freed)
    write_history(root / "data")
    yield root / "data"
    shutil.rmtree(root, ignore_errors=True)


def test_groups_snapshot(snap_compare, make_console, history: Path) -> None:
    assert snap_compare(make_console(), terminal_size=TERMINAL, run_before=view("2"))


def test_quotas_snapshot(snap_compare, make_console, history: Path) -> None:
    assert snap_compare(make_console(), terminal_size=TERMINAL, run_before=view("3"))


def test_journal_snapshot(snap_compare, make_console, history: Path) -> None:
    assert snap_compare(make_console(), terminal_size=TERMINAL, run_before=view("4"))


def test_journal_snapshot_light(snap_compare, make_console, history: Path) -> None:
    assert snap_compare(make_console(theme="ebbtide-light"), terminal_size=TERMINAL, run_before=view("4"))


def test_engine_snapshot(snap_compare, make_console, fixed_data: Path) -> None:
    assert snap_compare(make_console(data=fixed_data), terminal_size=TERMINAL, run_before=view("5"))


@pytest.mark.parametrize("read_only", [False, True])
async def test_the_engine_view_footer_offers_z(make_console, read_only: bool) -> None:
    """The Engine view says ``Deletion running (z pauses)`` and had room for the key in
    its footer, which did not list it (walk3 finding 8); read-only it stays hidden."""
    app = make_console(read_only=read_only)
    async with app.run_test(size=TERMINAL) as pilot:
        await pilot.press("5")
        await settle(pilot)
        shown = {k.key for k in app.screen.query(FooterKey)}
        assert ("z" in shown) is not read_only
        await pilot.press("z")
        await settle(pilot)
        if read_only:
            refused = [str(n.message) for n in raised_toasts(app) if n.title == "Read-only"]
            assert refused == ["Pause deletion refused: the console is read-only"]
        else:
            assert isinstance(app.screen, AskScreen)  # asks y before pausing


@pytest.mark.parametrize("key", ["1", "2", "3", "4", "5", "6"])
async def test_every_footer_key_is_on_screen_at_120_columns(make_console, key: str) -> None:
    """The Journal's footer ended ``p Liv`` and lost ``t Theme`` (walk2 finding 5)."""
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await pilot.press(key)
        await settle(pilot)
        keys = list(app.screen.query(FooterKey))
        assert keys
        assert [k.description for k in keys if k.region.width == 0 or k.region.right > TERMINAL[0]] == []
