"""The console's capacity forecasts (the Forecast view, the policy editor's what-if):
``ebb forecast``'s defaults, a week ahead hourly with rates observed over the last
hour, and the byte limits their charts draw as lines."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from engine.broker import Broker
from engine.config import Config
from engine.forecast.forecast import Request, instants
from engine.policy.effective import EffectivePolicy

HOUR = 3_600_000
HORIZON_MS, STEP_MS, WINDOW_MS = 7 * 24 * HOUR, HOUR, HOUR


def week_ahead(now: int, config: Config) -> Request:
    """With the disk budget and prune interval of ``config``, as ``ebb forecast`` reads them."""
    return Request(
        instants(now, HORIZON_MS, STEP_MS),
        WINDOW_MS,
        disk_budget=config.disk_budget,
        prune_interval_ms=config.prune_interval_ms,
    )


def size_cap(policy: EffectivePolicy, partitions: int) -> int | None:
    """The most bytes the topic's size cap lets it hold: ``max_partition_size`` on each
    partition; None when the cap is infinite."""
    cap = policy.limit("max_partition_size")
    return None if cap is None else cap * partitions


@dataclass(frozen=True)
class WhatIfCaps:
    """The size caps a what-if's chart draws: with the edited and with the saved policy."""

    edited: int | None
    saved: int | None


def what_if_caps(broker: Broker, topic: str, overrides: Mapping[str, str]) -> WhatIfCaps:
    """``topic``'s size cap with ``overrides`` (the edited policy) and as saved."""
    with broker.catalog.read():
        partitions = len(broker.catalog.partitions(topic))
        saved = broker.policy(topic)
    return WhatIfCaps(size_cap(broker.policy(topic, overrides), partitions), size_cap(saved, partitions))
