"""Spark fixtures, each started once for the whole run: a local engine, a Spark
Connect server (which also serves as the one that cannot see the data directories
made in :func:`hidden_from_spark`), and a standalone cluster.

A process holds at most one local SparkContext, so the local engine is session-scoped
and shared. The servers are test-owned JVM subprocesses on loopback
(docs/SPARK_NOTES.md): each runs in its own process group, dies with the test process
(PR_SET_PDEATHSIG), and writes only to a log file.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from engine.prune.session import SparkEngine
from engine.prune.spark_settings import java_log_options, spark_home

__all__ = [
    "connect_server_of_the_run", "hidden_from_spark", "spark_connect_engine", "spark_connect_server",
    "spark_connect_server_elsewhere", "spark_engine", "spark_standalone_cluster",
]  # fmt: skip

CONNECT_START_TIMEOUT = 120.0  # the port opened after 5-9 s when measured; CI is slower
#: how often a start looks again at a server's port or log: a look costs nothing next
#: to the seconds a JVM takes, and a coarser one only adds to each start
_POLL_SECONDS = 0.05
_PR_SET_PDEATHSIG = 1


@pytest.fixture(scope="session")
def spark_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkEngine]:
    """The local engine (``local[2]``) of the test run, started but maybe not ready yet."""
    engine = SparkEngine(master="local[2]", log_dir=tmp_path_factory.mktemp("spark-local") / "logs")
    engine.start()
    yield engine
    engine.stop()


@pytest.fixture
def shared_spark(spark_engine: SparkEngine, monkeypatch: pytest.MonkeyPatch) -> SparkEngine:
    """``prune``, ``explain`` and ``engine`` run in-process get the session fixture's
    engine, which they must not stop: a process has one local Spark, and a command
    asking for another master would fail beside it."""
    monkeypatch.setattr(spark_engine, "stop", lambda: None)
    monkeypatch.setattr("engine.prune.session.spark_engine_for", lambda *args, **kwargs: spark_engine)
    return spark_engine


@pytest.fixture(scope="session")
def hidden_from_spark(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory that :func:`spark_connect_server_elsewhere` cannot see: data
    directories made in it are as invisible to that server as on another machine."""
    return tmp_path_factory.mktemp("hidden-from-spark")


