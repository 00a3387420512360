"""The console's side of the engine: brokers, the Spark engine and the prune schedule.

Every method that touches disk, SQLite or Spark is for worker threads only; the UI
thread reads :meth:`ConsoleHost.engine_status`, which only looks at fields in memory.

Three brokers on one data directory, because one SQLite connection carries one
transaction at a time (see ``engine/prune/scheduler.py``):

- the *reader* loads what the views show (short read transactions, never waits on
  Spark);
- the *actor* plans on demand and applies the operator's actions, one at a time;
- the scheduler's own, when this console runs the prune schedule.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.broker import Broker
from engine.clock import now_ms
from engine.errors import EbbError
from engine.prune.cycle_result import CycleResult
from engine.prune.executor import hold_prune_lock
from engine.prune.record_times import StoreRecordTimes
from engine.prune.session import SparkEngine, spark_engine_for, without_token
from engine.prune.spark_settings import LOG_NAME
from engine.store.lock import LockTimeout

if TYPE_CHECKING:
    # Imported where used: planning, forecasting and the schedule load Arrow and
    # numpy (half a second), which the console's first paint does not need.
    from engine.forecast.forecast import Request
    from engine.forecast.result import Forecast
    from engine.prune.planner import Plan
    from engine.prune.pruner import Pruner
    from engine.prune.scheduler import Scheduler

#: how long prune now tries for the prune lock before it says who holds it
LOCK_PATIENCE = 0.5


def _signature(path: Path) -> tuple[int, int] | None:
    """When and how big the file last was; None if it does not exist."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_mtime_ns, stat.st_size


class ReadOnlyRefused(EbbError):
    """A mutating action asked of a console opened with ``--read-only``."""


@dataclass(frozen=True)
class EngineStatus:
    """What the Engine view and the overview's status line show, read without I/O."""

    #: the Spark master or Connect URL plans run on
    master: str
    #: ``off`` (no engine in this console), ``stopped``, ``starting``, ``ready``, ``failed``
    session: str
    #: one line when ``session`` is ``failed``
    error: str | None
    #: whether this console runs the prune schedule (never in read-only mode)
    scheduling: bool
    #: a scheduled cycle is running now
    cycle_running: bool
    #: epoch ms of the next scheduled cycle; None when not scheduling
    next_cycle_at: int | None
    #: the prune interval in force, ms
    interval_ms: int
    #: the latest scheduled cycle this console ran, if any
    last_report: CycleResult | None
    #: where Spark and the JVM write their output (never the terminal)
    log_file: Path


@dataclass(frozen=True)
class LatestPlan:
    """The newest plan this console has seen, from the schedule or a preview."""

    plan: Plan
    #: the topics it covers; None: all topics
    topics: frozenset[str] | None

    def covers(self, topic: str) -> bool:
        return self.topics is None or topic in self.topics


class _GatedPruner:
    """The schedule's pruner: each cycle waits for the gate, which prune now holds
    from re-checking its preview until its cycle ends. The rest (its broker, Spark
    engine and planner, which the scheduler reads) is the pruner's."""

    def __init__(self, pruner: Pruner, gate: threading.Lock) -> None:
        self.pruner = pruner
        self.broker = pruner.broker
        self.gate = gate

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pruner, name)

    def cycle(self, **kwargs: Any) -> CycleResult:
        with self.gate:
            return self.pruner.cycle(**kwargs)


