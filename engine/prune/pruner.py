"""One prune cycle end to end: snapshot the catalog, plan on Spark, apply.

The same :meth:`Pruner.plan` serves the scheduled cycle, a one-off prune, a dry run,
``explain`` and a what-if preview (SPEC §4): only what is done with the plan differs.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

from engine.broker import Broker
from engine.catalog.bulk_reads import CatalogTables
from engine.errors import InvalidPolicy
from engine.journal.journal import Entry, Journal
from engine.prune.cycle_result import CycleResult
from engine.prune.executor import execute
from engine.prune.plan_desk import DeskClient
from engine.prune.plan_work import work_from_plan
from engine.prune.planner import Plan, Planner
from engine.prune.record_times import StoreRecordTimes
from engine.prune.scratch import scratch_dir
from engine.prune.session import SparkEngine
from engine.prune.snapshot import build_snapshot
from engine.prune.transport import Scratch


class Pruner:
    """Plans and applies prune cycles over one broker's data directory."""

    #: Whether a cycle that plans keeps every segment's row in its plan, for a caller
    #: that shows the cycle's plan segment by segment (the console's Topic view).
    #: Applying needs only the deletions, and at a million segments the kept ones'
    #: rows are most of the plan's output.
    cycle_plans_every_segment = False

    def __init__(self, broker: Broker, spark: SparkEngine) -> None:
        self.broker = broker
        self.spark = spark
        config = broker.config
        scratch = Scratch.configured(config.spark_scratch, broker.data.root / "snapshots")
        self.planner = Planner(spark, scratch, config.spark_transport)
        #: plans go to the service's plan desk first (:meth:`use_desk`)
        self.desk: DeskClient | None = None
        #: the last snapshot's read of every topic: the next one re-reads only the
        #: partitions written since (a million unchanged segments took most of a cycle)
        self._read: CatalogTables | None = None

    def use_desk(self) -> bool:
        """Plan at the service's plan desk (engine/prune/plan_desk.py) when there is
        one; whether there is. Only where the desk makes the very plan this process
        would: on the data directory's own local service, files in the data
        directory's scratch directory. For one-shot commands, which then need no
        Spark session of their own (the engine starts only if the desk fails)."""
        service = self.spark.service
        if (
            service is None
            or not self.spark.reads_local_files
            or self.broker.config.spark_scratch is not None
            or self.broker.config.spark_transport not in ("auto", "files")
        ):
            return False
        desk = DeskClient(service.data_root)
        self.desk = desk if desk.available() else None
        return self.desk is not None

    def plan(
        self,
        *,
        now: int | None = None,
        topics: Sequence[str] | None = None,
        overrides: Mapping[str, Mapping[str, str]] | None = None,
        tag: str | None = None,
        every_segment: bool = True,
    ) -> Plan:
        """The plan at ``now`` (default: the clock) for ``topics`` (default: all);
        ``overrides`` replaces some topics' saved policy overrides (a what-if);
        without ``every_segment`` only the deleted segments' rows (:meth:`Planner.plan`)."""
        for name in topics or ():
            self.broker.catalog.topic(name)  # an unknown topic is an error, not an empty plan
        began = time.monotonic()
        snapshot = build_snapshot(
            self.broker.catalog,
            StoreRecordTimes(self.broker.data),
            defaults=self.broker.config.policy_defaults,
            now=self.broker.clock() if now is None else now,
            topics=topics,
            overrides=overrides,
            since=self._read,
        )
        if topics is None:
            self._read = snapshot.read
        if topics and snapshot.rejected:
            # Asked for by name: an invalid effective policy is the answer, not a gap.
            name, reason = next(iter(snapshot.rejected.items()))
            raise InvalidPolicy(f"topic {name!r}: {reason}")
        if self.broker.config.spark_scratch is None:
            # Chosen again for every plan: the disk may have filled since the last one.
            self.planner.scratch = Scratch.local(scratch_dir(self.broker.data.root, "snapshots"))
        made = self.desk.plan(snapshot, every_segment=every_segment) if self.desk is not None else None
        plan = made if made is not None else self.planner.plan(snapshot, tag=tag, every_segment=every_segment)
        return replace(plan, plan_ms=round((time.monotonic() - began) * 1000))

    def cycle(
        self,
        *,
        now: int | None = None,
        topics: Sequence[str] | None = None,
        dry_run: bool = False,
        trigger: str = "schedule",
        actor: str = "engine",
        tag: str | None = None,
        plan: Plan | None = None,
    ) -> CycleResult:
        """Plan, then apply (or, with ``dry_run``, only journal) one cycle; ``plan``:
        apply that plan of ``topics`` (one the operator previewed) instead of planning,
        journaling its own planning time. Returns the executor's result with the plan
        it applied."""
        if plan is None:
            plan = self.plan(now=now, topics=topics, tag=tag, every_segment=self.cycle_plans_every_segment)
        result = execute(
            self.broker,
            work_from_plan(plan.tables),
            now=plan.now,
            trigger=trigger,
            actor=actor,
            scope=list(topics) if topics else "all",
            spark_master=self.spark.description,
            dry_run=dry_run,
            plan_ms=plan.plan_ms,
        )
        if plan.rejected and not dry_run:
            # A topic whose effective policy became invalid (a changed default) is
            # left out of the plan; say so rather than skip it silently.
            Journal(self.broker.catalog).append(
                [Entry("topic_failed", topic=t, details={"error": reason}) for t, reason in plan.rejected.items()],
                time=self.broker.clock(),
                trigger=trigger,
                actor=actor,
                status="applied",
                cycle=result.cycle_id,
            )
        return replace(result, plan=plan)
