"""What the Overview view shows: one row per topic and the engine's recent cycles,
loaded in one read transaction (off the UI thread)."""

from __future__ import annotations

from dataclasses import dataclass

from console.model.policies import policies
from console.model.quota import QuotaStatus, quota_statuses
from console.model.states import topic_states
from engine.broker import Broker
from engine.catalog.lag import partition_lags
from engine.catalog.queries import topic_totals
from engine.journal.journal import Journal
from engine.journal.rows import Cycle
from engine.journal.state import EngineState
from engine.policy.effective import EffectivePolicy

#: how many recent cycles the engine panel's sparkline covers
CYCLE_HISTORY = 60


@dataclass(frozen=True)
class TopicSummary:
    name: str
    partitions: int
    segments: int
    size_bytes: int
    #: the first timestamp of the oldest segment; None when the topic holds nothing
    oldest_timestamp: int | None
    #: None when the effective policy is invalid (a changed default broke it)
    policy: EffectivePolicy | None
    #: why ``policy`` is None
    policy_error: str | None
    #: where it stands against its backlog quota (console.model.quota)
    quota: QuotaStatus

    def states(self, paused: bool) -> tuple[str, ...]:
        return topic_states(self.policy, self.quota, paused)


@dataclass(frozen=True)
class OverviewData:
    now: int
    topics: tuple[TopicSummary, ...]
    paused: bool
    #: recent cycles, newest first (journal rows: any process's cycles)
    cycles: tuple[Cycle, ...]


def load_overview(broker: Broker) -> OverviewData:
    catalog = broker.catalog
    with catalog.read():
        rows = topic_totals(catalog)
        topic_policies = policies(broker)
        lags = partition_lags(catalog)
        state = EngineState(catalog)
        quota_states = state.quota_states()
        paused = state.is_paused()
        cycles = Journal(catalog).cycles(limit=CYCLE_HISTORY)
    now = broker.clock()
    quotas = quota_statuses({t: p for t, (p, _e) in topic_policies.items()}, lags, quota_states, now)
    topics = []
    for row in rows:
        policy, error = topic_policies.get(row["name"], (None, "no policy"))
        topics.append(
            TopicSummary(
                name=row["name"],
                partitions=row["partitions"],
                segments=row["segments"],
                size_bytes=row["size_bytes"],
                oldest_timestamp=row["oldest_timestamp"],
                policy=policy,
                policy_error=error,
                quota=quotas[row["name"]],
            )
        )
    return OverviewData(now, tuple(topics), paused, tuple(cycles))
