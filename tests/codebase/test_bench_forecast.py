"""``bench/forecast.py`` (issue 15's benchmark) runs against the engine as it is: the
benchmark calls the forecast's parts one by one, so a changed signature there
(``readings`` gained an argument) broke it with no test failing. A tiny catalog here,
on the run's local Spark (a JVM of its own would cost this test most of its time);
the figures are the benchmark's to print, not this test's to judge."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import forecast as bench_forecast
from engine.prune.session import SparkEngine


def test_the_forecast_benchmark_runs_on_a_tiny_catalog(
    tmp_path: Path, spark_engine: SparkEngine, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--partitions", "4", "--segments", "3", "--instants", "3", "--repeat", "1", "--dir", str(tmp_path)]
    bench_forecast.main(argv, engine=spark_engine)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("synthetic catalog: 4 partitions x 3 segments = 12 segments")
    assert f"master {spark_engine.description};" in lines[0]
    assert any(line.startswith("forecast:") and "for 3 instants" in line for line in lines), lines
    assert any(line.startswith("ratio:        forecast / plan = ") for line in lines), lines
    assert not list(tmp_path.iterdir())  # its temporary directory is gone with it
    assert spark_engine.state == "ready"  # the run's engine is left to the run
