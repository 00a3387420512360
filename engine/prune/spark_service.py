"""The data directory's shared Spark: one warm Spark Connect server every process plans on.

Planning on a JVM of its own costs a one-shot command 10-50 s; so, unless a master or
a Connect URL is configured, every Ebbtide process on a data directory plans on one
Spark Connect server that outlives them. Its files, all owner-only, in ``DATA_DIR/spark``
(the layout of ``pyspark.sql.connect.local_server``'s reusable server, kept per data
directory)::

    server.json    the running server: pids, port, start time, master, token file
    token          the secret a client must present (0600; new for each server)
    server.conf    the server's Spark settings (a properties file)
    start.lock     held while a server is started or stopped: two starts get one server
    attached.lock  held shared by every client attached to the server
    plans          one byte appended per plan served; its mtime is the server's last use
    warmed-up      written once the warm-up (engine/prune/spark_warmup.py) has ended
    desk.json      the plan desk's port, once it listens (engine/prune/plan_desk.py)

The server is a JVM run by a small supervisor process (:mod:`engine.prune.spark_supervisor`),
which stops it once it has been idle for the configured time: no client attached and
no plan for ``[spark] idle_timeout``. The JVM binds 127.0.0.1 only and refuses any
client without the token (``spark.connect.authenticate.token``, handed over in its
environment so that it never shows in ``ps``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from engine.errors import SparkUnavailable
from engine.prune.spark_settings import server_conf, spark_home
from engine.store.segment import describe

SERVICE_DIR = "spark"
STATE_NAME = "server.json"
TOKEN_NAME = "token"
CONF_NAME = "server.conf"
START_LOCK = "start.lock"
ATTACH_LOCK = "attached.lock"
PLANS_NAME = "plans"
WARMED_NAME = "warmed-up"
DESK_NAME = "desk.json"
SUPERVISOR_MODULE = "engine.prune.spark_supervisor"

#: the master of the service's own JVM unless ``[spark.conf] "spark.master"`` says otherwise
SERVICE_MASTER = "local[*]"
#: measured 5-9 s on a quiet machine, 30 s on a busy one
START_TIMEOUT_SECONDS = 180.0
STOP_TIMEOUT_SECONDS = 40.0
_POLL_SECONDS = 0.1


@dataclass(frozen=True)
class ServerState:
    """``server.json``: what a client needs to find, reach and judge the server."""

    supervisor_pid: int
    #: the JVM
    pid: int
    port: int
    #: epoch ms
    started: int
    master: str
    token_file: str
    idle_timeout_ms: int

    @property
    def host(self) -> str:
        # "localhost", not 127.0.0.1: only for that name does the Connect client send
        # its token over a plain local channel (anything else it would wrap in TLS).
        return "localhost"

    @property
    def address(self) -> str:
        return f"sc://{self.host}:{self.port}"


class ServiceDir:
    """The files of one data directory's Spark service (see the module docstring)."""

    def __init__(self, data_root: Path) -> None:
        self.root = Path(data_root) / SERVICE_DIR

    def path(self, name: str) -> Path:
        return self.root / name

    def ensure(self) -> None:
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)  # also when it existed with a wider mode

    # -- state --------------------------------------------------------------------------

    def read_state(self) -> ServerState | None:
        """The recorded server; None if there is none (or its record is unreadable)."""
        try:
            return ServerState(**json.loads(self.path(STATE_NAME).read_text()))
        except (OSError, ValueError, TypeError):
            return None

    def write_state(self, state: ServerState) -> None:
        """Write ``server.json`` whole or not at all: readers never lock."""
        self.write_private(STATE_NAME, json.dumps(asdict(state)))

    def clear_state(self, supervisor_pid: int) -> None:
        """Remove ``server.json`` if it still describes the server of ``supervisor_pid``."""
        state = self.read_state()
        if state is not None and state.supervisor_pid == supervisor_pid:
            with contextlib.suppress(FileNotFoundError):
                self.path(STATE_NAME).unlink()

    def new_token(self) -> Path:
        """A fresh secret for the next server, readable by the owner only."""
        self.write_private(TOKEN_NAME, secrets.token_urlsafe(32))
        return self.path(TOKEN_NAME)

    def write_conf(self, conf: Mapping[str, str]) -> Path:
        # A properties file, not --conf arguments: settings may hold secrets, and `ps` shows argv.
        lines = (
            f"{key}={str(value).replace(chr(92), chr(92) * 2).replace(chr(10), chr(92) + 'n')}"
            for key, value in conf.items()
        )
        self.write_private(CONF_NAME, "\n".join(lines) + "\n")
        return self.path(CONF_NAME)

    def write_private(self, name: str, text: str) -> None:
        """Write ``name`` whole or not at all, readable by the owner only."""
        self.ensure()
        temporary = self.path(f".{name}.{os.getpid()}")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, self.path(name))

    # -- use ----------------------------------------------------------------------------

    def reset_plans(self) -> None:
        """A new server: no plan served, not warmed up, no plan desk."""
        self.write_private(PLANS_NAME, "")
        for name in (WARMED_NAME, DESK_NAME):
            with contextlib.suppress(FileNotFoundError):
                self.path(name).unlink()

    def record_warm_up(self, outcome: str) -> None:
        self.write_private(WARMED_NAME, outcome)

    def warmed_up(self) -> bool:
        return self.path(WARMED_NAME).exists()

    def record_plan(self) -> None:
        """Count a plan served: one byte appended (atomic with O_APPEND), which also
        marks the server as used now."""
        with contextlib.suppress(OSError):
            fd = os.open(self.path(PLANS_NAME), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, b".")
            finally:
                os.close(fd)

    def touch(self) -> None:
        """Mark the server as used now (a client attaching or leaving)."""
        with contextlib.suppress(OSError):
            os.utime(self.path(PLANS_NAME))

    def plans_served(self) -> int:
        try:
            return self.path(PLANS_NAME).stat().st_size
        except OSError:
            return 0

    def last_used(self) -> float:
        """Epoch seconds of the last plan, attach or detach; 0 if never."""
        try:
            return self.path(PLANS_NAME).stat().st_mtime
        except OSError:
            return 0.0

    # -- locks --------------------------------------------------------------------------

    @contextlib.contextmanager
    def start_lock(self) -> Iterator[None]:
        with self._lock(START_LOCK, fcntl.LOCK_EX):
            yield

    def start_in_progress(self) -> bool:
        """Whether another process holds ``start.lock``: a server is being started
        (a stop holds it too, but its server stays recorded until the end). Creates
        nothing: a status must not write."""
        try:
            handle = open(self.path(START_LOCK), "rb")
        except OSError:
            return False
        with handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            except OSError:  # a lock the system refuses: nothing can be starting under it
                return False
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        return False

    def attach_lock(self) -> IO[bytes]:
        """Hold ``attached.lock`` shared until the returned file is closed: the server
        does not stop for idleness while any client holds it."""
        handle = self._opened(ATTACH_LOCK)
        fcntl.flock(handle.fileno(), fcntl.LOCK_SH)
        return handle

    def try_exclusive_attach(self) -> IO[bytes] | None:
        """``attached.lock`` held exclusively if no client holds it, else None."""
        handle = self._opened(ATTACH_LOCK)
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return None
        return handle

    @contextlib.contextmanager
    def _lock(self, name: str, mode: int) -> Iterator[None]:
        with self._opened(name) as handle:
            fcntl.flock(handle.fileno(), mode)
            yield

    def _opened(self, name: str) -> IO[bytes]:
        """Lock file ``name``, open (created if missing); SparkUnavailable, in one line,
        where the system refuses it (a directory in its place, a full disk)."""
        try:
            self.ensure()
            return open(self.path(name), "ab")
        except OSError as error:
            raise SparkUnavailable(f"the Spark service's {name} cannot be opened: {describe(error)}") from None


