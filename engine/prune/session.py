"""The one Spark session of a process: built off the caller's thread, silent, reused.

A :class:`SparkEngine` builds its session in a daemon worker thread, so the console
stays responsive during the 5-7 s cold start, and keeps it for every prune cycle.
Two modes:

* local (``local[*]``, ``local[N]``, ``spark://...``): this process launches the
  gateway JVM itself, with the JVM's stdout and stderr sent to ``spark.log``. That is
  the only way to keep the JVM's ``WARNING: Using incubator modules`` line (and any
  Python worker output) off the terminal (docs/SPARK_NOTES.md, "Local session, silent").
  Spark's own logging goes to the same file through a log4j2 config written next to it.
* Spark Connect (``sc://host:port``): a gRPC client of a server run elsewhere.
* the shared service (neither configured): a Connect client of the data directory's
  own warm server (:mod:`engine.prune.spark_service`), started first if none is up.
  A server lost mid-use is let go: the next plan attaches again (or starts a new one).

pyspark is imported lazily: importing this module costs nothing until a session is
built (the Connect client alone takes about 0.6 s to import).
"""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlparse

from engine.config import Config
from engine.datadir import DataDir
from engine.errors import PlanCancelled, SparkUnavailable
from engine.prune.scratch import scratch_dir
from engine.prune.spark_service import ServiceSpec, not_answering, serving, silence
from engine.prune.spark_settings import (
    CONNECT_DEFAULTS,
    LOCAL_DEFAULTS,
    LOG_NAME,
    local_java_options,
    spark_home,
)

if TYPE_CHECKING:
    # Connect sessions are a different class; pyspark itself presents them under this
    # name, and so do we.
    from pyspark.sql import SparkSession

T = TypeVar("T")

_LOCAL_MASTER = re.compile(r"^(local(\[[^\]]+\])?|local-cluster\[[^\]]+\]|spark://\S+)$")
_CONNECT_PROBE_SECONDS = 5.0
_CANCEL_REPEAT_SECONDS = 0.2
_GATEWAY_EXIT_SECONDS = 10.0
#: how long closing a Connect session may wait for its server (a release takes milliseconds)
_CONNECT_CLOSE_SECONDS = 10.0
#: a Connect URL's token: it must not reach the log, the journal or the screen
_TOKEN_PARAMETER = re.compile(r";token=[^;]*")
#: how long a service engine that failed to start stays failed before the next use retries
_SERVICE_RETRY_SECONDS = 30.0

# One local SparkContext per process is a hard Spark limit; this is who holds it.
_local_owner_lock = threading.Lock()
_local_owner: SparkEngine | None = None


def without_token(url: str) -> str:
    """A Spark Connect URL as an operator sees it: its token hidden."""
    return _TOKEN_PARAMETER.sub(";token=<hidden>", url)


# Python-side loggers of pyspark and py4j that would write to stderr: pyspark's query
# context loggers come with their own stderr handler and log every failed query.
_PYTHON_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger", "pyspark.sql.connect.logging", "py4j")
_python_log_handler: logging.Handler | None = None
_python_log_lock = threading.Lock()


def route_python_logs(log_file: Path) -> None:
    """Send pyspark's and py4j's Python loggers to ``log_file`` instead of stderr, and
    the root logger's warnings too: py4j reports a call the JVM broke off with
    ``logging.exception`` on the root logger, which Python prints to stderr when it
    has no handler. A signal to the whole process group (Ctrl-C at a terminal,
    ``systemctl stop``) reaches the local JVM as well, and the plan it was running
    put a traceback on the operator's terminal."""
    global _python_log_handler
    from pyspark.logger import PySparkLogger

    handler = logging.FileHandler(log_file, encoding="utf-8", delay=True)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%y/%m/%d %H:%M:%S"))
    with _python_log_lock:
        previous, _python_log_handler = _python_log_handler, handler
        for name in _PYTHON_LOGGERS:
            logger = logging.getLogger(name) if name == "py4j" else PySparkLogger.getLogger(name)
            for old in list(logger.handlers):
                if old is previous or type(old) is logging.StreamHandler:
                    logger.removeHandler(old)
            # pyspark's addHandler would swap our formatter for its JSON one
            logging.Logger.addHandler(logger, handler)
            logger.propagate = False
        root = logging.getLogger()
        if previous is not None:
            root.removeHandler(previous)
        root.addHandler(handler)
    if previous is not None:
        previous.close()


