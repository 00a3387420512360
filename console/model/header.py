"""What the header on every screen says about the whole data directory: whether
deletion is paused and which topics are over their backlog quota or held. Loaded
with every refresh of any view (off the UI thread), so a badge never waits for a
view switch; computed by the same functions the views use (console.model.quota)."""

from __future__ import annotations

from dataclasses import dataclass

from console.model.policies import policies
from console.model.quota import quota_statuses
from engine.broker import Broker
from engine.catalog.lag import partition_lags
from engine.journal.state import EngineState


@dataclass(frozen=True)
class HeaderFacts:
    paused: bool
    #: topics over quota or in the quota-exceeded state, by name
    over_quota: tuple[str, ...]
    #: topics on hold, by name
    held: tuple[str, ...]


def load_header(broker: Broker) -> HeaderFacts:
    catalog = broker.catalog
    with catalog.read():
        state = EngineState(catalog)
        paused = state.is_paused()
        topic_policies = {topic: policy for topic, (policy, _error) in policies(broker).items()}
        statuses = quota_statuses(
            topic_policies, partition_lags(catalog, broker.record_ages), state.quota_states(), broker.clock()
        )
    return HeaderFacts(
        paused=paused,
        over_quota=tuple(sorted(t for t, s in statuses.items() if s.alarming)),
        held=tuple(sorted(t for t, p in topic_policies.items() if p is not None and p["hold"])),
    )