# -- processes ---------------------------------------------------------------------------


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_supervisor(pid: int) -> bool:
    """Whether ``pid`` is a supervisor of ours (not a pid reused by something else)."""
    try:
        return SUPERVISOR_MODULE.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def rss_bytes(pid: int) -> int | None:
    """Resident memory of ``pid``; None if it cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def running(service: ServiceDir) -> ServerState | None:
    """The recorded server if its supervisor and JVM are both alive."""
    state = service.read_state()
    if state is None or not _is_supervisor(state.supervisor_pid) or not pid_alive(state.pid):
        return None
    return state


#: how long a server may leave a new connection's handshake unanswered and still count as answering
HANDSHAKE_SECONDS = 5.0
#: what ``ebb spark status`` and a failed plan say of a server that does not answer
NOT_ANSWERING = "it is stopped or hung; `ebb spark stop` ends it, and the next plan starts a new one"


def silence(state: ServerState) -> str:
    """The error of a plan that gave up on a server that does not answer."""
    return f"the Spark service's server (pid {state.pid}) does not answer: {NOT_ANSWERING}"


def answers(state: ServerState, timeout: float = HANDSHAKE_SECONDS) -> bool:
    """Whether the server completes a new connection's HTTP/2 handshake within
    ``timeout`` seconds. A JVM that is stopped (SIGSTOP) or hung still has its
    connections accepted (by the kernel) and its process alive, so only this tells
    it from a busy one: a plan sent to it would wait for ever."""
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")  # gRPC's C core logs to stderr
    import grpc

    # A connection of its own: one shared with earlier channels of this process
    # would be ready already, whatever the server does now.
    channel = grpc.insecure_channel(f"127.0.0.1:{state.port}", options=[("grpc.use_local_subchannel_pool", 1)])
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout)
    except grpc.FutureTimeoutError:
        return False
    finally:
        channel.close()
    return True


def serving(service: ServiceDir) -> bool:
    """Whether the recorded server is up and its JVM not dead: a JVM killed is a
    zombie until its supervisor reaps it and clears the record, which :func:`running`
    leaves to the supervisor (a start meanwhile would race it for the record)."""
    state = running(service)
    return state is not None and not _is_zombie(state.pid)


def not_answering(service: ServiceDir) -> ServerState | None:
    """The recorded server if it is up (:func:`serving`) but does not answer
    (:func:`answers`): stopped or hung, not gone."""
    state = running(service)
    return state if state is not None and not _is_zombie(state.pid) and not answers(state) else None


@dataclass(frozen=True)
class ServiceSpec:
    """How to start a data directory's service, from its config."""

    data_root: Path
    conf: Mapping[str, str]
    idle_timeout_ms: int
    log_dir: Path

    @property
    def master(self) -> str:
        return self.conf.get("spark.master", SERVICE_MASTER)


