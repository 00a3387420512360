"""An in-memory catalog for the reference model, random catalogs, and their loading
into a real SQLite :class:`engine.catalog.catalog.Catalog`.

Unlike the real catalog, a segment here carries every record's timestamp, so that the
model can find record-level time cuts by scanning records itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace

from hypothesis import strategies as st

from engine.catalog.catalog import Catalog
from engine.policy.fields import exact_text
from engine.store.segment import SegmentInfo

# -- the in-memory catalog ----------------------------------------------------------


@dataclass(frozen=True)
class Policy:
    """A topic's effective policy as numbers: ms or bytes, ``None`` = infinite.

    The same fields and units as the TOPICS table, plus ``segment_size`` (not used by
    retention, but part of a valid policy)."""

    segment_size: int = 1024
    segment_roll: int | None = None
    retention_time: int | None = None
    retention_size: int | None = None
    max_time: int | None = None
    max_partition_size: int | None = None
    granularity: str = "segment"
    consumption: str = "ignore"
    subscription_expiry: int | None = None
    message_ttl: int | None = None
    backlog_size: int | None = None
    backlog_age: int | None = None
    backlog_policy: str = "producer_request_hold"
    max_deletes_per_cycle: int | None = None
    hold: bool = False

    def texts(self) -> dict[str, str]:
        """Every field as a text the policy parser reads back to exactly this value."""
        return {f.name: exact_text(f.name, getattr(self, f.name)) for f in fields(self)}


@dataclass(frozen=True)
class Segment:
    """One segment: offsets ``[base, next)``, one timestamp per record, in offset order."""

    base: int
    next: int
    size: int
    sealed: bool
    timestamps: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        assert self.next - self.base == len(self.timestamps), "one timestamp per offset"

    @property
    def empty(self) -> bool:
        return self.next == self.base

    @property
    def first_ts(self) -> int | None:
        return self.timestamps[0] if self.timestamps else None

    @property
    def max_ts(self) -> int | None:
        return max(self.timestamps) if self.timestamps else None

    def records(self) -> list[tuple[int, int]]:
        """``(offset, timestamp)`` of every record, in offset order."""
        return [(self.base + i, ts) for i, ts in enumerate(self.timestamps)]


@dataclass(frozen=True)
class Partition:
    """``[log_start, T)`` and its segments ``S_0 .. S_n`` (``S_n`` active)."""

    index: int
    log_start: int  # H
    segments: tuple[Segment, ...]

    @property
    def next_offset(self) -> int:  # T
        return self.segments[-1].next


@dataclass(frozen=True)
class Position:
    partition: int
    position: int
    committed_at: int


@dataclass(frozen=True)
class Group:
    name: str
    kind: str  # subscriber | reader
    positions: tuple[Position, ...]


@dataclass(frozen=True)
class Topic:
    name: str
    policy: Policy
    partitions: tuple[Partition, ...]
    groups: tuple[Group, ...] = ()
    #: the policy texts saved on the topic (the rest comes from the defaults)
    overrides: Mapping[str, str] = field(default_factory=dict)
    #: id of the topic's latest policy change (0: none); filled by load_into_catalog
    policy_version: int = 0


@dataclass(frozen=True)
class RefCatalog:
    topics: tuple[Topic, ...]
    now: int
    #: the engine defaults (config file texts) the overrides apply on top of
    defaults: Mapping[str, str] = field(default_factory=dict)


# -- record timestamps for the snapshot -----------------------------------------------


class FakeRecordTimes:
    """The snapshot's ``RecordTimes`` protocol answered from the in-memory catalog."""

    def __init__(self, catalog: RefCatalog) -> None:
        self.segments = {
            (t.name, p.index, s.base): s for t in catalog.topics for p in t.partitions for s in p.segments
        }
        self.calls: list[tuple[str, int, int, int, int]] = []

    def first_at_or_after(self, topic: str, partition: int, segment_base: int, start_offset: int, theta: int) -> int | None:
        """The first offset >= ``start_offset`` in that segment whose record timestamp
        is >= ``theta``, or None."""
        self.calls.append((topic, partition, segment_base, start_offset, theta))
        segment = self.segments.get((topic, partition, segment_base))
        if segment is None:
            return None
        for offset, ts in segment.records():
            if offset >= start_offset and ts >= theta:
                return offset
        return None


# -- loading into a real catalog -------------------------------------------------------


