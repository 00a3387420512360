"""What the Topic view shows: one topic's partitions, segments and groups, loaded in
one read transaction (off the UI thread), joined with the latest plan's decisions
when there is a plan that covers the topic.

The plan is matched to the catalog by segment key ``(partition, base_offset)``: a
segment appended after the plan has no decision yet, and one the plan decided but
that has since gone is simply no longer listed.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import pyarrow.compute as pc

from console.model.quota import QuotaStatus, quota_statuses
from console.model.states import topic_states
from engine.broker import Broker
from engine.catalog.lag import GroupLag, by_group, partition_lags
from engine.catalog.queries import topic_segments
from engine.errors import InvalidPolicy
from engine.journal.journal import Journal
from engine.journal.state import EngineState
from engine.policy.effective import EffectivePolicy
from engine.prune.planner import Plan

#: the keep reason that names the subscriber whose position stops deletion
KEEP_BARRIER = "KEEP_BARRIER"


@dataclass(frozen=True)
class PartitionState:
    partition: int
    log_start_offset: int
    next_offset: int
    #: bytes of every segment file of the partition (what the size cap counts)
    size_bytes: int
    segments: int

    @property
    def messages(self) -> int:
        return self.next_offset - self.log_start_offset


@dataclass(frozen=True)
class Decision:
    """One row of the plan's ``segments`` table (docs/RETENTION.md)."""

    decision: str  # delete | keep
    reason: str
    #: when the time rules alone make the segment eligible; None: never (or active)
    eligible_at: int | None
    #: ``group G at P`` for KEEP_BARRIER, else None
    detail: str | None

    @property
    def barrier_group(self) -> str | None:
        """The group a KEEP_BARRIER decision names (names hold no spaces)."""
        if self.reason != KEEP_BARRIER or not self.detail:
            return None
        return self.detail.split()[1]


@dataclass(frozen=True)
class SegmentState:
    partition: int
    base_offset: int
    next_offset: int
    size_bytes: int
    #: None for an empty active segment
    first_timestamp: int | None
    max_timestamp: int | None
    sealed: bool
    #: the latest plan's word on it; None without a plan or for a newer segment
    decision: Decision | None

    def age_ms(self, now: int) -> int | None:
        """Age of the newest record: what the time rules compare."""
        return None if self.max_timestamp is None else now - self.max_timestamp


@dataclass(frozen=True)
class GroupOutcome:
    """What the plan does to one group, over all its partitions.

    Only what it does: whether the group is over its backlog quota is a state, which
    the view shows live from console.model.quota; the plan's verdict of some seconds
    ago beside it would contradict the live one as soon as a consumer commits or the
    cycle evicts (walk finding 16)."""

    expired: bool
    ttl_skipped: int
    evicted_skipped: int
    moved_skipped: int

    def describe(self) -> str:
        """``expires``, ``ttl skips 12``, ``evicts 40``, ``moves up 5`` (the counts are
        messages the group skips), or ``unchanged``."""
        if self.expired:
            return "expires"
        parts = [
            f"{label} {n:,}"
            for label, n in (
                ("ttl skips", self.ttl_skipped),
                ("evicts", self.evicted_skipped),
                ("moves up", self.moved_skipped),
            )
            if n
        ]
        return ", ".join(parts) or "unchanged"


@dataclass(frozen=True)
class GroupState:
    lag: GroupLag
    #: bytes the plan keeps only because of this group (KEEP_BARRIER naming it);
    #: 0 for groups that never hold data back; None when unknown (no plan)
    holds_back_bytes: int | None
    #: None without a plan (or for a group created after it)
    outcome: GroupOutcome | None

    @property
    def name(self) -> str:
        return self.lag.group


@dataclass(frozen=True)
class TopicData:
    name: str
    now: int
    #: None when the effective policy is invalid (a changed default broke it)
    policy: EffectivePolicy | None
    policy_error: str | None
    partitions: tuple[PartitionState, ...]
    segments: tuple[SegmentState, ...]
    groups: tuple[GroupState, ...]
    #: the instant of the plan the decisions come from; None: no plan
    plan_now: int | None
    #: why that plan left the topic out (its effective policy was invalid then)
    plan_rejected: str | None
    #: where it stands against its backlog quota (console.model.quota)
    quota: QuotaStatus
    #: whether deletion is paused
    paused: bool
    #: why the plan no longer says what the engine would do (a cycle planned since,
    #: the topic's policy changed since); None while it is current or without a plan
    plan_stale: str | None = None

    @property
    def states(self) -> tuple[str, ...]:
        return topic_states(self.policy, self.quota)


