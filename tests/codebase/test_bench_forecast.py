"""``bench/forecast.py`` (issue 15's benchmark) runs against the engine as it is: the
benchmark calls the forecast's parts one by one, so a changed signature there
(``readings`` gained an argument) broke it with no test failing. A tiny catalog here,
on the run's local Spark (a JVM of its own would cost this test most of its time);
the figures are the benchmark's to print, not this test's to judge."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import forecast as bench_forecast
from engine.forecast.result import Forecast, PartitionPoint, Point, TopicForecast
from engine.prune.session import SparkEngine


def test_the_forecast_benchmark_runs_on_a_tiny_catalog(
    tmp_path: Path, spark_engine: SparkEngine, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--partitions", "4", "--segments", "3", "--instants", "3", "--repeat", "1", "--by-plans"]
    argv += ["--dir", str(tmp_path)]
    bench_forecast.main(argv, engine=spark_engine)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("synthetic catalog: 4 partitions x 3 segments = 12 segments")
    assert f"master {spark_engine.description};" in lines[0]
    assert any(line.startswith("forecast:") and "for 3 instants" in line for line in lines), lines
    assert any(line.startswith("by plans: ") and line.endswith("the same forecast") for line in lines), lines
    assert any(line.startswith("ratio:        forecast / plan = ") for line in lines), lines
    assert any(line.startswith("  churn:      ") and "later instants (median)" in line for line in lines), lines
    assert not list(tmp_path.iterdir())  # its temporary directory is gone with it
    assert spark_engine.state == "ready"  # the run's engine is left to the run


def test_the_churn_counts_deletions_after_nows_cycle_and_log_start_moves() -> None:
    def point(at: int, deleted: int, starts: list[int]) -> Point:
        parts = [PartitionPoint(p, 0, 0, start) for p, start in enumerate(starts)]
        return Point(at, 0, 0, parts, 0, deleted, {}, False)

    # partition 0 moves at both later instants, partition 1 at one of them
    topic = TopicForecast("t", {}, [point(0, 5, [10, 20]), point(1, 7, [12, 20]), point(2, 9, [15, 30])], [], [])
    line = bench_forecast.churn(Forecast(0, [0, 1, 2], 1, [topic], None, None), today=8)
    assert line == (
        "  churn:      4 segments deleted after now's cycle (0.50x today's); "
        "a partition's log start moves at 1.5 of 2 later instants (median)"
    )
