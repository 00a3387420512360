"""What the Groups view shows: every consumer group of every topic with its lag, when
``subscription_expiry`` removes it and whether it is over the backlog quota, loaded
in one read transaction (off the UI thread)."""

from __future__ import annotations

from dataclasses import dataclass

from console.model.policies import policies
from console.model.quota import EXCEEDED, Quota, QuotaStatus, quota_statuses
from engine.broker import Broker
from engine.catalog.lag import GroupLag, by_group, partition_lags
from engine.journal.state import EngineState


@dataclass(frozen=True)
class GroupSummary:
    topic: str
    group: str
    kind: str
    partitions: int
    lag_messages: int
    #: the sum over partitions, whole segments (see engine.catalog.lag)
    lag_bytes: int
    #: the age of the oldest unconsumed record on any partition
    lag_ms: int
    #: the latest commit on any partition
    last_commit: int | None
    #: ``last_commit + subscription_expiry``; None: the group never expires (or the
    #: policy is invalid, see ``policy_error``)
    expires_at: int | None
    #: the backlog-quota limits (``size``, ``age``) the group is over on some
    #: partition; None when no quota applies (a reader, or no finite quota)
    over_quota: tuple[str, ...] | None
    policy_error: str | None
    #: the topic is in the engine's quota-exceeded state with no subscriber over any
    #: more (console.model.quota: ``quota exceeded, clearing``), which the header counts
    topic_clearing: bool = False

    @property
    def key(self) -> str:
        """Unique over topics; ``/`` is in no topic name, so it splits back."""
        return f"{self.topic}/{self.group}"


@dataclass(frozen=True)
class GroupsData:
    now: int
    groups: tuple[GroupSummary, ...]


def summarize(
    group: GroupLag, status: QuotaStatus | None, expiry_ms: int | None, policy_error: str | None, now: int
) -> GroupSummary:
    over = None
    quota = Quota(None, None) if status is None else status.quota
    if group.kind == "subscriber" and quota.finite:
        largest = max((p.lag_bytes for p in group.partitions), default=0)
        over = quota.breaches(largest, group.lag_ms(now))
    last_commit = group.last_commit
    expires_at = None if expiry_ms is None or last_commit is None else last_commit + expiry_ms
    return GroupSummary(
        topic=group.topic,
        group=group.group,
        kind=group.kind,
        partitions=len(group.partitions),
        lag_messages=group.lag_messages,
        lag_bytes=group.lag_bytes,
        lag_ms=group.lag_ms(now),
        last_commit=last_commit,
        expires_at=expires_at,
        over_quota=over,
        policy_error=policy_error,
        topic_clearing=status is not None and status.word == EXCEEDED and not status.breaches,
    )


def load_groups(broker: Broker) -> GroupsData:
    catalog = broker.catalog
    now = broker.clock()
    with catalog.read():
        topic_policies = policies(broker)
        lags = partition_lags(catalog, broker.record_ages)
        engine_states = EngineState(catalog).quota_states()
    statuses = quota_statuses({t: p for t, (p, _e) in topic_policies.items()}, lags, engine_states, now)
    summaries = []
    for group in by_group(lags):
        policy, error = topic_policies.get(group.topic, (None, "no policy"))
        expiry = None if policy is None else policy["subscription_expiry"]
        summaries.append(summarize(group, statuses.get(group.topic), expiry, error, now))  # type: ignore[arg-type]
    return GroupsData(now, tuple(summaries))
