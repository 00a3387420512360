"""What the Overview view shows: one row per topic and the engine's recent cycles,
loaded in one read transaction (off the UI thread)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from console.model.lag import PartitionLag, partition_lags
from engine.broker import Broker
from engine.errors import InvalidPolicy
from engine.journal.journal import Journal
from engine.journal.state import EngineState
from engine.policy.effective import EffectivePolicy, resolve

#: how many recent cycles the engine panel's sparkline covers
CYCLE_HISTORY = 60

_TOPIC_SQL = """
SELECT t.name, t.partitions,
       COUNT(s.base_offset) AS segments,
       COALESCE(SUM(s.size_bytes), 0) AS size_bytes,
       MIN(s.first_timestamp) AS oldest_timestamp
FROM topics t LEFT JOIN segments s ON s.topic = t.name
GROUP BY t.name ORDER BY t.name
"""


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
    #: the largest per-partition backlog of a subscriber group (whole segments)
    backlog_bytes: int | None
    #: the engine's last verdict on the backlog quota
    quota_exceeded: bool

    @property
    def held(self) -> bool:
        return bool(self.policy and self.policy["hold"])

    @property
    def quota_bytes(self) -> int | None:
        value = self.policy["backlog_size"] if self.policy else None
        return value if isinstance(value, int) else None

    def states(self, paused: bool) -> tuple[str, ...]:
        """``ok`` or the conditions that matter to an operator, most urgent first."""
        states = []
        if self.policy is None:
            states.append("invalid policy")
        if self.quota_exceeded:
            states.append("quota exceeded")
        if self.held:
            states.append("held")
        if paused:
            states.append("paused")
        return tuple(states) or ("ok",)


@dataclass(frozen=True)
class OverviewData:
    now: int
    topics: tuple[TopicSummary, ...]
    paused: bool
    #: recent cycles, newest first (journal rows: any process's cycles)
    cycles: tuple[dict, ...]


def policies(broker: Broker) -> dict[str, tuple[EffectivePolicy | None, str | None]]:
    """Every topic's effective policy (or the reason it is invalid), in one query."""
    overrides: dict[str, dict[str, str]] = {t.name: {} for t in broker.catalog.topics()}
    for row in broker.catalog.db.query("SELECT topic, field, value FROM policies"):
        overrides.setdefault(row["topic"], {})[row["field"]] = row["value"]
    result: dict[str, tuple[EffectivePolicy | None, str | None]] = {}
    for topic, texts in overrides.items():
        try:
            result[topic] = (resolve(texts, broker.config.policy_defaults), None)
        except InvalidPolicy as error:
            result[topic] = (None, str(error))
    return result


def subscriber_backlogs(lags: list[PartitionLag]) -> Mapping[str, int]:
    """Per topic, the largest backlog of any subscriber group on any partition."""
    backlog: dict[str, int] = {}
    for lag in lags:
        if lag.kind == "subscriber":
            backlog[lag.topic] = max(backlog.get(lag.topic, 0), lag.lag_bytes)
    return backlog


def load_overview(broker: Broker) -> OverviewData:
    catalog = broker.catalog
    with catalog.read():
        rows = list(catalog.db.query(_TOPIC_SQL))
        topic_policies = policies(broker)
        backlogs = subscriber_backlogs(partition_lags(catalog))
        state = EngineState(catalog)
        quota = state.quota_states()
        paused = state.is_paused()
        cycles = Journal(catalog).cycles(limit=CYCLE_HISTORY)
    topics = []
    for row in rows:
        policy, error = topic_policies.get(row["name"], (None, "no policy"))
        topics.append(
            TopicSummary(
                name=row["name"], partitions=row["partitions"], segments=row["segments"],
                size_bytes=row["size_bytes"], oldest_timestamp=row["oldest_timestamp"],
                policy=policy, policy_error=error,
                backlog_bytes=backlogs.get(row["name"]),
                quota_exceeded=bool(quota.get(row["name"]) and quota[row["name"]].exceeded),
            )
        )
    return OverviewData(broker.clock(), tuple(topics), paused, tuple(cycles))
