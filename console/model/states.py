"""A topic's state words (``ok``, ``over quota``, ``held``...): decided here once, shown
by the Overview's State column and the Topic view's header line alike.

A pause stops deletion for every topic at once, so it is not a topic's state: the
header's DELETION PAUSED badge says it on every screen (repeated on every row it cut
the State column at 120 columns)."""

from __future__ import annotations

from console.model.quota import QuotaStatus
from engine.policy.effective import EffectivePolicy


def topic_states(policy: EffectivePolicy | None, quota: QuotaStatus) -> tuple[str, ...]:
    """``ok`` or the conditions that matter to an operator, most urgent first."""
    states = []
    if policy is None:
        states.append("invalid policy")
    if quota.alarming:
        states.append(quota.word)
    if policy is not None and policy["hold"]:
        states.append("held")
    return tuple(states) or ("ok",)
