"""The Topic view (SPEC §8): its loader on the fixed catalog, its keys, and how it
looks with and without a plan."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from rich.style import Style
from rich.text import Text

from console import format
from console.host import ConsoleHost
from console.model.topic import GroupOutcome, load_topic
from console.screens.overview import OverviewScreen
from console.screens.topic import SUMMARY_WIDTH, TopicRows, TopicScreen, eligible_text, policy_summary, topic_rows
from console.widgets.cells import Palette
from console.widgets.charts import ChartSpec
from console.widgets.live_table import LiveTable
from engine.broker import Broker
from engine.clock import MAX_INSTANT_MS
from engine.journal.journal import Journal
from engine.journal.state import EngineState
from engine.prune import tables
from engine.prune.planner import Plan
from tests.support.console_fixtures import MINUTE, NOW, TERMINAL, raised_toasts, settle

# -- the loader --------------------------------------------------------------------------


def _describe(root: Path, topic: str):
    with Broker(root, clock=lambda: NOW) as broker:
        return broker.describe(topic)


def test_loader_reads_partitions_segments_and_lags(console_data: Path) -> None:
    described = _describe(console_data, "orders")
    with Broker(console_data, clock=lambda: NOW) as broker:
        data = load_topic(broker, "orders", None)

    assert data.now == NOW and data.plan_now is None
    assert [(p.partition, p.log_start_offset, p.next_offset, p.messages) for p in data.partitions] == [
        (0, 0, 120, 120),
        (1, 0, 120, 120),
    ]
    assert [p.size_bytes for p in data.partitions] == [view.size_bytes for view in described.partitions]
    assert [p.segments for p in data.partitions] == [len(view.segments) for view in described.partitions]
    catalog_segments = [
        (v.row.partition, s.base_offset, s.size_bytes) for v in described.partitions for s in v.segments
    ]
    assert [(s.partition, s.base_offset, s.size_bytes) for s in data.segments] == catalog_segments
    assert all(s.decision is None for s in data.segments)
    assert [s.sealed for s in data.segments if s.partition == 0][-1] is False  # the active one

    groups = {g.name: g for g in data.groups}
    assert set(groups) == {"audit-reader", "billing"}
    billing = groups["billing"]
    assert [(p.partition, p.position) for p in billing.lag.partitions] == [(0, 30), (1, 90)]
    assert billing.lag.lag_messages == (120 - 30) + (120 - 90)
    # Whole segments holding any unread offset, as the backlog quota counts them.
    unread = [s for v in described.partitions for s in v.segments if s.next_offset > (30, 90)[v.row.partition]]
    assert billing.lag.lag_bytes == sum(s.size_bytes for s in unread)
    # The age of the record at each position (one a minute from NOW - 2h, + partition
    # ms), not of the first record of the segment holding it.
    assert [p.lag_ms(NOW) for p in billing.lag.partitions] == [90 * MINUTE, 30 * MINUTE - 1]
    assert min(s.first_timestamp for s in unread) < NOW - 90 * MINUTE
    assert billing.lag.lag_ms(NOW) == 90 * MINUTE
    assert billing.lag.last_commit == NOW - 5 * MINUTE
    # A protecting subscriber holds data back, but how much only a plan can tell.
    assert billing.holds_back_bytes is None and billing.outcome is None
    reader = groups["audit-reader"]
    assert reader.lag.lag_messages == 0 and reader.lag.lag_bytes == 0
    assert reader.holds_back_bytes == 0  # readers never hold data back


def _plan_table(name: str, rows: list[dict]) -> pa.Table:
    schema = tables.PLAN_TABLES[name]
    return pa.Table.from_pylist([{f.name: row.get(f.name) for f in schema} for row in rows], schema=schema)


def test_loader_joins_the_plan_by_segment(console_data: Path) -> None:
    """Decisions, KEEP_BARRIER bytes per group and group outcomes come from the plan's
    rows of this topic only."""
    described = _describe(console_data, "orders")
    p0 = described.partitions[0].segments
    segment = {"topic": "orders", "partition": 0, "sealed": True, "size_bytes": 0, "next_offset": 0}
    plan = Plan(
        now=NOW - MINUTE,
        tables={
            "segments": _plan_table(
                "segments",
                [
                    {
                        **segment,
                        "base_offset": p0[0].base_offset,
                        "decision": "delete",
                        "reason": "DELETE_TIME",
                        "eligible_at": NOW - 9,
                    },
                    {
                        **segment,
                        "base_offset": p0[1].base_offset,
                        "decision": "keep",
                        "reason": "KEEP_BARRIER",
                        "detail": "group billing at 30",
                    },
                    {
                        **segment,
                        "base_offset": p0[2].base_offset,
                        "decision": "keep",
                        "reason": "KEEP_BARRIER",
                        "detail": "group billing at 30",
                    },
                    # another topic's row at the same key must not leak in
                    {
                        **segment,
                        "topic": "payments",
                        "base_offset": p0[3].base_offset,
                        "decision": "delete",
                        "reason": "DELETE_SIZE",
                    },
                ],
            ),
            "groups": _plan_table(
                "groups",
                [
                    {
                        "topic": "orders",
                        "group": "billing",
                        "partition": 0,
                        "evicted_skipped": 4,
                        "moved_skipped": 0,
                        "ttl_skipped": 0,
                        "expired": False,
                        "over_quota": True,
                    },
                    {
                        "topic": "orders",
                        "group": "billing",
                        "partition": 1,
                        "evicted_skipped": 6,
                        "moved_skipped": 2,
                        "ttl_skipped": 0,
                        "expired": False,
                        "over_quota": False,
                    },
                    {
                        "topic": "payments",
                        "group": "audit-reader",
                        "partition": 0,
                        "expired": True,
                        "ttl_skipped": 0,
                        "evicted_skipped": 0,
                        "moved_skipped": 0,
                        "over_quota": False,
                    },
                ],
            ),
            "partitions": _plan_table("partitions", []),
            "topics": _plan_table("topics", []),
        },
        rejected={"legal": "invalid value for retention_time"},
    )
    with Broker(console_data, clock=lambda: NOW) as broker:
        data = load_topic(broker, "orders", plan)
        left_out = load_topic(broker, "legal", plan)

    assert data.plan_now == NOW - MINUTE and data.plan_rejected is None
    assert left_out.plan_rejected == "invalid value for retention_time"
    assert all(s.decision is None for s in left_out.segments)
    decided = {(s.partition, s.base_offset): s.decision for s in data.segments if s.decision is not None}
    assert {key: (d.decision, d.reason) for key, d in decided.items()} == {
        (0, p0[0].base_offset): ("delete", "DELETE_TIME"),
        (0, p0[1].base_offset): ("keep", "KEEP_BARRIER"),
        (0, p0[2].base_offset): ("keep", "KEEP_BARRIER"),
    }
    assert decided[(0, p0[0].base_offset)].eligible_at == NOW - 9
    groups = {g.name: g for g in data.groups}
    assert groups["billing"].holds_back_bytes == p0[1].size_bytes + p0[2].size_bytes
    assert groups["billing"].outcome == GroupOutcome(expired=False, ttl_skipped=0, evicted_skipped=10, moved_skipped=2)
    # what the plan does, never the plan's quota verdict: that is a live state (the header's)
    assert groups["billing"].outcome.describe() == "evicts 10, moves up 2"
    # in the plan's topics but not in its groups table: no outcome; a reader holds nothing
    assert groups["audit-reader"].outcome is None and groups["audit-reader"].holds_back_bytes == 0


def test_group_outcome_words() -> None:
    assert GroupOutcome(True, 5, 0, 0).describe() == "expires"
    assert GroupOutcome(False, 1234, 0, 0).describe() == "ttl skips 1,234"
    assert GroupOutcome(False, 0, 0, 0).describe() == "unchanged"


# -- one screen, one truth (walk findings 5, 6 and 16) -----------------------------------

#: the clock of these tests: a minute after the catalog was built (and its policies set)
LATER = NOW + MINUTE
#: styles that tell the palette's roles apart in a cell
TONES = Palette(*(Style(color=c) for c in ("green", "yellow", "red", "grey50", "cyan")))


def _ledger_plan(now: int, evicted: int) -> Plan:
    """A plan of payments at ``now`` in which the ledger is over quota and evicted,
    one of its segments kept by the ledger's position (KEEP_BARRIER)."""
    group = {"topic": "payments", "group": "ledger", "partition": 0, "ttl_skipped": 0, "moved_skipped": 0}
    segment = {"topic": "payments", "partition": 0, "base_offset": 0, "sealed": True, "size_bytes": 0}
    return Plan(
        now=now,
        tables={
            "segments": _plan_table(
                "segments",
                [
                    {
                        **segment,
                        "decision": "keep",
                        "reason": "KEEP_BARRIER",
                        "detail": "group ledger at 10",
                        "eligible_at": now - 143_000,
                    }
                ],
            ),
            "groups": _plan_table(
                "groups", [{**group, "evicted_skipped": evicted, "expired": False, "over_quota": True}]
            ),
            "partitions": _plan_table("partitions", []),
            "topics": _plan_table("topics", []),
        },
        rejected={},
    )