def ensure_running(spec: ServiceSpec, on_wait: Callable[[float], None] | None = None) -> tuple[ServerState, bool]:
    """The running server, started first if there is none; and whether this call
    started it. ``on_wait(seconds)`` is called while a start is awaited."""
    service = ServiceDir(spec.data_root)
    state = running(service)
    if state is not None:
        return state, False
    with service.start_lock():
        # Another process may have started it while this one waited for the lock.
        state = running(service)
        if state is not None:
            return state, False
        return _start(spec, service, on_wait), True


def _start(spec: ServiceSpec, service: ServiceDir, on_wait: Callable[[float], None] | None) -> ServerState:

    stale = service.read_state()
    if stale is not None:
        _end(stale)  # a JVM whose supervisor died, or the reverse: none may be left
        service.clear_state(stale.supervisor_pid)
    token = service.new_token()
    conf = service.write_conf(server_conf(spec.log_dir, spec.conf))
    service.reset_plans()
    spec.log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    command = [
        sys.executable, "-m", SUPERVISOR_MODULE, str(service.root),
        "--master", spec.master, "--conf-file", str(conf), "--token-file", str(token),
        "--idle-timeout-ms", str(spec.idle_timeout_ms), "--spark-home", str(spark_home()),
        "--log", str(spec.log_dir / "spark.log"),
    ]  # fmt: skip
    with open(spec.log_dir / "spark.log", "ab") as log:
        supervisor = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True
        )
    began = time.monotonic()
    while True:
        state = service.read_state()
        if state is not None and state.supervisor_pid == supervisor.pid:
            # Reaped by a thread of its own so that no zombie stays in a long-lived
            # client (the console) once the supervisor stops on its own.
            _reap_in_background(supervisor)
            return state
        waited = time.monotonic() - began
        if supervisor.poll() is not None:
            raise SparkUnavailable(
                f"the Spark service did not start (see {spec.log_dir / 'spark.log'}); "
                "or plan in this process with --spark-master local[*]"
            )
        if waited > START_TIMEOUT_SECONDS:
            _terminate(supervisor.pid)
            supervisor.wait()
            raise SparkUnavailable(
                f"the Spark service did not start within {START_TIMEOUT_SECONDS:g} s "
                f"(see {spec.log_dir / 'spark.log'}); the machine may be overloaded"
            )
        if on_wait is not None:
            on_wait(waited)
        time.sleep(_POLL_SECONDS)


