"""A large synthetic catalog for the planner and console benchmarks.

:func:`generate` draws (from a seed, with numpy, in a second or two for a million
segments) topics with mixed retention policies, their partitions and segments, and
groups with positions; :meth:`SyntheticCatalog.write` bulk-inserts it into a fresh
SQLite :class:`~engine.catalog.catalog.Catalog` in one write transaction, and
:class:`LinearRecordTimes` answers the snapshot's record-level time cuts without any
segment files.

Record timestamps are linear in the offset inside each segment: record ``i`` of a
segment has timestamp ``first_ts + i * step`` (``step`` >= 0 ms, per segment), so a
time cut is arithmetic. Across segments time mostly moves forward at a rate that
varies by segment; a few partitions have clock skew that puts their newest segments
in the future.

What is drawn (per topic unless said otherwise; probabilities are approximate):

- granularity: segment 80 %, message 20 %; consumption: protect 50 %, ignore 50 %;
- retention_time finite 85 % (0.2-1.2x the partition's time span), retention_size
  finite 30 % (30-90 % of the nominal partition bytes), max_time finite 20 % (never
  below retention_time), max_partition_size finite 20 % (60-110 % of the bytes; else
  the 100 GiB default), segment_roll finite 30 %;
- subscription_expiry finite 25 % (1 day), message_ttl 25 %, backlog_size 25 %,
  backlog_age 25 %, backlog_policy uniform over the three;
- max_deletes_per_cycle finite 5 % (0, 1, 5 or 20); hold 2 %;
- 0-4 groups per topic (mean about 2), 70 % subscribers; 10 % of groups last
  committed days ago (so they expire where subscription_expiry is finite);
- per partition: 10 % idle for hours (so segment_roll fires), 1 % with timestamps up
  to 2 h in the future; message-granularity partitions have their log start inside
  one of their first three segments (older sealed segments lie wholly below it);
- per segment: 80-120 % of the topic's nominal record count (sealed), 0-100 % for
  the active segment (10 % of them empty); 1 % of segments have all records at the
  same timestamp.

Every policy is written as topic overrides of the fields that differ from the SPEC
defaults, with one policy_changes row per override (the topic's ``policy_version`` is
the last one's id); the snapshot must be built with ``defaults={}``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TypedDict, cast

import numpy as np

from engine.catalog.catalog import Catalog, GroupKind
from engine.policy.fields import FIELDS, Value, exact_text
from engine.prune.record_times import NO_RECORD, FirstRecord
from engine.prune.time_cuts import RecordReads

NOW = 1_700_000_000_000
HOUR = 3_600_000
DAY = 24 * HOUR

#: policy fields in the order of the model's Policy (all of SPEC §3)
POLICY_FIELDS = tuple(FIELDS)


_DEFAULTS = {name: f.parse(f.default_text) for name, f in FIELDS.items()}


class PolicyValues(TypedDict):
    """Every policy field -> its value (ms, bytes, count, choice, bool; None =
    infinite): the keyword arguments of the model's Policy."""

    segment_size: int
    segment_roll: int | None
    retention_time: int | None
    retention_size: int | None
    max_time: int | None
    max_partition_size: int
    granularity: str
    consumption: str
    subscription_expiry: int | None
    message_ttl: int | None
    backlog_size: int | None
    backlog_age: int | None
    backlog_policy: str
    max_deletes_per_cycle: int | None
    hold: bool


@dataclass
class TopicSpec:
    name: str
    partitions: int
    policy: PolicyValues
    #: the texts saved as topic overrides (fields that differ from the SPEC defaults)
    overrides: dict[str, str] = field(default_factory=dict)
    #: id of the topic's last policy_changes row (0: none)
    policy_version: int = 0


@dataclass
class GroupSpec:
    topic: int  # index into topics
    name: str
    kind: GroupKind


