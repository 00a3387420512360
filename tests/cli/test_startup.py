"""``ebb`` starts fast: a command that neither plans nor applies a plan imports no
Spark, Arrow, numpy or pandas (they cost a second of every start). The CLI imports
every command's module to build its parser, so a command module imports those only
inside the handlers that need them (console/cli/main.py)."""

from __future__ import annotations

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


@pytest.mark.parametrize(
    "argv",
    [
        ["topic", "list"],
        ["topic", "describe", "orders"],
        ["group", "list", "orders"],
        ["consume", "orders", "--group", "billing", "--max", "1"],
        ["log", "--cycles"],
        ["verify"],
        ["--help"],
    ],
    ids=" ".join,
)
def test_a_command_that_does_not_plan_loads_no_spark_arrow_or_numpy(data_dir: Path, argv: list[str]) -> None:
    with Broker(data_dir) as broker:
        broker.create_topic("orders")
        broker.create_group("orders", "billing", "reader", "earliest")
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), "--data-dir", str(data_dir), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "loaded:" in done.stdout, done.stderr
    loaded = done.stdout.rsplit("loaded:", 1)[1].split("exit:")[0].strip()
    assert loaded == "", f"`ebb {' '.join(argv)}` imported {loaded}"


def test_the_probe_sees_a_command_that_applies_load_arrow(data_dir: Path) -> None:
    """The probe itself: `ebb group expire` runs through the executor, which loads
    Arrow (here it stops at an unknown topic, after its handler imported the executor)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), "--data-dir", str(data_dir), "group", "expire", "nope", "x"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "pyarrow" in done.stdout.rsplit("loaded:", 1)[1], done.stdout + done.stderr
