"""Spark fixtures, each started once for the whole run: a local engine, a Spark
Connect server (which also serves as the one that cannot see the data directories
made in :func:`hidden_from_spark`), and a standalone cluster.

A process holds at most one local SparkContext, so the local engine is session-scoped
and shared. The servers are test-owned JVM subprocesses on loopback
(docs/SPARK_NOTES.md): each runs in its own process group, dies with the test process
(PR_SET_PDEATHSIG), and writes only to a log file.

Each is started as soon as collection shows a test that will ask for it
(:func:`pytest_collection_finish`): its JVM then boots while the first tests run,
instead of while the first test that needs it waits. Its fixture takes it from there,
waits until it is ready and stops it; one that no test took (a run stopped early) is
stopped when the session ends.

"Once for the whole run" is once per pytest-xdist worker: each worker is a session of
its own, with its own directories (pyproject.toml runs two), and starts only the
local engine early.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from engine.prune.session import START_THREAD_NAME, SparkEngine
from engine.prune.spark_settings import java_log_options, spark_home

__all__ = [
    "connect_server_of_the_run", "hidden_from_spark", "spark_connect_engine", "spark_connect_server",
    "spark_connect_server_elsewhere", "spark_engine", "spark_standalone_cluster", "no_spark_starting",
]  # fmt: skip

CONNECT_START_TIMEOUT = 120.0  # the port opened after 5-9 s when measured; CI is slower
#: how often a start looks again at a server's port or log: a look costs nothing next
#: to the seconds a JVM takes, and a coarser one only adds to each start
_POLL_SECONDS = 0.05
_PR_SET_PDEATHSIG = 1


#: what :func:`pytest_collection_finish` started, by the fixture that takes it
_EARLY = pytest.StashKey[dict[str, Any]]()


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    needed = {name for item in session.items for name in item.fixturenames}
    # The tmp_path_factory fixture's own object (fixtures cannot be asked for yet).
    factory: pytest.TempPathFactory = session.config._tmp_path_factory  # type: ignore[attr-defined]
    early: dict[str, Any] = {}
    session.config.stash[_EARLY] = early
    # Started from this (the main) thread: a server dies with the thread that forked it.
    if "spark_engine" in needed:
        early["spark_engine"] = _local_engine(factory)
    # A pytest-xdist worker collects every test but runs a share of them, unknown yet:
    # the servers, which a few files ask for, start when its share first needs them,
    # instead of booting in each worker (JVMs that take the CPU the tests run on).
    if hasattr(session.config, "workerinput"):
        return
    if "connect_server_of_the_run" in needed:
        early["connect_server_of_the_run"] = _ConnectStart(factory, factory.mktemp("hidden-from-spark"))
    if "spark_standalone_cluster" in needed:
        early["spark_standalone_cluster"] = _StandaloneStart(factory)


def pytest_sessionfinish(session: pytest.Session) -> None:
    for left in session.config.stash.get(_EARLY, {}).values():
        left.stop()


def _early(request: pytest.FixtureRequest, fixture: str) -> Any:
    """What :func:`pytest_collection_finish` started for ``fixture``, or None."""
    return request.config.stash.get(_EARLY, {}).pop(fixture, None)


def _local_engine(factory: pytest.TempPathFactory) -> SparkEngine:
    engine = SparkEngine(master="local[2]", log_dir=factory.mktemp("spark-local") / "logs")
    engine.start()
    return engine


@pytest.fixture
def no_spark_starting() -> None:
    """No Spark session of this process is still being built: a test that measures
    the process's memory (tracemalloc traces every thread) must not count the
    imports of the local engine this worker started early."""
    for thread in threading.enumerate():
        if thread.name == START_THREAD_NAME:
            thread.join(CONNECT_START_TIMEOUT)


@pytest.fixture(scope="session")
def spark_engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkEngine]:
    """The local engine (``local[2]``) of the test run, started but maybe not ready yet."""
    engine = _early(request, "spark_engine") or _local_engine(tmp_path_factory)
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
def hidden_from_spark(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory that :func:`spark_connect_server_elsewhere` cannot see: data
    directories made in it are as invisible to that server as on another machine."""
    started = request.config.stash.get(_EARLY, {}).get("connect_server_of_the_run")
    return started.hidden if started is not None else tmp_path_factory.mktemp("hidden-from-spark")


