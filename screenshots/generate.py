"""Regenerate ``screenshots/*.svg`` from the console itself.

Every shot is the real app, headless at 120x40, on the fixed catalog the console's
tests use (``tests/support/console_fixtures.py``: one topic per policy, lagging groups) at
its fixed clock, so the pictures change only when the console does. A local Spark
session is started once to show plan decisions, previews and a prune.

Run from the repository root: ``python -m screenshots.generate`` (about a minute).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

from console.app import EbbApp
from console.host import ConsoleHost
from console.settings import ConsoleSettings
from engine.broker import Broker
from engine.prune.operations import set_hold
from engine.prune.session import SparkEngine
from tests.support.console_fixtures import NOW, TERMINAL, build_catalog, settle
from tests.support.history_fixtures import write_disk_history

ROOT = Path(__file__).resolve().parent.parent

Steps = Callable[[object], Awaitable[None]]


@dataclass(frozen=True)
class Shot:
    name: str
    keys: tuple[str, ...] = ()
    theme: str = "ebbtide-dark"
    read_only: bool = False
    #: plan the whole catalog first, so views show decisions
    planned: bool = True


SHOTS = (
    Shot("overview"),
    Shot("overview-light", theme="ebbtide-light"),
    Shot("overview-high-contrast", theme="ebbtide-high-contrast"),
    Shot("overview-read-only", read_only=True),
    Shot("topic", ("down", "down", "down", "enter")),
    Shot("groups", ("2",)),
    Shot("quotas", ("3",)),
    Shot("journal", ("4",)),
    Shot("engine", ("5",)),
    Shot("forecast", ("6", "down", "down", "enter")),
    Shot("policy-editor", ("down", "down", "down", "e")),
    Shot("prune-now", ("down", "down", "down", "x")),
    Shot("truncate", ("down", "down", "down", "T")),
    Shot("help", ("question_mark",)),
    Shot("palette", ("colon", "t", "o", "p", "i", "c")),
)


def journal_history(root: Path) -> None:
    """A hold and its release, so that the Journal shows an operator's actions beside
    the cycles of :func:`write_disk_history`."""
    with Broker(root, clock=lambda: NOW) as broker:
        set_hold(broker, "metrics", True, actor="operator")
        set_hold(broker, "metrics", False, actor="operator")


async def take(shot: Shot, catalog: Path, spark: SparkEngine, out: Path) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        data = Path(scratch) / "data"
        shutil.copytree(catalog, data)
        host = ConsoleHost(data, read_only=shot.read_only, engine=False, clock=lambda: NOW, spark=spark)
        if shot.planned:
            host.plan()
        settings = ConsoleSettings(Path(scratch) / "console.json")
        app = EbbApp(host, theme=shot.theme, live=False, watch=False, settings=settings)
        try:
            async with app.run_test(size=TERMINAL) as pilot:
                await settle(pilot)
                for key in shot.keys:
                    await pilot.press(key)
                    await settle(pilot)
                await pilot.pause(0.5)
                await settle(pilot)
                app.save_screenshot(str(out / f"{shot.name}.svg"))
        finally:
            host.close()


async def main() -> None:
    out = ROOT / "screenshots"
    spark = SparkEngine(master="local[2]", log_dir=Path(tempfile.mkdtemp()) / "logs")
    spark.start()
    spark.session(timeout=300)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            catalog = Path(scratch) / "catalog"
            build_catalog(catalog)
            write_disk_history(catalog)  # an hour of cycles: the charts' past
            journal_history(catalog)
            for shot in SHOTS:
                await take(shot, catalog, spark, out)
                print(f"screenshots/{shot.name}.svg")
    finally:
        spark.stop()


if __name__ == "__main__":
    asyncio.run(main())
