"""What the Overview view shows: one row per topic and the engine's recent cycles,
loaded in one read transaction (off the UI thread).

The backlog of every group (``partition_lags``) is most of a load's cost on a big
catalog (two thirds of it at a million segments: it reads every unconsumed segment),
and only the backlog gauge and the quota state need it. So a load can hand over the
topics first, their backlog pending, and finish them in the same transaction: the
view's first frame has rows well before the lags are read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

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
    #: where it stands against its backlog quota (console.model.quota); None while
    #: the backlog is still being read
    quota: QuotaStatus | None

    def states(self) -> tuple[str, ...] | None:
        """The state words; None while the backlog (which decides the quota's) is pending."""
        return None if self.quota is None else topic_states(self.policy, self.quota)


@dataclass(frozen=True)
class OverviewData:
    now: int
    topics: tuple[TopicSummary, ...]
    paused: bool
    #: recent cycles, newest first (journal rows: any process's cycles)
    cycles: tuple[Cycle, ...]

    @property
    def complete(self) -> bool:
        """Every topic's backlog is in (see the module docstring)."""
        return all(t.quota is not None for t in self.topics)


def load_overview(broker: Broker, on_topics: Callable[[OverviewData], None] | None = None) -> OverviewData:
    """The Overview's data; ``on_topics``, if given, receives it first with every
    backlog pending (in the load's thread, before the lags are read)."""
    catalog = broker.catalog
    with catalog.read():
        rows = topic_totals(catalog)
        topic_policies = policies(broker)
        state = EngineState(catalog)
        quota_states = state.quota_states()
        paused = state.is_paused()
        cycles = Journal(catalog).cycles(limit=CYCLE_HISTORY)
        now = broker.clock()
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
                    quota=None,
                )
            )
        pending = OverviewData(now, tuple(topics), paused, tuple(cycles))
        if on_topics is not None:
            on_topics(pending)
        lags = partition_lags(catalog, broker.record_ages)
    quotas = quota_statuses({t: p for t, (p, _e) in topic_policies.items()}, lags, quota_states, now)
    return replace(pending, topics=tuple(replace(t, quota=quotas[t.name]) for t in pending.topics))
