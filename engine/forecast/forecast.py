"""The capacity forecast: every instant from now to the horizon, planned in one
Spark job (engine/forecast/extend.py), summed per topic and instant.

At each instant a topic has its bytes and segments on disk after that instant's
cycle, each partition's log start, and the bytes deleted since now by reason. A
breach is the first instant at which a cap deletes (``max_partition_size`` or
``max_time``: retention no longer keeps the partition under it) or a partition keeps
more than a cap after the cycle (a hold: bytes over ``max_partition_size``, data older
than ``max_time``), a group is over a backlog quota, or the topics together hold more
than the disk budget.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from engine.catalog.catalog import Catalog
from engine.config import DEFAULT_CONFIG
from engine.errors import InvalidInput, InvalidPolicy
from engine.forecast.extend import Extension, extend
from engine.forecast.rates import Rate, given_rate, observed_rates
from engine.forecast.reading import Reading, by_topic, observed_reads, readings
from engine.policy.effective import EffectivePolicy, resolve
from engine.prune.planner import Planner
from engine.prune.record_times import FirstRecord, RecordTimes, first_record, time_cut
from engine.prune.snapshot import Snapshot, build_snapshot

#: more instants than this is a typo (a step of 1s over a week), not a forecast
MAX_INSTANTS = 5000

_Item = TypeVar("_Item")
_Result = TypeVar("_Result")

#: the cap each reason code means a breach of
_CAP_OF_REASON = {"DELETE_MAX_SIZE": "max_partition_size", "DELETE_MAX_TIME": "max_time"}


@dataclass(frozen=True)
class Breach:
    kind: str  # max_partition_size | max_time | backlog_quota | disk_budget
    at: int
    limit: int | None
    partition: int | None = None
    group: str | None = None
    #: of a backlog_quota breach: the quota exceeded (backlog_size, else backlog_age)
    quota: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "at": self.at,
            "limit": self.limit,
            "partition": self.partition,
            "group": self.group,
            "quota": self.quota,
        }


@dataclass(frozen=True)
class PartitionPoint:
    partition: int
    bytes: int
    segments: int
    log_start: int


@dataclass(frozen=True)
class Point:
    """A topic at one instant, after that instant's cycle."""

    at: int
    bytes: int
    segments: int
    partitions: list[PartitionPoint]
    bytes_deleted: int
    segments_deleted: int
    #: reason code -> bytes deleted since now for it
    deleted_by_reason: dict[str, int]
    quota_exceeded: bool
    #: (group, partition) over a backlog quota
    over_quota: list[tuple[str, int]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "bytes": self.bytes,
            "segments": self.segments,
            "bytes_deleted": self.bytes_deleted,
            "segments_deleted": self.segments_deleted,
            "deleted_by_reason": self.deleted_by_reason,
            "quota_exceeded": self.quota_exceeded,
            "over_quota": [{"group": g, "partition": p} for g, p in self.over_quota],
            "partitions": [
                {"partition": p.partition, "bytes": p.bytes, "segments": p.segments, "log_start": p.log_start}
                for p in self.partitions
            ],
        }


@dataclass(frozen=True)
class TopicForecast:
    topic: str
    #: partition -> the ingest rate used
    rates: dict[int, Rate]
    points: list[Point]
    breaches: list[Breach]
    #: how each group reads each partition, by group and partition
    readings: list[Reading] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "rates": [
                {
                    "partition": p,
                    "source": r.source,
                    "since": r.since,
                    "bytes_per_second": r.bytes_per_second,
                    "records_per_second": r.records_per_second,
                    "record_bytes": r.record_bytes,
                    "batch": r.batch,
                }
                for p, r in sorted(self.rates.items())
            ],
            "readings": [r.to_json() for r in self.readings],
            "breaches": [b.to_json() for b in self.breaches],
            "points": [p.to_json() for p in self.points],
        }


@dataclass(frozen=True)
class Forecast:
    now: int
    instants: list[int]
    window_ms: int
    topics: list[TopicForecast]
    disk_budget: int | None
    #: the first instant at which the topics together hold more than the budget
    disk_breach: Breach | None
    #: with a what-if, the same topics under their saved policy (same job)
    saved: list[TopicForecast] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "now": self.now,
            "instants": self.instants,
            "window_ms": self.window_ms,
            "disk_budget": self.disk_budget,
            "disk_breach": None if self.disk_breach is None else self.disk_breach.to_json(),
            "topics": [t.to_json() for t in self.topics],
            "saved": None if self.saved is None else [t.to_json() for t in self.saved],
        }


