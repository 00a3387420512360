"""The process that runs a data directory's shared Spark Connect server and ends it.

Started detached by :func:`engine.prune.spark_service.ensure_running`; runs the JVM
as its child, records it in ``server.json`` once it accepts connections, and stops it
on SIGTERM (``ebb spark stop``), when it has been idle for its timeout, or when its
record is no longer its own (``server.json`` damaged or replaced); exits when the JVM
dies. Once the server is ready it also runs the warm-up
(:mod:`engine.prune.spark_warmup`) beside it, and once that has ended the plan desk
(:mod:`engine.prune.plan_desk`). Whatever ends this process, no JVM, warm-up or desk
is left: they get SIGTERM from the kernel if this process dies first
(``PR_SET_PDEATHSIG``).

Stays small on purpose (no pyspark import): it lives as long as the server.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from engine.prune.spark_service import STATE_NAME, ServerState, ServiceDir

_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
_WARM_UP_MODULE = "engine.prune.spark_warmup"
_DESK_MODULE = "engine.prune.plan_desk"
#: how often the end of the warm-up is looked for, to start the desk soon after
_WARM_UP_POLL_SECONDS = 0.5
_PR_SET_PDEATHSIG = 1
_PORT_ATTEMPTS = 3
_JVM_STOP_SECONDS = 30.0
_READY_POLL_SECONDS = 0.1


def _log(path: Path, message: str) -> None:
    with open(path, "a", encoding="utf-8") as log:
        log.write(f"{time.strftime('%y/%m/%d %H:%M:%S')} ebbtide spark service [{os.getpid()}]: {message}\n")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _launch(args: argparse.Namespace, port: int, token: str) -> subprocess.Popen[bytes]:
    command = [
        str(Path(args.spark_home) / "bin" / "spark-submit"), "--master", args.master,
        "--properties-file", args.conf_file,
        # On the command line, after the file, so that no setting of the file moves them.
        "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf", f"spark.connect.grpc.binding.port={port}",
        "--conf", "spark.connect.grpc.port.maxRetries=0",
        "--class", _SERVER_CLASS, "--name", "ebbtide-service", "spark-internal",
    ]  # fmt: skip
    env = {key: value for key, value in os.environ.items() if key not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}
    env.update(
        SPARK_HOME=args.spark_home, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
        SPARK_CONNECT_AUTHENTICATE_TOKEN=token,
    )  # fmt: skip
    return _child(command, env, Path(args.log))


def _child(command: list[str], env: dict[str, str], log_file: Path) -> subprocess.Popen[bytes]:
    """``command`` as a child that writes to ``log_file`` and dies with this process."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def die_with_parent() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)

    with open(log_file, "ab") as log:
        return subprocess.Popen(
            command, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            preexec_fn=die_with_parent,  # noqa: PLW1509 - one prctl call, resolved before the fork
        )  # fmt: skip


def _start_python(module: str, args: argparse.Namespace) -> subprocess.Popen[bytes]:
    """``python -m module SERVICE_DIR --log-dir LOG_DIR`` as a child: the warm-up, the desk."""
    log = Path(args.log)
    command = [sys.executable, "-m", module, args.service_dir, "--log-dir", str(log.parent)]
    return _child(command, dict(os.environ), log)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def _stop(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is not None:
        return
    child.terminate()
    try:
        child.wait(_JVM_STOP_SECONDS)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def _start_jvm(
    args: argparse.Namespace, token: str, stopping: threading.Event
) -> tuple[subprocess.Popen[bytes], int] | None:
    """The JVM listening on its port; None if it could not start (or a stop came first).
    A free port can be taken between choosing it and the JVM's bind: try again."""
    for _attempt in range(_PORT_ATTEMPTS):
        port = _free_port()
        jvm = _launch(args, port, token)
        while not stopping.is_set() and jvm.poll() is None and not _listening(port):
            time.sleep(_READY_POLL_SECONDS)
        if jvm.poll() is None and not stopping.is_set():
            return jvm, port
        _stop(jvm)
        if stopping.is_set():
            return None
        _log(Path(args.log), f"the Spark Connect server exited during start-up (status {jvm.returncode})")
    return None


def _recorded(service: ServiceDir) -> bool:
    """Whether ``server.json`` still records this process's server."""
    state = service.read_state()
    return state is not None and state.supervisor_pid == os.getpid()


def _idle_for(service: ServiceDir, started: float) -> float:
    return time.time() - max(service.last_used(), started)


def serve(args: argparse.Namespace) -> int:
    service = ServiceDir(Path(args.service_dir).parent)
    log = Path(args.log)
    stopping = threading.Event()

    def on_signal(_signum: int, _frame: Any) -> None:
        stopping.set()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    token = Path(args.token_file).read_text().strip()
    started_jvm = _start_jvm(args, token, stopping)
    if started_jvm is None:
        return 1
    jvm, port = started_jvm
    started = time.time()
    service.write_state(
        ServerState(
            supervisor_pid=os.getpid(),
            pid=jvm.pid,
            port=port,
            started=int(started * 1000),
            master=args.master,
            token_file=args.token_file,
            idle_timeout_ms=args.idle_timeout_ms,
        )
    )
    _log(log, f"Spark Connect server (pid {jvm.pid}) ready on 127.0.0.1:{port}, master {args.master}")
    warm_up = _start_python(_WARM_UP_MODULE, args)
    desk: subprocess.Popen[bytes] | None = None
    idle_timeout = args.idle_timeout_ms / 1000
    poll = min(5.0, max(0.2, idle_timeout / 10))
    try:
        while not stopping.wait(poll if desk is not None else min(poll, _WARM_UP_POLL_SECONDS)):
            if desk is None and warm_up.poll() is not None:  # reaped: no zombie for the server's lifetime
                desk = _start_python(_DESK_MODULE, args)
            if desk is not None:
                desk.poll()
            if jvm.poll() is not None:
                _log(log, f"the Spark Connect server exited (status {jvm.returncode})")
                return 1
            if not _recorded(service):
                # No client can find it any more, and the next plan starts another
                # server, whose clients (taking the same attach lock) would keep this
                # one from ever being idle: a second JVM for nothing.
                _log(log, f"{STATE_NAME} no longer records this server (damaged or replaced): stopping it")
                return 1
            if _idle_for(service, started) < idle_timeout:
                continue
            exclusive = service.try_exclusive_attach()
            if exclusive is None:
                continue  # a client is attached: not idle, whatever the clock says
            with exclusive:
                # Checked again under the lock: a client may have planned meanwhile.
                if _idle_for(service, started) >= idle_timeout:
                    _log(log, f"idle for {idle_timeout:g} s: stopping the Spark Connect server")
                    # Forgotten before the JVM ends: a client waiting for the lock
                    # then starts a new server instead of attaching to a dying one.
                    service.clear_state(os.getpid())
                    _stop(jvm)
                    return 0
        _log(log, "stopping the Spark Connect server (asked to)")
        return 0
    finally:
        service.clear_state(os.getpid())
        _stop(warm_up)
        if desk is not None:
            _stop(desk)
        _stop(jvm)


def main() -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {__name__}")
    parser.add_argument("service_dir")
    parser.add_argument("--master", required=True)
    parser.add_argument("--conf-file", required=True)
    parser.add_argument("--token-file", required=True)
    parser.add_argument("--idle-timeout-ms", type=int, required=True)
    parser.add_argument("--spark-home", required=True)
    parser.add_argument("--log", required=True)
    return serve(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
