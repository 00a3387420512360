"""Where a topic stands against its backlog quota: the one place the console decides
it, so that the Overview, Quotas, Groups and Topic views and the header never disagree.

Two inputs meet here. The *estimate* is the slowest subscriber's backlog from the
catalog, counted as the engine counts it (docs/RETENTION.md, "Backlog": per
partition, whole segments, strictly over a limit). The *engine's state* is its last
cycle's verdict (SPEC §4: with a producer policy a topic over quota enters the
quota-exceeded state and appends are held or fail). They differ only between cycles,
and :attr:`QuotaStatus.word` says which case it is rather than showing either alone:

- ``no quota``: both limits infinite;
- ``ok``: under every limit and not in the exceeded state;
- ``over quota``: the estimate is over; the next cycle evicts (eviction policy) or
  enters the exceeded state (producer policies);
- ``quota exceeded``: the engine holds the topic in the exceeded state (appends held
  or failing) — also while the estimate is back under, until the next cycle clears it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from console import format
from engine.catalog.lag import PartitionLag
from engine.journal.state import NOT_EXCEEDED, QuotaState
from engine.policy.effective import EffectivePolicy

NO_QUOTA, OK, OVER, EXCEEDED = "no quota", "ok", "over quota", "quota exceeded"


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
        """Which limits (``size``, ``age``) a backlog exceeds; strictly, as the engine
        compares."""
        over = []
        if self.size_bytes is not None and backlog_bytes > self.size_bytes:
            over.append("size")
        if self.age_ms is not None and backlog_ms > self.age_ms:
            over.append("age")
        return tuple(over)

    def fraction(self, backlog_bytes: int, backlog_ms: int) -> float | None:
        """The larger of backlog/size quota and age/age quota; None without a quota."""
        parts = [
            part / limit if limit else float(part > 0)
            for part, limit in ((backlog_bytes, self.size_bytes), (backlog_ms, self.age_ms))
            if limit is not None
        ]
        return max(parts) if parts else None


@dataclass(frozen=True)
class QuotaStatus:
    """See the module docstring."""

    quota: Quota
    #: None when no quota applies (or the policy is invalid)
    backlog_policy: str | None
    #: the largest backlog of any subscriber on any partition; None: no subscriber
    backlog_bytes: int | None
    #: the age of the oldest unconsumed data of any subscriber; None: no subscriber
    oldest_ms: int | None
    #: the engine's verdict from its last cycle
    engine: QuotaState

    @property
    def breaches(self) -> tuple[str, ...]:
        return self.quota.breaches(self.backlog_bytes or 0, self.oldest_ms or 0)

    @property
    def fraction(self) -> float | None:
        return self.quota.fraction(self.backlog_bytes or 0, self.oldest_ms or 0)

    @property
    def word(self) -> str:
        if self.engine.exceeded:
            return EXCEEDED
        if not self.quota.finite:
            return NO_QUOTA
        return OVER if self.breaches else OK

    @property
    def alarming(self) -> bool:
        """Over quota or exceeded: what the header counts."""
        return self.word in (OVER, EXCEEDED)

    def label(self, now: int) -> str:
        """The word with what an operator asks next: which limit, since when; what the
        next cycle then does follows from the backlog policy shown beside it."""
        word = self.word
        if word == EXCEEDED:
            since = "" if self.engine.since is None else f" {format.since(now, self.engine.since)}"
            return f"{word}{since}" + ("" if self.breaches else ", clearing")
        if word == OVER:
            return f"{word} ({'+'.join(self.breaches)})"
        return word


def quota_statuses(
    policies: Mapping[str, EffectivePolicy | None],
    lags: Iterable[PartitionLag],
    engine_states: Mapping[str, QuotaState],
    now: int,
) -> dict[str, QuotaStatus]:
    """Every topic of ``policies``: its status from its subscribers' ``lags`` and the
    engine's states (as of one read transaction)."""
    backlog: dict[str, int] = {}
    oldest: dict[str, int] = {}
    for lag in lags:
        if lag.kind == "subscriber":
            backlog[lag.topic] = max(backlog.get(lag.topic, 0), lag.lag_bytes)
            oldest[lag.topic] = max(oldest.get(lag.topic, 0), lag.lag_ms(now))
    statuses = {}
    for topic, policy in policies.items():
        quota = Quota.of(policy)
        statuses[topic] = QuotaStatus(
            quota=quota,
            backlog_policy=str(policy["backlog_policy"]) if policy is not None and quota.finite else None,
            backlog_bytes=backlog.get(topic),
            oldest_ms=oldest.get(topic),
            engine=engine_states.get(topic, NOT_EXCEEDED),
        )
    return statuses
