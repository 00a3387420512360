"""What the Quotas view shows: every topic's backlog quota (SPEC §4) against the
slowest subscriber group, loaded in one read transaction (off the UI thread).

Where each topic stands is :class:`console.model.quota.QuotaStatus`, the same value
the Overview and the header show. The age of the oldest unconsumed data is that of
the record at the subscriber's position, as the ``backlog_age`` quota reads it (see
:mod:`engine.catalog.lag`).

Topics without a quota (``backlog_size`` and ``backlog_age`` both infinite) are
listed too, after the topics with one, so that a topic missing from the list is
never mistaken for one whose quota is fine.
"""

from __future__ import annotations

from dataclasses import dataclass

from console.model.policies import policies
from console.model.quota import QuotaStatus, quota_statuses
from engine.broker import Broker
from engine.catalog.lag import PartitionLag, partition_lags
from engine.journal.state import EngineState
from engine.policy.effective import EffectivePolicy


@dataclass(frozen=True)
class QuotaSummary:
    topic: str
    #: None when the effective policy is invalid
    policy: EffectivePolicy | None
    policy_error: str | None
    status: QuotaStatus
    #: the subscriber with the largest per-partition backlog (ties: the older
    #: backlog, then the first name); None when every subscriber is caught up
    furthest_behind: str | None


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
        lags = [lag for lag in partition_lags(catalog, broker.record_ages) if lag.kind == "subscriber"]
        engine_states = EngineState(catalog).quota_states()
    statuses = quota_statuses({t: p for t, (p, _e) in topic_policies.items()}, lags, engine_states, now)
    per_topic: dict[str, list[PartitionLag]] = {}
    for lag in lags:
        per_topic.setdefault(lag.topic, []).append(lag)
    summaries = [
        QuotaSummary(
            topic=topic,
            policy=policy,
            policy_error=error,
            status=statuses[topic],
            furthest_behind=_furthest_behind(per_topic.get(topic, []), now),
        )
        for topic, (policy, error) in topic_policies.items()
    ]
    summaries.sort(key=lambda s: (not s.status.quota.finite, s.topic))
    return QuotasData(now, tuple(summaries))
