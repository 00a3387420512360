"""The Spark session manager: off-thread start, reuse, silence, cancel, failures, Connect.

The local engine is shared by the whole run (one SparkContext per process); a fresh
local start is observed in a child process, which also shows that nothing reaches the
terminal.
"""

from __future__ import annotations

import json
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from engine.errors import PlanCancelled, SparkUnavailable
from engine.prune.session import SparkEngine
from engine.prune.spark_settings import LOCAL_COLLECTOR, java_log_options, local_java_options
from tests.support.cli import subprocess_env

READY_TIMEOUT = 180.0  # generous: CI machines are slow and other JVMs may be running

CHILD = r"""
import json, os, sys, time
from pathlib import Path
from engine.prune.session import SparkEngine

result_path, log_dir, remote = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] or None
engine = SparkEngine(master="local[2]", remote=remote, log_dir=log_dir)
result = {}
engine.start()
result["state_after_start"] = engine.state
# The calling thread stays free while the session is built.
polls = 0
while engine.state == "starting":
    polls += 1
    time.sleep(0.01)
result["polls_while_starting"] = polls
result["state_after_wait"] = engine.state
first, second = engine.session(), engine.session()
result["same_session"] = first is second
rows = engine.run(lambda spark: spark.range(100).selectExpr("id % 3 AS k").groupBy("k").count().collect(), "child")
result["counts"] = sorted([row["k"], row["count"]] for row in rows)
result["tables"] = len(engine.run(lambda spark: spark.catalog.listTables(), "catalog"))
engine.stop()
result["state_after_stop"] = engine.state
# Children of this process that are still alive (not zombies): the gateway JVM must be gone.
alive = []
for entry in os.listdir("/proc"):
    try:
        fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        continue
    if int(fields[1]) == os.getpid() and fields[0] != "Z":
        alive.append(open(f"/proc/{entry}/cmdline").read().replace("\0", " ")[:200])
result["children_after_stop"] = alive
result_path.write_text(json.dumps(result))
"""


def run_child(tmp_path: Path, remote: str = "") -> tuple[subprocess.CompletedProcess[bytes], dict[str, Any], Path]:
    result_path, log_dir = tmp_path / "result.json", tmp_path / "data" / "logs"
    # The log directory is given relative to the child's working directory, as an
    # operator's `--data-dir data` gives it: Spark must still get absolute file URIs.
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(result_path), "data/logs", remote],
        check=False, capture_output=True, cwd=tmp_path, timeout=300,
        env=subprocess_env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    return done, json.loads(result_path.read_text()), log_dir


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def local_child(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[bytes], dict[str, Any], Path]:
    return run_child(tmp_path_factory.mktemp("local-child"))


@pytest.fixture(scope="module")
def connect_engine(spark_connect_server: str, tmp_path_factory: pytest.TempPathFactory):
    engine = SparkEngine(remote=spark_connect_server, log_dir=tmp_path_factory.mktemp("connect-client") / "logs")
    engine.start()
    yield engine
    engine.stop()


@pytest.fixture(params=["local", "connect"])
def any_engine(request: pytest.FixtureRequest) -> SparkEngine:
    return request.getfixturevalue("spark_engine" if request.param == "local" else "connect_engine")


# -- local ------------------------------------------------------------------------------


def test_local_start_returns_at_once_and_the_session_is_built_off_the_calling_thread(local_child) -> None:
    _, result, _ = local_child
    assert result["state_after_start"] == "starting"
    assert result["polls_while_starting"] > 0
    assert result["state_after_wait"] == "ready"
    assert result["same_session"] is True
    assert result["counts"] == [[0, 34], [1, 33], [2, 33]]
    assert result["state_after_stop"] == "stopped"


def test_local_stop_leaves_no_jvm(local_child) -> None:
    _, result, _ = local_child
    assert result["children_after_stop"] == []


def test_local_engine_writes_nothing_to_the_terminal_and_logs_to_its_file(local_child) -> None:
    done, _, log_dir = local_child
    assert done.stdout == b""
    assert done.stderr == b""
    assert stat.S_IMODE(log_dir.stat().st_mode) == 0o700
    log = (log_dir / "spark.log").read_text()
    assert "Using incubator modules" in log  # the JVM's own stderr line landed here


def test_local_engine_keeps_the_catalog_directory_out_of_the_working_directory(local_child) -> None:
    # The planner registers tables; Spark's catalog then creates its default
    # database's directory, by default in the operator's working directory.
    _, result, log_dir = local_child
    working_directory = log_dir.parent.parent
    assert result["tables"] == 0
    assert not (working_directory / "spark-warehouse").exists()
    assert (log_dir / "spark-warehouse").is_dir()