@dataclass
class SyntheticCatalog:
    now: int
    topics: list[TopicSpec]
    # per partition (P rows, in topic order then partition order)
    part_topic: np.ndarray  # topic index
    part_index: np.ndarray  # partition number within the topic
    log_start: np.ndarray  # H
    next_offset: np.ndarray  # T
    # per segment, shape (P, S); S_{S-1} is the active segment
    base: np.ndarray
    next: np.ndarray
    size: np.ndarray
    first_ts: np.ndarray  # meaningless where count == 0
    step: np.ndarray  # ms between consecutive records of the segment
    count: np.ndarray  # records in the segment (next - base)
    groups: list[GroupSpec]
    # per position row
    pos_group: np.ndarray  # index into groups
    pos_partition: np.ndarray  # global partition index
    position: np.ndarray
    committed_at: np.ndarray

    @property
    def partitions(self) -> int:
        return self.base.shape[0]

    @property
    def segments_per_partition(self) -> int:
        return self.base.shape[1]

    @property
    def segment_count(self) -> int:
        return self.base.size

    @property
    def max_ts(self) -> np.ndarray:
        return self.first_ts + np.maximum(self.count - 1, 0) * self.step

    def partition_of(self) -> dict[tuple[str, int], int]:
        """(topic name, partition) -> global partition index."""
        names = [t.name for t in self.topics]
        return {
            (names[t], int(i)): p for p, (t, i) in enumerate(zip(self.part_topic.tolist(), self.part_index.tolist()))
        }

    def timestamps(self, p: int, k: int) -> range | tuple[int, ...]:
        """Every record timestamp of segment ``k`` of partition ``p``, in offset order."""
        n, first, step = int(self.count[p, k]), int(self.first_ts[p, k]), int(self.step[p, k])
        if n == 0:
            return ()
        if step == 0:
            return (first,) * n
        return range(first, first + n * step, step)

    # -- writing ------------------------------------------------------------------------

    def write(self, catalog: Catalog) -> None:
        """Insert everything into an empty catalog, in one write transaction."""
        conn = catalog.db.conn
        names = [t.name for t in self.topics]
        part_names = [names[t] for t in self.part_topic.tolist()]
        part_numbers = self.part_index.tolist()
        with catalog.write():
            conn.executemany(
                "INSERT INTO topics (name, partitions, created_at) VALUES (?, ?, ?)",
                [(t.name, t.partitions, self.now - 30 * DAY) for t in self.topics],
            )
            conn.executemany(
                "INSERT INTO policies (topic, field, value) VALUES (?, ?, ?)",
                [(t.name, f, v) for t in self.topics for f, v in t.overrides.items()],
            )
            conn.executemany(
                "INSERT INTO policy_changes (id, time, actor, topic, field, old, new) VALUES (?, ?, ?, ?, ?, ?, ?)",
                self._policy_changes(),
            )
            # Segments before their partitions, foreign keys checked at the commit: a
            # segment row's trigger then finds no partition to stamp, and each partition
            # is stamped once as it is inserted (engine/catalog/schema.py).
            conn.execute("PRAGMA defer_foreign_keys = ON")
            conn.executemany(
                "INSERT INTO segments (topic, partition, base_offset, next_offset, size_bytes,"
                " first_timestamp, max_timestamp, sealed) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                self._segment_rows(part_names, part_numbers),
            )
            conn.executemany(
                "INSERT INTO partitions (topic, partition, log_start_offset, next_offset) VALUES (?, ?, ?, ?)",
                zip(part_names, part_numbers, self.log_start.tolist(), self.next_offset.tolist()),
            )
            conn.executemany(
                "INSERT INTO groups (topic, name, kind, start_from, created_at) VALUES (?, ?, ?, ?, ?)",
                [(names[g.topic], g.name, g.kind, "earliest", self.now - 30 * DAY) for g in self.groups],
            )
            group_keys = [(names[g.topic], g.name) for g in self.groups]
            conn.executemany(
                "INSERT INTO positions (topic, group_name, partition, position, committed_at) VALUES (?, ?, ?, ?, ?)",
                (
                    (*group_keys[g], part_numbers[p], pos, at)
                    for g, p, pos, at in zip(
                        self.pos_group.tolist(),
                        self.pos_partition.tolist(),
                        self.position.tolist(),
                        self.committed_at.tolist(),
                    )
                ),
            )

    def _policy_changes(self) -> list[tuple]:
        """One row per override, ids in topic order: a topic's last id is its
        ``policy_version`` (set by :func:`generate`)."""
        rows, next_id = [], 1
        for t in self.topics:
            for f, v in sorted(t.overrides.items()):
                rows.append((next_id, self.now - 7 * DAY, "bench", t.name, f, None, v))
                next_id += 1
            assert t.policy_version == (next_id - 1 if t.overrides else 0)
        return rows

    def _segment_rows(self, part_names: list[str], part_numbers: list[int]) -> Iterator[tuple]:
        last = self.segments_per_partition - 1
        max_ts = self.max_ts
        for p, (base, nxt, size, first, mx, n) in enumerate(
            zip(
                self.base.tolist(),
                self.next.tolist(),
                self.size.tolist(),
                self.first_ts.tolist(),
                max_ts.tolist(),
                self.count.tolist(),
            )
        ):
            name, number = part_names[p], part_numbers[p]
            for k in range(last + 1):
                if n[k]:
                    yield (name, number, base[k], nxt[k], size[k], first[k], mx[k], int(k != last))
                else:
                    yield (name, number, base[k], nxt[k], size[k], None, None, int(k != last))


