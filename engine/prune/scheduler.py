"""The prune schedule (SPEC §5): one cycle every ``prune_interval``, in a thread of its own.

:meth:`Scheduler.run` is a loop meant for a thread of its own (``ebb engine`` runs it
in one, the console in a worker); :meth:`Scheduler.start` starts that thread. It

- runs ``Pruner.cycle(trigger="schedule")`` at once, then every interval measured
  from the start of each cycle (a cycle longer than the interval is followed at once
  by the next one, never by a burst of catch-up cycles);
- reloads the config file before each cycle, so that a changed policy default or
  journal retention applies from the next cycle on, and while it waits (when the
  file changes), so that a new ``prune_interval`` applies to that wait. A config file
  that has become invalid fails the cycle (journaled, nothing deleted: a typo must
  not leave the engine deleting by the old rules) until it is fixed;
- journals a cycle that raises (a failed cycle row with the error; the executor
  writes that row itself when the error reached it) and goes on; one topic's failure
  is the executor's ``topic_failed`` and does not fail the cycle;
- stops promptly on its :class:`threading.Event`: the wait between cycles ends at
  once, a plan running on Spark is cancelled (not journaled: nothing was done), and
  a cycle already applying its plan runs to its end (it would be crash-safe if
  killed, but a finished cycle is simpler to read in the journal);
- respects the pause through the executor: a paused engine still plans and reports.

The scheduler's broker (the pruner's) must not be used by another thread meanwhile:
one SQLite connection carries one transaction at a time. The console gives it a
broker of its own on the same data directory.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from engine.clock import now_ms
from engine.errors import EbbError, PlanCancelled
from engine.journal.journal import Journal
from engine.prune.cycle_result import CycleResult

TRIGGER = "schedule"
#: how often a wait for the Spark session looks at the stop event
_SPARK_POLL_SECONDS = 0.1


class _Pruner(Protocol):
    broker: Any

    def cycle(self, *, trigger: str, actor: str, tag: str | None) -> CycleResult: ...


class Scheduler:
    """Runs prune cycles on a schedule; see the module docstring."""

    def __init__(
        self,
        pruner: _Pruner,
        *,
        interval_ms: int | None = None,
        max_cycles: int | None = None,
        on_cycle: Callable[[CycleResult], None] | None = None,
        actor: str = "engine",
        reload_config: bool = True,
        config_poll_seconds: float = 1.0,
        wall: Callable[[], int] = now_ms,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if interval_ms is not None and interval_ms <= 0:
            raise ValueError(f"prune interval must be above 0 ms, got {interval_ms}")
        self.pruner = pruner
        self.broker = pruner.broker
        self.interval_override_ms = interval_ms
        self.max_cycles = max_cycles
        self.on_cycle = on_cycle
        self.actor = actor
        self.reload_config = reload_config
        self.config_poll_seconds = config_poll_seconds
        self._config_seen: tuple[int, int, int] | None = None
        self._wall = wall
        self._monotonic = monotonic
        self._stop = threading.Event()
        self._tag: str | None = None
        self._thread: threading.Thread | None = None
        #: epoch ms of the next cycle's start; None when the loop is not running
        self.next_cycle_at: int | None = None
        #: the latest cycle's report; None before the first one ends
        self.last_result: CycleResult | None = None
        self.cycles_run = 0
        #: True while a cycle is running
        self.running = False

    # -- for the console --------------------------------------------------------------

    @property
    def interval_ms(self) -> int:
        """The interval in force: the override, else the (reloaded) config's."""
        if self.interval_override_ms is not None:
            return self.interval_override_ms
        return self.broker.config.prune_interval_ms

    def start(self) -> threading.Thread:
        """Run the loop in a daemon thread (a cycle interrupted by the process's exit
        is recovered by the next one)."""
        if self._thread is not None and self._thread.is_alive():
            return self._thread
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self.run, args=(self._stop,), name="ebb-scheduler", daemon=True)
        self._thread.start()
        return self._thread

    def stop(self, timeout: float | None = None) -> bool:
        """Ask the loop to stop (callable from any thread or a signal handler); with
        ``timeout``, also wait that long for the thread :meth:`start` started.
        Returns True once the loop is not running."""
        self._stop.set()
        self._cancel_plan()
        thread = self._thread
        if thread is None or timeout is None:
            return thread is None or not thread.is_alive()
        thread.join(timeout)
        return not thread.is_alive()

    # -- the loop ------------------------------------------------------------------------

    def run(self, stop: threading.Event | None = None) -> None:
        """Run cycles until ``stop`` is set (or ``max_cycles`` have run)."""
        if stop is not None:
            self._stop = stop
        stop = self._stop
        try:
            self.next_cycle_at = self._wall()
            while not stop.is_set():
                begun = self._monotonic()
                self.run_once()
                if self.max_cycles is not None and self.cycles_run >= self.max_cycles:
                    break
                if self._wait_from(begun, stop):
                    break
        finally:
            self.next_cycle_at = None

    def _wait_from(self, begun: float, stop: threading.Event) -> bool:
        """Wait until ``interval`` after ``begun``; True if stopped. The config file is
        looked at every ``config_poll_seconds``, so that a new ``prune_interval``
        applies to the wait in progress (measured from the same start)."""
        while True:
            self._reload_if_changed()
            wait = max(0.0, begun + self.interval_ms / 1000 - self._monotonic())
            self.next_cycle_at = self._wall() + round(wait * 1000)
            if wait == 0:
                return stop.is_set()
            if stop.wait(min(wait, self.config_poll_seconds)):
                return True

    def run_once(self) -> CycleResult | None:
        """One scheduled cycle now; None if a stop came before it could start."""
        started = self._wall()
        self.running = True
        try:
            report = self._cycle(started)
        finally:
            self.running = False
        if report is None:
            return None
        self.cycles_run += 1
        self.last_result = report
        if self.on_cycle is not None:
            self.on_cycle(report)
        return report

    def _cycle(self, started: int) -> CycleResult | None:
        if self.reload_config:
            try:
                self._config_seen = self._config_signature()
                self.broker.reload_config()
            except EbbError as error:
                return self._failed(started, None, f"config not reloaded, nothing pruned: {error}")
        if not self._spark_ready():
            if self._stop.is_set():
                return None
            spark = getattr(self.pruner, "spark", None)
            return self._failed(started, None, getattr(spark, "error", None) or "Spark is not available")
        if self._stop.is_set():
            return None
        before = self._latest_cycle_id()
        self._tag = f"schedule-{uuid.uuid4().hex[:12]}"
        try:
            result = self.pruner.cycle(trigger=TRIGGER, actor=self.actor, tag=self._tag)
        except PlanCancelled as error:
            if self._stop.is_set():
                return CycleResult(None, "cancelled", started, self._wall(), error=str(error))
            return self._failed(started, before, str(error))
        except Exception as error:  # noqa: BLE001 - a failed cycle is journaled and the loop goes on (SPEC §5)
            return self._failed(started, before, str(error) or type(error).__name__)
        finally:
            self._tag = None
        failures = "; ".join(f"{t}: {e}" for t, e in result.failed.items()) or None
        return replace(result, error=failures, started=started, finished=self._wall())

    # -- helpers ---------------------------------------------------------------------------

    def _config_signature(self) -> tuple[int, int, int] | None:
        try:
            st = self.broker.config_path.stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _reload_if_changed(self) -> None:
        """Between cycles: reload a config file that changed (an invalid one is left
        for the next cycle, which journals it)."""
        if not self.reload_config:
            return
        seen = self._config_signature()
        if seen == self._config_seen:
            return
        self._config_seen = seen
        try:
            self.broker.reload_config()
        except EbbError:
            pass

    def _spark_ready(self) -> bool:
        """Wait (stoppably) for the pruner's Spark session to finish starting; False
        if it failed or a stop came first. A pruner without one is always ready."""
        spark = getattr(self.pruner, "spark", None)
        if spark is None or not hasattr(spark, "state"):
            return True
        if spark.state == "stopped":
            spark.start()
        while spark.state == "starting":
            if self._stop.wait(_SPARK_POLL_SECONDS):
                return False
        return spark.state == "ready"

    def _cancel_plan(self) -> None:
        tag = self._tag
        planner = getattr(self.pruner, "planner", None)
        if tag is not None and planner is not None:
            try:
                planner.cancel(tag)
            except Exception:  # noqa: BLE001, S110 - stopping must not fail; the plan ends anyway
                pass

    def _latest_cycle_id(self) -> int:
        try:
            return Journal(self.broker.catalog).latest_cycle_id()
        except Exception:  # noqa: BLE001 - the journal unreadable: the failure path says so
            return 0

    def _failed(self, started: int, before: int | None, error: str) -> CycleResult:
        """Journal a failed cycle (unless the executor did already) and report it."""
        cycle_id: int | None = None
        try:
            cycle_id = self._journal_failure(before, error, spent=max(0, self._wall() - started))
        except Exception as journal_error:  # noqa: BLE001 - keep the loop going; the report says it
            error = f"{error} (and the journal could not record it: {journal_error})"
        return CycleResult(cycle_id, "failed", started, self._wall(), error=error)

    def _journal_failure(self, before: int | None, error: str, *, spent: int) -> int:
        """Journal a cycle that failed after ``spent`` ms before applying anything: its planning."""
        catalog = self.broker.catalog
        journal = Journal(catalog)
        if before is not None:
            # The executor journals an error that reached it as a failed cycle (or
            # leaves it running for the next cycle's recovery): do not write it twice.
            unfinished = journal.unfinished_cycle_after(before, trigger=TRIGGER, actor=self.actor)
            if unfinished is not None:
                return unfinished
        spark = getattr(self.pruner, "spark", None)
        clock = self.broker.clock
        with catalog.write():
            cycle_id = journal.start_cycle(
                trigger=TRIGGER,
                actor=self.actor,
                scope="all",
                now=clock(),
                started=clock(),
                spark_master=getattr(spark, "description", None),
                status="failed",
                plan_ms=spent,
            )
            journal.finish_cycle(
                cycle_id, status="failed", finished=clock(), planned=0, applied=0, bytes_freed=0, error=error
            )
        return cycle_id