def test_local_session_is_reused_and_runs_queries(spark_engine: SparkEngine) -> None:
    first = spark_engine.session(timeout=READY_TIMEOUT)
    assert spark_engine.session() is first
    assert spark_engine.state == "ready"
    assert spark_engine.description == "local[2]"

    def job(spark) -> pa.Table:
        ranked = spark.range(1000).selectExpr(
            "id", "id % 10 AS k", "row_number() OVER (PARTITION BY id % 10 ORDER BY id DESC) AS n"
        )
        return ranked.filter("n = 1").select("k", "id").orderBy("k").toArrow()

    table = spark_engine.run(job, "local-query")
    assert isinstance(table, pa.Table)
    assert table.column("id").to_pylist() == list(range(990, 1000))
    assert first.conf.get("spark.sql.session.timeZone") == "UTC"
    assert first.conf.get("spark.sql.shuffle.partitions") == "4"


def test_the_local_jvm_runs_the_throughput_collector(spark_engine: SparkEngine) -> None:
    beans = spark_engine.session()._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    assert sorted(bean.getName() for bean in beans) == ["PS MarkSweep", "PS Scavenge"]


@pytest.mark.parametrize(
    ("extra", "collector"),
    [("", LOCAL_COLLECTOR), ("-Xss4m", LOCAL_COLLECTOR), ("-XX:+UseG1GC -Xss4m", "-XX:+UseG1GC")],
)
def test_the_config_may_choose_another_collector(extra: str, collector: str, tmp_path: Path) -> None:
    options = local_java_options(tmp_path, extra)
    assert options.startswith(java_log_options(tmp_path))
    assert options.endswith(extra)
    # One collector only: a JVM given two refuses to start.
    assert [o for o in options.split() if o.startswith("-XX:+Use") and o.endswith("GC")] == [collector]


def test_a_second_local_engine_in_the_process_fails_and_the_first_keeps_working(
    spark_engine: SparkEngine, tmp_path: Path
) -> None:
    spark_engine.session(timeout=READY_TIMEOUT)
    other = SparkEngine(master="local[1]", log_dir=tmp_path / "logs")
    with pytest.raises(SparkUnavailable, match="one per process"):
        other.session(timeout=READY_TIMEOUT)
    assert other.state == "failed"
    other.stop()
    assert other.state == "stopped"
    assert spark_engine.run(lambda spark: spark.range(5).count(), "still-alive") == 5


# -- failures ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"remote": f"sc://127.0.0.1:{free_port()}"}, "no Spark Connect server at 127.0.0.1:"),
        ({"remote": "http://127.0.0.1:15002"}, "invalid Spark Connect URL"),
        ({"master": "bogus://x"}, "invalid master 'bogus://x'"),
        ({"master": f"spark://127.0.0.1:{free_port()}"}, "no Spark master at 127.0.0.1:"),
    ],
)
def test_a_failed_start_gives_one_line_and_session_raises(
    options: dict[str, str], expected: str, tmp_path: Path
) -> None:
    engine = SparkEngine(log_dir=tmp_path / "logs", **options)
    engine.start()
    with pytest.raises(SparkUnavailable) as raised:
        engine.session(timeout=READY_TIMEOUT)
    assert engine.state == "failed"
    assert engine.error is not None
    assert "\n" not in engine.error
    assert expected in engine.error
    assert str(raised.value) == engine.error
    # The traceback is kept for whoever reads the log, not shown.
    assert "Traceback" in (tmp_path / "logs" / "spark.log").read_text()
    # A failed engine stays failed (no retry loop) until it is stopped.
    engine.start()
    assert engine.state == "failed"
    engine.stop()
    assert engine.state == "stopped"


# -- cancel -----------------------------------------------------------------------------


def test_cancel_from_another_thread_raises_plan_cancelled_and_the_session_survives(any_engine: SparkEngine) -> None:
    engine = any_engine
    engine.session(timeout=READY_TIMEOUT)
    started = threading.Event()
    outcome: dict[str, object] = {}

    def endless(spark) -> object:
        started.set()
        # about 10^12 rows: hours on two cores, unless cancelled
        return spark.range(0, 10**12, 1, 2).selectExpr("sum(id % 7)").collect()

    def plan() -> None:
        try:
            outcome["result"] = engine.run(endless, "prune-cycle-1")
        except BaseException as error:  # noqa: BLE001 - the test inspects it
            outcome["error"] = error

    worker = threading.Thread(target=plan, daemon=True)
    worker.start()
    assert started.wait(READY_TIMEOUT)
    # The job may not be submitted yet: the cancel must hold until it is.
    engine.cancel("prune-cycle-1")
    worker.join(READY_TIMEOUT)
    assert not worker.is_alive(), "the plan was not cancelled"
    assert isinstance(outcome.get("error"), PlanCancelled), outcome
    assert "prune-cycle-1" in str(outcome["error"])
    # Same tag, same session: the tag was cleared, the cancel does not linger, and the
    # cancelled job no longer holds the cores. Bounded, so that a job the cancel missed
    # fails this test instead of hanging the suite.
    after: dict[str, object] = {}
    follow_up = threading.Thread(
        target=lambda: after.update(count=engine.run(lambda spark: spark.range(10).count(), "prune-cycle-1")),
        daemon=True,
    )
    follow_up.start()
    follow_up.join(READY_TIMEOUT)
    assert after.get("count") == 10, "the session did not answer after the cancel: the job still runs"