def _rows(root: Path, plan: Plan | None) -> TopicRows:
    with Broker(root, clock=lambda: LATER) as broker:
        data = load_topic(broker, "payments", plan)
    host = ConsoleHost(root, engine=False, clock=lambda: LATER)
    try:
        return topic_rows(data, host.engine_status(), TONES, ChartSpec("", ""))
    finally:
        host.close()


def test_the_quota_label_does_not_say_quota_twice(console_data: Path) -> None:
    with Broker(console_data, clock=lambda: LATER) as broker:
        EngineState(broker.catalog).set_quota_state("payments", True, LATER - 5 * MINUTE)
    line = _rows(console_data, None).summary.plain.splitlines()[0]
    assert line == "state quota exceeded · backlog quota exceeded 5m"


def test_eligibility_says_it_counts_from_the_plan(console_data: Path) -> None:
    plan = _ledger_plan(LATER - 4_000, evicted=12)
    (barrier,) = [r for r in _rows(console_data, plan).segments if r.key == "0:0"]
    assert [str(c) for c in barrier.cells[-3:]] == ["keep", "KEEP_BARRIER", "2m 23s before plan"]
    assert eligible_text(LATER + 5 * MINUTE, LATER) == "5m after plan"
    assert eligible_text(None, LATER) == "-"