#: the thread that builds a session (:meth:`SparkEngine.start`)
START_THREAD_NAME = "ebb-spark-start"


@dataclass
class _Run:
    """A plan running under a tag."""

    finished: threading.Event
    cancelled: bool = False
    canceller: threading.Thread | None = None
    #: Connect only: the server reports stages running for the current operation
    job_running: bool = False


class SparkEngine:
    """The process's Spark session, local or Connect; see the module docstring."""

    def __init__(
        self,
        *,
        master: str = "local[*]",
        remote: str | None = None,
        conf: Mapping[str, str] | None = None,
        log_dir: Path,
        service: ServiceSpec | None = None,
        service_client: bool = False,
    ) -> None:
        """``service``: plan on the data directory's shared server (``master`` and
        ``remote`` are then ignored). ``service_client``: ``remote`` is that server, and
        this engine a plain client of it (the warm-up, the plan desk): it takes the
        server's settings and keeps the short retries, as a service engine does."""
        self._master = master
        self._remote = remote
        self._service = service
        self._service_client = service_client
        self._attachment: Any = None  # service: the attach lock held while attached
        self._retry_at: float | None = None
        self._conf = {str(k): str(v) for k, v in (conf or {}).items()}
        self._log_dir = Path(log_dir)
        self._lock = threading.Lock()
        self._state = "stopped"
        self._error: str | None = None
        self._spark: Any = None  # classic or Connect SparkSession
        self._gateway: Any = None  # local mode: the py4j gateway whose JVM we own
        self._thread: threading.Thread | None = None
        self._done = threading.Event()
        self._runs: dict[str, _Run] = {}
        self._thread_run = threading.local()  # .plan: the _Run of the calling thread

    # -- status -----------------------------------------------------------------------

    @property
    def state(self) -> str:
        """``"stopped"``, ``"starting"``, ``"ready"`` or ``"failed"``. A service
        engine that failed reads ``"stopped"`` again after a while: the next use retries."""
        if self._state == "failed" and self._retry_at is not None and time.monotonic() >= self._retry_at:
            return "stopped"
        return self._state

    def observed_state(self) -> str:
        """:attr:`state`, but ``"stopped"`` where this engine plans on the data
        directory's service and that server is gone (``ebb spark stop``, a crash),
        and ``"not_answering"`` where it lives but does not answer (stopped, hung):
        :attr:`state` stays ``"ready"`` until the next plan finds out (and attaches
        again), which a gauge or alert must not wait for. Reads the service's files
        and opens a connection to the server (up to 5 s where it does not answer):
        for a metrics scrape, not a UI thread."""
        state = self.state
        if state == "ready" and self._service is not None:
            if not serving(self._service_dir()):
                return "stopped"
            if not_answering(self._service_dir()) is not None:
                return "not_answering"
        return state

    @property
    def error(self) -> str | None:
        """One-line reason when :attr:`state` is ``"failed"``."""
        return self._error

    @property
    def description(self) -> str:
        """Where plans run: the master or the Connect URL (never a token)."""
        if self._service is not None:
            return f"service ({self._service.master})"  # reads "Spark service (local[*])"
        if self._remote is not None:
            return without_token(self._remote)
        return self._master

    @property
    def reads_local_files(self) -> bool:
        """Whether Spark runs on this machine and reads this process's local paths: an
        in-process local master, or the data directory's own service (a local server)."""
        if self._service is not None:
            return self._service.master.startswith("local")
        return self._remote is None and self._master.startswith("local")

    @property
    def service(self) -> ServiceSpec | None:
        """The data directory's shared service this engine plans on; None if it does not."""
        return self._service

    @property
    def _connect(self) -> bool:
        return self._remote is not None or self._service is not None

    @property
    def log_file(self) -> Path:
        """Where Spark, the JVM and this engine write their diagnostics."""
        return self._log_dir / LOG_NAME

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> None:
        """Begin building the session in a daemon thread and return at once.

        Does nothing unless stopped: a failed engine stays failed (with its error)
        until :meth:`stop`, so callers do not retry a broken setup in a loop.
        """
        with self._lock:
            if self.state != "stopped":
                return
            self._state, self._error, self._retry_at = "starting", None, None
            self._done = threading.Event()
            self._thread = threading.Thread(target=self._build, name=START_THREAD_NAME, daemon=True)
            self._thread.start()

    def session(self, timeout: float | None = None) -> SparkSession:
        """The session, starting it if needed and waiting up to ``timeout`` seconds."""
        self.start()
        done = self._done
        if not done.wait(timeout):
            raise SparkUnavailable(f"Spark ({self.description}) is not ready after {timeout:g} s")
        with self._lock:
            if self._state == "ready":
                return self._spark
            raise SparkUnavailable(self._error or f"Spark ({self.description}) was stopped")

    def stop(self) -> None:
        """Stop the session; in local mode also end the gateway JVM. Idempotent."""
        with self._lock:
            thread = self._thread
        if thread is not None:
            # Let a start in progress finish, so that no half-built JVM is left behind.
            thread.join()
        with self._lock:
            spark, gateway = self._spark, self._gateway
            # A plan still running dies with the session: report it as cancelled.
            for running in self._runs.values():
                running.cancelled = True
            self._spark = self._gateway = self._thread = None
            self._state, self._error = "stopped", None
        self._close_session(spark, gateway)

    def _close_session(self, spark: Any, gateway: Any) -> None:
        try:
            if spark is not None and self._connect:
                # Closing a Connect session asks the server to release it, which a
                # server that does not answer (stopped, hung) leaves waiting until the
                # client's keepalive gives up, 80 s on: Ctrl-C, a console's quit and
                # ``ebb engine``'s stop would wait as long. Not for a local session,
                # whose JVM is ended below only once its context has stopped.
                closing = threading.Thread(target=self._stop_session, args=(spark,), name="ebb-spark-stop", daemon=True)
                closing.start()
                closing.join(_CONNECT_CLOSE_SECONDS)
                if closing.is_alive():
                    self._note(
                        f"the Spark Connect session was not closed within {_CONNECT_CLOSE_SECONDS:g} s (its server "
                        "does not answer): left to close on its own"
                    )
            elif spark is not None:
                self._stop_session(spark)
        finally:
            if gateway is not None:
                self._shutdown_gateway(gateway)
            self._release_local()
            self._detach()

    def _stop_session(self, spark: Any) -> None:
        try:
            # pyspark reports a JVM that died first with warnings.warn (stderr)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                spark.stop()
            for warning in caught:
                self._note(f"while stopping Spark: {warning.message}")
        except Exception:  # noqa: BLE001 - stopping must not fail; the JVM is ended after it
            self._note("error while stopping the Spark session", exc_info=True)

    # -- plans ------------------------------------------------------------------------

    def run(self, job: Callable[[SparkSession], T], tag: str) -> T:
        """Run ``job(session)`` on this thread with Spark jobs tagged ``tag``.

        Raises :class:`PlanCancelled` if :meth:`cancel` was called for ``tag`` while
        it ran, even if the job got to finish: its result is stale by then.
        """
        spark = self.session()
        plan = _Run(threading.Event())
        with self._lock:
            if tag in self._runs:
                raise ValueError(f"a plan tagged {tag!r} is already running")
            self._runs[tag] = plan
        self._thread_run.plan = plan
        try:
            # Tags belong to the calling thread: attach here, clear in finally, since
            # threads of a pool are reused and would keep them.
            if self._connect:
                spark.addTag(tag)
            else:
                spark.sparkContext.addJobTag(tag)
            try:
                self._raise_if_cancelled(plan, tag)
                with self._cancelled_by_ctrl_c(tag):
                    result = job(spark)
            except PlanCancelled:
                raise
            except Exception as exc:
                if _interrupted(exc):
                    # Ctrl-C while pyspark read a result: the error of its cleanup
                    # (the JVM's write to a reader that left) replaced the interrupt.
                    raise KeyboardInterrupt from None
                self._raise_if_cancelled(plan, tag)
                if not _from_spark(exc):
                    raise
                raise self._failure(exc) from None
            self._raise_if_cancelled(plan, tag)
            if self._service is not None:
                self._service_dir().record_plan()
            return result
        finally:
            with self._lock:
                plan.finished.set()
                canceller = plan.canceller
            if canceller is not None:
                # Its last cancel must not land on the next plan run under this tag.
                canceller.join()
            try:
                if self._connect:
                    spark.clearTags()
                else:
                    spark.sparkContext.clearJobTags()
            except Exception:  # noqa: BLE001 - the session was stopped under us
                self._note("could not clear Spark job tags", exc_info=True)
            with self._lock:
                del self._runs[tag]
            self._thread_run.plan = None

    def cancel(self, tag: str) -> None:
        """Cancel the plan running under ``tag``, from any thread; no-op if none is.

        Spark only cancels jobs already submitted, and a plan may submit its next job
        just after; so the cancel is repeated until the plan's :meth:`run` returns.
        """
        with self._lock:
            plan, spark = self._runs.get(tag), self._spark
            if plan is None or spark is None or plan.cancelled or plan.finished.is_set():
                return
            plan.cancelled = True
            plan.canceller = threading.Thread(
                target=self._keep_cancelling, args=(spark, tag, plan), name="ebb-spark-cancel", daemon=True
            )
            plan.canceller.start()

    @contextmanager
    def _cancelled_by_ctrl_c(self, tag: str) -> Iterator[None]:
        """On the main thread, where Python's own Ctrl-C handler is in place (a
        one-shot command): Ctrl-C also cancels the Spark jobs of ``tag``. Without it,
        pyspark waits for the running job to end before the interrupt is raised,
        and a shared server runs it on for no one."""
        if threading.current_thread() is not threading.main_thread() or (
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler
        ):
            yield
            return

        def on_ctrl_c(signum: int, frame: FrameType | None) -> None:
            # From a thread: the main thread may hold the lock cancel() takes.
            threading.Thread(target=self.cancel, args=(tag,), name="ebb-spark-interrupt", daemon=True).start()
            signal.default_int_handler(signum, frame)

        signal.signal(signal.SIGINT, on_ctrl_c)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, signal.default_int_handler)

    def note(self, message: str) -> None:
        """Append a line to the log file, never the terminal."""
        self._note(message)

    # -- internals --------------------------------------------------------------------

    def _raise_if_cancelled(self, plan: _Run, tag: str) -> None:
        with self._lock:
            cancelled = plan.cancelled
        if cancelled:
            raise PlanCancelled(f"plan {tag} was cancelled") from None

    def _keep_cancelling(self, spark: Any, tag: str, plan: _Run) -> None:
        while not plan.finished.is_set():
            # Connect: an operation interrupted while the server is still planning it
            # is reported cancelled to us, yet the Spark job it submits a moment later
            # runs on, orphaned, holding the server's cores (measured). So interrupt
            # only while the server reports a stage running; the first report comes
            # about 2 s into a job, so cancelling a Connect plan takes that long.
            if self._connect and not plan.job_running:
                plan.finished.wait(_CANCEL_REPEAT_SECONDS / 4)
                continue
            try:
                if self._connect:
                    spark.interruptTag(tag)
                else:
                    spark.sparkContext.cancelJobsWithTag(tag)
            except Exception:  # noqa: BLE001 - session stopping: run() reports the cancel anyway
                self._note(f"could not cancel Spark jobs tagged {tag}", exc_info=True)
                return
            plan.finished.wait(_CANCEL_REPEAT_SECONDS)

    def _on_connect_progress(self, stages: Any = None, done: bool = False, **_: Any) -> None:
        """Progress handler of a Connect session: runs on the thread of the operation."""
        plan: _Run | None = getattr(self._thread_run, "plan", None)
        if plan is not None:
            # A stage still running, not just listed: between the jobs of one query
            # the server is planning again, which is when an interrupt orphans a job.
            plan.job_running = not done and any(not stage.done for stage in stages or ())

    def _build(self) -> None:
        try:
            self._log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            route_python_logs(self.log_file)
            if self._service is not None:
                spark = self._build_service()
            elif self._remote:
                spark = self._build_connect(self._remote, shared_service=self._service_client)
            else:
                spark = self._build_local()
        except Exception as exc:  # noqa: BLE001 - any failure is the engine's state, not a crash
            self._release_local()
            self._detach()
            if isinstance(exc, SparkUnavailable):
                reason = str(exc)
            elif _from_spark(exc):
                reason = str(self._failure(exc, starting=True))
            else:
                reason = f"cannot start Spark ({self.description}): {first_line(exc)}; details in {self.log_file}"
            self._note(reason, exc_info=not _from_spark(exc))  # _failure logged Spark's own
            with self._lock:
                self._state, self._error = "failed", reason
                if self._service is not None:
                    self._retry_at = time.monotonic() + _SERVICE_RETRY_SECONDS
        else:
            with self._lock:
                self._spark, self._state = spark, "ready"
        finally:
            self._done.set()

    def _build_local(self) -> Any:
        global _local_owner
        if not _LOCAL_MASTER.match(self._master):
            raise ValueError(f"invalid master {self._master!r}: expected local[N], local[*] or spark://HOST:PORT")
        from pyspark import SparkConf, SparkContext
        from pyspark.java_gateway import launch_gateway
        from pyspark.sql import SparkSession

        if self._master.startswith("spark://"):
            # A standalone master that does not answer: the driver retries it for a
            # minute, then reports only that its context stopped.
            url = urlparse(self._master)
            if url.hostname is not None:
                _probe(url.hostname, url.port or 7077, "Spark master")
        with _local_owner_lock:
            if _local_owner is not None or SparkContext._gateway is not None:
                raise RuntimeError("a local Spark session already runs in this process (one per process)")
            _local_owner = self

        # Workers would otherwise run whatever `python3` is on PATH (without pyarrow);
        # an inherited SPARK_HOME would win over the Spark bundled in the wheel.
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
        os.environ["SPARK_HOME"] = str(spark_home())

        conf = SparkConf(loadDefaults=False)
        conf.setMaster(self._master)
        options = {**LOCAL_DEFAULTS, **self._conf}
        # The planner registers its input as a table, and Spark's catalog then makes
        # the default database's directory: in the working directory unless told.
        options.setdefault("spark.sql.warehouse.dir", str(self._log_dir / "spark-warehouse"))
        options["spark.driver.extraJavaOptions"] = local_java_options(
            self._log_dir, self._conf.get("spark.driver.extraJavaOptions", "")
        )
        conf.setAll(list(options.items()))

        with open(self.log_file, "ab") as log:
            gateway = launch_gateway(conf, popen_kwargs={"stdout": log, "stderr": log})
        self._gateway = gateway
        try:
            context = SparkContext(conf=conf, gateway=gateway)
            return SparkSession(context)
        except Exception as exc:  # noqa: BLE001 - whatever stops the context, the JVM must go
            # Py4J asks the JVM for a Java error's text: read it before the JVM goes.
            refused = SparkUnavailable(
                f"cannot start Spark ({self.description}): {_spark_cause(exc)}; details in {self.log_file}"
            )
            self._note(f"Spark did not start ({self.description})", exc_info=True)
            self._gateway = None
            self._shutdown_gateway(gateway)
            raise refused from None

    def _build_service(self) -> Any:
        """A Connect session on the shared server, started first if none runs. The
        attach lock is taken first and held while attached: the server cannot stop
        for idleness between being found and being used."""
        from engine.prune import spark_service

        assert self._service is not None
        service = self._service_dir()
        self._attachment = service.attach_lock()
        state, _started = spark_service.ensure_running(self._service)
        if not spark_service.answers(state):
            # Found running, yet silent: the Connect client would try it three times
            # for 20 s each before giving up.
            raise SparkUnavailable(spark_service.silence(state))
        token = Path(state.token_file).read_text().strip()
        service.touch()
        return self._build_connect(f"{state.address}/;token={token}", shared_service=True)

    def _service_dir(self) -> Any:
        from engine.prune.spark_service import ServiceDir

        assert self._service is not None
        return ServiceDir(self._service.data_root)

    def _detach(self) -> None:
        """Service: let the server go (it stays up for the next client)."""
        with self._lock:
            attachment, self._attachment = self._attachment, None
        if attachment is not None:
            self._service_dir().touch()
            attachment.close()

    def _failure(self, exc: BaseException, *, starting: bool = False) -> SparkUnavailable:
        """One line for a Spark failure, saying what to do; the details go to the log.
        A service engine whose server went away lets it go: the next use attaches again."""
        self._note(f"Spark failed ({self.description})", exc_info=True)
        kind, reason = classify_failure(exc)
        silent = not_answering(self._service_dir()) if kind == "gone" and self._service is not None else None
        if silent is not None:
            kind, reason = "silent", silence(silent)
        if kind in ("gone", "silent") and self._service is not None and not starting:
            with self._lock:
                spark, self._spark = self._spark, None
                self._state, self._thread = "stopped", None
            self._close_session(spark, None)
        return SparkUnavailable(f"{reason}{_advice(kind, self._service is not None)}; details in {self.log_file}")

    def _build_connect(self, address: str, *, shared_service: bool = False) -> Any:
        """A Connect session on ``address``. On the ``shared_service`` the server has
        our settings already (only the config file's SQL ones are set), and the short
        retry policy stays: a loopback server that does not answer has died, and the
        client's default (ten minutes of retries) would only hide that."""
        url = urlparse(address)
        if url.scheme != "sc" or not url.hostname:
            raise ValueError(f"invalid Spark Connect URL {address!r}: expected sc://HOST:PORT")
        # The client retries an unreachable server for about ten minutes; a plain TCP
        # connect gives a quick, clear answer instead.
        _probe(url.hostname, url.port or 15002, "Spark Connect server")

        # gRPC's C core logs to stderr; keep it quiet unless the operator asked otherwise.
        os.environ.setdefault("GRPC_VERBOSITY", "NONE")
        # The Connect client's own progress bar (stdout) is off unless this is "1".
        os.environ["SPARK_CONNECT_PROGRESS_BAR_ENABLED"] = "0"
        # The client warns (stderr) when it gives up retrying; the failure is ours to report.
        warnings.filterwarnings("ignore", message=r"\[RETRIES_EXCEEDED\]")
        # The Connect builder itself, not pyspark.sql.SparkSession.builder: the generic
        # one flags the whole process as Connect, which breaks a local session in it.
        from pyspark.sql.connect.client.retries import DefaultPolicy
        from pyspark.sql.connect.session import SparkSession as ConnectSession

        spark = ConnectSession.builder.remote(address).create()
        # Typed as an ABC, but the client calls any handler with keywords only (pyspark's own docs register a function).
        spark.registerProgressHandler(self._on_connect_progress)  # type: ignore[arg-type]
        try:
            client = spark.client
            policies = client.get_retry_policies()
            client.set_retry_policies([DefaultPolicy(max_retries=2, max_backoff=1000)])
            try:
                _ = spark.version  # first round trip: fails fast if the server is not Spark
                if shared_service:
                    settings = {k: v for k, v in self._conf.items() if k.startswith("spark.sql.")}
                else:
                    settings = {**CONNECT_DEFAULTS, **self._conf}
                for key, value in settings.items():
                    try:
                        spark.conf.set(key, value)
                    except Exception as exc:  # noqa: BLE001 - the server says why; it goes to the log
                        # Static settings (driver memory...) belong to the server.
                        self._note(f"Spark Connect server kept its own {key}: {first_line(exc)}")
            finally:
                if not shared_service:
                    client.set_retry_policies(policies)
        except Exception:
            spark.stop()
            raise
        return spark

    def _shutdown_gateway(self, gateway: Any) -> None:
        """End the gateway JVM: ``spark.stop()`` alone leaves it (~400 MB) running."""
        from pyspark import SparkContext

        try:
            gateway.shutdown()
        except Exception:  # noqa: BLE001 - the JVM is ended through its stdin anyway
            self._note("error while shutting the Spark gateway down", exc_info=True)
        proc = getattr(gateway, "proc", None)
        if proc is not None:
            try:
                proc.stdin.close()  # the JVM exits when its stdin closes
                proc.wait(_GATEWAY_EXIT_SECONDS)
            except Exception:  # noqa: BLE001 - no clean exit: no JVM may be left either way
                proc.kill()
                proc.wait()
        SparkContext._gateway = None
        SparkContext._jvm = None

    def _release_local(self) -> None:
        global _local_owner
        with _local_owner_lock:
            if _local_owner is self:
                _local_owner = None

    def _note(self, message: str, *, exc_info: bool = False) -> None:
        """Append a line (and the current traceback) to the log file, never the terminal."""
        try:
            self._log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            with open(self.log_file, "a", encoding="utf-8") as log:
                log.write(f"{time.strftime('%y/%m/%d %H:%M:%S')} ebbtide: {message}\n")
                if exc_info:
                    log.write(traceback.format_exc())
        except OSError:
            pass