def _reap_in_background(process: subprocess.Popen[bytes]) -> None:
    import threading

    threading.Thread(target=process.wait, name="ebb-spark-supervisor-reaper", daemon=True).start()


def stop(data_root: Path) -> ServerState | None:
    """Stop the data directory's server; returns what was stopped (None: nothing ran)."""
    service = ServiceDir(data_root)
    with service.start_lock():
        state = service.read_state()
        if state is None:
            return None
        _end(state)
        service.clear_state(state.supervisor_pid)
        return state


def _end(state: ServerState) -> None:
    """Stop a server: its supervisor first (it stops the JVM), then the JVM if it outlived it."""
    if _is_supervisor(state.supervisor_pid):
        _terminate(state.supervisor_pid)
        _wait_gone(state.supervisor_pid)
    if pid_alive(state.pid) and _is_jvm(state.pid):
        _terminate(state.pid)
        if not _wait_gone(state.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(state.pid, signal.SIGKILL)
            _wait_gone(state.pid)


def _is_jvm(pid: int) -> bool:
    try:
        return b"SparkConnectServer" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _terminate(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)


def _wait_gone(pid: int) -> bool:
    deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if not pid_alive(pid) or _is_zombie(pid):
            return True
        time.sleep(_POLL_SECONDS)
    return False


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


_RUNNING_FIELDS = (
    "master",
    "pid",
    "port",
    "address",
    "uptime_s",
    "rss_bytes",
    "idle_timeout_s",
    "idle_s",
    "token_file",
    "answering",
)


def status(data_root: Path) -> dict[str, Any]:
    """What ``ebb spark status`` shows: master, state, pid, port, uptime, plans, memory,
    and whether it answers (:func:`answers`)."""
    service = ServiceDir(data_root)
    state = running(service)
    if state is None:
        stopped = "starting" if service.start_in_progress() else "stopped"
        return {"state": stopped, **dict.fromkeys(_RUNNING_FIELDS), "plans_served": 0, "warmed_up": False}
    now = time.time()
    return {
        "state": "running",
        "master": state.master,
        "pid": state.pid,
        "port": state.port,
        "address": state.address,
        "uptime_s": round(now - state.started / 1000, 1),
        "plans_served": service.plans_served(),
        "warmed_up": service.warmed_up(),
        "rss_bytes": rss_bytes(state.pid),
        "idle_timeout_s": state.idle_timeout_ms / 1000,
        "idle_s": round(now - max(service.last_used(), state.started / 1000), 1),
        "token_file": state.token_file,
        "answering": answers(state),
    }