def test_the_plan_column_never_contradicts_the_live_quota(console_data: Path) -> None:
    """The plan of 4 s ago found the ledger over quota and evicted it; the ledger has
    caught up since: the header says ok, and the Plan column only what the plan did,
    as of its instant."""
    with Broker(console_data, clock=lambda: LATER) as broker:
        broker.commit("payments", "ledger", 0, 120, at_ms=LATER - 1_000)
        journal = Journal(broker.catalog)
        journal.start_cycle(
            trigger="schedule", actor="engine", scope="all", now=LATER - 4_000, started=LATER - 4_000, spark_master=None
        )
    rows = _rows(console_data, _ledger_plan(LATER - 4_000, evicted=12))
    assert rows.summary.plain.splitlines()[0] == "state ok · backlog ok"
    (ledger,) = rows.groups
    assert ledger.cells[-1].plain == "evicts 12" and ledger.cells[-1].style == TONES.warning
    assert rows.groups_note.startswith("Plan column: plan of 4s ago · consumption protect")
    assert rows.segments_note.startswith("plan of 4s ago: 0 to delete")


def test_a_stale_plan_reads_stale_in_both_tables(console_data: Path) -> None:
    with Broker(console_data, clock=lambda: LATER) as broker:
        journal = Journal(broker.catalog)
        later = journal.start_cycle(
            trigger="schedule", actor="engine", scope="all", now=LATER - 1_000, started=LATER, spark_master=None
        )
    rows = _rows(console_data, _ledger_plan(LATER - MINUTE, evicted=12))
    (ledger,) = rows.groups
    assert ledger.cells[-1].style == TONES.muted
    assert all(c.style == TONES.muted for r in rows.segments for c in r.cells[-3:] if isinstance(c, Text))
    assert rows.groups_note.startswith("Plan column: STALE plan of 1m ago · ")
    assert rows.segments_note == f"STALE plan of 1m ago (cycle {later} planned since) · v plans again"


