"""Charts of bytes over time (plotext, through textual-plotext), drawn in the running
theme's colours: the engine panel's bytes on disk per topic and bytes freed per
cycle, the Topic view's history, the Forecast view and the what-if's projection.

A chart is described by a :class:`ChartSpec` (plain data, built in a worker with the
rest of a view's rows) and drawn by :class:`Chart` on the UI thread. Series name a
theme variable (``primary``, ``error``...) rather than a colour, so the chart is
drawn again in the new theme's colours when the theme changes; plotext's own colour
sequence is never used (it does not read on a light background).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.color import Color
from textual.widgets import Static
from textual_plotext import PlotextPlot

from console import format

#: the theme variables that may colour the series of a chart with several (a topic
#: each), in order; each reads on its theme's surface (tests/console/test_themes.py)
SERIES_CANDIDATES = ("primary", "secondary", "accent", "error", "success", "foreground", "warning")
#: series a chart draws at most: five colours differ in every theme
MAX_SERIES = 5

#: (unit, ms), the first whose span fits a chart's x axis: ``min`` for an hour of cycles
TIME_UNITS = (("s", 1000), ("min", 60_000), ("h", 3_600_000), ("d", 86_400_000))
#: a bar's width, as a fraction of the room plotext gives each
BAR_WIDTH = 0.6
#: a unit serves spans up to this many of it (120 s, then minutes up to 2 h...)
UNIT_SPAN = 120
#: a horizontal line above this many times the largest value is not drawn
OFF_CHART = 4
#: labelled ticks on the x axis, ends included (plotext's own number)
X_TICKS = 5
#: decimals an x tick's label may need at most
MAX_DECIMALS = 3


@dataclass(frozen=True)
class Series:
    """One line (or set of bars) of a chart; ``xs`` in the chart's x unit, ``ys`` in bytes."""

    label: str
    xs: tuple[float, ...]
    ys: tuple[int, ...]
    #: the theme variable of its colour
    role: str = "primary"
    bars: bool = False


@dataclass(frozen=True)
class Mark:
    """A horizontal line at ``value`` bytes (a cap, a budget), or a vertical one at
    ``value`` on the x axis (now, a breach)."""

    value: float
    role: str
    vertical: bool = False
    #: what the legend calls a horizontal line (``cap``); unlabelled lines are not listed
    label: str = ""


@dataclass(frozen=True)
class ChartSpec:
    title: str
    #: what the x axis counts, e.g. ``min (0 = now)``
    x_label: str
    series: tuple[Series, ...] = ()
    marks: tuple[Mark, ...] = ()
    #: shown instead of an empty plot when no series has a point
    empty: str = "nothing to chart yet"

    @property
    def has_data(self) -> bool:
        return any(s.xs for s in self.series)

    def on_chart(self, mark: Mark) -> bool:
        """Whether ``mark`` is drawn: a horizontal line far above every series (a
        default 100 GiB cap over KiB of data) would flatten them all onto the axis,
        so it is left to the legend, which says it is above."""
        peak = max((y for s in self.series for y in s.ys), default=0)
        return mark.vertical or mark.value <= OFF_CHART * max(peak, 1)


def size_unit(largest: int) -> tuple[str, int]:
    """The binary unit that shows ``largest`` bytes as a number of 1 to 1023."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if largest >= scale:
            return unit, scale
    return "B", 1


def time_unit(span_ms: int) -> tuple[str, int]:
    """The x unit of a chart spanning ``span_ms``: seconds up to 2 minutes, minutes up
    to 2 hours, hours up to 5 days, then days."""
    for unit, ms in TIME_UNITS:
        if span_ms <= UNIT_SPAN * ms:
            return unit, ms
    return TIME_UNITS[-1]


def relative(times: Sequence[int], now: int, unit_ms: int) -> tuple[float, ...]:
    """Instants as a chart's x values: units from ``now`` (negative in the past)."""
    return tuple(round((t - now) / unit_ms, 3) for t in times)


def x_ticks(low: float, high: float) -> list[float]:
    """:data:`X_TICKS` evenly spaced values from ``low`` to ``high``."""
    step = (high - low) / (X_TICKS - 1)
    return [low + i * step for i in range(X_TICKS)]


def tick_labels(ticks: Sequence[float]) -> list[str]:
    """Evenly spaced ``ticks`` with the fewest decimals that put every label within a
    tenth of a step of its tick; a tick that rounds to zero reads ``0``, never ``-0``
    (plotext labelled a tick at -0.0075 h ``-0.0``, which reads as a time before now)."""
    step = abs(ticks[1] - ticks[0]) if len(ticks) > 1 else 0.0
    decimals = next(
        (d for d in range(MAX_DECIMALS) if all(abs(round(t, d) - t) <= step / 10 for t in ticks)), MAX_DECIMALS
    )
    # "z": a negative value that rounds to zero loses its sign (Python 3.11, PEP 682)
    return [f"{t:z.{decimals}f}" for t in ticks]


def series_roles(variables: dict[str, str]) -> tuple[str, ...]:
    """The roles of :data:`SERIES_CANDIDATES` whose colours differ in this theme (a
    theme may give two roles one colour: high contrast's primary is its foreground)."""
    roles: dict[str, str] = {}
    for role in SERIES_CANDIDATES:
        roles.setdefault(Color.parse(variables[role]).hex, role)
    return tuple(roles.values())[:MAX_SERIES]


