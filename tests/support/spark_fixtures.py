"""Spark fixtures: one local engine and one Spark Connect server for the whole run.

A process holds at most one local SparkContext, so the local engine is session-scoped
and shared. The Connect server is a test-owned JVM subprocess (docs/SPARK_NOTES.md):
it runs in its own process group, dies with the test process (PR_SET_PDEATHSIG), and
writes only to a log file.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.prune.session import SparkEngine, java_log_options, spark_home

__all__ = ["spark_connect_server", "spark_engine"]

CONNECT_START_TIMEOUT = 120.0  # the port opened after 5-9 s when measured; CI is slower
_PR_SET_PDEATHSIG = 1


@pytest.fixture(scope="session")
def spark_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkEngine]:
    """The local engine (``local[2]``) of the test run, started but maybe not ready yet."""
    engine = SparkEngine(master="local[2]", log_dir=tmp_path_factory.mktemp("spark-local") / "logs")
    engine.start()
    yield engine
    engine.stop()


@pytest.fixture(scope="session")
def spark_connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Spark Connect server on 127.0.0.1; yields its ``sc://127.0.0.1:PORT`` URL."""
    log_dir = tmp_path_factory.mktemp("spark-connect") / "logs"
    java_options = java_log_options(log_dir)  # also creates log_dir
    # A free port can be taken between the probe and the server's bind: try again.
    for _attempt in range(3):
        port = _free_port()
        proc = _start_connect_server(port, java_options, log_dir / "connect-server.out")
        try:
            if _wait_for_port(proc, port):
                break
        except BaseException:
            _stop_process_group(proc)
            raise
        _stop_process_group(proc)
    else:
        raise RuntimeError(f"Spark Connect server did not start; see {log_dir}")
    try:
        yield f"sc://127.0.0.1:{port}"
    finally:
        _stop_process_group(proc)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start_connect_server(port: int, java_options: str, out: Path) -> subprocess.Popen[bytes]:
    home = spark_home()
    cmd = [
        str(home / "bin" / "spark-submit"), "--master", "local[2]", "--driver-memory", "1g",
        "--conf", "spark.ui.enabled=false",
        # The planner's tables make the catalog create its default database's directory.
        "--conf", f"spark.sql.warehouse.dir={out.parent / 'spark-warehouse'}",
        "--conf", "spark.ui.showConsoleProgress=false",
        "--conf", "spark.sql.shuffle.partitions=4",
        "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf", f"spark.connect.grpc.binding.port={port}",
        "--conf", "spark.connect.grpc.port.maxRetries=0",
        "--conf", f"spark.driver.extraJavaOptions={java_options}",
        "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--name", "ebb-connect-test",
        "spark-internal",
    ]  # fmt: skip
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    # Looked up before the fork: the child should only make the one system call.
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def die_with_parent() -> None:
        # The kernel sends SIGTERM when the thread that forked us exits, even on a
        # SIGKILL of the test process: no orphaned JVM (bin/spark-submit execs java).
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)

    with open(out, "ab") as log:
        return subprocess.Popen(
            cmd, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True, preexec_fn=die_with_parent,  # noqa: PLW1509 - one prctl call, resolved before the fork
        )  # fmt: skip


def _wait_for_port(proc: subprocess.Popen[bytes], port: int) -> bool:
    """True once the server accepts connections; False if it exited first."""
    deadline = time.monotonic() + CONNECT_START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.25)
    raise RuntimeError(f"Spark Connect server not listening on port {port} after {CONNECT_START_TIMEOUT:g} s")


def _stop_process_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server's whole group (JVM and any Python workers), SIGKILL if stuck."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:  # the group is gone already
        proc.wait()
        return
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