_SPARK_MODULES = ("pyspark", "py4j", "grpc")


def _probe(host: str, port: int, what: str) -> None:
    """Raise a one-line ConnectionError unless something accepts a TCP connection at ``host:port``."""
    try:
        socket.create_connection((host, port), timeout=_CONNECT_PROBE_SECONDS).close()
    except OSError as error:
        raise ConnectionError(f"no {what} at {host}:{port} ({error.strerror or error})") from None


def _from_spark(exc: BaseException) -> bool:
    """Whether ``exc`` comes from Spark, its client or its transport (a bug of ours does not)."""
    return isinstance(exc, ConnectionError) or any(
        cls.__module__.split(".")[0] in _SPARK_MODULES for cls in type(exc).__mro__
    )


def _interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` was raised while a KeyboardInterrupt was being handled."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt):
            return True
        seen = seen.__context__
    return False


def classify_failure(exc: BaseException) -> tuple[str, str]:
    """``(kind, one line)`` for a Spark failure: ``memory``, ``token``, ``gone`` or ``plan``."""
    text = f"{type(exc).__name__}: {_text(exc)}"
    if "OutOfMemoryError" in text or "Java heap space" in text or "GC overhead limit" in text:
        return "memory", "Spark ran out of memory"
    if "UNAUTHENTICATED" in text or "authentication token" in text.lower():
        return "token", "the Spark server refused this client's token"
    gone = (
        "UNAVAILABLE",
        "Connection refused",
        "Socket closed",
        "no Spark Connect server",
        "Py4JNetworkError",
        "Answer from Java side is empty",
        "Error while sending or receiving",
        "CANCELLED",
        "Connection reset",
    )
    if isinstance(exc, ConnectionError):
        return "gone", first_line(exc)  # our own probe's: it names the address
    if any(marker in text for marker in gone):
        return "gone", "the Spark server cannot be reached (not running, or it died)"
    return "plan", f"Spark failed: {first_line(exc)}"


def _advice(kind: str, service: bool) -> str:
    if kind == "memory":
        restart = ", then `ebb spark stop`" if service else ""
        return f'; give it more with [spark.conf] "spark.driver.memory" in ebb.toml{restart}'
    if kind == "token":
        return "; run `ebb spark stop`, then try again" if service else "; check the token in the sc:// URL"
    if kind == "gone":
        if service:
            return "; the next plan starts a new Spark service (the next cycle, or the command run again)"
        return "; check that the Spark server is up, or plan in this process with --spark-master local[*]"
    return ""


def first_line(exc: BaseException) -> str:
    """The first meaningful line of an error: Spark's messages carry JVM stack traces."""
    for line in _text(exc).splitlines():
        line = line.strip()
        if line:
            return line[:300]
    return type(exc).__name__


def _text(exc: BaseException) -> str:
    """``str(exc)``, or the name of its type where that fails: Py4J asks the JVM for a
    Java error's text, and a JVM that has gone answers nothing. A gRPC error gives its
    status and details: its ``str`` is a repr whose first line says neither."""
    try:
        if type(exc).__module__.split(".")[0] == "grpc" and callable(getattr(exc, "details", None)):
            code = exc.code()  # type: ignore[attr-defined]
            return f"{getattr(code, 'name', code)}: {exc.details()}"  # type: ignore[attr-defined]
        return str(exc)
    except Exception:  # noqa: BLE001 - any failure to describe an error is the same
        return type(exc).__name__


def _spark_cause(exc: BaseException) -> str:
    """The line of a Java error that says what went wrong: Py4J's first line only names
    the call (``An error occurred while calling None.org...JavaSparkContext.``); the
    Java exception's own message follows it (``: org.apache...SparkException: ...``)."""
    lines = [line.strip() for line in _text(exc).splitlines() if line.strip()]
    cause = next((line.lstrip(": ") for line in lines if line.startswith(": ")), None)
    return (cause or first_line(exc))[:300]


#: a master for an in-process Spark where neither flags nor config name one (the test
#: suite sets it: no background server for its hundreds of short commands)
MASTER_ENV = "EBB_SPARK_MASTER"


def spark_engine_for(
    config: Config, data: DataDir, *, master: str | None = None, remote: str | None = None
) -> SparkEngine:
    """The Spark engine of the ``--spark-master``/``--spark-remote`` flags, else of the
    config file, else of ``$EBB_SPARK_MASTER``, else the data directory's shared service."""
    if master is None and remote is None:
        master, remote = config.spark_master, config.spark_remote
    if master is None and remote is None:
        master = os.environ.get(MASTER_ENV) or None
    log_dir = scratch_dir(data.root, "logs")
    if master is None and remote is None:
        service = ServiceSpec(data.root, config.spark_conf, config.spark_idle_timeout_ms, log_dir)
        return SparkEngine(conf=config.spark_conf, log_dir=log_dir, service=service)
    return SparkEngine(master=master or "local[*]", remote=remote, conf=config.spark_conf, log_dir=log_dir)
