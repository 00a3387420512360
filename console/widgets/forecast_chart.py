"""The capacity forecast as a chart (the Forecast view and the policy editor's
what-if): bytes on disk per hour from now, the past from the journal's samples
before 0, caps and the disk budget as horizontal lines, the first breach as a
vertical one.

The size cap is per partition, the curve the topic's: the line drawn is the caps of
all its partitions summed, and says so in the legend. A partition that fills faster
than the others breaches its own cap while the topic's curve is far under that line:
when that is the breach marked, the Forecast view also draws that partition's curve
and its own cap, so that the marker sits where a curve reaches a line. Only then: at
120x40 a row of the chart spans a twentieth of its bytes, and a line within a row of
a curve is hidden under it (a 50 KiB disk budget under a partition held at 60 KiB).
"""

from __future__ import annotations

from console import format
from console.model.capacity import HOUR
from console.model.forecast_breaches import first_breach
from console.model.history import History
from console.widgets.charts import ChartSpec, Mark, Series, relative
from engine.forecast.result import Breach, Forecast, TopicForecast

#: the colour of the breaching partition's curve; its cap is red as every cap is (the
#: theme's accent is near its warning, the disk budget's, in every theme: two lines
#: in them would not be told apart, a dotted curve and a solid line are)
PARTITION_ROLE = "accent"


def _projection(topic: TopicForecast, now: int, label: str, role: str) -> Series:
    return Series(label, relative([p.at for p in topic.points], now, HOUR), tuple(p.bytes for p in topic.points), role)


def _cap_label(name: str, cap: int, partitions: int) -> str:
    """``cap`` for one partition; ``cap 60.0 KiB x 4 partitions =`` (the legend adds
    the sum) for several, so that the line is not read as one partition's cap."""
    return name if partitions <= 1 else f"{name} {format.size(cap // partitions)} x {partitions} partitions ="


def _breaching_partition(topic: TopicForecast, breach: Breach | None, now: int) -> tuple[Series, Mark] | None:
    """The curve of the partition whose size cap ``breach`` is, and that cap, as a
    line; None for another breach."""
    if breach is None or breach.kind != "max_partition_size" or breach.partition is None or breach.limit is None:
        return None
    sizes = tuple(
        next((part.bytes for part in p.partitions if part.partition == breach.partition), 0) for p in topic.points
    )
    label = f"partition {breach.partition}"
    curve = Series(label, relative([p.at for p in topic.points], now, HOUR), sizes, PARTITION_ROLE)
    return curve, Mark(breach.limit, "error", label=f"{label}'s cap")


def forecast_chart(
    result: Forecast,
    shown: str,
    *,
    past: History | None = None,
    cap: int | None = None,
    saved_cap: int | None = None,
    partitions: int = 1,
) -> ChartSpec:
    """The topic ``shown`` of ``result``; with a what-if (``result.saved``), the saved
    policy's projection beside the edited one's, and each policy's size cap when they
    differ (``cap`` the edited one's, ``saved_cap`` the saved one's). ``partitions``:
    how many partitions' caps ``cap`` sums (console.model.capacity.size_cap), which
    the legend says when several. Where ``result`` holds other topics too (a disk
    budget is over all of them: console.model.capacity.forecast_scope), their bytes
    together are drawn too: the curve the budget's line is crossed by."""
    topic = result.of(shown)
    series: list[Series] = []
    marks: list[Mark] = []
    if past is not None and past.topics:
        (mine,) = past.topics
        series.append(Series("past", relative(mine.times, result.now, HOUR), mine.bytes, "secondary"))
        marks.append(Mark(0, "foreground", vertical=True))
    if (saved := result.saved_of(shown)) is not None:
        series.append(_projection(saved, result.now, "saved policy", "secondary"))
        series.append(_projection(topic, result.now, "edited policy", "primary"))
    else:
        series.append(_projection(topic, result.now, "projected", "primary"))
    if result.saved and saved_cap != cap:
        if saved_cap is not None:
            marks.append(Mark(saved_cap, "secondary", label="saved cap"))
        if cap is not None:
            marks.append(Mark(cap, "error", label="edited cap"))
    elif cap is not None:
        marks.append(Mark(cap, "error", label=_cap_label("cap", cap, partitions)))
    # The first breach the summary names, the disk budget included (one choice for both).
    breach = first_breach(topic, result)
    # The what-if's pane is narrow and compares two policies' topics: the partition's
    # curve is the Forecast view's.
    partition = None if result.saved or partitions <= 1 else _breaching_partition(topic, breach, result.now)
    if partition is not None:
        curve, its_cap = partition
        series.append(curve)
        marks.append(its_cap)
    if result.disk_budget is not None:
        marks.append(Mark(result.disk_budget, "warning", label="disk budget"))
    if len(result.topics) > 1:
        together = Series(
            f"all {len(result.topics)} topics", relative(result.instants, result.now, HOUR),
            tuple(result.bytes_on_disk()), "warning",
        )  # fmt: skip
        series.append(together)
    if breach is not None:
        marks.append(Mark((breach.at - result.now) / HOUR, "error", vertical=True))
    return ChartSpec(f"{topic.topic}: bytes on disk", "hours (0 = now)", tuple(series), tuple(marks))
