"""Random catalogs for hypothesis: valid policies, record timestamps, segments,
groups and positions, on small scales so that the rules' edge cases come up often.

Apart from :mod:`tests.reference.catalog` so that the model itself needs no test
tools (bench/plan.py runs it from a plain install).
"""

from __future__ import annotations

from hypothesis import strategies as st

from engine.catalog.catalog import GroupKind
from engine.store.batch import HEADER_SIZE
from tests.reference.catalog import Group, Partition, Policy, Position, RefCatalog, Segment, Topic

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
    draw: st.DrawFn,
    ages: tuple[int, ...] = (),
    commit_ages: tuple[int, ...] = (),
    sizes: tuple[int, ...] = (),
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
        weighted(
            (1, st.none()),
            (1, st.integers(1, 10).map(lambda n: n * 50)),
            (1, st.integers(1, 900)),
            (1, st.sampled_from([s for s in sizes if s > 0] or [1])),
        )
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
    and a log start anywhere in ``[base of S_0, T]``. Sometimes a producer's steady
    batches: records stamped alike, the same gap apart, often in segments of the
    bytes the store gives them (a header per piece of a batch)."""
    count = draw(st.integers(1, 8))
    record_counts = [draw(st.integers(1, 6)) for _ in range(count - 1)] + [draw(st.integers(0, 6))]
    base = first_offset = draw(st.integers(0, 20))
    batch = draw(st.sampled_from([1, 1, 1, 2, 3]))
    if batch > 1:
        record_counts[-1] += -sum(record_counts) % batch  # whole batches
        start, gap = now - draw(st.integers(0, 300)), draw(st.integers(1, 12))
        all_ts = [start + (j // batch) * gap for j in range(sum(record_counts))]
        record = draw(st.one_of(st.none(), st.integers(1, 30)))  # None: sizes drawn as usual
    else:
        all_ts, record = draw(timestamps(sum(record_counts), now)), None
    segments = []
    for k, n in enumerate(record_counts):
        active = k == count - 1
        pieces = len({(offset - first_offset) // batch for offset in range(base, base + n)})
        size = 0 if n == 0 else draw(segment_sizes) if record is None else n * record + HEADER_SIZE * pieces
        segments.append(Segment(base, base + n, size, not active, tuple(all_ts[:n])))
        all_ts = all_ts[n:]
        base += n
    first, last = segments[0].base, segments[-1].next
    boundaries = sorted({s.base for s in segments} | {last})
    # often at or near the start, sometimes anywhere up to T
    log_start = draw(weighted((2, st.just(first)), (2, st.sampled_from(boundaries[:3])), (3, st.integers(first, last))))
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
        kinds: list[GroupKind] = ["subscriber", "subscriber", "subscriber", "reader"]
        kind = draw(st.sampled_from(kinds))
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
            # often a reading pace: an earlier commit at or before this position
            anchor = draw(
                st.one_of(
                    st.none(),
                    st.tuples(st.integers(0, position), st.integers(committed_at - 400, committed_at - 1)),
                )
            )
            positions.append(Position(p.index, position, committed_at, anchor))
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
        overrides = {k: v for k, v in policy.texts().items() if defaults.get(k) != v or draw(st.integers(0, 3)) == 0}
        topics.append(Topic(name, policy, parts, groups_, overrides))
    return RefCatalog(tuple(topics), now, defaults)