def load_into_catalog(generated: RefCatalog, catalog: Catalog) -> RefCatalog:
    """Write ``generated`` into ``catalog`` (topics, policy overrides, partitions, the
    exact segment rows, groups and positions) in one transaction.

    Returns ``generated`` with each topic's ``policy_version`` set to the id of its
    latest policy change in the catalog's journal (0 if none)."""
    now = generated.now
    with catalog.write():
        for topic in generated.topics:
            catalog.add_topic(topic.name, len(topic.partitions), now)
            catalog.replace_overrides(topic.name, dict(topic.overrides), actor="test", now_ms=now)
            for partition in topic.partitions:
                infos = [
                    SegmentInfo(s.base, s.next, s.size, s.first_ts, s.max_ts, s.sealed) for s in partition.segments
                ]
                catalog.db.execute(
                    "DELETE FROM segments WHERE topic = ? AND partition = ?", (topic.name, partition.index)
                )
                catalog.update_segments(topic.name, partition.index, infos, partition.next_offset)
                catalog.db.execute(
                    "UPDATE partitions SET log_start_offset = ? WHERE topic = ? AND partition = ?",
                    (partition.log_start, topic.name, partition.index),
                )
            for group in topic.groups:
                catalog.add_group(topic.name, group.name, group.kind, "earliest", {}, now)
                for p in group.positions:
                    catalog.set_position(topic.name, group.name, p.partition, p.position, p.committed_at)
        versions = dict(catalog.db.execute("SELECT topic, MAX(id) FROM policy_changes GROUP BY topic").fetchall())
    return replace(
        generated,
        topics=tuple(replace(t, policy_version=versions.get(t.name) or 0) for t in generated.topics),
    )


# -- random catalogs -------------------------------------------------------------------

NOW = 1_700_000_000_000


def weighted(*choices: tuple[int, st.SearchStrategy]) -> st.SearchStrategy:
    """One of ``choices``, each ``(weight, strategy)``, drawn with those weights."""
    return st.sampled_from([s for weight, s in choices for _ in range(weight)]).flatmap(lambda s: s)


#: durations in ms, on the same small scale as the record timestamps around ``now``,
#: so that equalities (``now - ts == X``) happen often
durations = weighted((2, st.none()), (1, st.just(0)), (5, st.integers(0, 300)))
#: segment file sizes: often multiples of 10, so that sums hit the size limits exactly
segment_sizes = st.one_of(st.integers(1, 10).map(lambda n: n * 10), st.integers(1, 100))
limit_sizes = weighted(
    (2, st.none()), (1, st.just(0)), (3, st.integers(0, 50).map(lambda n: n * 10)), (2, st.integers(1, 900))
)


@st.composite
def policies(
    draw: st.DrawFn, ages: tuple[int, ...] = (), commit_ages: tuple[int, ...] = (), sizes: tuple[int, ...] = ()
) -> Policy:
    """A random policy that passes validation (SPEC §3 rules).

    The ages of the records and of the latest commits, and the suffix sizes of the
    topic it is for (:func:`ages_and_sizes`) are drawn often, so that the strict
    comparisons meet equality."""
    duration = durations
    if ages:
        duration = weighted((2, durations), (1, st.sampled_from(ages)))
    limit_size = limit_sizes
    if sizes:
        limit_size = weighted((2, limit_sizes), (1, st.sampled_from(sizes)))
    retention_time, max_time = draw(duration), draw(duration)
    if retention_time is not None and max_time is not None and retention_time > max_time:
        retention_time, max_time = max_time, retention_time
    max_partition_size = draw(
        weighted((1, st.none()), (1, st.integers(1, 10).map(lambda n: n * 50)), (1, st.integers(1, 900)),
                 (1, st.sampled_from([s for s in sizes if s > 0] or [1])))
    )
    retention_size = draw(limit_size)
    if retention_size is not None and max_partition_size is not None:
        retention_size = min(retention_size, max_partition_size)
    # Pulsar's rule: a lone 0 (the other one finite and non-zero) is invalid
    if retention_time == 0 and retention_size:
        retention_size = draw(st.sampled_from([0, None]))
    elif retention_size == 0 and retention_time:
        retention_time = draw(st.sampled_from([0, None]))
    segment_size = draw(st.integers(1, max_partition_size or 1000))
    return Policy(
        segment_size=segment_size,
        segment_roll=draw(duration),
        retention_time=retention_time,
        retention_size=retention_size,
        max_time=max_time,
        max_partition_size=max_partition_size,
        granularity=draw(st.sampled_from(["segment", "message"])),
        consumption=draw(st.sampled_from(["ignore", "protect", "protect"])),
        subscription_expiry=draw(
            weighted((4, st.none()), (1, durations), *([(2, st.sampled_from(commit_ages))] if commit_ages else []))
        ),
        message_ttl=draw(duration),
        backlog_size=draw(limit_size),
        backlog_age=draw(duration),
        backlog_policy=draw(
            st.sampled_from(["producer_request_hold", "producer_exception", "consumer_backlog_eviction"])
        ),
        max_deletes_per_cycle=draw(weighted((4, st.none()), (1, st.just(0)), (2, st.integers(1, 5)))),
        hold=draw(weighted((7, st.just(False)), (1, st.just(True)))),
    )


@st.composite
def timestamps(draw: st.DrawFn, count: int, now: int) -> list[int]:
    """``count`` record timestamps around ``now``: mostly increasing, sometimes out of
    order, sometimes jumping ahead (possibly into the future)."""
    ts = now - draw(st.integers(0, 300))
    out = []
    for _ in range(count):
        step = draw(st.sampled_from(["up", "up", "up", "up", "up", "same", "back", "jump"]))
        if step == "up":
            ts += draw(st.integers(1, 12))
        elif step == "back":
            ts -= draw(st.integers(1, 40))
        elif step == "jump":
            ts += draw(st.integers(20, 150))
        out.append(ts)
    return out


