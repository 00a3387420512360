"""``ebb spark status|start|stop``: the data directory's shared Spark service
(engine/prune/spark_service.py), and the wait for Spark that commands show."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from console.cli.parser import command
from console.cli.render import emit_json, size
from engine.broker import Broker
from engine.datadir import DataDir
from engine.errors import SparkUnavailable
from engine.policy.units import describe_duration

if TYPE_CHECKING:
    from engine.prune.session import SparkEngine

_PROGRESS_AFTER_SECONDS = 1.0
_POLL_SECONDS = 0.05


def register(commands: argparse._SubParsersAction) -> None:
    spark = commands.add_parser("spark", help="the shared Spark service: status, start, stop")
    actions = spark.add_subparsers(dest="spark_action", metavar="ACTION", required=True)
    status = actions.add_parser("status", help="whether it runs, where, for how long, its memory")
    status.add_argument("--json", action="store_true")
    command(status, run_status, mutates=False)
    # They write DATA_DIR/spark (the server's state), never the catalog or the journal;
    # still, --read-only is for looking, not for managing.
    command(actions.add_parser("start", help="start it now (plans start it when needed)"), run_start, mutates=True)
    stop = actions.add_parser("stop", help="stop it (the next plan starts it again)")
    command(stop, run_stop, mutates=True, open_data=_service_directory)


def run_status(broker: Broker, args: argparse.Namespace) -> int:
    from engine.prune import spark_service

    status = spark_service.status(broker.data.root)
    if args.json:
        emit_json(status)
        return 0
    if status["state"] == "starting":
        print("Spark service: starting (another command is starting it; it answers once its JVM is up)")
        return 0
    if status["state"] != "running":
        print(f"Spark service: stopped (the next plan starts it; idle timeout "
              f"{describe_duration(broker.config.spark_idle_timeout_ms)})")  # fmt: skip
        return 0
    memory = size(status["rss_bytes"]) if status["rss_bytes"] is not None else "unknown"
    print(
        f"Spark service: running on {status['address']} (pid {status['pid']}, master {status['master']}), "
        f"up {describe_duration(int(status['uptime_s']) * 1000)}, {status['plans_served']} plan(s) served, "
        f"memory {memory}, idle {describe_duration(int(status['idle_s']) * 1000)} of "
        f"{describe_duration(int(status['idle_timeout_s']) * 1000)}"
    )
    if not status["answering"]:
        print(f"  but it does not answer: {spark_service.NOT_ANSWERING}")
    return 0


def run_start(broker: Broker, args: argparse.Namespace) -> int:
    from engine.prune import spark_service

    spec = spark_service.ServiceSpec(
        broker.data.root, broker.config.spark_conf, broker.config.spark_idle_timeout_ms, broker.data.root / "logs"
    )
    progress = Progress()
    try:
        state, started = spark_service.ensure_running(spec, on_wait=progress.show)
    finally:
        progress.clear()
    verb = "started" if started else "already running"
    print(f"Spark service {verb} on {state.address} (pid {state.pid}, master {state.master})")
    return 0


@dataclass(frozen=True)
class ServiceDirectory:
    """All ``ebb spark stop`` opens: the data directory, not its catalog nor its
    config. An ebb.toml broken while the service runs must not keep the operator
    from stopping it (every other command refuses a broken config)."""

    data: DataDir

    def __enter__(self) -> ServiceDirectory:
        return self

    def __exit__(self, *_: object) -> None:
        return None


def _service_directory(root: Path, _config: Path | None) -> ServiceDirectory:
    return ServiceDirectory(DataDir(root))


def run_stop(target: Broker | ServiceDirectory, args: argparse.Namespace) -> int:
    from engine.prune import spark_service

    state = spark_service.stop(target.data.root)
    print("Spark service stopped" if state is not None else "Spark service was not running")
    return 0


class Progress:
    """``starting Spark… 6 s`` on stderr, kept on one line, only if stderr is a
    terminal and the wait lasts: a script's stderr gets nothing."""

    def __init__(self) -> None:
        self._shown: str | None = None
        self._tty = sys.stderr.isatty()

    def show(self, waited: float) -> None:
        text = f"starting Spark… {waited:.0f} s"
        if self._tty and waited >= _PROGRESS_AFTER_SECONDS and text != self._shown:
            sys.stderr.write(f"\r{text}")
            sys.stderr.flush()
            self._shown = text

    def clear(self) -> None:
        if self._shown is not None:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            self._shown = None


def wait_for_spark(spark: SparkEngine) -> None:
    """Start ``spark`` and wait until it is ready, showing progress; a failure is the
    one-line :class:`SparkUnavailable` it recorded."""
    spark.start()
    progress = Progress()
    began = time.monotonic()
    try:
        while spark.state == "starting":
            progress.show(time.monotonic() - began)
            time.sleep(_POLL_SECONDS)
    finally:
        progress.clear()
    if spark.state != "ready":
        raise SparkUnavailable(spark.error or f"Spark ({spark.description}) did not start")
