"""A capacity forecast's breaches in the words ``ebb forecast`` prints and the console's
Forecast view shows (one wording, so that they never disagree), and the one choice of
which breach comes first: the one the view's summary names first and its chart marks.

Each is said with its instant given by the caller: the CLI's an ISO instant, the
view's hours from now (``+3 h``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.policy.units import describe_duration, describe_size

if TYPE_CHECKING:  # they import pyarrow and numpy, which `ebb` loads only to forecast
    from engine.forecast.result import Breach, Forecast, TopicForecast

#: the limits that are durations; every other limit is a size
_DURATIONS = ("max_time", "backlog_age")


def limit_text(breach: Breach) -> str:
    """``60 KiB``, ``3d``: the limit ``breach`` went over, in its unit."""
    if breach.limit is None:
        return ""
    kind = breach.quota or breach.kind
    return describe_duration(breach.limit) if kind in _DURATIONS else describe_size(breach.limit)


def breach_text(breach: Breach, when: str) -> str:
    """``first breach: max_partition_size (60 KiB) at WHEN on partition 0``; a backlog
    quota's names the quota and the group: ``first breach: backlog_quota backlog_age
    (1h) at WHEN on partition 1 by group billing``. A disk budget's is
    :func:`disk_budget_text`."""
    if breach.kind == "disk_budget":
        return disk_budget_text(breach.limit, when)
    quota = f" {breach.quota}" if breach.quota is not None else ""
    limit = f" ({limit_text(breach)})" if breach.limit is not None else ""
    where = f" on partition {breach.partition}" if breach.partition is not None else ""
    who = f" by group {breach.group}" if breach.group is not None else ""
    return f"first breach: {breach.kind}{quota}{limit} at {when}{where}{who}"


def disk_budget_text(budget: int | None, when: str | None) -> str:
    """``disk budget 50 KiB: exceeded at WHEN``, or ``... not exceeded within the horizon``
    (``when`` None)."""
    outcome = f"exceeded at {when}" if when is not None else "not exceeded within the horizon"
    return f"disk budget {describe_size(budget)}: {outcome}"


def breaches_in_order(topic: TopicForecast, result: Forecast) -> list[Breach]:
    """``topic``'s first breach of each kind and the disk budget's (``result``'s, for
    the topics forecast together), earliest first; at one instant the topic's own
    come before the budget's."""
    budget = [result.disk_breach] if result.disk_breach is not None else []
    # sorted() is stable: a tie keeps the topic's breaches (and their order) first
    return sorted([*topic.breaches, *budget], key=lambda breach: breach.at)


def first_breach(topic: TopicForecast, result: Forecast) -> Breach | None:
    """The earliest of :func:`breaches_in_order`: the one the Forecast view's summary
    names first and its chart marks (the chart marked the topic's own first breach
    while the summary said the disk budget broke earlier)."""
    ordered = breaches_in_order(topic, result)
    return ordered[0] if ordered else None
