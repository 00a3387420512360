"""The planner: a plan of the snapshot's retention decisions, computed on Spark.

A plan is three steps (:mod:`engine.prune.plan`): the snapshot becomes the rows
and facts Spark reads (:mod:`~engine.prune.plan.inputs`), sent as Parquet files or
as Arrow (:mod:`engine.prune.transport`); one SQL query decides
(:mod:`~engine.prune.plan.query`, the rules of docs/RETENTION.md); its Arrow result
is split into the plan tables (:mod:`~engine.prune.plan.output`). No Python UDFs;
nothing is collected into Python loops.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from engine.prune import bucketed
from engine.prune.plan import query
from engine.prune.plan.inputs import (
    ROW_KEY,
    ROW_ORDER,
    SparkInputs,
    buckets_of,
    read_files,
    sent_as_arrow,
    spark_inputs,
    write_inputs,
)
from engine.prune.plan.output import split
from engine.prune.plan.round_trips import sql_frame, to_arrow
from engine.prune.session import SparkEngine
from engine.prune.snapshot import Snapshot
from engine.prune.transport import TRANSPORTS, Scratch, private_directory, unreadable_by


@dataclass(frozen=True)
class Plan:
    """Decisions for one instant: the four tables of :mod:`engine.prune.tables`."""

    now: int
    tables: dict[str, pa.Table]
    #: topics the snapshot left out (invalid effective policy): topic -> reason
    rejected: dict[str, str]
    #: whether ``segments`` has a row per snapshot segment; else only the deleted
    #: ones (a cycle's plan: :meth:`Planner.plan` without ``every_segment``)
    every_segment: bool = True
    #: how long making it took, snapshot and Spark (:meth:`Pruner.plan`; None: not measured)
    plan_ms: int | None = None

    def deletions(self) -> pa.Table:
        segments = self.tables["segments"]
        return segments.filter(pc.equal(segments["decision"], "delete"))


class Planner:
    """Plans cycles on one :class:`SparkEngine`; the snapshot reaches Spark by
    ``transport`` (:mod:`engine.prune.transport`), files going through ``scratch``."""

    def __init__(self, engine: SparkEngine, scratch: Scratch | Path, transport: str = "auto") -> None:
        if transport not in TRANSPORTS:
            raise ValueError(f"unknown snapshot transport {transport!r}: expected one of {', '.join(TRANSPORTS)}")
        self.engine = engine
        self.scratch = scratch if isinstance(scratch, Scratch) else Scratch.local(scratch)
        self.transport = transport
        self._lock = threading.Lock()
        #: the session the last plan ran on, and the transport chosen for it
        self._chosen: tuple[Any, str] | None = None

    @property
    def chosen(self) -> str | None:
        """How the last plan's snapshot reached Spark: ``files`` or ``arrow``."""
        return None if self._chosen is None else self._chosen[1]

    def plan(self, snapshot: Snapshot, *, tag: str | None = None, every_segment: bool = True) -> Plan:
        """Plan ``snapshot``; ``tag`` names the Spark job for :meth:`cancel`. Without
        ``every_segment``, the segments table has only the deleted segments: all that
        a cycle applies, and at a million segments a fraction of the plan's time."""
        inputs = spark_inputs(snapshot.tables, snapshot.now)
        frame = self.engine.run(
            lambda spark: self._plan(spark, inputs, every_segment), tag or f"plan-{uuid.uuid4().hex}"
        )
        return Plan(snapshot.now, split(frame, snapshot.tables, inputs), snapshot.rejected, every_segment)

    def query_partitions(self, text: str, rows: pa.Table, *, tag: str | None = None) -> pa.Table:
        """The Arrow result of the SQL query ``text`` over ``rows``, named ``{rows}``
        in it: rows with ``pid`` and ``base_offset``, each partition's rows in offset
        order, sent as the plan's rows are (bucketed by ``pid`` and sorted, so that a
        window over a partition in offset order neither shuffles nor sorts them)."""

        def run(spark: Any) -> pa.Table:
            if self._transport_for(spark) == "arrow":
                return to_arrow(sql_frame(spark, text, rows=spark.createDataFrame(rows)))
            buckets = buckets_of(spark)
            of_bucket = bucketed.rows_by_bucket(rows[ROW_KEY].to_numpy(), buckets)
            with private_directory(self.scratch) as directory:
                files = directory.child("rows")
                bucketed.write(files.filesystem, files.path, buckets, lambda bucket: rows.take(of_bucket[bucket]))
                with bucketed.registered(spark, files.location, rows.schema, ROW_KEY, ROW_ORDER, buckets) as frame:
                    return to_arrow(sql_frame(spark, text, rows=frame))

        return self.engine.run(run, tag or f"query-{uuid.uuid4().hex}")

    def cancel(self, tag: str) -> None:
        self.engine.cancel(tag)

    def _plan(self, spark: Any, inputs: SparkInputs, every_segment: bool) -> pa.Table:
        if self._transport_for(spark) == "arrow":
            return to_arrow(query.frame(spark, *sent_as_arrow(spark, inputs), every_segment=every_segment))
        buckets = buckets_of(spark)
        with private_directory(self.scratch) as directory:
            write_inputs(inputs, directory, buckets)
            with read_files(spark, directory, buckets) as (rows, facts):
                return to_arrow(query.frame(spark, rows, facts, every_segment=every_segment))

    def _transport_for(self, spark: Any) -> str:
        """``files`` or ``arrow`` on ``spark``: as configured, or (``auto``) as found
        once per session: files if Spark reads the scratch directory."""
        with self._lock:
            if self._chosen is not None and self._chosen[0] is spark:
                return self._chosen[1]
        if self.transport != "auto":
            chosen = self.transport
        elif self.engine.reads_local_files and self.scratch.is_local:
            chosen = "files"  # Spark runs on this machine: no probe needed
        else:
            why_not = unreadable_by(spark, self.scratch)
            chosen = "files" if why_not is None else "arrow"
            self.engine.note(
                f"snapshot transport for {self.engine.description}: {chosen}"
                + ("" if why_not is None else f" (Spark cannot read {self.scratch.location}: {why_not})")
            )
        with self._lock:
            self._chosen = (spark, chosen)
        return chosen