@dataclass(frozen=True)
class Request:
    """What to forecast: ``instants`` (the first is now), the rate window, an
    ingest rate that replaces the observed ones (bytes/s per partition), groups
    assumed stopped, the disk budget (bytes, over all topics forecast), and how often
    cycles run (``max_deletes_per_cycle`` is a cycle's limit: by an instant, as many
    cycles have run as prune intervals have passed, and one now)."""

    instants: list[int]
    window_ms: int
    rate: int | None = None
    stalled: frozenset[str] = frozenset()
    disk_budget: int | None = None
    prune_interval_ms: int = DEFAULT_CONFIG.prune_interval_ms


def instants(now: int, horizon_ms: int, step_ms: int) -> list[int]:
    """``now``, ``now + step``, ... and ``now + horizon`` last (a shorter last step
    where the horizon is not a whole number of steps away: a breach between the last
    whole step and the horizon is within the horizon asked for)."""
    if step_ms <= 0 or horizon_ms < 0:
        raise InvalidInput("the step must be above 0 and the horizon at least 0")
    whole = horizon_ms // step_ms + 1
    count = whole + (horizon_ms % step_ms > 0)
    if count > MAX_INSTANTS:
        raise InvalidInput(f"{count} instants: at most {MAX_INSTANTS} (a longer --step or a shorter --horizon)")
    return [now + i * step_ms for i in range(whole)] + [now + horizon_ms] * (count - whole)