class _ConnectStart:
    """The Connect server of the run, launched: hidden from a new directory of its own
    if the kernel lets it, else not (and why)."""

    def __init__(self, factory: pytest.TempPathFactory, hidden: Path) -> None:
        self.hidden = hidden
        refused = subprocess.run(
            [*_UNSHARE, "sh", "-c", 'mount -t tmpfs -o size=1m tmpfs "$0"', str(self.hidden)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        self.why_not_hidden = None
        if refused.returncode != 0:
            self.why_not_hidden = (
                f"cannot hide a directory from a server: unshare -m refused ({refused.stderr.strip()})"
            )
        self.hide = self.hidden if self.why_not_hidden is None else None
        self.log_dir = factory.mktemp("spark-connect") / "logs"
        self.launched = _launch_connect_server(self.log_dir, self.hide)

    def stop(self) -> None:
        _stop_process_group(self.launched[0])


@pytest.fixture(scope="session")
def connect_server_of_the_run(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, hidden_from_spark: Path
) -> Iterator[tuple[str, str | None]]:
    """One Spark Connect server JVM for every Connect test: its URL, and why it could
    not be hidden from :func:`hidden_from_spark` (None when it is). Hidden, it sees
    every other directory as a server on this machine does, so the tests that need it
    to see their data share it with the tests that need it not to: one JVM start and
    one cold JIT instead of two."""
    start = _early(request, "connect_server_of_the_run") or _ConnectStart(tmp_path_factory, hidden_from_spark)
    with _connect_server(start.log_dir, start.hide, start.launched) as url:
        yield url, start.why_not_hidden


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


class _StandaloneStart:
    """A standalone cluster, launched: its master, and at once its worker, which keeps
    trying to register until the master listens."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self.base = factory.mktemp("spark-standalone")
        self.log_dir = self.base / "logs"
        self.worker_log = self.log_dir / "worker.out"
        # Spark's default logging (INFO, to the .out files): the worker says when it registered.
        self.env = {**_spark_env(), "SPARK_DAEMON_MEMORY": "256m"}
        self._launch()

    def _launch(self) -> None:
        spark_class = str(spark_home() / "bin" / "spark-class")
        self.port = _free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.master = _start(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(self.port), "--webui-port", "0"],
            self.env, self.log_dir / "master.out",
        )  # fmt: skip
        self.worker = _start(
            [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "1",
             "--memory", "1g", "--webui-port", "0", "--work-dir", str(self.base / "work"), self.url],
            self.env, self.worker_log,
        )  # fmt: skip

    def wait(self) -> None:
        """Until the worker has registered. A master that could not take its port
        (taken between the probe and its bind) starts again on another, with its worker."""
        attempts = 1
        while not _wait_for_port(self.master, self.port):  # on failure, the fixture stops both
            self.stop()
            if attempts == 3:
                raise RuntimeError(f"Spark master did not start; see {self.log_dir}")
            self._launch()
            attempts += 1
        registered = "Successfully registered with master"
        _wait_for(lambda: registered in self.worker_log.read_text(errors="replace"), self.worker)

    def stop(self) -> None:
        _stop_process_group(self.worker)
        _stop_process_group(self.master)


@pytest.fixture(scope="session")
def spark_standalone_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A standalone Spark cluster on 127.0.0.1, from the wheel's jars: a Master and one
    Worker JVM (1 core, 1 GiB for executors; the daemons 256 MiB each). Yields the
    master's ``spark://127.0.0.1:PORT`` URL once the worker has registered.

    Its executors are JVMs of their own, started by the worker: they read the
    planner's files by path, which works because they run on this machine."""
    cluster = _early(request, "spark_standalone_cluster") or _StandaloneStart(tmp_path_factory)
    try:
        cluster.wait()
        yield cluster.url
    finally:
        cluster.stop()


def _launch_connect_server(log_dir: Path, hide: Path | None) -> tuple[subprocess.Popen[bytes], int]:
    """A Spark Connect server (in a mount namespace with ``hide`` covered, if given)
    starting on a free port: the process and the port."""
    java_options = java_log_options(log_dir)  # also creates log_dir
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
    return _start(cmd, _spark_env(), log_dir / "connect-server.out"), port


@contextmanager
def _connect_server(log_dir: Path, hide: Path | None, launched: tuple[subprocess.Popen[bytes], int]) -> Iterator[str]:
    """The server ``launched`` while the context lasts, once it listens; its ``sc://`` URL.
    One that could not take its port (taken between the probe and its bind) starts
    again on another."""
    proc, port = launched
    attempts = 1
    while not _listening(proc, port):
        _stop_process_group(proc)
        if attempts == 3:
            raise RuntimeError(f"Spark Connect server did not start; see {log_dir}")
        proc, port = _launch_connect_server(log_dir, hide)
        attempts += 1
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


def _listening(proc: subprocess.Popen[bytes], port: int) -> bool:
    """:func:`_wait_for_port`, stopping ``proc`` if the wait itself fails."""
    try:
        return _wait_for_port(proc, port)
    except BaseException:
        _stop_process_group(proc)
        raise


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
