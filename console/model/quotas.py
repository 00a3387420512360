"""What the Quotas view shows: every topic's backlog quota (SPEC §4) against the
slowest subscriber group, loaded in one read transaction (off the UI thread).

Figures are the console's estimate from the catalog, counted as the engine counts
them (docs/RETENTION.md, "Backlog"): per partition, in whole segments, subscribers
only (readers never hold a quota). The age of the oldest unconsumed data is at
segment precision (see :mod:`console.model.lag`). The engine's own verdict, set by
its last cycle, is :attr:`QuotaSummary.state`; the two can differ until the next
cycle runs.

Topics without a quota (``backlog_size`` and ``backlog_age`` both infinite) are
listed too, after the topics with one, so that a topic missing from the list is
never mistaken for one whose quota is fine.
"""

from __future__ import annotations

from dataclasses import dataclass

from console.model.lag import PartitionLag, partition_lags
from console.model.overview import policies, subscriber_backlogs
from engine.broker import Broker
from engine.journal.state import NOT_EXCEEDED, EngineState, QuotaState
from engine.policy.effective import EffectivePolicy


@dataclass(frozen=True)
class Quota:
    """A topic's backlog quota; a None limit is infinite."""

    size_bytes: int | None
    age_ms: int | None

    @classmethod
    def of(cls, policy: EffectivePolicy | None) -> Quota:
        if policy is None:
            return cls(None, None)
        return cls(policy["backlog_size"], policy["backlog_age"])  # type: ignore[arg-type]

    @property
    def finite(self) -> bool:
        return self.size_bytes is not None or self.age_ms is not None

    def breaches(self, backlog_bytes: int, backlog_ms: int) -> tuple[str, ...]:
        """Which limits (``size``, ``age``) a subscriber's largest per-partition
        backlog exceeds; strictly, as the engine compares."""
        over = []
        if self.size_bytes is not None and backlog_bytes > self.size_bytes:
            over.append("size")
        if self.age_ms is not None and backlog_ms > self.age_ms:
            over.append("age")
        return tuple(over)


@dataclass(frozen=True)
class QuotaSummary:
    topic: str
    #: None when the effective policy is invalid
    policy: EffectivePolicy | None
    policy_error: str | None
    quota: Quota
    #: the largest backlog of any subscriber on any partition; None: no subscriber
    backlog_bytes: int | None
    #: the age of the oldest unconsumed data of any subscriber; None: no subscriber
    oldest_ms: int | None
    #: the subscriber with the largest per-partition backlog (ties: the older
    #: backlog, then the first name); None when every subscriber is caught up
    furthest_behind: str | None
    #: the engine's verdict from its last cycle
    state: QuotaState

    @property
    def backlog_policy(self) -> str | None:
        return None if self.policy is None else str(self.policy["backlog_policy"])

    def breaches(self) -> tuple[str, ...]:
        """The limits the slowest subscriber is over, as the console estimates."""
        return self.quota.breaches(self.backlog_bytes or 0, self.oldest_ms or 0)


@dataclass(frozen=True)
class QuotasData:
    now: int
    #: topics with a quota first, then the others; by name within each
    topics: tuple[QuotaSummary, ...]


def _furthest_behind(lags: list[PartitionLag], now: int) -> str | None:
    behind = [lag for lag in lags if lag.lag_messages > 0]
    if not behind:
        return None
    worst = min(behind, key=lambda lag: (-lag.lag_bytes, -lag.lag_ms(now), lag.group))
    return worst.group


def load_quotas(broker: Broker) -> QuotasData:
    catalog = broker.catalog
    now = broker.clock()
    with catalog.read():
        topic_policies = policies(broker)
        lags = [lag for lag in partition_lags(catalog) if lag.kind == "subscriber"]
        states = EngineState(catalog).quota_states()
    backlogs = subscriber_backlogs(lags)
    per_topic: dict[str, list[PartitionLag]] = {}
    for lag in lags:
        per_topic.setdefault(lag.topic, []).append(lag)
    summaries = []
    for topic, (policy, error) in topic_policies.items():
        topic_lags = per_topic.get(topic, [])
        summaries.append(
            QuotaSummary(
                topic=topic, policy=policy, policy_error=error, quota=Quota.of(policy),
                backlog_bytes=backlogs.get(topic),
                oldest_ms=max((lag.lag_ms(now) for lag in topic_lags), default=None),
                furthest_behind=_furthest_behind(topic_lags, now),
                state=states.get(topic, NOT_EXCEEDED),
            )
        )
    summaries.sort(key=lambda s: (not s.quota.finite, s.topic))
    return QuotasData(now, tuple(summaries))