class LinearRecordTimes:
    """The snapshot's ``RecordTimes`` for a :class:`SyntheticCatalog`: arithmetic on
    each segment's ``first_ts + i * step``; counts the reads."""

    def __init__(self, data: SyntheticCatalog) -> None:
        self.data = data
        names = [t.name for t in data.topics]
        self.topic_of = {name: t for t, name in enumerate(names)}
        # (topic, partition) -> global partition index, as a grid (-1: none)
        self.partition_grid = np.full((len(names), int(data.part_index.max(initial=0)) + 1), -1, np.int64)
        self.partition_grid[data.part_topic, data.part_index] = np.arange(data.partitions)
        # every segment's base, each partition's shifted above the one before
        self.width = int(data.base.max(initial=0)) + 1
        self.keys = (np.arange(data.partitions)[:, None] * self.width + data.base).ravel()
        self.reads = 0

    def first_at_or_after(
        self, topic: str, partition: int, segment_base: int, start_offset: int, theta: int
    ) -> FirstRecord | None:
        self.reads += 1
        t = self.topic_of.get(topic)
        if t is None or partition >= self.partition_grid.shape[1] or self.partition_grid[t, partition] < 0:
            return None
        p = int(self.partition_grid[t, partition])
        k = int(np.searchsorted(self.data.base[p], segment_base))
        if k >= self.data.segments_per_partition or int(self.data.base[p, k]) != segment_base:
            return None
        n, first, step = int(self.data.count[p, k]), int(self.data.first_ts[p, k]), int(self.data.step[p, k])
        i = int(_record_index(n, first, step, max(0, start_offset - segment_base), theta))
        return FirstRecord(segment_base + i, first + i * step) if i < n else None

    def first_offsets(self, reads: RecordReads) -> np.ndarray:
        """Per read, as the store answers it: the segment found, the record by arithmetic."""
        self.reads += len(reads)
        found = np.full(len(reads), NO_RECORD, np.int64)
        topic = np.array([self.topic_of.get(name, -1) for name in reads.topics], np.int64)[reads.topic]
        grid = self.partition_grid
        inside = (topic >= 0) & (reads.partition < grid.shape[1])
        p = np.where(inside, grid[np.maximum(topic, 0), np.minimum(reads.partition, grid.shape[1] - 1)], -1)
        wanted = p * self.width + reads.segment_base
        at = np.minimum(np.searchsorted(self.keys, wanted), len(self.keys) - 1)
        n, first, step = (column.ravel()[at] for column in (self.data.count, self.data.first_ts, self.data.step))
        i = _record_index(n, first, step, np.maximum(0, reads.start_offset - reads.segment_base), reads.theta)
        held = (p >= 0) & (self.keys[at] == wanted) & (i < n)
        found[held] = (reads.segment_base + i)[held]
        return found


