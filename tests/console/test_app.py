"""The console's shared plumbing: the Overview, navigation, the filter, sorting,
themes, the palette, the top bar's badges and read-only mode's key hints."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.geometry import Region
from textual.widgets import Static

from console import format
from console.commands import EbbCommands
from console.model.overview import load_overview
from console.screens.base import MUTATING_ACTIONS
from console.widgets.live_table import LiveTable
from console.widgets.top_bar import TopBar
from engine.broker import Broker
from engine.prune.operations import pause
from tests.support.console_fixtures import HOUR, NOW, TERMINAL, raised_toasts, settle

# -- formatting -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (None, "-"),
        (0, "0s"),
        (999, "0s"),
        (65_000, "1m 5s"),
        (3 * 86_400_000 + 4 * 3_600_000 + 5_000, "3d 4h"),
        (2 * HOUR, "2h"),
        (-90_000, "in 1m 30s"),
    ],
)
def test_ages_read_in_at_most_two_units(ms: int | None, text: str) -> None:
    assert format.age(ms) == text


@pytest.mark.parametrize(
    ("n", "text"), [(None, "-"), (0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"), (3 << 30, "3.0 GiB")]
)
def test_sizes_are_binary_and_short(n: int | None, text: str) -> None:
    assert format.size(n) == text


# -- the overview's model --------------------------------------------------------------------


def test_overview_model_counts_each_topic_and_its_backlog(console_data: Path) -> None:
    with Broker(console_data, clock=lambda: NOW) as broker:
        data = load_overview(broker)
        expected = {
            name: (
                len(broker.catalog.partitions(name)),
                sum(len(broker.catalog.segments(name, p.partition)) for p in broker.catalog.partitions(name)),
            )
            for name in ("clickstream", "orders", "payments")
        }
    topics = {t.name: t for t in data.topics}
    assert sorted(topics) == ["clickstream", "legal", "metrics", "orders", "payments", "sessions"]
    for name, (partitions, segments) in expected.items():
        assert (topics[name].partitions, topics[name].segments) == (partitions, segments)
    # 120 records of 100 B and a batch header each per partition: every byte counted
    assert topics["clickstream"].size_bytes > 2 * 120 * 100
    assert topics["clickstream"].oldest_timestamp == NOW - 2 * HOUR
    # payments' subscriber "ledger" sits at offset 10 of 120: its backlog is almost the
    # whole partition, in whole segments, against a 4 KiB quota
    payments = topics["payments"].quota
    assert payments.quota.size_bytes == 4096
    assert payments.backlog_bytes is not None and payments.backlog_bytes > 4096
    assert topics["payments"].states() == ("over quota",)
    # a reader never counts as backlog; clickstream has no group at all
    assert topics["clickstream"].quota.backlog_bytes is None
    assert topics["legal"].states() == ("held",)
    assert topics["orders"].states() == ("ok",)
    assert data.paused is False and data.now == NOW


# -- the app ---------------------------------------------------------------------------------


async def test_overview_lists_every_topic_and_opens_one(make_console) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#topics", LiveTable)
        assert [r.key for r in table.shown_rows] == [
            "clickstream",
            "legal",
            "metrics",
            "orders",
            "payments",
            "sessions",
        ]
        assert app.known_topics == [r.key for r in table.shown_rows]
        await pilot.press("down", "down", "down", "enter")
        await settle(pilot)
        assert type(app.screen).__name__ == "TopicScreen" and app.screen.topic == "orders"
        await pilot.press("escape")
        await settle(pilot)
        assert type(app.screen).__name__ == "OverviewScreen"


async def test_number_keys_reach_every_view_and_escape_returns(make_console) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        for key, view in (("2", "GroupsScreen"), ("3", "QuotasScreen"), ("4", "JournalScreen"), ("5", "EngineScreen")):
            await pilot.press(key)
            await settle(pilot)
            assert type(app.screen).__name__ == view
            await pilot.press("escape")
            await settle(pilot)
            assert type(app.screen).__name__ == "OverviewScreen"


async def test_slash_filters_rows_and_escape_clears_the_filter(make_console) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#topics", LiveTable)
        await pilot.press("slash", *"pay")
        assert [r.key for r in table.shown_rows] == ["payments"]
        await pilot.press("enter")
        assert [r.key for r in table.shown_rows] == ["payments"]  # enter keeps it
        await pilot.press("escape")
        assert len(table.shown_rows) == 6
        assert type(app.screen).__name__ == "OverviewScreen"  # the first esc only cleared


async def test_sorting_uses_raw_values_and_reverses(make_console) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#topics", LiveTable)
        table.sort_column = "bytes"
        sizes = [r.sort_values[3] for r in table.shown_rows]
        assert sizes == sorted(sizes)
        await pilot.press("S")
        assert [r.sort_values[3] for r in table.shown_rows] == sorted(sizes, reverse=True)
        # the cursor follows its row through a re-sort
        selected = table.selected_key
        table.sort_column = "topic"
        assert table.selected_key == selected


async def test_refresh_shows_what_another_process_changed(make_console, console_data: Path) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        with Broker(console_data, clock=lambda: NOW) as other:
            other.create_topic("newcomer", 1)
            pause(other, actor="test")
        await pilot.press("r")
        await settle(pilot)
        table = app.screen.query_one("#topics", LiveTable)
        assert "newcomer" in [r.key for r in table.shown_rows]
        assert app.deletion_paused is True
        assert app.screen.query_one(TopBar).paused is True


async def test_theme_switches_at_run_time_and_is_remembered(make_console, console_settings) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        assert app.theme == "ebbtide-dark"
        await pilot.press("t")
        await settle(pilot)
        assert app.theme != "ebbtide-dark"
        chosen = app.theme
    assert console_settings.theme == chosen
    again = make_console()
    async with again.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        assert again.theme == chosen


async def test_theme_flag_wins_over_the_remembered_one(make_console, console_settings) -> None:
    console_settings.remember_theme("ebbtide-light")
    app = make_console(theme="ebbtide-high-contrast")
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        assert app.theme == "ebbtide-high-contrast"


async def test_read_only_shows_a_badge_and_hides_every_mutating_key(make_console) -> None:
    app = make_console(read_only=True)
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        assert app.screen.query_one(TopBar).read_only is True
        shown = {binding.action for _key, binding, enabled, _tip in app.screen.active_bindings.values() if enabled}
        assert not (shown & MUTATING_ACTIONS)
        assert "refresh" in shown and "filter" in shown


async def test_read_only_says_why_a_mutating_key_does_nothing(make_console) -> None:
    """Hidden from the footer, a mutating key still answers: a toast naming what was
    refused, and nothing else happens (no dialog)."""
    app = make_console(read_only=True)
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        await pilot.press("enter")  # the first topic
        await settle(pilot)
        topic = app.screen
        for key in ("e", "x", "h", "z", "T", "D"):
            await pilot.press(key)
            await settle(pilot)
            assert app.screen is topic
        refused = [str(n.message) for n in raised_toasts(app) if n.title == "Read-only"]
        assert len(refused) == 6 and all(m.endswith("refused: the console is read-only") for m in refused)
        assert refused[0].startswith("Edit policy") and refused[-1].startswith("Purge")
        await pilot.press("slash", *"ex", "escape")  # typed into the filter: no refusal
        await settle(pilot)
        assert len([n for n in raised_toasts(app) if n.title == "Read-only"]) == 6


async def test_palette_offers_views_topics_and_no_mutation_when_read_only(make_console) -> None:
    from console.commands import EbbCommands

    for read_only in (False, True):
        app = make_console(read_only=read_only)
        async with app.run_test(size=TERMINAL) as pilot:
            await settle(pilot)
            provider = EbbCommands(app.screen)
            names = [name for name, _help, _run in provider._commands()]
            assert {"overview", "groups", "quotas", "journal", "engine", "topic orders", "theme ebbtide-light"} <= set(
                names
            )
            assert ({"prune", "pause", "resume"} & set(names)) == (set() if read_only else {"prune", "pause", "resume"})


async def test_number_keys_always_reach_their_view_and_the_breadcrumb_says_where(make_console) -> None:
    from console.screens.topic import TopicScreen

    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        assert app.COMMANDS == {EbbCommands}  # no Textual built-ins (keys, screenshot, foreign themes)
        app.open_topic("orders")  # as the palette's "topic orders" does
        await settle(pilot)
        assert app.screen.query_one(TopBar).view_title == "Overview › Topic orders"
        for key, view in (("4", "JournalScreen"), ("1", "OverviewScreen"), ("3", "QuotasScreen")):
            await pilot.press(key)
            await settle(pilot)
            assert type(app.screen).__name__ == view
        app.open_topic("payments")
        await settle(pilot)
        assert app.screen.query_one(TopBar).view_title == "Quotas › Topic payments"
        await pilot.press("3")  # the view the topic was opened from: its own base screen
        await settle(pilot)
        assert type(app.screen).__name__ == "QuotasScreen" and not isinstance(app.screen, TopicScreen)
        await pilot.press("1")
        await settle(pilot)
        assert type(app.screen).__name__ == "OverviewScreen"


async def test_a_toast_that_expired_is_still_among_those_raised(make_console) -> None:
    """The tests read toasts from ``raised_toasts``: on screen, one expires."""
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        app.notify("gone soon", title="Brief", timeout=0.05)
        await pilot.pause(0.3)
        assert "Brief" not in [n.title for n in app._notifications]
        assert [str(n.message) for n in raised_toasts(app) if n.title == "Brief"] == ["gone soon"]


async def test_t_names_the_theme_it_switched_to(make_console) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        await pilot.press("t")
        await settle(pilot)
        assert app.theme != "ebbtide-dark"
        assert [str(n.message) for n in raised_toasts(app)][-1] == f"theme {app.theme} (t: next)"


async def test_what_the_start_had_to_say_is_shown_once_the_console_is_up(make_console) -> None:
    """A metrics address another process serves is not served here (console/cli/metrics.py):
    said on stderr before the console starts, it would be drawn over at once."""
    app = make_console(notices=("metrics address 127.0.0.1:9464: cannot listen (Address already in use): ...",))
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        shown = [(n.title, n.severity, str(n.message)) for n in raised_toasts(app)]
        assert ("Metrics", "warning", app._notices[0]) in shown


async def test_a_failing_load_is_a_notification_not_a_crash(make_console, monkeypatch: pytest.MonkeyPatch) -> None:
    """The notice shows the error as written: read as markup, a path's ``[b]`` and
    ``[/]`` were taken for styles and left out of it."""
    app = make_console()
    async with app.run_test(size=TERMINAL, notifications=True) as pilot:
        await settle(pilot)
        text = "disk on fire: cannot read /data/[b]old/[/]catalog.db: [Errno 5] Input/output error"

        def broken(_broker, *_steps):
            raise OSError(text)

        monkeypatch.setattr("console.screens.overview.load_overview", broken)
        await pilot.press("r")
        await settle(pilot)
        assert _toasts(app) == [f"Refresh failed\nOSError: {text}"]
        assert app.is_running


async def test_the_demos_failures_are_shown_each_once(make_console) -> None:
    """``ebb console --demo``: a demo thread that fails tries again every few seconds;
    what went wrong reached no one (the threads never print). It is shown now, each
    failure once however often it comes back."""
    legal = "ebb-demo-produce-demo-legal: NotFound: topic 'demo-legal' does not exist"
    full = "ebb-demo-consume: StoreError: [Errno 28] No space left on device"
    others = [f"ebb-demo-produce-demo-{n}: StoreError: [Errno 28] No space left on device" for n in range(4)]
    batches = [[], [legal, legal], [legal], [full, legal, *others], []]
    app = make_console(demo_failures=lambda: batches.pop(0) if batches else [])
    async with app.run_test(size=TERMINAL, notifications=True) as pilot:
        await settle(pilot)
        while batches:  # the status timer's ticks, at once
            app._tick()
        await settle(pilot)
        assert [n.severity for n in raised_toasts(app)] == ["warning", "warning"]
        assert _toasts(app) == [
            f"Demo traffic\n{legal}",
            "\n".join(["Demo traffic", *others[-3:], "(and 2 more)"]),
        ]


def _toasts(app) -> list[str]:
    """The notices on screen, as drawn (title, then message)."""
    return [str(toast.render()) for toast in app.screen.query("Toast")]


# -- snapshots ---------------------------------------------------------------------------------


@pytest.mark.parametrize("theme", ["ebbtide-dark", "ebbtide-light", "ebbtide-high-contrast"])
def test_overview_snapshot(snap_compare, make_console, theme: str) -> None:
    assert snap_compare(make_console(theme=theme), terminal_size=TERMINAL, run_before=settle)


def test_overview_read_only_snapshot(snap_compare, make_console) -> None:
    assert snap_compare(make_console(read_only=True), terminal_size=TERMINAL, run_before=settle)


async def test_help_names_every_view_and_current_key_in_full(make_console) -> None:
    """The help at 120 columns: view 6, the Journal's kind picker and its clear-all key,
    the confirmations, and no heading or key cut short."""
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await settle(pilot)
        keys = app.screen.query_one("#help-keys", Static)
        lines = keys.render_lines(Region(0, 0, keys.size.width, keys.size.height))
        text = " ".join(" ".join(line.text for line in lines).split())  # wrapped lines joined
        assert "Overview, Groups, Quotas, Journal, Engine, Forecast" in text
        assert "Steering (not in --read-only)" in text and text.count("…") == 1  # "1 … 6" only: none cut
        assert "pick an action kind" in text and "next / previous action kind" not in text
        assert "clear every filter" in text and "(y confirms)" in text


def test_help_snapshot(snap_compare, make_console) -> None:
    async def open_help(pilot) -> None:
        await settle(pilot)
        await pilot.press("question_mark")
        await settle(pilot)

    assert snap_compare(make_console(), terminal_size=TERMINAL, run_before=open_help)


def test_command_palette_snapshot(snap_compare, make_console) -> None:
    async def open_palette(pilot) -> None:
        await settle(pilot)
        await pilot.press("colon", *"topic")
        await settle(pilot)
        await pilot.pause(0.3)  # the palette searches asynchronously

    assert snap_compare(make_console(), terminal_size=TERMINAL, run_before=open_palette)


async def test_views_follow_an_edit_of_the_config_file(make_console, console_data: Path) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#topics", LiveTable)
        payments = next(r for r in table.shown_rows if r.key == "payments")
        assert "7d" in str(payments.cells[5])
        (console_data / "ebb.toml").write_text('[policy]\nretention_time = "2d"\n')
        await pilot.press("r")
        await settle(pilot)
        payments = next(r for r in table.shown_rows if r.key == "payments")
        assert "2d" in str(payments.cells[5])
        (console_data / "ebb.toml").write_text("[policy\n")  # broken: said, not a crash
        await pilot.press("r")
        await settle(pilot)
        assert any("ebb.toml" in str(n.message) for n in raised_toasts(app))
        assert app.is_running


async def test_a_refresh_rewrites_changed_cells_and_widens_their_column(make_console) -> None:
    from textual.app import App

    from console.widgets.live_table import Column, LiveRow

    class One(App[None]):
        def compose(self):
            yield LiveTable([Column("name", "Name"), Column("size", "Size")])

    app = One()
    async with app.run_test(size=TERMINAL) as pilot:
        table = app.query_one(LiveTable)
        table.show([LiveRow("a", ("a", "1 B"), ("a", 1)), LiveRow("b", ("b", "2 B"), ("b", 2))])
        await pilot.pause()
        width = table.columns[table.ordered_columns[1].key].content_width
        table.show([LiveRow("a", ("a", "1 B"), ("a", 1)), LiveRow("b", ("b", "2.0 GiB and more"), ("b", 2 << 30))])
        await pilot.pause()
        assert str(table.get_cell("b", "size")) == "2.0 GiB and more"
        assert str(table.get_cell("a", "size")) == "1 B"
        assert table.columns[table.ordered_columns[1].key].content_width == len("2.0 GiB and more") > width
        # a narrower value later never shrinks the column (no re-measuring of the rest)
        table.show([LiveRow("a", ("a", "1 B"), ("a", 1)), LiveRow("b", ("b", "3 B"), ("b", 3))])
        await pilot.pause()
        assert str(table.get_cell("b", "size")) == "3 B"
        assert table.columns[table.ordered_columns[1].key].content_width == len("2.0 GiB and more")


async def test_a_theme_switch_recolours_cells_whose_text_is_unchanged(make_console) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#topics", LiveTable)
        before = table.get_cell("legal", "state").style
        await pilot.press("t")
        await settle(pilot)
        after = table.get_cell("legal", "state")
        assert str(after) == "held" and after.style != before


async def test_on_an_80x24_terminal_the_tables_keep_their_rows(make_console) -> None:
    """Walk finding: at 80x24 the engine panel's charts took 19 of 24 lines (the
    Overview showed 1 topic of 6), and the Topic view's segments had no row at all."""
    app = make_console()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert not app.screen.query_one("#engine-charts").display
        assert app.screen.query_one("#topics", LiveTable).scrollable_content_region.height >= 6 + 1  # header
        await pilot.press("down", "down", "down", "enter")
        await settle(pilot)
        assert not app.screen.query_one("#history-box").display
        assert app.screen.query_one("#segments", LiveTable).scrollable_content_region.height >= 3


async def test_at_the_usual_size_the_charts_are_shown(make_console) -> None:
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        assert app.screen.query_one("#engine-charts").display
        await pilot.press("down", "down", "down", "enter")
        await settle(pilot)
        assert app.screen.query_one("#history-box").display


async def test_a_header_without_badges_has_no_empty_slot(make_console) -> None:
    """An audit: with nothing to flag the header read `Ebbtide │ Journal │ │ Spark`."""
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        bar = app.screen.query_one(TopBar)
        bar.facts, bar.live = None, True
        assert bar.badges() == []
        header = bar.render().plain
        assert "│ │" not in header and header.startswith(" Ebbtide │ Overview │ Spark"), header
