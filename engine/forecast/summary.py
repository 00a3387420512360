"""The forecast read from the plan of the virtual snapshot (engine/forecast/extend.py):
per topic and instant what stays on disk, what went and why, and the first breach of
each kind.

A breach is the first instant at which a cap deletes (``max_partition_size`` or
``max_time``: retention no longer keeps the partition under it) or a partition keeps
more than a cap after the cycle (a hold: bytes over ``max_partition_size``, data older
than ``max_time``), or a group is over a backlog quota. The disk budget is over every
topic forecast, so engine/forecast/forecast.py finds its breach.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.forecast.extend import Extension
from engine.forecast.rates import Rate
from engine.forecast.reading import Reading, by_topic
from engine.forecast.result import Breach, Forecast, PartitionPoint, Point, TopicForecast
from engine.prune.snapshot import Snapshot

#: the cap each reason code means a breach of
_CAP_OF_REASON = {"DELETE_MAX_SIZE": "max_partition_size", "DELETE_MAX_TIME": "max_time"}


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


def _first_deletions(
    deleted: pa.Table, names: Sequence[str], width: int, carried: bool
) -> dict[tuple[int, int], dict[str, int]]:
    """(topic index, instant index) -> reason -> bytes of the segments that go first
    at that instant, each for the reason its cycle would journal: a later instant's
    plan may give a segment already gone another reason (one time retention has since
    reached, say), which the cycles never record. Of virtual topic ``v`` of
    ``names``, the topic is ``v % width`` and the instant ``v // width``; another
    variant's rows are not in ``names``. ``carried``: what goes at the first instant
    went in the run before."""
    virtual = pc.index_in(deleted["topic"], value_set=pa.array(names, pa.string())).fill_null(-1).to_numpy()
    mine = virtual >= 0
    instant, topic = np.divmod(virtual[mine], width)
    partition = deleted["partition"].to_numpy()[mine]
    base = deleted["base_offset"].to_numpy()[mine]
    order = np.lexsort((instant, base, partition, topic))
    same = np.ones(len(order), dtype=bool)  # the segment went at an earlier instant
    same[:1] = False
    for key in (topic[order], partition[order], base[order]):
        same[1:] &= key[1:] == key[:-1]
    first = order[~same]
    if carried:
        first = first[instant[first] > 0]
    rows = np.flatnonzero(mine)[first]
    firsts = (
        pa.table(
            {
                "topic": topic[first],
                "instant": instant[first],
                "reason": deleted["reason"].take(rows),
                "size_bytes": deleted["size_bytes"].take(rows),
            }
        )
        .group_by(["topic", "instant", "reason"])
        .aggregate([("size_bytes", "sum")])
    )
    result: dict[tuple[int, int], dict[str, int]] = {}
    for t, i, reason, size in zip(*(firsts[c].to_pylist() for c in ("topic", "instant", "reason", "size_bytes_sum"))):
        result.setdefault((t, i), {})[reason] = size
    return result


def summarize(
    extension: Extension,
    plan: Mapping[str, pa.Table],
    snapshot: Snapshot,
    rates: Sequence[Rate],
    reads: Sequence[Reading],
    window_ms: int,
    *,
    carried: bool = False,
) -> Forecast:
    """The forecast from the plan of the virtual snapshot, without a disk budget
    (a budget is over every topic: see :func:`forecast`); ``rates`` and ``reads``
    per row of the snapshot's partitions and positions. ``carried``: the
    extension's first instant is the last of the run of instants before it
    (:func:`engine.forecast.forecast.batches`), planned again only to tell what goes
    after it: it has no point here."""
    names = extension.names
    width = len(extension.topics)
    segments = plan["segments"]
    # Deleted rows only: what stays is what was there (the extension's totals) less that.
    deleted = segments.filter(pc.equal(segments["decision"], "delete"))
    first_deleted = _first_deletions(deleted, names, width, carried)
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
        #: reason -> bytes deleted since now for it
        since_now: dict[str, int] = {}
        for i, at in enumerate(extension.instants):
            for reason, size in first_deleted.get((t, i), {}).items():
                since_now[reason] = since_now.get(reason, 0) + size
            if carried and i == 0:
                continue
            name = names[i * width + t]
            parts = [
                PartitionPoint(p, *held.get((name, p), (0, 0)), log_start)
                for p, log_start in sorted(starts.get(name, []))
            ]
            for r in by_reason.get(name, []):
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
                    dict(sorted(since_now.items())),
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
