"""The capacity forecast as a chart (the Forecast view and the policy editor's
what-if): bytes on disk per hour from now, the past from the journal's samples
before 0, caps and the disk budget as horizontal lines, the first breach as a
vertical one."""

from __future__ import annotations

from console.model.capacity import HOUR
from console.model.history import History
from console.widgets.charts import ChartSpec, Mark, Series, relative
from engine.forecast.result import Forecast, TopicForecast


def _projection(topic: TopicForecast, now: int, label: str, role: str) -> Series:
    return Series(label, relative([p.at for p in topic.points], now, HOUR), tuple(p.bytes for p in topic.points), role)


def first_breach_at(topic: TopicForecast, result: Forecast) -> int | None:
    first = topic.breaches[0] if topic.breaches else result.disk_breach
    return None if first is None else first.at


def forecast_chart(
    result: Forecast, *, past: History | None = None, cap: int | None = None, saved_cap: int | None = None
) -> ChartSpec:
    """The (only) topic of ``result``; with a what-if (``result.saved``), the saved
    policy's projection beside the edited one's, and each policy's size cap when they
    differ (``cap`` the edited one's, ``saved_cap`` the saved one's)."""
    (topic,) = result.topics
    series: list[Series] = []
    marks: list[Mark] = []
    if past is not None and past.topics:
        (mine,) = past.topics
        series.append(Series("past", relative(mine.times, result.now, HOUR), mine.bytes, "secondary"))
        marks.append(Mark(0, "foreground", vertical=True))
    if result.saved:
        series.append(_projection(result.saved[0], result.now, "saved policy", "secondary"))
        series.append(_projection(topic, result.now, "edited policy", "primary"))
    else:
        series.append(_projection(topic, result.now, "projected", "primary"))
    if result.saved and saved_cap != cap:
        if saved_cap is not None:
            marks.append(Mark(saved_cap, "secondary", label="saved cap"))
        if cap is not None:
            marks.append(Mark(cap, "error", label="edited cap"))
    elif cap is not None:
        marks.append(Mark(cap, "error", label="cap"))
    if result.disk_budget is not None:
        marks.append(Mark(result.disk_budget, "warning", label="disk budget"))
    breach = first_breach_at(topic, result)
    if breach is not None:
        marks.append(Mark((breach - result.now) / HOUR, "error", vertical=True))
    return ChartSpec(f"{topic.topic}: bytes on disk", "hours (0 = now)", tuple(series), tuple(marks))
