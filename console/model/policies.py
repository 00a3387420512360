"""Every topic's effective policy, read once per refresh for the views that list
topics (Overview, Groups, Quotas)."""

from __future__ import annotations

from engine.broker import Broker
from engine.catalog.queries import all_overrides
from engine.errors import InvalidPolicy
from engine.policy.effective import EffectivePolicy, resolve


def policies(broker: Broker) -> dict[str, tuple[EffectivePolicy | None, str | None]]:
    """Every topic's effective policy (or the reason it is invalid), in one query."""
    result: dict[str, tuple[EffectivePolicy | None, str | None]] = {}
    for topic, texts in all_overrides(broker.catalog).items():
        try:
            result[topic] = (resolve(texts, broker.config.policy_defaults), None)
        except InvalidPolicy as error:
            result[topic] = (None, str(error))
    return result
