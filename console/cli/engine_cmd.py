"""``ebb engine``: the headless engine (SPEC §7). Prune cycles every ``prune_interval``
until SIGINT or SIGTERM (a clean stop, exit 0) or ``--cycles N``; one line per cycle
on stdout (``--json``: one object per line); Spark and the JVM write only to the data
directory's ``logs/spark.log``.

The schedule runs in a thread of its own (engine/prune/scheduler.py); this thread
only waits, so that a signal is handled at once: the wait between cycles ends, a plan
running on Spark is cancelled, a cycle applying its plan runs to its end. A second
signal stops at once (exit 130); the next cycle recovers what that interrupted.
Spark and Arrow are imported by :func:`run_engine` (see console/cli/main.py).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

from console import format
from console.cli.metrics import serve_metrics
from console.cli.parser import command, finite, positive_int, warn
from console.cli.render import emit_json, instant, size
from console.cli.spark_flags import add_spark_flags
from console.model.journal import cycle_took
from engine.broker import Broker
from engine.errors import EbbError, SparkUnavailable
from engine.journal.journal import Journal
from engine.journal.rows import Cycle
from engine.policy.units import describe_duration, parse_duration

if TYPE_CHECKING:
    from engine.prune.cycle_result import CycleResult

_WAIT_SECONDS = 0.2


def register(commands: argparse._SubParsersAction) -> None:
    engine = commands.add_parser("engine", help="headless engine: prune cycles until interrupted")
    engine.add_argument(
        "--prune-interval",
        metavar="DURATION",
        help="time between the starts of two cycles [default: config [engine] prune_interval, else 1m]",
    )
    engine.add_argument("--cycles", type=positive_int, metavar="N", help="stop after N cycles")
    engine.add_argument("--json", action="store_true", help="one JSON object per cycle")
    engine.add_argument(
        "--metrics", metavar="ADDR",
        help="serve Prometheus metrics on this loopback HOST:PORT [default: config [engine] metrics, else none]",
    )  # fmt: skip
    add_spark_flags(engine)
    command(engine, run_engine, mutates=True)


def _interval(text: str | None) -> int | None:
    return None if text is None else finite("--prune-interval", text, parse_duration, "duration", above_zero=True)


def journaled(broker: Broker, result: CycleResult) -> Cycle | None:
    """The journal's row of ``result``'s cycle: its times are the ones the console and
    ``ebb log --cycles`` show. None for a cycle the journal does not hold (a cancelled
    plan, a failure the journal could not record) or cannot give back (damaged)."""
    if result.cycle_id is None:
        return None
    try:
        return Journal(broker.catalog).cycle(result.cycle_id)
    except EbbError:
        return None


def report_json(result: CycleResult, number: int, cycle: Cycle | None) -> dict[str, Any]:
    """One scheduled cycle, the ``number``-th of this engine, as ``--json`` prints it;
    its times are the journal's ``cycle`` (the scheduler's span without one)."""
    return {
        "cycle_id": result.cycle_id,
        "number": number,
        "status": result.status,
        "started": result.started,
        "finished": result.finished,
        "duration_ms": result.duration_ms if cycle is None else cycle.duration_ms,
        "plan_ms": None if cycle is None else cycle.plan_ms,
        "apply_ms": None if cycle is None else cycle.apply_ms,
        "planned": result.planned,
        "applied": result.applied,
        "bytes_freed": result.bytes_freed,
        "skipped": result.skipped,
        "failed": result.failed,
        "error": result.error,
    }


def report_line(result: CycleResult, cycle: Cycle | None) -> str:
    """One line per cycle, for the terminal and for logs; how long it took is the
    journal's ``cycle`` in the console's words (the scheduler's span without one)."""
    head = f"{instant(result.started)} cycle {result.cycle_id if result.cycle_id is not None else '-'} {result.status}"
    took = format.elapsed(result.duration_ms) if cycle is None else cycle_took(cycle)
    if result.status in ("failed", "cancelled"):
        # the scheduler's own result: the cycle stopped before the executor ran
        return f"{head} after {took}: {result.error}"
    if result.status == "paused":
        body = f"{result.planned} segment(s) planned, none deleted (engine paused)"
    else:
        body = f"deleted {result.applied} of {result.planned} segment(s), {size(result.bytes_freed)} freed"
    notes = [f"not applied to {where}: {why}" for where, why in result.skipped.items()]
    notes += [f"{topic} failed: {error}" for topic, error in result.failed.items()]
    return f"{head} in {took}: {body}" + "".join(f"; {n}" for n in notes)


def run_engine(broker: Broker, args: argparse.Namespace) -> int:
    from engine.prune.pruner import Pruner
    from engine.prune.scheduler import Scheduler
    from engine.prune.session import spark_engine_for

    interval = _interval(args.prune_interval)
    spark = spark_engine_for(broker.config, broker.data, master=args.spark_master, remote=args.spark_remote)

    stop = threading.Event()
    errors: list[BaseException] = []

    def on_cycle(result: CycleResult) -> None:
        cycle = journaled(broker, result)
        if args.json:
            emit_json(report_json(result, scheduler.cycles_run, cycle))
        else:
            print(report_line(result, cycle), flush=True)
        if broker.catalog.damage is not None:
            # Every later cycle would fail the same way: stop, and say what to do.
            errors.append(broker.catalog.damage)
            stop.set()
            scheduler.stop()

    scheduler = Scheduler(Pruner(broker, spark), interval_ms=interval, max_cycles=args.cycles, on_cycle=on_cycle)
    metrics = serve_metrics(broker, args.metrics, lambda: spark.observed_state(), warn)

    def on_signal(signum: int, _frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt  # a second signal: stop now (exit 130)
        stop.set()
        scheduler.stop()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}

    def loop() -> None:
        try:
            scheduler.run(stop)
        except BaseException as error:  # noqa: BLE001 - handed to the main thread
            errors.append(error)

    try:
        spark.start()
        while spark.state == "starting" and not stop.wait(_WAIT_SECONDS):
            pass
        if stop.is_set():
            return 0
        if spark.state != "ready":
            raise SparkUnavailable(spark.error or f"Spark ({spark.description}) did not start")
        if not args.json:
            print(
                f"ebb engine on {broker.data.root}: Spark {spark.description}, a cycle every "
                f"{describe_duration(scheduler.interval_ms)}; "
                f"Spark logs in {spark.log_file}; "
                + (f"metrics on http://{metrics.address}/metrics; " if metrics is not None else "")
                + "Ctrl-C to stop",
                flush=True,
            )
        thread = threading.Thread(target=loop, name="ebb-scheduler", daemon=True)
        thread.start()
        while thread.is_alive():
            thread.join(_WAIT_SECONDS)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if metrics is not None:
            metrics.stop()
        spark.stop()
    if errors:
        raise errors[0]
    sys.stdout.flush()
    return 0