def test_ctrl_c_during_a_plan_cancels_its_spark_job_and_is_an_interrupt(spark_engine: SparkEngine) -> None:
    """A one-shot command's Ctrl-C: pyspark, reading the result, would wait for the job
    to end and then report the JVM's error (``Spark failed: ... getResult``) in place of
    the interrupt."""
    main, running, jobs = threading.main_thread().ident, threading.Event(), []

    def interrupt_once_the_job_runs(spark: Any) -> None:
        tracker = spark.sparkContext.statusTracker()
        while running.is_set() and not jobs:
            jobs.extend(tracker.getActiveJobsIds())
            time.sleep(0.05)
        if running.is_set():
            signal.pthread_kill(main, signal.SIGINT)

    def job(spark: Any) -> Any:
        running.set()
        threading.Thread(target=interrupt_once_the_job_runs, args=(spark,), daemon=True).start()
        # Tens of seconds of work uncancelled; its result is read as a plan's is.
        return spark.range(0, 30_000_000_000, 1, 2).selectExpr("sum(id % 7) AS s").toArrow()

    try:
        with pytest.raises(KeyboardInterrupt):
            spark_engine.run(job, "ctrl-c")
    finally:
        running.clear()
    tracker = spark_engine.session().sparkContext.statusTracker()
    assert [tracker.getJobInfo(job).status for job in jobs] == ["FAILED"]  # cancelled, not run to its end
    assert tracker.getActiveJobsIds() == []
    assert spark_engine.run(lambda spark: spark.range(3).count(), "after-ctrl-c") == 3


def test_cancel_of_an_unknown_tag_does_nothing(spark_engine: SparkEngine) -> None:
    spark_engine.cancel("nothing-runs-under-this-tag")
    assert spark_engine.run(lambda spark: spark.range(3).count(), "nothing-runs-under-this-tag") == 3


# -- Spark Connect ----------------------------------------------------------------------


def test_connect_engine_runs_queries(connect_engine: SparkEngine, spark_connect_server: str) -> None:
    spark = connect_engine.session(timeout=READY_TIMEOUT)
    assert connect_engine.state == "ready"
    assert connect_engine.description == spark_connect_server
    assert type(spark).__module__ == "pyspark.sql.connect.session"
    assert connect_engine.session() is spark

    def job(spark) -> pa.Table:
        return spark.sql(
            """WITH d AS (SELECT id, id % 10 AS k FROM range(1000)),
            counts AS (SELECT k, count(*) AS n, max(id) AS top FROM d GROUP BY k),
            ranked AS (SELECT k, id, row_number() OVER (PARTITION BY k ORDER BY id DESC) AS r FROM d)
            SELECT counts.k, n, top, id FROM counts JOIN ranked ON counts.k = ranked.k AND r = 1 ORDER BY counts.k"""
        ).toArrow()

    table = connect_engine.run(job, "connect-query")
    assert isinstance(table, pa.Table)
    assert table.column("n").to_pylist() == [100] * 10
    assert table.column("top").to_pylist() == table.column("id").to_pylist() == list(range(990, 1000))
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"


def test_local_and_connect_sessions_share_one_process(spark_engine: SparkEngine, connect_engine: SparkEngine) -> None:
    for engine in (spark_engine, connect_engine, spark_engine):
        rows = engine.run(
            lambda spark: spark.range(100).selectExpr("id % 2 AS k").groupBy("k").count().orderBy("k").toArrow(),
            "mixed",
        )
        assert rows.column("count").to_pylist() == [50, 50]


def test_connect_engine_writes_nothing_to_the_terminal(spark_connect_server: str, tmp_path: Path) -> None:
    done, result, _ = run_child(tmp_path, remote=spark_connect_server)
    assert (done.stdout, done.stderr) == (b"", b"")
    assert result["state_after_start"] == "starting"
    assert result["counts"] == [[0, 34], [1, 33], [2, 33]]
    assert result["state_after_stop"] == "stopped"
