"""Console test fixtures: a fixed catalog at a fixed clock, an app on it that loads
deterministically, and the switches that make snapshots repeatable (no animation,
no cursor blink, no live refresh or file watching, a fixed terminal size).

Use ``console_app`` for Pilot tests and ``snap_console`` for snapshot tests; both
take keyword arguments for the app (``read_only=True``...). ``settle(pilot)`` waits
until every worker is done and the UI has caught up.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

from engine.broker import Broker
from engine.store.batch import NewRecord

#: the console's clock in every console test: 2026-11-21T12:00:00Z
NOW = 1_795_262_400_000
MINUTE = 60_000
HOUR = 60 * MINUTE
TERMINAL = (120, 40)

#: the demo-like catalog: one topic per policy of SPEC §3
TOPICS: dict[str, tuple[int, dict[str, str]]] = {
    "clickstream": (2, {"retention_time": "1h", "segment_size": "2 KiB"}),
    "metrics": (
        1,
        {
            "retention_time": "infinite",
            "retention_size": "4 KiB",
            "max_partition_size": "8 KiB",
            "segment_size": "2 KiB",
        },
    ),
    "orders": (2, {"retention_time": "30m", "consumption": "protect", "segment_size": "2 KiB"}),
    "payments": (
        1,
        {
            "backlog_size": "4 KiB",
            "backlog_policy": "consumer_backlog_eviction",
            "segment_size": "2 KiB",
            "consumption": "protect",
        },
    ),
    "sessions": (1, {"message_ttl": "20m", "granularity": "message", "retention_time": "1h", "segment_size": "2 KiB"}),
    "legal": (1, {"retention_time": "10m", "hold": "on", "segment_size": "2 KiB"}),
}


def build_catalog(root: Path) -> None:
    """Topics, records every minute of the last two hours (100 B each), and groups
    at fixed positions: a lagging subscriber, a reader, a caught-up subscriber."""
    clock = [NOW]
    with Broker(root, clock=lambda: clock[0]) as broker:
        for name, (partitions, policy) in TOPICS.items():
            clock[0] = NOW - 2 * HOUR  # created before its first record: what it journals comes first
            broker.create_topic(name, partitions, policy, actor="test")
            clock[0] = NOW
            for p in range(partitions):
                records = [
                    NewRecord(value=bytes(100), key=None, timestamp=NOW - 2 * HOUR + m * MINUTE + p) for m in range(120)
                ]
                for start in range(0, len(records), 10):  # small batches: several segments
                    broker.produce(name, records[start : start + 10], partition=p)
        broker.create_group("orders", "billing", "subscriber")
        broker.commit("orders", "billing", 0, 30, at_ms=NOW - 50 * MINUTE)
        broker.commit("orders", "billing", 1, 90, at_ms=NOW - 5 * MINUTE)
        broker.create_group("orders", "audit-reader", "reader", "latest")
        broker.create_group("payments", "ledger", "subscriber")
        broker.commit("payments", "ledger", 0, 10, at_ms=NOW - 90 * MINUTE)
        broker.create_group("sessions", "tracker", "subscriber", "latest")


@pytest.fixture(scope="session")
def console_catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixed catalog, built once; copy it (``console_data``) before changing it."""
    root = tmp_path_factory.mktemp("console-catalog") / "data"
    build_catalog(root)
    return root


@pytest.fixture
def console_data(console_catalog: Path, tmp_path: Path) -> Path:
    """A private copy of the fixed catalog, safe to change."""
    import shutil

    target = tmp_path / "data"
    shutil.copytree(console_catalog, target)
    return target


@pytest.fixture(autouse=True)
def _no_cursor_blink(monkeypatch: pytest.MonkeyPatch) -> None:
    from textual.widgets import Input

    monkeypatch.setattr(Input, "_toggle_cursor", lambda self: None)


@pytest.fixture
def console_settings(tmp_path: Path):
    from console.settings import ConsoleSettings

    return ConsoleSettings(tmp_path / "settings" / "console.json")


@pytest.fixture
def make_console(console_data: Path, console_settings) -> Iterator[Callable[..., object]]:
    """``make_console(read_only=False, spark=None, theme=None)`` -> an EbbApp on a
    private copy of the fixed catalog, at the fixed clock, without Spark unless one
    is lent, without live refresh or file watching."""
    from console.app import EbbApp
    from console.host import ConsoleHost

    hosts: list[ConsoleHost] = []

    def make(
        *,
        read_only: bool = False,
        spark=None,
        theme: str | None = None,
        data: Path | None = None,
        notices: tuple[str, ...] = (),
        demo_failures: Callable[[], list[str]] | None = None,
    ) -> EbbApp:
        host = ConsoleHost(data or console_data, read_only=read_only, engine=False, clock=lambda: NOW, spark=spark)
        hosts.append(host)
        app = EbbApp(
            host, theme=theme, live=False, watch=False, settings=console_settings, notices=notices,
            demo_failures=demo_failures,
        )  # fmt: skip
        _record_toasts(app)
        return app

    yield make
    for host in hosts:
        host.close()


_RAISED: weakref.WeakKeyDictionary[Any, list[Any]] = weakref.WeakKeyDictionary()


def _record_toasts(app: Any) -> None:
    raised: list[Any] = []
    add = app._notifications.add

    def recorded(notification: Any) -> Any:
        raised.append(notification)
        return add(notification)

    app._notifications.add = recorded
    _RAISED[app] = raised


def raised_toasts(app: Any) -> list[Any]:
    """Every toast (a textual ``Notification``) an app of ``make_console`` has raised,
    in order, expired or not: a toast on screen expires after its 3 to 15 s, which a
    loaded machine can take to press a few keys (a CI run beside a benchmark saw 4 of
    6 left)."""
    return _RAISED[app]


async def settle(pilot) -> None:
    """Wait for every worker (loads, operations) and for the UI to process their
    messages. A refresh superseded by a newer one is cancelled: that is not an error."""
    from textual.worker import WorkerCancelled

    for _ in range(3):
        try:
            await pilot.app.workers.wait_for_complete()
        except WorkerCancelled:
            pass
        await pilot.pause()
    # The top bars show the engine as of their last 1 s tick: bring every screen's up
    # to date, so a snapshot never races the tick (Spark "starting" against "ready").
    for screen in pilot.app.screen_stack:
        pilot.app.sync_top_bar(screen)
    # The footer redraws its keys one refresh after a screen's bindings change (a load
    # that enables ctrl+s); on a loaded machine that refresh can come after the
    # snapshot. Redraw it now, so the keys shown are those the screen offers.
    import asyncio

    from textual.widgets import Footer

    for footer in pilot.app.screen.query(Footer):
        redrawn = asyncio.Event()

        async def redraw(footer: Footer = footer, redrawn: asyncio.Event = redrawn) -> None:
            await footer.recompose()
            redrawn.set()

        footer.call_later(redraw)  # in the footer's own context, as its refresh would
        # A screen dismissed meanwhile takes its footer with it, and the redraw never runs.
        for _ in range(500):
            if redrawn.is_set() or not footer.is_attached:
                break
            await pilot.pause(0.01)
        else:
            raise AssertionError("the footer never redrew")
    # A table measures new rows and changed cells only when its message queue is idle;
    # on a loaded machine a snapshot could catch columns cut to their old widths.
    from textual.widgets import DataTable

    for _ in range(100):
        tables = list(pilot.app.screen.query(DataTable))
        if not any(t._require_update_dimensions or t._updated_cells for t in tables):
            break
        await pilot.pause(0.05)
    await pilot.pause()
