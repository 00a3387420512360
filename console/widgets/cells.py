"""Table cells that carry meaning in colour: gauges, age bars and states.

Colours come from the running theme's variables (``$error``, ``$warning``...), read
when the cells are built, so every theme (dark, light, high contrast) gets its own;
a theme switch re-renders the views.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.style import Style
from rich.text import Text
from textual.app import App
from textual.color import Color

FULL, EMPTY = "█", "░"
#: fraction of a limit from which a gauge or an age bar turns to ``warning``
WARN_AT = 0.8
#: how much of the foreground muted text keeps, blended into the surface: as much as
#: reads at 4.5:1 on every background of every theme (tests/console/test_themes.py);
#: a terminal's own ``dim`` has no such floor
MUTED_WEIGHT = 0.7


def muted_colour(variables: dict[str, str]) -> Color:
    """Muted text (``-``, ``no quota``, empty bars): the foreground, faded toward the
    surface."""
    return Color.parse(variables["surface"]).blend(Color.parse(variables["foreground"]), MUTED_WEIGHT)


@dataclass(frozen=True)
class Palette:
    """The theme colours cells use, as Rich styles."""

    success: Style
    warning: Style
    error: Style
    muted: Style
    accent: Style

    @classmethod
    def of(cls, app: App) -> Palette:
        variables = app.theme_variables

        def style(name: str, fallback: str) -> Style:
            return Style.parse(variables.get(name, fallback))

        return cls(
            success=style("success", "green"),
            warning=style("warning", "yellow"),
            error=style("error", "red"),
            muted=Style(color=muted_colour(variables).hex),
            accent=style("accent", "cyan"),
        )

    def level(self, fraction: float) -> Style:
        # Strictly over, as the engine compares: a backlog exactly at its quota is ok.
        if fraction > 1.0:
            return self.error
        if fraction >= WARN_AT:
            return self.warning
        return self.success


def bar(fraction: float, width: int) -> str:
    filled = round(max(0.0, min(1.0, fraction)) * width)
    return FULL * filled + EMPTY * (width - filled)


def gauge(part: int | None, whole: int | None, palette: Palette, *, width: int = 10) -> Text:
    """``███████░░░  70%`` of ``part`` against ``whole``; ``-`` with no limit."""
    if whole is None or part is None:
        return Text("-", style=palette.muted)
    return meter(part / whole if whole else (1.0 if part else 0.0), palette, width=width)


def meter(fraction: float | None, palette: Palette, *, width: int = 10) -> Text:
    """``███████░░░  70%`` of a fraction already computed; ``-`` for None."""
    if fraction is None:
        return Text("-", style=palette.muted)
    text = Text(bar(fraction, width), style=palette.level(fraction))
    text.append(f" {fraction:>4.0%}")
    return text


def age_bar(age_ms: int | None, limit_ms: int | None, palette: Palette, *, width: int = 12) -> Text:
    """How far a segment has aged toward its time limit; against no limit the bar
    stays muted (its length then only compares segments with each other)."""
    if age_ms is None:
        return Text("")
    if limit_ms is None or limit_ms <= 0:
        return Text(bar(0.0, width), style=palette.muted)
    fraction = age_ms / limit_ms
    return Text(bar(fraction, width), style=palette.level(fraction))


def tone(word: str, palette: Palette) -> Style:
    """The colour of a state word's urgency (a topic's, the engine's, a journaled
    cycle's or action's)."""
    return {
        "ok": palette.success,
        "ready": palette.success,
        "done": palette.success,
        "applied": palette.success,
        "running": palette.accent,
        "planned": palette.accent,
        "held": palette.warning,
        "paused": palette.warning,
        "starting": palette.warning,
        "skipped": palette.warning,
        "quota exceeded": palette.error,
        "over quota": palette.warning,
        "invalid policy": palette.error,
        "failed": palette.error,
        "interrupted": palette.error,
        "rolled_back": palette.error,
    }.get(word, palette.muted)


def state(text: str, palette: Palette) -> Text:
    """A state word in the colour of its urgency."""
    return Text(text, style=tone(text, palette))
