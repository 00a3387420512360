"""What a forecast assumed, shown with its chart (the Forecast view, the policy
editor's what-if): the window its ingest rates were observed over, each partition's
rate, and how each group is assumed to read each partition, in ``ebb forecast``'s
words (console/model/forecast_assumptions.py), so that the two never disagree."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table

from console.model.forecast_assumptions import ingest, pace, window
from engine.forecast.result import TopicForecast


def _table(*headers: str) -> Table:
    """Headers in bold, no box: the first columns never wrap, the last (the words) does."""
    table = Table(box=None, padding=(0, 2, 0, 0), show_edge=False, header_style="bold")
    *names, words = headers
    for header in names:
        table.add_column(header, no_wrap=True, justify="right" if header == "Part" else "left")
    table.add_column(words)
    return table


def spans(partitions: list[int]) -> str:
    """``0-2, 5`` for partitions 0, 1, 2 and 5 (in order)."""
    runs: list[list[int]] = []
    for partition in partitions:
        if runs and partition == runs[-1][-1] + 1:
            runs[-1].append(partition)
        else:
            runs.append([partition])
    return ", ".join(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)


def assumptions(topic: TopicForecast, window_ms: int) -> RenderableType:
    """A table of ``topic``'s ingest per partition under the window, then one of its
    groups' reading (none for a topic without groups): a row for the partitions a
    group reads alike, where ``ebb forecast`` prints a line each (a group that keeps
    up everywhere is one row, not one a partition)."""
    rates = _table("Part", window(window_ms).capitalize())
    for partition, rate in sorted(topic.rates.items()):
        rates.add_row(str(partition), ingest(rate))
    if not topic.readings:
        return rates
    alike: dict[tuple[str, str], list[int]] = {}
    for reading in topic.readings:  # by group and partition
        alike.setdefault((reading.group, pace(reading)), []).append(reading.partition)
    reads = _table("Group", "Part", "Assumed to read")
    for (group, words), partitions in alike.items():
        reads.add_row(group, spans(partitions), words)
    return Group(rates, reads)
