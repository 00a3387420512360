"""``ebb`` starts fast: a command that does not plan imports no Spark, Arrow, numpy or
pandas (they cost a second of every start). The CLI imports every command's module to
build its parser, so a command module imports those only inside the handlers that
need them (console/cli/main.py); a manual operation runs through the executor, whose
input (engine/prune/work.py) and record-time cuts (engine/prune/record_times.py) need
no Arrow."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from engine.broker import Broker

HEAVY = ("pyspark", "pyarrow", "numpy", "pandas", "py4j", "textual")

#: runs one ``ebb`` command in this interpreter, then prints the heavy packages it loaded
PROBE = """
import sys
from console.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as exit_:  # --help
    code = exit_.code
heavy = sorted({{name.split(".")[0] for name in sys.modules}} & set({heavy!r}))
print("\\nloaded:", ",".join(heavy), "exit:", code)
"""


def run_probe(probe: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``probe`` in a fresh interpreter with ``args``."""
    return subprocess.run(
        [sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["topic", "list"],
        ["topic", "describe", "orders"],
        ["group", "list", "orders"],
        ["consume", "orders", "--group", "billing", "--max", "1"],
        ["log", "--cycles"],
        ["verify"],
        ["hold", "orders"],
        ["truncate", "orders", "--partition", "0", "--before-offset", "0"],
        ["group", "move", "orders", "billing", "--partition", "0", "--to-latest"],
        ["group", "expire", "orders", "billing"],
        ["--help"],
    ],
    ids=" ".join,
)
def test_a_command_that_does_not_plan_loads_no_spark_arrow_or_numpy(data_dir: Path, argv: list[str]) -> None:
    with Broker(data_dir) as broker:
        broker.create_topic("orders")
        broker.create_group("orders", "billing", "reader", "earliest")
    done = run_probe(PROBE.format(heavy=HEAVY), "--data-dir", str(data_dir), *argv)
    assert "loaded:" in done.stdout, done.stderr
    loaded, code = (part.strip() for part in done.stdout.rsplit("loaded:", 1)[1].split("exit:"))
    assert loaded == "", f"`ebb {' '.join(argv)}` imported {loaded}"
    assert code == "0", done.stderr  # it ran to its end, not to an early error


def test_the_probe_sees_what_a_command_loaded(data_dir: Path) -> None:
    """The probe itself: Arrow loaded before `ebb topic list` runs is reported."""
    done = run_probe("import pyarrow\n" + PROBE.format(heavy=HEAVY), "--data-dir", str(data_dir), "topic", "list")
    assert "pyarrow" in done.stdout.rsplit("loaded:", 1)[1], done.stdout + done.stderr


#: opens the console headless on a data directory (no Spark: ``engine=False``) until
#: the Overview shows its topics, then prints them and the heavy packages loaded
FIRST_PAINT_PROBE = """
import asyncio, sys
from pathlib import Path
import console.cli.console_cmd
from console.app import EbbApp
from console.host import ConsoleHost
from console.settings import ConsoleSettings
from console.widgets.live_table import LiveTable

preloads = []
if sys.argv[3] == "record":  # the preload after the first paint: recorded, not run
    EbbApp._preload_views = lambda app: preloads.append(1)

async def paint():
    host = ConsoleHost(Path(sys.argv[1]), engine=False)
    app = EbbApp(host, live=False, watch=False, settings=ConsoleSettings(Path(sys.argv[2])))
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(3):
                await app.workers.wait_for_complete()
                await pilot.pause()
            rows = app.screen.query_one("#topics", LiveTable).row_count
    finally:
        host.close()
    heavy = sorted({{name.split(".")[0] for name in sys.modules}} & set({heavy!r}))
    topic_view = "console.screens.topic" in sys.modules
    print("\\npreloads:", len(preloads), "topic view:", topic_view, "rows:", rows, "loaded:", ",".join(heavy))

asyncio.run(paint())
"""


def _first_paint(data_dir: Path, settings: Path, preload: str) -> tuple[int, bool, int, str]:
    """``(preloads requested, Topic view imported, rows, heavy packages loaded)``."""
    with Broker(data_dir) as broker:
        broker.create_topic("orders")
    heavy = tuple(h for h in HEAVY if h != "textual")
    done = run_probe(FIRST_PAINT_PROBE.format(heavy=heavy), str(data_dir), str(settings), preload)
    assert "loaded:" in done.stdout, done.stderr
    fields = re.fullmatch(r"preloads: (\d+) topic view: (\w+) rows: (\d+) loaded: ?(.*)", done.stdout.splitlines()[-1])
    assert fields is not None, done.stdout
    return int(fields[1]), fields[2] == "True", int(fields[3]), fields[4].strip()


def test_the_consoles_first_paint_loads_no_spark_arrow_or_numpy(data_dir: Path, tmp_path: Path) -> None:
    """Launch to the Overview's rows (issue 14, item 10): Arrow and numpy, half a second
    of a start, load after the first paint (in a thread), not before it."""
    preloads, topic_view, rows, loaded = _first_paint(data_dir, tmp_path / "settings.json", "record")
    assert (preloads, topic_view, rows) == (1, False, 1)
    assert loaded == "", f"the console's first paint imported {loaded}"


def test_after_the_first_paint_the_other_views_are_imported_in_a_thread(data_dir: Path, tmp_path: Path) -> None:
    """So that opening a topic never waits on the UI thread for Arrow's import."""
    _preloads, topic_view, rows, loaded = _first_paint(data_dir, tmp_path / "settings.json", "run")
    assert topic_view and rows == 1
    assert {"pyarrow", "numpy"} <= set(loaded.split(",")) and "pyspark" not in loaded