# -- keys --------------------------------------------------------------------------------


async def _open_from_overview(pilot, topic: str) -> None:
    await settle(pilot)
    topics = pilot.app.screen.query_one("#topics", LiveTable)
    while topics.selected_key != topic:
        await pilot.press("down")
    await pilot.press("enter")
    await settle(pilot)


def _column(table: LiveTable, key: str) -> list[str]:
    index = [c.key for c in table.live_columns].index(key)
    return [str(row.cells[index]) for row in table.shown_rows]


async def test_enter_opens_the_topic_and_esc_goes_back(make_console) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await _open_from_overview(pilot, "orders")
        screen = app.screen
        assert isinstance(screen, TopicScreen) and screen.topic == "orders"
        assert len(screen.query_one("#segments", LiveTable).shown_rows) == 16
        assert _column(screen.query_one("#groups", LiveTable), "group") == ["audit-reader", "billing"]
        assert _column(screen.query_one("#segments", LiveTable), "decision") == ["-"] * 16
        assert "no plan" in screen.query_one("#segments-box").border_subtitle
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, OverviewScreen)


async def test_tab_filter_and_focused_group(make_console) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await _open_from_overview(pilot, "orders")
        screen = app.screen
        assert app.focused is screen.query_one("#segments")
        visited = []
        for _ in range(3):
            await pilot.press("tab")
            visited.append(app.focused.id)
        assert sorted(visited) == ["groups", "partitions", "segments"]

        while app.focused.id != "groups":
            await pilot.press("tab")
        await pilot.press("down")
        assert screen.focused_group() == ("orders", "billing")

        # ``/`` searches the table in use: here the groups, and only them
        await pilot.press("slash", *"bill", "enter")
        assert [r.key for r in screen.query_one("#groups", LiveTable).shown_rows] == ["billing"]
        assert len(screen.query_one("#segments", LiveTable).shown_rows) == 16
        await pilot.press("escape")
        assert len(screen.query_one("#groups", LiveTable).shown_rows) == 2

        while app.focused.id != "segments":
            await pilot.press("tab")
        await pilot.press("slash", "p", "1")
        await settle(pilot)
        segments = screen.query_one("#segments", LiveTable)
        assert _column(segments, "partition") == ["1"] * 8
        assert len(screen.query_one("#groups", LiveTable).shown_rows) == 2  # only the segments filter


async def test_plan_now_without_spark_is_a_notification_even_read_only(make_console) -> None:
    """``v`` deletes nothing, so read-only mode allows it; with Spark off it fails
    with one line, and the view stays as it was."""
    app = make_console(read_only=True)
    async with app.run_test(size=TERMINAL) as pilot:
        await _open_from_overview(pilot, "orders")
        await pilot.press("v")
        await settle(pilot)
        assert isinstance(app.screen, TopicScreen)
        errors = [n.message for n in raised_toasts(app) if n.severity == "error"]
        assert errors == ["the Spark engine is off in this console"]
        assert app.screen.query_one("#segments-box").border_subtitle == "no plan: Spark is off in this console"


async def test_plan_now_shows_the_plans_decisions(make_console, spark_engine) -> None:
    app = make_console(spark=spark_engine)
    async with app.run_test(size=TERMINAL) as pilot:
        await _open_from_overview(pilot, "orders")
        await pilot.press("v")
        assert app.screen.query_one("#segments-box").border_subtitle.startswith("planning")
        await settle(pilot)
        plan = app.host.latest_plan.plan
        rows = plan.tables["segments"].to_pylist()
        expected = {f"{r['partition']}:{r['base_offset']}": (r["decision"], r["reason"]) for r in rows}
        segments = app.screen.query_one("#segments", LiveTable)
        shown = {row.key: (str(row.cells[7]), str(row.cells[8])) for row in segments.shown_rows}
        assert shown == expected
        # billing (at 30 on partition 0) keeps data the retention time would delete
        assert ("keep", "KEEP_BARRIER") in shown.values() and ("delete", "DELETE_TIME") in shown.values()
        barrier_bytes = sum(r["size_bytes"] for r in rows if r["reason"] == "KEEP_BARRIER")
        groups = app.screen.query_one("#groups", LiveTable)
        holds = dict(zip(_column(groups, "group"), _column(groups, "holds")))
        assert holds == {"audit-reader": "0 B", "billing": format.size(barrier_bytes)}
        assert app.screen.query_one("#segments-box").border_subtitle.startswith("plan of 0s ago")