def _plan_rows(plan: Plan, table: str, topic: str) -> list[dict]:
    rows = plan.tables[table]
    return rows.filter(pc.equal(rows["topic"], topic)).to_pylist()


def plan_decisions(plan: Plan, topic: str) -> dict[tuple[int, int], Decision]:
    """``topic``'s segment decisions keyed by ``(partition, base_offset)``."""
    return {
        (r["partition"], r["base_offset"]): Decision(r["decision"], r["reason"], r["eligible_at"], r["detail"])
        for r in _plan_rows(plan, "segments", topic)
    }


def plan_outcomes(plan: Plan, topic: str) -> dict[str, GroupOutcome]:
    """``topic``'s group outcomes, the per-partition rows of the plan summed up."""
    per_group: dict[str, list[dict]] = defaultdict(list)
    for row in _plan_rows(plan, "groups", topic):
        per_group[row["group"]].append(row)
    return {
        name: GroupOutcome(
            expired=any(r["expired"] for r in rows),
            ttl_skipped=sum(r["ttl_skipped"] or 0 for r in rows),
            evicted_skipped=sum(r["evicted_skipped"] or 0 for r in rows),
            moved_skipped=sum(r["moved_skipped"] or 0 for r in rows),
        )
        for name, rows in per_group.items()
    }


def _held_back(segments: tuple[SegmentState, ...]) -> dict[str, int]:
    held: dict[str, int] = defaultdict(int)
    for segment in segments:
        if segment.decision is not None and (group := segment.decision.barrier_group) is not None:
            held[group] += segment.size_bytes
    return held


def plan_staleness(journal: Journal, topic: str, plan_now: int) -> str | None:
    """Why a plan made at ``plan_now`` is out of date for ``topic``, or None."""
    changes = journal.policy_changes(topic=topic, limit=1)
    if changes and changes[0]["time"] > plan_now:
        return "the policy changed since"
    cycles = journal.cycles(limit=1)
    if cycles and cycles[0].now > plan_now:
        return f"cycle {cycles[0].id} planned since"
    return None


def load_topic(broker: Broker, topic: str, plan: Plan | None) -> TopicData:
    """``topic`` as the catalog has it now, with ``plan``'s decisions (a plan that
    covers the topic, or None). Raises NotFound when the topic is gone."""
    catalog = broker.catalog
    with catalog.read():
        catalog.topic(topic)
        partition_rows = catalog.partitions(topic)
        segment_rows = topic_segments(catalog, topic)
        lags = partition_lags(catalog, broker.record_ages, topic)
        try:
            policy, policy_error = broker.policy(topic), None
        except InvalidPolicy as error:
            policy, policy_error = None, str(error)
        state = EngineState(catalog)
        paused = state.is_paused()
        quota = quota_statuses({topic: policy}, lags, {topic: state.quota_state(topic)}, broker.clock())[topic]
        stale = None if plan is None else plan_staleness(Journal(catalog), topic, plan.now)
    decisions = plan_decisions(plan, topic) if plan is not None else {}
    segments = tuple(
        SegmentState(
            partition=r["partition"],
            base_offset=r["base_offset"],
            next_offset=r["next_offset"],
            size_bytes=r["size_bytes"],
            first_timestamp=r["first_timestamp"],
            max_timestamp=r["max_timestamp"],
            sealed=bool(r["sealed"]),
            decision=decisions.get((r["partition"], r["base_offset"])),
        )
        for r in segment_rows
    )
    sizes: dict[int, int] = defaultdict(int)
    counts: dict[int, int] = defaultdict(int)
    for segment in segments:
        sizes[segment.partition] += segment.size_bytes
        counts[segment.partition] += 1
    partitions = tuple(
        PartitionState(p.partition, p.log_start_offset, p.next_offset, sizes[p.partition], counts[p.partition])
        for p in partition_rows
    )
    protects = policy is not None and policy["consumption"] == "protect"
    outcomes = plan_outcomes(plan, topic) if plan is not None else {}
    held = _held_back(segments)
    groups = []
    for lag in by_group(lags):
        if not (protects and lag.kind == "subscriber"):
            holds_back: int | None = 0  # readers, and subscribers under ignore, never hold data
        else:
            holds_back = held.get(lag.group, 0) if plan is not None else None
        groups.append(GroupState(lag, holds_back, outcomes.get(lag.group)))
    return TopicData(
        name=topic,
        now=broker.clock(),
        policy=policy,
        policy_error=policy_error,
        partitions=partitions,
        segments=segments,
        groups=tuple(groups),
        plan_now=plan.now if plan is not None else None,
        plan_rejected=plan.rejected.get(topic) if plan is not None else None,
        quota=quota,
        paused=paused,
        plan_stale=stale,
    )
