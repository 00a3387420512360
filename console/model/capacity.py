"""The console's capacity forecasts (the Forecast view, the policy editor's what-if):
``ebb forecast``'s defaults, a week ahead hourly with rates observed over the last
hour (the Forecast view can widen the window and assume groups stalled, as
``--window`` and ``--stalled`` do), and the byte limits their charts draw as lines."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from engine.broker import Broker
from engine.config import Config
from engine.forecast.defaults import HORIZON_MS, HOUR_MS, STEP_MS, WINDOW_MS
from engine.forecast.forecast import Request, instants
from engine.policy.effective import EffectivePolicy

HOUR = HOUR_MS
#: the rate windows the Forecast view steps through (``w``), ``ebb forecast``'s default first
WINDOWS = (WINDOW_MS, 6 * HOUR, 24 * HOUR, 7 * 24 * HOUR)


def week_ahead(now: int, config: Config, window_ms: int = WINDOW_MS, stalled: frozenset[str] = frozenset()) -> Request:
    """With the disk budget and prune interval of ``config``, as ``ebb forecast`` reads
    them, and its ``--window`` and ``--stalled``."""
    return Request(
        instants(now, HORIZON_MS, STEP_MS),
        window_ms,
        stalled=stalled,
        disk_budget=config.disk_budget,
        prune_interval_ms=config.prune_interval_ms,
    )


def forecast_scope(topic: str, config: Config) -> list[str] | None:
    """The topics a console forecast of ``topic`` plans: every one (None) where a disk
    budget is set, which is over all of them (the breach a forecast of ``topic``
    alone finds is the one a disk holding only that topic would see, later than the
    one ``ebb forecast`` finds); else ``topic`` alone."""
    return None if config.disk_budget is not None else [topic]


def next_window(window_ms: int) -> int:
    """The window of :data:`WINDOWS` after ``window_ms`` (after the last, the first)."""
    later = [w for w in WINDOWS if w > window_ms]
    return later[0] if later else WINDOWS[0]


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