def forecast(
    planner: Planner,
    catalog: Catalog,
    records: RecordTimes,
    request: Request,
    *,
    defaults: Mapping[str, str],
    topics: Sequence[str] | None = None,
    overrides: Mapping[str, Mapping[str, str]] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Forecast:
    """Forecast ``topics`` (all if None) of ``catalog``; ``overrides`` as in
    :func:`~engine.prune.snapshot.build_snapshot` (a what-if over time).

    Every instant of a topic is planned in one Spark job; the topics are planned in
    batches of at most :data:`MAX_VIRTUAL_ROWS` virtual segments (:func:`batches`).
    ``progress(done, batches)`` is called after each batch: a large catalog's
    forecast takes minutes (README, "The capacity forecast")."""
    now = request.instants[0]

    def real_time_cut(topic: str, partition: int, log_start: int, theta: int) -> int | None:
        return time_cut(catalog, records, topic, partition, log_start, theta)

    # A what-if is planned with the saved policy too, in the same job: virtual
    # topics of both, told apart by a label.
    variants = [Variant.of(catalog, records, request, defaults, topics, "", overrides)]
    if overrides is not None:
        variants.append(Variant.of(catalog, records, request, defaults, topics, "saved:", None))
    observed = observed_reads(catalog, variants[0].snapshot.tables["topics"]["topic"].to_pylist())
    Parts = list[tuple[Extension, Snapshot, list[Rate], list[Reading]]]

    def virtual(batch: list[str]) -> Parts:
        """Each variant's virtual snapshot of ``batch``."""
        parts = []
        for variant in variants:
            snapshot, rates = variant.only(batch)
            reads = readings(snapshot.tables, observed, now, request.window_ms, request.stalled)
            extension = extend(
                snapshot, request.instants, rates, variant.segment_sizes, label=variant.label,
                readings=reads, real_time_cut=real_time_cut, prune_interval_ms=request.prune_interval_ms,
            )  # fmt: skip
            parts.append((extension, snapshot, rates, reads))
        return parts

    results: list[list[Forecast]] = []
    topic_batches = batches(variants[0], request.instants, len(variants))
    # The next batch's virtual snapshot is built (numpy, in this process) while Spark
    # plans this one (in the JVM); the plans stay on the calling thread (Ctrl-C).
    for done, parts in enumerate(_one_ahead(virtual, topic_batches), 1):
        joined = {
            name: pa.concat_tables([extension.snapshot.tables[name] for extension, *_ in parts])
            for name in parts[0][0].snapshot.tables
        }
        # Deleted segments only: the kept ones' rows would be collected and split for
        # nothing (a quarter of the forecast's time at 100K segments).
        plan = planner.plan(Snapshot(now, joined, parts[0][1].rejected), every_segment=False)
        results.append(
            [
                summarize(extension, plan.tables, snapshot, rates, reads, request.window_ms)
                for extension, snapshot, rates, reads in parts
            ]
        )
        if progress is not None:
            progress(done, len(topic_batches))
    result, *saved = (_merged([r[v] for r in results], request) for v in range(len(variants)))
    return replace(result, saved=saved[0].topics) if saved else result


def _one_ahead(work: Callable[[_Item], _Result], items: Sequence[_Item]) -> Iterator[_Result]:
    """``work`` of each of ``items`` in order, each computed in a thread while the
    caller still uses the one before."""
    with ThreadPoolExecutor(1, thread_name_prefix="ebb-forecast") as pool:
        pending: deque[Future[_Result]] = deque()
        for item in items:
            pending.append(pool.submit(work, item))
            if len(pending) == 2:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


#: virtual segment rows (segments x instants) one Spark job plans at most: the
#: rows are built in this process, about 0.3 KiB each, and the job of a 1M-segment
#: catalog's 168 instants in one would need tens of GiB
MAX_VIRTUAL_ROWS = 4_000_000


@dataclass(frozen=True)
class Variant:
    """The catalog under one policy (the saved one, or a what-if's): its snapshot,
    rates and segment sizes."""

    label: str
    snapshot: Snapshot
    rates: list[Rate]
    segment_sizes: dict[str, int]

    @classmethod
    def of(
        cls,
        catalog: Catalog,
        records: RecordTimes,
        request: Request,
        defaults: Mapping[str, str],
        topics: Sequence[str] | None,
        label: str,
        overrides: Mapping[str, Mapping[str, str]] | None,
    ) -> Variant:
        now = request.instants[0]
        snapshot = build_snapshot(catalog, records, defaults=defaults, now=now, topics=topics, overrides=overrides)
        names = snapshot.tables["topics"]["topic"].to_pylist()
        sizes = {
            name: _segment_size(resolve((overrides or {}).get(name, catalog.overrides(name)), defaults))
            for name in names
        }
        return cls(label, snapshot, rates_for(snapshot, request, catalog, records), sizes)

    def only(self, topics: Sequence[str]) -> tuple[Snapshot, list[Rate]]:
        """The snapshot of ``topics`` alone, and the rates of its partitions."""
        keep = pa.array(topics, pa.string())
        tables_ = {name: t.filter(pc.is_in(t["topic"], value_set=keep)) for name, t in self.snapshot.tables.items()}
        wanted = set(topics)
        partitions = self.snapshot.tables["partitions"]["topic"].to_pylist()
        rates = [rate for rate, topic in zip(self.rates, partitions) if topic in wanted]
        return Snapshot(self.snapshot.now, tables_, self.snapshot.rejected), rates


def batches(variant: Variant, instants: Sequence[int], variants: int) -> list[list[str]]:
    """The topics of ``variant`` in batches, in order, each of at most
    :data:`MAX_VIRTUAL_ROWS` virtual segments over ``instants`` and ``variants``
    (a topic larger than that alone): its segments today, plus the segments its
    ingest adds by the horizon, at each instant."""
    tables_ = variant.snapshot.tables
    rows = dict.fromkeys(tables_["topics"]["topic"].to_pylist(), 0.0)
    for count in pc.value_counts(tables_["segments"]["topic"]).to_pylist():
        rows[count["values"]] += count["counts"]
    horizon_ms = instants[-1] - instants[0]
    roll = dict(zip(tables_["topics"]["topic"].to_pylist(), tables_["topics"]["segment_roll"].to_pylist()))
    for topic, rate in zip(tables_["partitions"]["topic"].to_pylist(), variant.rates):
        filled = rate.bytes_per_second * horizon_ms / 1000 / variant.segment_sizes[topic]
        # a roll ends a segment every segment_roll at most (one per record at least)
        rolled = (
            0.0
            if roll[topic] is None
            else min(rate.records * horizon_ms / rate.per_ms, horizon_ms / max(roll[topic], 1))
        )
        rows[topic] += max(filled, rolled) / 2  # on average over instants
    result: list[list[str]] = []
    size = 0.0
    for topic, count in rows.items():
        cost = (count + 1) * len(instants) * variants
        if result and size + cost <= MAX_VIRTUAL_ROWS:
            result[-1].append(topic)
            size += cost
        else:
            result.append([topic])
            size = cost
    return result


def _past_max_time(virtual: Snapshot, partitions: pa.Table) -> set[tuple[str, int]]:
    """The (virtual topic, partition)s that keep data older than ``max_time`` after
    the cycle: the cap deletes it unless a hold or ``max_deletes_per_cycle`` stops it,
    so only those topics are looked at. Segment granularity: a sealed segment past
    the log start whose newest record is older; message granularity: records below
    the ``max_time`` time cut."""
    topics = virtual.tables["topics"]
    stopped = pc.and_(
        pc.is_valid(topics["max_time"]), pc.or_(topics["hold"], pc.is_valid(topics["max_deletes_per_cycle"]))
    )
    policies = topics.filter(stopped).select(["topic", "max_time", "granularity"])
    if policies.num_rows == 0:
        return set()
    starts = partitions.select(["topic", "partition", "new_log_start_offset"]).join(policies, "topic")
    segments = virtual.tables["segments"]
    segments = segments.filter(pc.is_in(segments["topic"], value_set=policies["topic"]))
    segments = segments.join(starts, ["topic", "partition"], join_type="inner")
    older = pc.and_(
        pc.and_(segments["sealed"], pc.greater(segments["next_offset"], segments["new_log_start_offset"])),
        pc.less(segments["max_timestamp"], pc.subtract(virtual.now, segments["max_time"])),
    )
    by_segment = segments.filter(pc.and_(older, pc.equal(segments["granularity"], "segment")))
    cuts = virtual.tables["time_cuts"]
    cuts = cuts.filter(pc.equal(cuts["kind"], "max_time")).join(starts, ["topic", "partition"], join_type="inner")
    by_record = cuts.filter(
        pc.and_(pc.equal(cuts["granularity"], "message"), pc.greater(cuts["offset"], cuts["new_log_start_offset"]))
    )
    return {
        (topic, partition)
        for table in (by_segment, by_record)
        for topic, partition in zip(table["topic"].to_pylist(), table["partition"].to_pylist())
    }


def _merged(parts: Sequence[Forecast], request: Request) -> Forecast:
    """One forecast of the topics of ``parts`` (batches of one request), with the
    disk budget's breach over all of them."""
    topics = [topic for part in parts for topic in part.topics]
    breach = None
    if request.disk_budget is not None:
        for i, at in enumerate(request.instants):
            if sum(t.points[i].bytes for t in topics) > request.disk_budget:
                breach = Breach("disk_budget", at, request.disk_budget)
                break
    instants = list(request.instants)
    return Forecast(instants[0], instants, request.window_ms, topics, request.disk_budget, breach)


def _segment_size(policy: EffectivePolicy) -> int:
    size = policy["segment_size"]
    if not isinstance(size, int):  # the policy rules make it a finite size
        raise InvalidPolicy(f"segment_size must be a finite size, got {size!r}")
    return size


def rates_for(snapshot: Snapshot, request: Request, catalog: Catalog, records: RecordTimes) -> list[Rate]:
    """The rate of each partition of ``snapshot``: observed, or ``request.rate``."""
    tables_ = snapshot.tables

    def first(topic: str, partition: int, log_start: int, theta: int) -> FirstRecord | None:
        return first_record(catalog, records, topic, partition, log_start, theta)

    observed = observed_rates(tables_["segments"], tables_["partitions"], snapshot.now, request.window_ms, first)
    if request.rate is None:
        return observed
    return [given_rate(request.rate, rate) for rate in observed]


def summarize(
    extension: Extension,
    plan: Mapping[str, pa.Table],
    snapshot: Snapshot,
    rates: Sequence[Rate],
    reads: Sequence[Reading],
    window_ms: int,
) -> Forecast:
    """The forecast from the plan of the virtual snapshot, without a disk budget
    (a budget is over every topic: see :func:`forecast`); ``rates`` and ``reads``
    per row of the snapshot's partitions and positions."""
    names = extension.names
    width = len(extension.topics)
    segments = plan["segments"]
    # Deleted rows only: what stays is what was there (the extension's totals) less that.
    deleted = segments.filter(pc.equal(segments["decision"], "delete"))
    deleted = deleted.group_by(["topic", "partition", "reason"]).aggregate(
        [("size_bytes", "sum"), ("size_bytes", "count")]
    )
    by_reason: dict[str, list[dict[str, Any]]] = {}
    # In partition order: a breach names the first partition that breaches, the
    # same one every run (a group-by's rows come in any order).
    for r in sorted(deleted.to_pylist(), key=lambda r: (r["partition"], r["reason"])):
        by_reason.setdefault(r["topic"], []).append(r)
    partitions = snapshot.tables["partitions"]
    row_of = {
        (t, p): i for i, (t, p) in enumerate(zip(partitions["topic"].to_pylist(), partitions["partition"].to_pylist()))
    }
    index = {name: v for v, name in enumerate(names)}
    columns = ["topic", "partition", "new_log_start_offset", "segments_deleted", "bytes_deleted", "roll"]
    starts: dict[str, list[tuple[int, int]]] = {}
    held: dict[tuple[str, int], tuple[int, int]] = {}
    for name, partition, start, gone, freed, rolls in zip(*(plan["partitions"][c].to_pylist() for c in columns)):
        if name not in index:
            continue  # another variant's (a what-if's saved policy)
        starts.setdefault(name, []).append((partition, start))
        i, t = divmod(index[name], width)
        total_bytes, total_segments = extension.on_disk[i]
        row = row_of[(extension.topics[t], partition)]
        # the cycle's roll seals the active segment and begins an empty one
        held[(name, partition)] = (int(total_bytes[row]) - freed, int(total_segments[row]) - gone + bool(rolls))
    past_max_time = _past_max_time(extension.snapshot, plan["partitions"])
    #: virtual topic -> (group, partition) -> the quota it is over
    over: dict[str, dict[tuple[str, int], str]] = {}
    groups = plan["groups"]
    for r in groups.filter(groups["over_quota"]).to_pylist():
        exceeded = "backlog_size" if r["over_backlog_size"] else "backlog_age"
        over.setdefault(r["topic"], {})[(r["group"], r["partition"])] = exceeded
    blocked = dict(zip(plan["topics"]["topic"].to_pylist(), plan["topics"]["quota_exceeded"].to_pylist()))
    policies = {r["topic"]: r for r in snapshot.tables["topics"].to_pylist()}
    topic_rates: dict[str, dict[int, Rate]] = {}
    for topic, partition, rate in zip(partitions["topic"].to_pylist(), partitions["partition"].to_pylist(), rates):
        topic_rates.setdefault(topic, {})[partition] = rate
    topic_reads = by_topic(snapshot.tables["positions"], reads)

    result = []
    for t, topic in enumerate(extension.topics):
        points: list[Point] = []
        #: kind -> the topic's first breach of that kind
        first: dict[str, Breach] = {}
        for i, at in enumerate(extension.instants):
            name = names[i * width + t]
            parts = [
                PartitionPoint(p, *held.get((name, p), (0, 0)), log_start)
                for p, log_start in sorted(starts.get(name, []))
            ]
            reasons: dict[str, int] = {}
            for r in by_reason.get(name, []):
                reasons[r["reason"]] = reasons.get(r["reason"], 0) + r["size_bytes_sum"]
                cap = _CAP_OF_REASON.get(r["reason"])
                if cap is not None:
                    first.setdefault(cap, Breach(cap, at, policies[topic][cap], partition=r["partition"]))
            # A hold (or max_deletes_per_cycle) stops the cap deleting, not the
            # partition growing past it.
            size_cap = policies[topic]["max_partition_size"]
            past = [p.partition for p in parts if size_cap is not None and p.bytes > size_cap]
            if past:
                first.setdefault("max_partition_size", Breach("max_partition_size", at, size_cap, partition=past[0]))
            aged = [p.partition for p in parts if (name, p.partition) in past_max_time]
            if aged:
                first.setdefault("max_time", Breach("max_time", at, policies[topic]["max_time"], partition=aged[0]))
            quota = sorted(over.get(name, {}))
            if quota:
                group, partition = quota[0]
                exceeded = over[name][quota[0]]
                breach = Breach("backlog_quota", at, policies[topic][exceeded], partition, group, exceeded)
                first.setdefault("backlog_quota", breach)
            rows = by_reason.get(name, [])
            points.append(
                Point(
                    at,
                    sum(p.bytes for p in parts),
                    sum(p.segments for p in parts),
                    parts,
                    sum(r["size_bytes_sum"] for r in rows),
                    sum(r["size_bytes_count"] for r in rows),
                    dict(sorted(reasons.items())),
                    bool(blocked.get(name)),
                    quota,
                )
            )
        result.append(
            TopicForecast(
                topic,
                topic_rates.get(topic, {}),
                points,
                sorted(first.values(), key=lambda b: b.at),
                topic_reads.get(topic, []),
            )
        )
    return Forecast(extension.instants[0], extension.instants, window_ms, result, None, None)