def theme_colour(variables: dict[str, str], role: str) -> Color:
    return Color.parse(variables.get(role) or variables["foreground"])


class Chart(PlotextPlot):
    """A plotext plot that draws a :class:`ChartSpec` in the theme's colours."""

    DEFAULT_CSS = """
    Chart {
        height: 1fr;
        min-height: 6;
    }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        #: what is drawn (None: nothing yet)
        self.spec: ChartSpec | None = None

    def on_mount(self) -> None:
        super().on_mount()
        # Series colours are theme variables: a new theme draws them again.
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._draw())

    def show(self, spec: ChartSpec) -> None:
        if spec != self.spec:
            self.spec = spec
            self._draw()

    def render(self) -> Text:
        if self.spec is not None and not self.spec.has_data:
            return Text(f"{self.spec.title}\n{self.spec.empty}", style=self.app.theme_variables.get("foreground", ""))
        return super().render()  # type: ignore[return-value]

    def _draw(self) -> None:
        spec, plt = self.spec, self.plt
        plt.clear_data()
        plt.clear_figure()
        if spec is None or not spec.has_data:
            self.refresh()
            return
        variables = self.app.theme_variables
        marks = [m for m in spec.marks if spec.on_chart(m)]
        values = [float(y) for s in spec.series for y in s.ys] + [m.value for m in marks if not m.vertical]
        unit, scale = size_unit(int(max([*values, 1])))
        plt.title(f"{spec.title} ({unit})")
        plt.xlabel(spec.x_label)
        for series in spec.series:
            colour = theme_colour(variables, series.role).rgb
            if series.bars:
                # A bar of 0 would still draw a cell: a cycle that freed nothing has none.
                shown = [(x, y / scale) for x, y in zip(series.xs, series.ys) if y]
                if shown:
                    bar_xs, bar_ys = zip(*shown)
                    width = _bar_width(series.xs, bar_xs)
                    plt.bar(list(bar_xs), list(bar_ys), color=colour, width=width, reset_ticks=False)
            else:
                plt.plot(list(series.xs), [y / scale for y in series.ys], color=colour, marker="braille")
        for mark in marks:
            colour = theme_colour(variables, mark.role).rgb
            if mark.vertical:
                plt.vline(mark.value, colour)
            else:
                plt.hline(mark.value / scale, colour)
        # Bytes are never negative: the axis starts at 0, so a flat line is not mid-chart.
        plt.ylim(0, max(values) / scale * 1.05 or 1)
        xs = [x for s in spec.series for x in s.xs] + [m.value for m in marks if m.vertical]
        low, high = min(xs), max([*xs, 0.0])
        # One instant (the first cycle's sample, at now) spans nothing: plotext divides by the span.
        low = low if high > low else high - 1
        plt.xlim(low, high)
        ticks = x_ticks(low, high)
        plt.xticks(ticks, tick_labels(ticks))
        self.refresh()


def _bar_width(every: Sequence[float], drawn: Sequence[float]) -> float:
    """plotext's ``width`` for bars at ``drawn``, so that each is :data:`BAR_WIDTH` of
    the smallest gap between ``every`` x (as if every cycle had a bar): plotext makes
    a bar ``width`` times the mean gap between those drawn (one bar: ``width`` x units)."""
    gaps = [b - a for a, b in zip(every, every[1:]) if b > a]
    wanted = BAR_WIDTH * min(gaps, default=1.0)
    mean_gap = (max(drawn) - min(drawn)) / (len(drawn) - 1) if len(drawn) > 1 else 1.0
    return min(1.0, wanted / mean_gap) if mean_gap > 0 else BAR_WIDTH


def legend(series: Sequence[Series], variables: dict[str, str]) -> Text:
    """``━ orders  ━ clickstream``: each series' label in its colour (a chart of
    several topics is too small for plotext's own legend)."""
    text = Text()
    for index, s in enumerate(series):
        if index:
            text.append("  ")
        text.append("▇ " if s.bars else "━ ", style=theme_colour(variables, s.role).hex)
        text.append(s.label)
    return text


def chart_legend(spec: ChartSpec, variables: dict[str, str]) -> Text:
    """:func:`legend` of the series, then each labelled horizontal line with its value
    on a line of its own (a narrow pane would wrap it mid-item): ``─ cap 8.0 KiB``,
    ``─ disk budget 1.0 GiB (above)``."""
    text = legend(spec.series, variables)
    for mark in spec.marks:
        if mark.label and not mark.vertical:
            text.append("\n")
            text.append("─ ", style=theme_colour(variables, mark.role).hex)
            text.append(f"{mark.label} {format.size(int(mark.value))}")
            if not spec.on_chart(mark):
                text.append(" (above)")
    return text


class ChartLegend(Static):
    """:func:`chart_legend` of a spec, then a note; drawn again when the theme changes,
    as :class:`Chart` is: the legend's swatches are Rich text with the colours in it,
    which kept the old theme's (1.8:1 on the light theme's surface) after ``t``."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._spec: ChartSpec | None = None
        self._note = ""

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._write())

    def show(self, spec: ChartSpec | None, note: str = "") -> None:
        """The legend of ``spec`` (None: none) and ``note`` on the lines after it."""
        self._spec, self._note = spec, note
        self._write()

    def _write(self) -> None:
        if self._spec is None:
            self.update(Text(self._note))  # plain: an error's [brackets] are no markup
            return
        text = chart_legend(self._spec, self.app.theme_variables)
        if self._note:
            text.append(f"\n{self._note}")
        self.update(text)