def _record_index(n: Any, first: Any, step: Any, start: Any, theta: Any) -> Any:
    """The index of the first record at or after index ``start`` of a segment of ``n``
    records stamped ``first + i * step`` that is stamped ``theta`` or later (``n``
    where none is); numbers or arrays alike."""
    older = (start < n) & (first + start * step < theta)
    # ceil((θ - first) / step), where θ is above first (θ may be far below every
    # timestamp, and the difference past int64, where the record at start is not older)
    above = np.maximum(theta, first)
    caught_up = np.where(step > 0, np.maximum(start, -((first - above) // np.maximum(step, 1))), n)
    return np.where(older, caught_up, start)


# -- generation ----------------------------------------------------------------------------


def _policy(rng: np.random.Generator, span: int, partition_bytes: int, segment_bytes: int) -> PolicyValues:
    """A valid policy (SPEC §3 rules hold) scaled to a partition's span and bytes."""

    def maybe(p: float, value: float) -> int | None:
        return int(value) if rng.random() < p else None

    def between(lo: float, hi: float) -> float:
        return float(rng.uniform(lo, hi))

    retention_time = maybe(0.85, span * between(0.2, 1.2))
    max_time = maybe(0.20, span * between(0.4, 1.0))
    if retention_time is not None and max_time is not None:
        max_time = max(max_time, retention_time)
    max_partition_size = maybe(0.20, partition_bytes * between(0.6, 1.1))
    if max_partition_size is None:
        default = _DEFAULTS["max_partition_size"]
        assert isinstance(default, int), "the SPEC default of max_partition_size is a finite size"
        max_partition_size = default
    max_partition_size = max(max_partition_size, segment_bytes)
    retention_size = maybe(0.30, partition_bytes * between(0.3, 0.9))
    if retention_size is not None:
        retention_size = min(retention_size, max_partition_size)
    return {
        "segment_size": segment_bytes,
        "segment_roll": maybe(0.30, between(10 * 60_000, 2 * HOUR)),
        "retention_time": retention_time,
        "retention_size": retention_size,
        "max_time": max_time,
        "max_partition_size": max_partition_size,
        "granularity": "message" if rng.random() < 0.20 else "segment",
        "consumption": "protect" if rng.random() < 0.50 else "ignore",
        "subscription_expiry": maybe(0.25, DAY),
        "message_ttl": maybe(0.25, span * between(0.1, 0.8)),
        "backlog_size": maybe(0.25, partition_bytes * between(0.1, 0.5)),
        "backlog_age": maybe(0.25, span * between(0.05, 0.5)),
        "backlog_policy": str(rng.choice(["producer_request_hold", "producer_exception", "consumer_backlog_eviction"])),
        "max_deletes_per_cycle": int(rng.choice([0, 1, 5, 20])) if rng.random() < 0.05 else None,
        "hold": bool(rng.random() < 0.02),
    }


#: what a plain policy leaves at its SPEC default (:func:`generate`)
_NOT_PLAIN = ("segment_roll", "granularity", "subscription_expiry", "message_ttl", "backlog_size", "backlog_age",
              "max_deletes_per_cycle", "hold")  # fmt: skip


def generate(
    partitions: int, segments: int, topics: int, seed: int = 0, now: int = NOW, *, plain: bool = False
) -> SyntheticCatalog:
    """``partitions`` partitions of ``segments`` segments each (the last one active),
    spread as evenly as possible over ``topics`` topics; ``plain``: every policy
    only time, size and caps at segment granularity (the forecast plans those
    topics as a timeline, engine/forecast/timeline.py), its other fields at their
    defaults."""
    if partitions < 1 or segments < 1 or not 1 <= topics <= partitions:
        raise ValueError("need partitions >= 1, segments >= 1 and 1 <= topics <= partitions")
    rng = np.random.default_rng(seed)
    P, S = partitions, segments

    # -- topics and their policies
    per_topic = [partitions // topics + (1 if i < partitions % topics else 0) for i in range(topics)]
    nominal_records = rng.integers(80, 121, topics)  # records per sealed segment
    record_bytes = rng.integers(200, 2001, topics)
    span = rng.integers(1 * DAY, 20 * DAY, topics)  # time covered by a partition
    topic_specs = []
    for i in range(topics):
        segment_bytes = math.ceil(nominal_records[i] * record_bytes[i] * 1.25)
        partition_bytes = int(S * nominal_records[i] * record_bytes[i])
        policy = _policy(rng, int(span[i]), partition_bytes, segment_bytes)
        if plain:
            policy.update({field: _DEFAULTS[field] for field in _NOT_PLAIN})  # type: ignore[typeddict-item]
        # A TypedDict's items() are typed object; every value of a PolicyValues is a Value.
        values = cast(dict[str, Value], policy)
        overrides = {f: exact_text(f, v) for f, v in values.items() if v != _DEFAULTS[f]}
        topic_specs.append(TopicSpec(f"topic-{i:05d}", per_topic[i], policy, overrides))
    changes = 0
    for t in topic_specs:  # ids of the policy_changes rows that write() inserts
        changes += len(t.overrides)
        t.policy_version = changes if t.overrides else 0
    part_topic = np.repeat(np.arange(topics), per_topic)
    part_index = np.concatenate([np.arange(n) for n in per_topic])
    message = np.array([t.policy["granularity"] == "message" for t in topic_specs])[part_topic]

    # -- records per segment
    nominal = nominal_records[part_topic][:, None]
    count = np.floor(nominal * rng.uniform(0.8, 1.2, (P, S))).astype(np.int64).clip(min=1)
    active = np.floor(nominal[:, 0] * rng.uniform(0.0, 1.0, P)).astype(np.int64)
    active[rng.random(P) < 0.10] = 0
    count[:, -1] = active

    # -- offsets: a partition starts where earlier prunes left it
    start = rng.integers(0, 1_000_000, P)
    ends = np.cumsum(count, axis=1)
    base = start[:, None] + ends - count
    nxt = start[:, None] + ends
    T = nxt[:, -1].copy()

    # -- timestamps: linear inside a segment, the newest record `lag` ms before now
    nominal_step = np.maximum(span[part_topic] // (S * nominal_records[part_topic]), 1)
    step = np.rint(nominal_step[:, None] * rng.uniform(0.5, 1.5, (P, S))).astype(np.int64)
    step[rng.random((P, S)) < 0.01] = 0
    duration = count * step  # from a segment's first record to the next segment's first
    rel_first = np.cumsum(duration, axis=1) - duration
    last_nonempty = np.where(count[:, -1] > 0, S - 1, max(S - 2, 0))
    rows = np.arange(P)
    rel_last = (
        rel_first[rows, last_nonempty] + np.maximum(count[rows, last_nonempty] - 1, 0) * step[rows, last_nonempty]
    )
    lag = rng.integers(0, 60_000, P)
    idle = rng.random(P) < 0.10
    lag[idle] = rng.integers(1 * HOUR, 48 * HOUR, int(idle.sum()))
    first_ts = (now - lag - rel_last)[:, None] + rel_first
    skewed = rng.random(P) < 0.01  # clock skew: the newest 30 % of segments up to 2 h ahead
    if skewed.any():
        ahead = np.zeros((P, S), dtype=np.int64)
        ahead[:, int(S * 0.7) :] = rng.integers(HOUR, 2 * HOUR, (P, 1))
        first_ts = first_ts + np.where(skewed[:, None], ahead, 0)

    # -- sizes: whole files, about the records' bytes; an empty segment has 0 bytes
    size = np.rint(count * record_bytes[part_topic][:, None] * rng.uniform(0.9, 1.1, (P, S))).astype(np.int64)
    size[count == 0] = 0

    # -- log start: at S_0 (segment granularity), or inside one of the first three
    #    sealed segments (message granularity: the older ones lie wholly below it)
    H = base[:, 0].copy()
    sealed_count = S - 1
    if sealed_count > 0:
        j = np.minimum(rng.choice([0, 1, 2], P, p=[0.5, 0.3, 0.2]), sealed_count - 1)
        inside = base[rows, j] + np.floor(rng.random(P) * count[rows, j]).astype(np.int64)
        H = np.where(message, inside, H)

    # -- groups and positions
    group_specs: list[GroupSpec] = []
    for topic in range(topics):
        for number in range(int(rng.choice([0, 1, 2, 3, 4], p=[0.15, 0.25, 0.30, 0.20, 0.10]))):
            kind: GroupKind = "subscriber" if rng.random() < 0.70 else "reader"
            group_specs.append(GroupSpec(topic, f"{kind[:3]}-{number}", kind))
    first_partition = np.concatenate([[0], np.cumsum(per_topic)[:-1]])
    pos_group_list, pos_partition_list = [], []
    for gi, group in enumerate(group_specs):
        parts = np.arange(first_partition[group.topic], first_partition[group.topic] + per_topic[group.topic])
        pos_group_list.append(np.full(len(parts), gi))
        pos_partition_list.append(parts)
    pos_group = np.concatenate(pos_group_list) if pos_group_list else np.zeros(0, dtype=np.int64)
    pos_partition = np.concatenate(pos_partition_list) if pos_partition_list else np.zeros(0, dtype=np.int64)
    n_pos = len(pos_group)
    pH, pT, pstart = H[pos_partition], T[pos_partition], start[pos_partition]
    mode = rng.choice(4, n_pos, p=[0.55, 0.30, 0.10, 0.05])
    u = rng.random(n_pos)
    caught_up = pT - np.floor(u * nominal_records[part_topic][pos_partition]).astype(np.int64)
    lagging = pH + np.floor(u * (pT - pH)).astype(np.int64)
    below = pstart + np.floor(u * (pH - pstart)).astype(np.int64)
    boundary = base[pos_partition, rng.integers(0, S, n_pos)]
    position = np.choose(mode, [caught_up, lagging, below, boundary]).clip(0, pT)
    stale = np.array([rng.random() < 0.10 for _ in group_specs], dtype=bool)
    committed_at = now - rng.integers(-1_000, 120_000, n_pos)
    if n_pos:
        old = stale[pos_group]
        committed_at[old] = now - rng.integers(2 * DAY, 10 * DAY, int(old.sum()))

    return SyntheticCatalog(
        now=now,
        topics=topic_specs,
        part_topic=part_topic,
        part_index=part_index,
        log_start=H,
        next_offset=T,
        base=base,
        next=nxt,
        size=size,
        first_ts=first_ts,
        step=step,
        count=count,
        groups=group_specs,
        pos_group=pos_group,
        pos_partition=pos_partition,
        position=position,
        committed_at=committed_at,
    )
