"""One truth: the Overview, Quotas, Groups and Topic views and the header say the same
about every topic's backlog quota, held and paused state (issue 14, deliverable 1),
for topics under, exactly at and over their quota, over an age-only quota, and in the
engine's exceeded state after the backlog has come back under."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from rich.style import Style

from console.model.groups import load_groups
from console.model.header import load_header
from console.model.overview import load_overview
from console.model.quotas import load_quotas
from console.model.topic import Decision, SegmentState, load_topic, plan_staleness
from console.screens.groups import COLUMNS as GROUP_COLUMNS
from console.screens.groups import group_row
from console.screens.journal import cycle_row
from console.screens.overview import retention_text, topic_row
from console.screens.quotas import quota_row
from console.screens.topic import GROUP_COLUMNS as TOPIC_GROUP_COLUMNS
from console.screens.topic import eligible_text, segment_row, state_line
from console.screens.topic import group_row as topic_group_row
from console.widgets.cells import Palette
from console.widgets.live_table import LiveTable
from console.widgets.top_bar import TopBar
from engine.broker import Broker
from engine.journal.journal import Journal
from engine.journal.rows import Cycle
from engine.journal.state import EngineState
from engine.prune.operations import pause, set_hold
from engine.store.batch import NewRecord
from tests.support.console_fixtures import HOUR, MINUTE, NOW, TERMINAL, settle

PLAIN = Palette(*(Style() for _ in range(5)))
#: topic -> the state word every view must show for it
EXPECTED = {
    "q-under": "ok",
    "q-at": "ok",  # the engine compares strictly: a backlog equal to the quota is within it
    "q-over": "over quota",
    "q-age": "over quota",  # an age-only quota: the size figure alone would read 0%
    "q-clearing": "quota exceeded",  # the engine's state holds until its next cycle clears it
}


def build(root: Path) -> None:
    """Five topics with a lagging subscriber each; quotas set against the backlogs the
    catalog then holds."""
    with Broker(root, clock=lambda: NOW) as broker:
        for name in EXPECTED:
            broker.create_topic(name, 1, {"segment_size": "1 KiB"}, actor="test")
            records = [NewRecord(bytes(100), None, NOW - 60 * MINUTE + m * MINUTE) for m in range(40)]
            for start in range(0, 40, 5):
                broker.produce(name, records[start : start + 5], partition=0)
            broker.create_group(name, "slow", "subscriber")
            broker.commit(name, "slow", 0, 12, at_ms=NOW - MINUTE)
        backlog = {t.topic: t.status.backlog_bytes for t in load_quotas(broker).topics}
        broker.alter_topic("q-under", {"backlog_size": f"{backlog['q-under'] + 1} B"}, actor="test")
        broker.alter_topic("q-at", {"backlog_size": f"{backlog['q-at']} B"}, actor="test")
        broker.alter_topic("q-over", {"backlog_size": f"{backlog['q-over'] - 1} B"}, actor="test")
        broker.alter_topic("q-age", {"backlog_age": "10m"}, actor="test")
        broker.alter_topic("q-clearing", {"backlog_size": "1 GiB"}, actor="test")
        EngineState(broker.catalog).set_quota_state("q-clearing", True, NOW - 5 * MINUTE)


@pytest.fixture
def quota_data(tmp_path: Path) -> Path:
    root = tmp_path / "quota-data"
    build(root)
    return root


def words(root: Path) -> dict[str, dict[str, str]]:
    """Per view, per topic, the quota word its rows show."""
    with Broker(root, clock=lambda: NOW) as broker:
        overview = load_overview(broker)
        quotas = load_quotas(broker)
        groups = load_groups(broker)
        header = load_header(broker)
        topics = {name: load_topic(broker, name, None) for name in EXPECTED}
    seen: dict[str, dict[str, str]] = {}
    seen["overview"] = {t.name: topic_row(t, overview, PLAIN).cells[-1].plain for t in overview.topics}
    seen["quotas"] = {t.topic: quota_row(t, NOW, PLAIN).cells[4].plain.split(" (")[0] for t in quotas.topics}
    # Groups shows, per group, the limits it is over (the topic is over when its slowest
    # is), and that a group within its quota still has its topic in the exceeded state
    # the header counts, until the next cycle clears it
    seen["groups"] = {g.topic: group_row(g, NOW, PLAIN).cells[-1].plain for g in groups.groups}
    seen["topic"] = {
        name: state_line(data, PLAIN).plain.split(" · ")[0].removeprefix("state ") for name, data in topics.items()
    }
    seen["header"] = {name: "alarming" if name in header.over_quota else "calm" for name in EXPECTED}
    return seen


def test_every_view_says_the_same_about_each_quota(quota_data: Path) -> None:
    seen = words(quota_data)
    assert seen["overview"] == EXPECTED
    assert {t: w.split(" ")[0] for t, w in seen["quotas"].items()} == {
        t: {"ok": "ok", "over quota": "over", "quota exceeded": "quota"}[w] for t, w in EXPECTED.items()
    }
    assert seen["topic"] == EXPECTED
    assert seen["groups"] == {
        "q-under": "no",
        "q-at": "no",
        "q-over": "yes: size",
        "q-age": "yes: age",
        "q-clearing": "no, clearing",
    }
    assert seen["header"] == {t: "calm" if w == "ok" else "alarming" for t, w in EXPECTED.items()}


def test_the_groups_and_topic_views_say_the_same_last_commit(quota_data: Path) -> None:
    """The Topic view's groups read ``Committed 2m 50s`` where Groups read ``Last commit
    2m 50s ago`` (walk3 finding 9): one heading, one cell."""
    with Broker(quota_data, clock=lambda: NOW) as broker:
        groups = load_groups(broker)
        topic = load_topic(broker, "q-over", None)
    (group,) = [g for g in groups.groups if g.topic == "q-over"]
    groups_cell = group_row(group, NOW, PLAIN).cells[[c.key for c in GROUP_COLUMNS].index("last_commit")]
    (topic_group,) = topic.groups
    topic_cells = topic_group_row(topic_group, NOW, PLAIN).cells
    topic_cell = topic_cells[[c.key for c in TOPIC_GROUP_COLUMNS].index("commit")]
    assert str(groups_cell) == str(topic_cell) == "1m ago"
    assert {c.label for c in GROUP_COLUMNS if c.key == "last_commit"} == {
        c.label for c in TOPIC_GROUP_COLUMNS if c.key == "commit"
    }


def test_the_overview_gauge_is_the_larger_of_size_and_age(quota_data: Path) -> None:
    with Broker(quota_data, clock=lambda: NOW) as broker:
        topics = {t.name: t for t in load_overview(broker).topics}
    assert topics["q-at"].quota.fraction == 1.0
    assert topics["q-under"].quota.fraction < 1.0 < topics["q-over"].quota.fraction
    # 40 minutes of unread data against a 10 minute age quota, no size quota at all
    assert topics["q-age"].quota.fraction > 3.0
    gauge = topic_row(topics["q-age"], load_overview_now(quota_data), PLAIN).cells[6].plain
    assert gauge.endswith("%") and int(gauge.split()[-1].rstrip("%")) > 300


def load_overview_now(root: Path):
    with Broker(root, clock=lambda: NOW) as broker:
        return load_overview(broker)


def test_hold_and_pause_read_the_same_in_the_overview_topic_and_header(quota_data: Path) -> None:
    with Broker(quota_data, clock=lambda: NOW) as broker:
        set_hold(broker, "q-under", True, actor="test")
        pause(broker, actor="test")
        overview_data = load_overview(broker)
        overview = {t.name: t.states() for t in overview_data.topics}
        topic = load_topic(broker, "q-under", None)
        header = load_header(broker)
    # The pause is every topic's: the header says it, no row repeats it.
    assert overview["q-under"] == topic.states == ("held",)
    assert overview_data.paused and topic.paused and header.paused and header.held == ("q-under",)


async def test_the_header_shows_the_same_badges_on_every_screen(make_console, quota_data: Path) -> None:
    app = make_console(data=quota_data)
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        for key, crumb in (("1", "Overview"), ("2", "Groups"), ("3", "Quotas"), ("4", "Journal"), ("5", "Engine")):
            await pilot.press(key)
            await settle(pilot)
            bar = app.screen.query_one(TopBar)
            assert bar.view_title == crumb
            assert "3 OVER QUOTA" in bar.render().plain
        await pilot.press("3")
        await settle(pilot)
        table = app.screen.query_one("#quotas", LiveTable)
        table.move_cursor(row=[r.key for r in table.shown_rows].index("q-over"))
        await pilot.press("enter")
        await settle(pilot)
        bar = app.screen.query_one(TopBar)
        assert bar.view_title == "Quotas › Topic q-over"
        assert "3 OVER QUOTA" in bar.render().plain


def test_retention_shows_every_finite_limit(console_data: Path) -> None:
    with Broker(console_data, clock=lambda: NOW) as broker:
        broker.alter_topic("orders", {"max_time": "7d", "max_partition_size": "infinite"}, actor="test")
        topics = {t.name: t for t in load_overview(broker).topics}
    # pruned by its size cap although its retention time is infinite: both are shown
    assert retention_text(topics["metrics"]) == "4 KiB · cap 8 KiB/p"
    assert retention_text(topics["orders"]) == "30m · cap 7d"
    assert retention_text(topics["clickstream"]) == "1h · cap 100 GiB/p"  # the default cap is finite too


def test_a_cycle_took_its_planning_and_its_applying() -> None:
    cycle = Cycle(
        id=7,
        trigger="schedule",
        actor="engine",
        scope="all",
        now=1_000,
        started=3_000,
        finished=3_500,
        status="done",
        planned=1,
        applied=1,
        bytes_freed=10,
        spark_master=None,
        duration_ms=2_500,
        error=None,
        plan_ms=2_000,
        apply_ms=500,
    )
    row = cycle_row(cycle, PLAIN, split=True)
    assert [str(c) for c in row.cells[-3:]] == ["2.5 s", "2.0 s", "500 ms"]
    running = dataclasses.replace(cycle, finished=None, status="running", duration_ms=None, apply_ms=None)
    assert [str(c) for c in cycle_row(running, PLAIN, split=True).cells[-3:]] == ["-", "2.0 s", "-"]


def test_a_plan_never_looks_fresher_than_it_is(console_data: Path) -> None:
    with Broker(console_data, clock=lambda: NOW) as broker:
        journal = Journal(broker.catalog)
        assert plan_staleness(journal, "orders", NOW) is None
        cycle = journal.start_cycle(
            trigger="schedule",
            actor="engine",
            scope="all",
            now=NOW + MINUTE,
            started=NOW + MINUTE,
            spark_master="local[2]",
        )
        assert plan_staleness(journal, "orders", NOW) == f"cycle {cycle} planned since"
    with Broker(console_data, clock=lambda: NOW + 2 * MINUTE) as broker:
        broker.alter_topic("orders", {"retention_time": "1h"}, actor="test")
        assert plan_staleness(Journal(broker.catalog), "orders", NOW) == "the policy changed since"
    # eligibility counts from the plan's instant, not from the clock
    assert eligible_text(NOW + 5 * MINUTE, NOW) == "5m after plan"
    assert eligible_text(NOW - 5 * MINUTE, NOW) == "5m before plan"
    segment = SegmentState(0, 0, 10, 100, NOW - HOUR, NOW - HOUR, True, Decision("keep", "KEEP_ACTIVE", None, None))
    row = segment_row(segment, NOW + HOUR, None, PLAIN, plan_now=NOW, stale=True)
    assert [c.plain for c in row.cells[-3:]] == ["keep", "KEEP_ACTIVE (then)", "-"]


# -- snapshots ---------------------------------------------------------------------------------


def test_quota_states_snapshot(snap_compare, make_console, quota_data: Path) -> None:
    assert snap_compare(make_console(data=quota_data), terminal_size=TERMINAL, run_before=settle)


def test_quotas_view_snapshot(snap_compare, make_console, quota_data: Path) -> None:
    async def quotas(pilot) -> None:
        await settle(pilot)
        await pilot.press("3")
        await settle(pilot)

    assert snap_compare(make_console(data=quota_data), terminal_size=TERMINAL, run_before=quotas)


def test_pause_confirmation_snapshot(snap_compare, make_console) -> None:
    async def ask(pilot) -> None:
        await settle(pilot)
        await pilot.press("z")
        await settle(pilot)

    assert snap_compare(make_console(), terminal_size=TERMINAL, run_before=ask)


def test_journal_kind_picker_snapshot(snap_compare, make_console) -> None:
    async def pick(pilot) -> None:
        await settle(pilot)
        await pilot.press("4", "a")
        await settle(pilot)

    assert snap_compare(make_console(), terminal_size=TERMINAL, run_before=pick)


def test_journal_policy_changes_snapshot(snap_compare, make_console) -> None:
    async def changes(pilot) -> None:
        await settle(pilot)
        await pilot.app.show_journal_kind("policy_change")
        await settle(pilot)

    assert snap_compare(make_console(), terminal_size=TERMINAL, run_before=changes)
