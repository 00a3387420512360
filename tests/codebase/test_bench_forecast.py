"""``bench/forecast.py`` (issue 15's benchmark) runs against the engine as it is: the
benchmark calls the forecast's parts one by one, so a changed signature there
(``readings`` gained an argument) broke it with no test failing. A tiny catalog here;
the figures are the benchmark's to print, not this test's to judge."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.cli import REPO


def test_the_forecast_benchmark_runs_on_a_tiny_catalog(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.forecast", "--partitions", "4", "--segments", "3", "--instants", "3",
         "--repeat", "1", "--dir", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("synthetic catalog: 4 partitions x 3 segments = 12 segments")
    assert any(line.startswith("forecast:") and "for 3 instants" in line for line in lines), done.stdout
    assert any(line.startswith("ratio:        forecast / plan = ") for line in lines), done.stdout
    assert not list(tmp_path.iterdir())  # its temporary directory is gone with it