class ConsoleHost:
    """One data directory as the console sees it; see the module docstring."""

    def __init__(
        self,
        root: Path,
        config_path: Path | None = None,
        *,
        read_only: bool = False,
        engine: bool = True,
        clock: Callable[[], int] = now_ms,
        spark_master: str | None = None,
        spark_remote: str | None = None,
        spark: SparkEngine | None = None,
    ) -> None:
        """``engine=False`` starts neither Spark nor the schedule (tests, benchmarks);
        ``spark`` lends an engine the caller owns and stops (tests share one)."""
        self.root = Path(root)
        self.config_path = config_path
        self.read_only = read_only
        self.engine_enabled = engine
        self.clock = clock
        self._spark_master = spark_master
        self._spark_remote = spark_remote
        self._reader: Broker | None = None
        self._actor: Broker | None = None
        self._reader_lock = threading.Lock()
        self._config_seen: tuple[int, int] | None = None
        self._actor_lock = threading.Lock()
        self._spark: SparkEngine | None = spark
        self._owns_spark = spark is None
        self._scheduler: Scheduler | None = None
        self._latest_plan: LatestPlan | None = None
        self._plan_lock = threading.Lock()
        #: held by a scheduled cycle, and by prune now from its re-check to its end
        self._cycle_gate = threading.Lock()
        #: called (from a worker thread) after each scheduled cycle
        self.on_cycle: Callable[[CycleResult], object] | None = None

    # -- brokers ------------------------------------------------------------------------

    def _open(self) -> Broker:
        return Broker(self.root, self.config_path, clock=self.clock)

    @contextmanager
    def reading(self) -> Iterator[Broker]:
        """The reader broker, for loading views (worker threads only). The config
        file is re-read when it changed, so views follow an operator's edit of it;
        an invalid file raises its one-line error (the view shows it) until fixed."""
        with self._reader_lock:
            if self._reader is None:
                self._reader = self._open()
                self._config_seen = _signature(self._reader.config_path)
            elif (seen := _signature(self._reader.config_path)) != self._config_seen:
                self._reader.reload_config()
                self._config_seen = seen
            yield self._reader

    @contextmanager
    def acting(self, what: str) -> Iterator[Broker]:
        """The actor broker, for ``what`` (worker threads only); refused when read-only."""
        self.refuse_if_read_only(what)
        with self._actor_lock:
            if self._actor is None:
                self._actor = self._open()
            yield self._actor

    def refuse_if_read_only(self, what: str) -> None:
        if self.read_only:
            raise ReadOnlyRefused(f"{what} refused: the console is read-only (--read-only)")

    # -- Spark and the schedule ---------------------------------------------------------------

    def start_engine(self) -> None:
        """Warm Spark in the background and, unless read-only, start the schedule.
        Returns at once; the session is built in a thread of its own."""
        if not self.engine_enabled or self._spark is not None:
            return
        self._owns_spark = True
        with self.reading() as broker:
            self._spark = spark_engine_for(
                broker.config, broker.data, master=self._spark_master, remote=self._spark_remote
            )
        self._spark.start()
        if not self.read_only:
            from engine.prune.scheduler import Scheduler

            pruner = self._pruner(self._open())
            pruner.cycle_plans_every_segment = True  # the Topic view shows the cycle's plan segment by segment
            self._scheduler = Scheduler(_GatedPruner(pruner, self._cycle_gate), on_cycle=self._cycled)
            self._scheduler.start()

    def _cycled(self, result: CycleResult) -> None:
        if result.plan is not None:
            self._remember(result.plan, None)
        if self.on_cycle is not None:
            self.on_cycle(result)

    def _remember(self, plan: Plan, topics: Sequence[str] | None) -> None:
        with self._plan_lock:
            self._latest_plan = LatestPlan(plan, frozenset(topics) if topics else None)

    @property
    def latest_plan(self) -> LatestPlan | None:
        return self._latest_plan

    def observed_session(self) -> str:
        """The Spark session's state as a scrape reports it (SparkEngine.observed_state:
        reads the service's files, so not on the UI thread)."""
        spark = self._spark
        return spark.observed_state() if spark else self.engine_status().session

    def engine_status(self) -> EngineStatus:
        spark, scheduler = self._spark, self._scheduler
        reader = self._reader
        interval = reader.config.prune_interval_ms if reader is not None else 60_000
        return EngineStatus(
            master=spark.description if spark else self._flags_description(),
            # Until the worker has built the engine, an enabled one is starting.
            session=spark.state if spark else ("starting" if self.engine_enabled else "off"),
            error=spark.error if spark else None,
            scheduling=self.engine_enabled and not self.read_only,
            cycle_running=bool(scheduler and scheduler.running),
            next_cycle_at=scheduler.next_cycle_at if scheduler else None,
            interval_ms=scheduler.interval_ms if scheduler else interval,
            last_report=scheduler.last_result if scheduler else None,
            log_file=spark.log_file if spark else self.root / "logs" / LOG_NAME,
        )

    def _flags_description(self) -> str:
        """Where plans will run before the engine is built, as the flags say (a
        Connect URL's token hidden, as SparkEngine.description hides it)."""
        if self._spark_remote is not None:
            return without_token(self._spark_remote)
        return self._spark_master or "local[*]"

    def _pruner(self, broker: Broker) -> Pruner:
        from engine.prune.pruner import Pruner

        if self._spark is None:
            raise EbbError("the Spark engine is off in this console")
        return Pruner(broker, self._spark)

    def plan(
        self,
        topics: Sequence[str] | None = None,
        *,
        now: int | None = None,
        overrides: Mapping[str, Mapping[str, str]] | None = None,
        tag: str | None = None,
    ) -> Plan:
        """A plan at ``now`` (default: the clock; waits for Spark). A what-if with
        ``overrides`` is not remembered as the latest plan: it is not what the engine
        would do."""
        with self._actor_lock:
            if self._actor is None:
                self._actor = self._open()
            plan = self._pruner(self._actor).plan(now=now, topics=topics, overrides=overrides, tag=tag)
        if not overrides:
            self._remember(plan, topics)
        return plan

    def forecast(
        self,
        request: Request,
        topics: Sequence[str] | None,
        overrides: Mapping[str, Mapping[str, str]] | None = None,
        *,
        progress: Callable[[int, int], None] | None = None,
        tag: str | None = None,
    ) -> Forecast:
        """A capacity forecast of ``topics`` (all if None; engine/forecast) on the console's Spark;
        with ``overrides``, a what-if over time (the saved policy's in ``saved``);
        ``progress(done, jobs)`` after each of its Spark jobs (what it raises stops
        the forecast), its jobs under ``tag`` (:meth:`cancel`)."""
        from engine.forecast.forecast import forecast

        with self._actor_lock:
            if self._actor is None:
                self._actor = self._open()
            broker = self._actor
            planner = self._pruner(broker).planner
            return forecast(
                planner, broker.catalog, StoreRecordTimes(broker.data), request,
                defaults=broker.config.policy_defaults, topics=topics, overrides=overrides,
                progress=progress, tag=tag,
            )  # fmt: skip

    def prune_as_previewed(
        self,
        topics: Sequence[str] | None,
        previewed: Plan,
        still_does: Callable[[Plan], bool],
        *,
        tag: str | None = None,
        waiting: Callable[[LockTimeout | None], None] | None = None,
        schedule_held: bool = False,
    ) -> CycleResult | Plan:
        """Apply what the operator previewed, or say it changed. With the schedule held
        off and the data directory's prune lock held (no cycle of any process between;
        ``waiting`` hears who holds it meanwhile), plan ``topics`` again at the
        preview's instant (so the clock alone changes nothing); if ``still_does(plan)``
        (the new plan still does all the preview did), apply ``previewed`` itself as
        one manual cycle, else return the new plan, applying nothing. The preview, not
        the new plan: on a live topic producers append between the two, so a size cap
        or a backlog eviction reaches further in the new plan, and applying that would
        delete what the operator never saw (the next cycle takes it).

        A changed plan leaves this console's schedule held off while the operator looks
        at the difference: otherwise, on a schedule shorter than a plan, a scheduled
        cycle would change the store again before every answer. Answer with a call
        with ``schedule_held=True``, or :meth:`release_schedule`."""
        self.refuse_if_read_only("prune now")
        # The gate first, as a scheduled cycle takes them: the other order deadlocks.
        if not schedule_held:
            self._cycle_gate.acquire()
        keep_held = False
        try:
            with hold_prune_lock(self.root, patience=LOCK_PATIENCE, waiting=waiting):
                plan = self.plan(topics, now=previewed.now, tag=tag)
                if not still_does(plan):
                    keep_held = True
                    return plan
                with self._actor_lock:
                    assert self._actor is not None  # plan() opened it
                    result = self._pruner(self._actor).cycle(
                        topics=topics, trigger="manual", actor="console", tag=tag, plan=previewed
                    )
        finally:
            if not keep_held:
                self._cycle_gate.release()
        self._remember(previewed, topics)
        return result

    def release_schedule(self) -> None:
        """Let the schedule go on after a changed prune now (:meth:`prune_as_previewed`)
        that the operator did not confirm again."""
        self._cycle_gate.release()

    @staticmethod
    def new_tag() -> str:
        """A job tag for a plan that may be cancelled."""
        return f"ebb-console-{uuid.uuid4().hex[:12]}"

    def cancel(self, tag: str) -> None:
        """Cancel the plan running under ``tag`` (any thread)."""
        if self._spark is not None:
            self._spark.cancel(tag)

    def replacing(self, tag: str | None) -> str:
        """A new job tag for work that replaces the work running under ``tag`` (a
        preview or forecast asked for again), which is cancelled."""
        if tag is not None:
            self.cancel(tag)
        return self.new_tag()

    def close(self) -> None:
        """Stop the schedule and Spark, close the brokers (at exit, off the UI)."""
        if self._scheduler is not None:
            self._scheduler.stop(timeout=30)
            self._scheduler.pruner.broker.close()
            self._scheduler = None
        if self._spark is not None and self._owns_spark:
            self._spark.stop()
        self._spark = None
        for broker in (self._reader, self._actor):
            if broker is not None:
                broker.close()
        self._reader = self._actor = None
