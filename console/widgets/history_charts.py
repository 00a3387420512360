"""The history charts of the engine panel and the Topic view, as chart specs built
from :class:`~console.model.history.History` (in the worker, with the view's rows)."""

from __future__ import annotations

from collections.abc import Sequence

from console.model.history import History
from console.widgets.charts import ChartSpec, Series, relative, time_unit


def _x_label(history: History) -> tuple[str, int]:
    unit, ms = time_unit(history.span_ms)
    return f"{unit} (0 = now)", ms


def disk_chart(history: History, roles: Sequence[str], title: str = "on disk per topic") -> ChartSpec:
    """Bytes on disk of the largest topics over time, one line each in a colour of
    ``roles`` (as many topics as roles)."""
    label, unit_ms = _x_label(history)
    shown = history.topics[: len(roles)]
    if len(history.topics) > len(shown):
        title = f"{title}, largest {len(shown)} of {len(history.topics)}"
    series = tuple(
        Series(h.topic, relative(h.times, history.now, unit_ms), h.bytes, role) for h, role in zip(shown, roles)
    )
    return ChartSpec(title, label, series, empty="no samples yet: each prune cycle adds one")


def freed_chart(history: History, title: str = "freed per cycle") -> ChartSpec:
    """Bytes freed by each finished cycle, as bars at the cycle's start."""
    label, unit_ms = _x_label(history)
    starts = [t for t, _ in history.freed]
    bars = Series("freed", relative(starts, history.now, unit_ms), tuple(b for _, b in history.freed), "accent", True)
    return ChartSpec(title, label, (bars,) if starts else (), empty="no finished cycle yet")


def topic_chart(history: History) -> ChartSpec:
    """One topic: its bytes on disk (a line) and what each cycle freed of it (bars)."""
    label, unit_ms = _x_label(history)
    disk = tuple(Series("on disk", relative(h.times, history.now, unit_ms), h.bytes, "primary") for h in history.topics)
    freed = freed_chart(history).series if any(b for _, b in history.freed) else ()
    return ChartSpec("on disk, freed/cycle", label, disk + freed, empty="no samples yet: each prune cycle adds one")