@pytest.fixture(scope="session")
def connect_server_of_the_run(
    tmp_path_factory: pytest.TempPathFactory, hidden_from_spark: Path
) -> Iterator[tuple[str, str | None]]:
    """One Spark Connect server JVM for every Connect test: its URL, and why it could
    not be hidden from :func:`hidden_from_spark` (None when it is). Hidden, it sees
    every other directory as a server on this machine does, so the tests that need
    it to see their data share it with the tests that need it not to: one JVM start
    and one cold JIT instead of two."""
    refused = subprocess.run(
        [*_UNSHARE, "sh", "-c", 'mount -t tmpfs -o size=1m tmpfs "$0"', str(hidden_from_spark)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    why_not_hidden = None
    if refused.returncode != 0:
        why_not_hidden = f"cannot hide a directory from a server: unshare -m refused ({refused.stderr.strip()})"
    hide = hidden_from_spark if why_not_hidden is None else None
    with _connect_server(tmp_path_factory.mktemp("spark-connect") / "logs", hide=hide) as url:
        yield url, why_not_hidden


@pytest.fixture(scope="session")
def spark_connect_server(connect_server_of_the_run: tuple[str, str | None]) -> str:
    """A Spark Connect server on 127.0.0.1; its ``sc://127.0.0.1:PORT`` URL."""
    return connect_server_of_the_run[0]


@pytest.fixture(scope="session")
def spark_connect_server_elsewhere(connect_server_of_the_run: tuple[str, str | None]) -> str:
    """A Spark Connect server on 127.0.0.1 that cannot see :func:`hidden_from_spark`:
    it runs in a private mount namespace (``unshare -m``) where an empty tmpfs covers
    that directory. Skipped, saying why, where the kernel refuses the namespace."""
    url, why_not_hidden = connect_server_of_the_run
    if why_not_hidden is not None:
        print(why_not_hidden, file=sys.stderr)
        pytest.skip(why_not_hidden)
    return url


@pytest.fixture(scope="session")
def spark_standalone_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A standalone Spark cluster on 127.0.0.1, from the wheel's jars: a Master and one
    Worker JVM (1 core, 1 GiB for executors; the daemons 256 MiB each). Yields the
    master's ``spark://127.0.0.1:PORT`` URL once the worker has registered.

    Its executors are JVMs of their own, started by the worker: they read the
    planner's files by path, which works because they run on this machine."""
    base = tmp_path_factory.mktemp("spark-standalone")
    log_dir = base / "logs"
    # Spark's default logging (INFO, to the .out files): the worker says when it registered.
    env = {**_spark_env(), "SPARK_DAEMON_MEMORY": "256m"}
    spark_class = str(spark_home() / "bin" / "spark-class")
    for _attempt in range(3):
        port = _free_port()
        master = _start([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                         "--port", str(port), "--webui-port", "0"], env, log_dir / "master.out")  # fmt: skip
        try:
            if _wait_for_port(master, port):
                break
        except BaseException:
            _stop_process_group(master)
            raise
        _stop_process_group(master)
    else:
        raise RuntimeError(f"Spark master did not start; see {log_dir}")
    url = f"spark://127.0.0.1:{port}"
    worker_log = log_dir / "worker.out"
    worker = _start(
        [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "1",
         "--memory", "1g", "--webui-port", "0", "--work-dir", str(base / "work"), url],
        env, worker_log,
    )  # fmt: skip
    try:
        _wait_for(lambda: "Successfully registered with master" in worker_log.read_text(errors="replace"), worker)
        yield url
    finally:
        _stop_process_group(worker)
        _stop_process_group(master)


@contextmanager
def _connect_server(log_dir: Path, hide: Path | None = None) -> Iterator[str]:
    """A Spark Connect server (in a mount namespace with ``hide`` covered, if given)
    while the context lasts; its ``sc://`` URL."""
    java_options = java_log_options(log_dir)  # also creates log_dir
    # A free port can be taken between the probe and the server's bind: try again.
    for _attempt in range(3):
        port = _free_port()
        cmd = _connect_server_command(port, java_options, log_dir)
        if hide is not None:
            # The tmpfs is mounted in the server's namespace only, and goes with it.
            cmd = [
                *_UNSHARE,
                "sh",
                "-c",
                'mount -t tmpfs -o size=1m tmpfs "$0" && shift && exec "$@"',
                str(hide),
                "-",
                *cmd,
            ]
        proc = _start(cmd, _spark_env(), log_dir / "connect-server.out")
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


#: a private mount namespace: mounts made in it are seen by nobody else
_UNSHARE = ["unshare", "-m", "--propagation", "private"]


@pytest.fixture(scope="session")
def spark_connect_engine(spark_connect_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkEngine]:
    """A client engine of :func:`spark_connect_server`, started, shared by the run."""
    engine = SparkEngine(remote=spark_connect_server, log_dir=tmp_path_factory.mktemp("connect-engine") / "logs")
    engine.start()
    yield engine
    engine.stop()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _spark_env() -> dict[str, str]:
    return dict(os.environ, SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)


def _connect_server_command(port: int, java_options: str, log_dir: Path) -> list[str]:
    return [
        str(spark_home() / "bin" / "spark-submit"), "--master", "local[2]", "--driver-memory", "1g",
        "--conf", "spark.ui.enabled=false",
        # The planner's tables make the catalog create its default database's directory.
        "--conf", f"spark.sql.warehouse.dir={log_dir / 'spark-warehouse'}",
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


def _start(cmd: list[str], env: dict[str, str], out: Path) -> subprocess.Popen[bytes]:
    """``cmd`` in a process group of its own, writing to ``out``, dying with this process."""
    # Looked up before the fork: the child should only make the one system call.
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def die_with_parent() -> None:
        # The kernel sends SIGTERM when the thread that forked us exits, even on a
        # SIGKILL of the test process: no orphaned JVM (bin/spark-submit, spark-class,
        # unshare and sh all exec, so the JVM keeps this setting).
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)

    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "ab") as log:
        return subprocess.Popen(
            cmd, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True, preexec_fn=die_with_parent,  # noqa: PLW1509 - one prctl call, resolved before the fork
        )  # fmt: skip


def _wait_for(ready: Callable[[], bool], proc: subprocess.Popen[bytes]) -> None:
    """Until ``ready()``; fails if ``proc`` exits first or it takes too long."""
    deadline = time.monotonic() + CONNECT_START_TIMEOUT
    while not ready():
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[1]} exited with status {proc.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{proc.args[1]} not ready after {CONNECT_START_TIMEOUT:g} s")
        time.sleep(_POLL_SECONDS)


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
            time.sleep(_POLL_SECONDS)
    raise RuntimeError(f"Spark Connect server not listening on port {port} after {CONNECT_START_TIMEOUT:g} s")


def _stop_process_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server's whole group (JVM, a worker's executors, any Python
    workers) and wait until every member is gone; SIGKILL what is stuck."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:  # the group is gone already
        proc.wait()
        return
    deadline = time.monotonic() + 30
    while _group_alive(proc) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _group_alive(proc):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _group_alive(proc: subprocess.Popen[bytes]) -> bool:
    """Whether any process of ``proc``'s group is left (the leader reaped as it exits)."""
    proc.poll()
    try:
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        return False
    return True
