"""The reference model of docs/RETENTION.md: plain loops, one function per rule, named
after the doc's terms. Written to be checked by reading, not to be fast.

Entry points: :func:`plan` (rows as dicts per plan table) and :func:`plan_tables`
(the same rows as Arrow tables with the PLAN_* schemas).

``None`` means infinite for every limit, and also "no barrier".
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from engine.prune import tables

from .catalog import Group, Partition, Policy, RefCatalog, Segment, Topic

# -- basics -----------------------------------------------------------------------------


def is_older_than(ts: int, now: int, limit: int) -> bool:
    """ "Expired" is strict everywhere: ``now - ts > X``."""
    return now - ts > limit


def suffix_from(segments: tuple[Segment, ...], k: int) -> int:
    """Sum of the file sizes of ``S_k .. S_n``."""
    return sum(s.size for s in segments[k:])


def suffix_after(segments: tuple[Segment, ...], k: int) -> int:
    return suffix_from(segments, k + 1)


def time_cut(partition: Partition, theta: int) -> int:
    """The first offset in ``[H, T)`` whose record has timestamp ``>= theta``, scanning
    records in offset order from ``H``; ``T`` if there is none."""
    H, T = partition.log_start, partition.next_offset
    for segment in partition.segments:
        for offset, ts in segment.records():
            if H <= offset < T and ts >= theta:
                return offset
    return T


def time_cut_for(partition: Partition, now: int, limit: int | None) -> int | None:
    """``time_cut(now - limit)``; ``None`` when the limit is infinite."""
    if limit is None:
        return None
    return time_cut(partition, now - limit)


# -- segment-level eligibility (sealed segments only) -----------------------------------


def _newest_older_than(segment: Segment, now: int, limit: int | None) -> bool:
    """A sealed segment whose newest record is older than ``limit``; an empty one has
    none (the planner's comparison with a null timestamp is false)."""
    newest = segment.max_ts
    return segment.sealed and limit is not None and newest is not None and newest < now - limit


def e_time(policy: Policy, segment: Segment, now: int) -> bool:
    return _newest_older_than(segment, now, policy.retention_time)


def e_size(policy: Policy, segments: tuple[Segment, ...], k: int) -> bool:
    return (
        segments[k].sealed and policy.retention_size is not None and suffix_after(segments, k) >= policy.retention_size
    )


def e_max_time(policy: Policy, segment: Segment, now: int) -> bool:
    return _newest_older_than(segment, now, policy.max_time)


def e_max_size(policy: Policy, segments: tuple[Segment, ...], k: int) -> bool:
    return (
        segments[k].sealed
        and policy.max_partition_size is not None
        and suffix_from(segments, k) > policy.max_partition_size
    )


def first_not(partition: Partition, predicate) -> int:
    """``max(H, base of the first segment with next > H for which P is false)``.

    When no segment has ``next > H`` (``H == T``) the answer is ``H``."""
    H = partition.log_start
    for k, segment in enumerate(partition.segments):
        if segment.next > H and not predicate(k):
            return max(H, segment.base)
    return H


# -- per topic, before the cut --------------------------------------------------------


def last_commit(group: Group) -> int | None:
    """The latest commit of ``group`` over all partitions of the topic."""
    times = [p.committed_at for p in group.positions]
    return max(times) if times else None


def is_group_expired(group: Group, policy: Policy, now: int) -> bool:
    """Rule 1, expiry: ``now - last_commit > subscription_expiry``."""
    latest = last_commit(group)
    if policy.subscription_expiry is None or latest is None:
        return False
    return is_older_than(latest, now, policy.subscription_expiry)


def pos_eff(position: int, partition: Partition) -> int:
    """``max(pos, H)``: data below ``H`` is gone anyway."""
    return max(position, partition.log_start)


def pos_after_ttl(position_eff: int, partition: Partition, policy: Policy, now: int) -> int:
    """Rule 2, TTL: ``max(pos_eff, time_cut(now - message_ttl))``."""
    cut = time_cut_for(partition, now, policy.message_ttl)
    return position_eff if cut is None else max(position_eff, cut)


def size_evict_cut(partition: Partition, backlog_size: int) -> int:
    """The smallest ``b`` in ``{base of S_k} ∪ {T}`` with ``suffix_from(b) <= backlog_size``."""
    candidates = [
        segment.base
        for k, segment in enumerate(partition.segments)
        if suffix_from(partition.segments, k) <= backlog_size
    ]
    candidates.append(partition.next_offset)  # suffix_from(T) = 0
    return min(candidates)


@dataclass
class Backlog:
    over_size: bool
    over_age: bool
    size_cut: int | None  # None: backlog_size infinite
    age_cut: int | None  # None: backlog_age infinite

    @property
    def over_quota(self) -> bool:
        return self.over_size or self.over_age


def backlog(pos_ttl: int, partition: Partition, policy: Policy, now: int) -> Backlog:
    """Rule 3: is a subscriber at ``pos_ttl`` over the size or the age quota?"""
    size_cut = None if policy.backlog_size is None else size_evict_cut(partition, policy.backlog_size)
    age_cut = time_cut_for(partition, now, policy.backlog_age)
    return Backlog(
        over_size=size_cut is not None and pos_ttl < size_cut,
        over_age=age_cut is not None and pos_ttl < age_cut,
        size_cut=size_cut,
        age_cut=age_cut,
    )


def pos_after_eviction(pos_ttl: int, b: Backlog, policy: Policy) -> int:
    """``consumer_backlog_eviction`` moves the position past the quotas; the producer
    policies move nothing."""
    if policy.backlog_policy != "consumer_backlog_eviction":
        return pos_ttl
    cuts = [pos_ttl] + [c for c in (b.size_cut, b.age_cut) if c is not None]
    return max(cuts)


def idle_roll(partition: Partition, policy: Policy, now: int) -> bool:
    """Rule 4: roll a non-empty active segment with ``now - first_ts >= segment_roll``."""
    active = partition.segments[-1]
    first = active.first_ts  # None: empty
    if first is None or policy.segment_roll is None:
        return False
    return now - first >= policy.segment_roll


@dataclass
class GroupState:
    """One group on one partition, through the steps of the cycle."""

    group: Group
    position: int  # as in the catalog
    expired: bool
    pos_eff: int = 0
    pos_ttl: int = 0
    pos_new: int = 0
    over_size: bool = False
    over_age: bool = False
    new_position: int = 0
    moved_skipped: int = 0

    @property
    def is_subscriber(self) -> bool:
        return self.group.kind == "subscriber"

    @property
    def over_quota(self) -> bool:
        return self.over_size or self.over_age


def positions_before_cut(topic: Topic, partition: Partition, expired: dict[str, bool], now: int) -> list[GroupState]:
    """Rules 2 and 3 for every group on ``partition``: ``pos_new`` and over-quota."""
    policy = topic.policy
    states = []
    for group in topic.groups:
        for p in group.positions:
            if p.partition != partition.index:
                continue
            state = GroupState(group, p.position, expired[group.name])
            if state.expired:
                # removed this cycle, ignored below: reported as it was
                state.pos_eff = state.pos_ttl = state.pos_new = state.new_position = p.position
            elif state.is_subscriber:
                state.pos_eff = pos_eff(p.position, partition)
                state.pos_ttl = pos_after_ttl(state.pos_eff, partition, policy, now)
                b = backlog(state.pos_ttl, partition, policy, now)
                state.over_size, state.over_age = b.over_size, b.over_age
                state.pos_new = pos_after_eviction(state.pos_ttl, b, policy)
            else:  # readers: not affected by TTL or quotas
                state.pos_eff = state.pos_ttl = state.pos_new = pos_eff(p.position, partition)
            states.append(state)
    return states


# -- per partition, the cut ------------------------------------------------------------


@dataclass
class Cut:
    target: int
    hard: int
    tc_r: int  # H when retention_time is infinite
    tc_m: int  # H when max_time is infinite
    barrier: int | None
    barrier_group: str | None
    cut: int


def segment_flags(policy: Policy, partition: Partition, k: int, now: int) -> dict[str, bool]:
    segments = partition.segments
    return {
        "e_time": e_time(policy, segments[k], now),
        "e_size": e_size(policy, segments, k),
        "e_max_time": e_max_time(policy, segments[k], now),
        "e_max_size": e_max_size(policy, segments, k),
    }


def barrier(policy: Policy, states: list[GroupState]) -> tuple[int | None, str | None]:
    """With ``protect`` and at least one unexpired subscriber: ``min(pos_new)`` and the
    subscriber furthest behind after TTL (lowest ``pos_ttl``; ties: first name);
    otherwise no barrier."""
    if policy.consumption != "protect":
        return None, None
    subscribers = [s for s in states if s.is_subscriber and not s.expired]
    if not subscribers:
        return None, None
    lowest = min(s.pos_new for s in subscribers)
    furthest_behind = min(s.pos_ttl for s in subscribers)
    name = min(s.group.name for s in subscribers if s.pos_ttl == furthest_behind)
    return lowest, name


def the_cut(topic: Topic, partition: Partition, states: list[GroupState], now: int) -> Cut:
    policy = topic.policy
    H, T = partition.log_start, partition.next_offset

    def flag(name: str):
        return lambda k: segment_flags(policy, partition, k, now)[name]

    tc_r = time_cut_for(partition, now, policy.retention_time)
    tc_m = time_cut_for(partition, now, policy.max_time)
    tc_r = H if tc_r is None else tc_r
    tc_m = H if tc_m is None else tc_m
    if policy.granularity == "segment":
        target = first_not(partition, lambda k: flag("e_time")(k) or flag("e_size")(k))
        hard = first_not(partition, lambda k: flag("e_max_time")(k) or flag("e_max_size")(k))
    else:
        target = max(tc_r, first_not(partition, flag("e_size")))
        hard = max(tc_m, first_not(partition, flag("e_max_size")))
    low, group = barrier(policy, states)
    protected = target if low is None else min(target, low)
    cut = min(T, max(H, hard, protected))
    return Cut(target, hard, tc_r, tc_m, low, group, cut)


def delete_reason(policy: Policy, segment: Segment, flags: dict[str, bool], H: int, c: Cut) -> str:
    """Reason of a deleted segment, first match."""
    protected = c.target if c.barrier is None else min(c.target, c.barrier)
    if segment.next <= H:
        return "DELETE_BELOW_LOG_START"
    time_ok = flags["e_time"] if policy.granularity == "segment" else segment.next <= c.tc_r
    if segment.next <= protected and time_ok:
        return "DELETE_TIME"
    if segment.next <= protected:
        return "DELETE_SIZE"
    max_time_ok = flags["e_max_time"] if policy.granularity == "segment" else segment.next <= c.tc_m
    if max_time_ok:
        return "DELETE_MAX_TIME"
    return "DELETE_MAX_SIZE"


def keep_reason(
    policy: Policy, segment: Segment, flags: dict[str, bool], wanted: bool, c: Cut, now: int
) -> tuple[str, str | None]:
    """Reason (and detail) of a kept segment, first match."""
    if policy.hold:
        return "KEEP_HOLD", None
    if not segment.sealed:
        return "KEEP_ACTIVE", None
    if wanted:  # wanted but not deleted, without hold: beyond the budget
        return "KEEP_BUDGET", None
    if segment.next <= c.target and c.barrier is not None and segment.next > c.barrier:
        return "KEEP_BARRIER", f"group {c.barrier_group} at {c.barrier}"
    if any(flags.values()):
        return "KEEP_PREFIX", None
    newest = segment.max_ts
    if policy.retention_time is not None and newest is not None and newest > now:
        return "KEEP_FUTURE_TIMESTAMP", None
    if policy.retention_time is not None:
        return "KEEP_WITHIN_TIME", None
    if policy.retention_size is not None:
        return "KEEP_SIZE_TARGET", None
    return "KEEP_NO_LIMIT", None


def eligible_at(policy: Policy, segment: Segment) -> int | None:
    """Sealed only: earliest of ``max_ts + retention_time + 1`` and
    ``max_ts + max_time + 1`` over the finite ones."""
    newest = segment.max_ts
    if not segment.sealed or newest is None:
        return None
    times = [newest + limit + 1 for limit in (policy.retention_time, policy.max_time) if limit is not None]
    return min(times) if times else None


def within_budget(policy: Policy, k: int) -> bool:
    """Only the first ``max_deletes_per_cycle`` segments, counting from ``S_0``."""
    return policy.max_deletes_per_cycle is None or k < policy.max_deletes_per_cycle


def new_log_start(policy: Policy, partition: Partition, c: Cut, wanted: list[bool], deleted: list[bool]) -> int:
    H = partition.log_start
    if policy.hold:
        return H
    if policy.granularity == "segment":
        last = [s.next for s, d in zip(partition.segments, deleted) if d]
        return max(H, last[-1]) if last else H
    kept_by_budget = [s.base for s, w, d in zip(partition.segments, wanted, deleted) if w and not d]
    return max(H, min(c.cut, kept_by_budget[0])) if kept_by_budget else max(H, c.cut)


# -- the whole plan -----------------------------------------------------------------------


def plan_partition(topic: Topic, partition: Partition, states: list[GroupState], now: int, rows: dict) -> None:
    policy = topic.policy
    H, T = partition.log_start, partition.next_offset
    c = the_cut(topic, partition, states, now)

    wanted = [s.sealed and s.next <= c.cut and not policy.hold for s in partition.segments]
    deleted = [w and within_budget(policy, k) for k, w in enumerate(wanted)]

    for k, segment in enumerate(partition.segments):
        flags = segment_flags(policy, partition, k, now)
        if deleted[k]:
            decision, reason, detail = "delete", delete_reason(policy, segment, flags, H, c), None
        else:
            decision = "keep"
            reason, detail = keep_reason(policy, segment, flags, wanted[k], c, now)
        rows["segments"].append(
            {
                "topic": topic.name,
                "partition": partition.index,
                "base_offset": segment.base,
                "next_offset": segment.next,
                "size_bytes": segment.size,
                "sealed": segment.sealed,
                "decision": decision,
                "reason": reason,
                "eligible_at": eligible_at(policy, segment),
                "detail": detail,
            }
        )

    h_new = new_log_start(policy, partition, c, wanted, deleted)
    rows["partitions"].append(
        {
            "topic": topic.name,
            "partition": partition.index,
            "log_start_offset": H,
            "new_log_start_offset": h_new,
            "next_offset": T,
            "roll": idle_roll(partition, policy, now),
            "barrier": c.barrier,
            "segments_deleted": sum(deleted),
            "bytes_deleted": sum(s.size for s, d in zip(partition.segments, deleted) if d),
        }
    )

    for state in states:
        # after the cut: a group below the new log start is moved up to it
        if not state.expired and state.pos_new < h_new:
            state.new_position, state.moved_skipped = h_new, h_new - state.pos_new
        elif not state.expired:
            state.new_position, state.moved_skipped = state.pos_new, 0
        rows["groups"].append(
            {
                "topic": topic.name,
                "group": state.group.name,
                "kind": state.group.kind,
                "partition": partition.index,
                "position": state.position,
                "new_position": state.new_position,
                "expired": state.expired,
                "ttl_skipped": state.pos_ttl - state.pos_eff,
                "evicted_skipped": state.pos_new - state.pos_ttl,
                "moved_skipped": state.moved_skipped,
                "over_quota": state.over_quota,
                "over_backlog_size": state.over_size,
                "over_backlog_age": state.over_age,
            }
        )


def plan_topic(topic: Topic, now: int, rows: dict) -> None:
    policy = topic.policy
    expired = {g.name: is_group_expired(g, policy, now) for g in topic.groups}
    quota_exceeded = False
    for partition in topic.partitions:
        states = positions_before_cut(topic, partition, expired, now)
        if policy.backlog_policy != "consumer_backlog_eviction":
            quota_exceeded = quota_exceeded or any(s.over_quota for s in states)
        plan_partition(topic, partition, states, now, rows)
    rows["topics"].append(
        {"topic": topic.name, "quota_exceeded": quota_exceeded, "policy_version": topic.policy_version}
    )


def plan(catalog: RefCatalog, now: int | None = None) -> dict[str, list[dict]]:
    """The plan of one cycle at ``now`` (default: ``catalog.now``): table name (as in
    ``tables.PLAN_TABLES``) -> rows, each a dict with exactly that table's columns."""
    now = catalog.now if now is None else now
    rows: dict[str, list[dict]] = {name: [] for name in tables.PLAN_TABLES}
    for topic in catalog.topics:
        plan_topic(topic, now, rows)
    return rows


def plan_tables(catalog: RefCatalog, now: int | None = None) -> dict[str, pa.Table]:
    """:func:`plan` as Arrow tables with the PLAN_* schemas."""
    return {
        name: pa.Table.from_pylist(rows, schema=tables.PLAN_TABLES[name]) for name, rows in plan(catalog, now).items()
    }