#: every key the footer must show on the Topic view; the rest (T, D, E, z, s, esc) are in help
FOOTER_KEYS = {"slash", "e", "x", "h", "m", "v", "ctrl+q", "colon", "question_mark", "r", "p", "t"}


async def test_every_footer_key_of_the_topic_view_shows_at_120_columns(make_console) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await _open_from_overview(pilot, "orders")
        await pilot.pause()
        keys = {k.key: k.region for k in app.screen.query("FooterKey")}
        assert FOOTER_KEYS <= keys.keys()
        cut = {key: region.right for key, region in keys.items() if region.right > TERMINAL[0]}
        assert not cut, f"keys past column {TERMINAL[0]}: {cut}"


# -- snapshots -----------------------------------------------------------------------------


def _open(topic: str):
    async def run_before(pilot) -> None:
        await settle(pilot)
        pilot.app.open_topic(topic)
        await settle(pilot)
        # A table measures its new rows when idle: let it, before the picture (as screenshots/generate.py does).
        await pilot.pause(0.3)
        await settle(pilot)

    return run_before


def test_snapshot_without_plan(snap_compare, make_console) -> None:
    assert snap_compare(make_console(), terminal_size=TERMINAL, run_before=_open("orders"))


def test_snapshot_with_plan(snap_compare, make_console, spark_engine) -> None:
    app = make_console(spark=spark_engine)
    app.host.plan(["orders"])
    assert snap_compare(app, terminal_size=TERMINAL, run_before=_open("orders"))


def test_snapshot_high_contrast_with_plan(snap_compare, make_console, spark_engine) -> None:
    app = make_console(spark=spark_engine, theme="ebbtide-high-contrast")
    app.host.plan(["payments"])
    assert snap_compare(app, terminal_size=TERMINAL, run_before=_open("payments"))


def test_the_policy_summary_breaks_between_items_at_120_columns(console_data: Path) -> None:
    """With a hold, a ttl and both quotas set on the topic, the second line of limits
    ran past 118 columns and wrapped inside its last item (``unmarked: engine`` /
    ``default``; walk3 finding 6): lines break between items."""
    with Broker(console_data, clock=lambda: NOW) as broker:
        broker.alter_topic(
            "orders",
            {
                "hold": "on",
                "message_ttl": "20s",
                "backlog_size": "8 KiB",
                "backlog_age": "10m",
                "granularity": "message",
            },
            actor="test",
        )
        data = load_topic(broker, "orders", None)
    palette = Palette(*(Style() for _ in range(5)))
    lines = policy_summary(data, palette).plain.split("\n")
    assert all(len(line) <= SUMMARY_WIDTH for line in lines), lines
    assert lines[-1].endswith("unmarked: engine default")
    assert sum("hold on (topic)" in line for line in lines) == 1
    assert not any(line.startswith(" ") or line.endswith(" · ") for line in lines)


def test_an_instant_past_year_9999_reads_as_epoch_ms_not_a_crash() -> None:
    """A record stamped late in 9999 (``ebb produce`` takes it) is eligible a
    retention later, past what a date holds: its segment row's search text formats
    that instant on every refresh, and raised ValueError (year 10000 is out of range)."""
    far = MAX_INSTANT_MS + 7 * 24 * 60 * MINUTE
    assert format.instant(far) == f"{far} ms"
    assert format.instant(1_800_000_000_000) == "2027-01-15 08:00:00"