@st.composite
def partitions(draw: st.DrawFn, index: int, now: int) -> Partition:
    """1–8 segments (the last active, possibly empty), 1–6 records per sealed segment,
    and a log start anywhere in ``[base of S_0, T]``."""
    count = draw(st.integers(1, 8))
    record_counts = [draw(st.integers(1, 6)) for _ in range(count - 1)] + [draw(st.integers(0, 6))]
    all_ts = draw(timestamps(sum(record_counts), now))
    base = draw(st.integers(0, 20))
    segments = []
    for k, n in enumerate(record_counts):
        active = k == count - 1
        size = 0 if n == 0 else draw(segment_sizes)
        segments.append(Segment(base, base + n, size, not active, tuple(all_ts[:n])))
        all_ts = all_ts[n:]
        base += n
    first, last = segments[0].base, segments[-1].next
    boundaries = sorted({s.base for s in segments} | {last})
    # often at or near the start, sometimes anywhere up to T
    log_start = draw(
        weighted((2, st.just(first)), (2, st.sampled_from(boundaries[:3])), (3, st.integers(first, last)))
    )
    return Partition(index, log_start, tuple(segments))


GROUP_NAMES = ("beta", "alpha", "gamma", "delta")
TOPIC_NAMES = ("orders", "Logs.v2", "t_1", "a-b")


@st.composite
def groups(draw: st.DrawFn, parts: tuple[Partition, ...], now: int) -> tuple[Group, ...]:
    """0–3 groups of both kinds, each with a position in ``[0, T]`` (often ``H``,
    ``T`` or a segment boundary) and a commit time on every partition."""
    count = draw(weighted((1, st.just(0)), (3, st.integers(1, 3))))
    names = draw(st.permutations(GROUP_NAMES))[:count]
    out: list[Group] = []
    for name in names:
        kind = draw(st.sampled_from(["subscriber", "subscriber", "subscriber", "reader"]))
        positions = []
        for p in parts:
            T = p.next_offset
            special = sorted({p.log_start, T} | {s.base for s in p.segments})
            # often the position of an earlier group: ties for the barrier
            taken = sorted({pos.position for g in out for pos in g.positions if pos.partition == p.index})
            choices = [(2, st.integers(0, T)), (2, st.sampled_from(special))]
            if taken:
                choices.append((2, st.sampled_from(taken)))
            position = draw(weighted(*choices))
            committed_at = now - draw(st.integers(-5, 300))
            positions.append(Position(p.index, position, committed_at))
        out.append(Group(name, kind, tuple(positions)))
    return tuple(out)


def ages_and_sizes(
    parts: tuple[Partition, ...], groups_: tuple[Group, ...], now: int
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Of one topic: the ages (``now - ts``, >= 0) of its records, of its groups' latest
    commits, and the sums of the sizes of every suffix ``S_k .. S_n`` of segments
    (what the size rules compare)."""
    ages = {now - ts for p in parts for s in p.segments for ts in s.timestamps}
    commits = {now - max(pos.committed_at for pos in g.positions) for g in groups_}
    sizes = {sum(s.size for s in p.segments[k:]) for p in parts for k in range(len(p.segments))}
    return (
        tuple(sorted(a for a in ages if 0 <= a <= 100_000)),
        tuple(sorted(a for a in commits if 0 <= a <= 100_000)),
        tuple(sorted(sizes)),
    )


@st.composite
def catalogs(draw: st.DrawFn) -> RefCatalog:
    """A random catalog: 1–3 topics of 1–3 partitions, random valid policies given as
    overrides on top of random engine defaults, 0–3 groups per topic."""
    now = NOW + draw(st.integers(0, 10_000))
    names = draw(st.lists(st.sampled_from(TOPIC_NAMES), unique=True, min_size=1, max_size=3))
    contents = []
    for _ in names:
        parts = tuple(draw(partitions(i, now)) for i in range(draw(st.integers(1, 3))))
        groups_ = draw(groups(parts, now))
        contents.append((parts, groups_, draw(policies(*ages_and_sizes(parts, groups_, now)))))
    # engine defaults: some fields of a valid policy, often the first topic's
    base = contents[0][2] if draw(st.booleans()) else draw(policies())
    defaults = {k: v for k, v in base.texts().items() if draw(st.integers(0, 9)) < 7}
    topics = []
    for name, (parts, groups_, policy) in zip(names, contents):
        # a field may be left to the defaults only where the default text is the same
        overrides = {
            k: v for k, v in policy.texts().items() if defaults.get(k) != v or draw(st.integers(0, 3)) == 0
        }
        topics.append(Topic(name, policy, parts, groups_, overrides))
    return RefCatalog(tuple(topics), now, defaults)
