"""Every text colour of every theme reads at WCAG AA (4.5:1) on every background the
console draws text on (issue 14, deliverable 9). The ratios are computed from the
theme files themselves, with the colours Textual derives from them."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from rich.color import Color as RichColor
from rich.color import ColorSystem
from textual.color import Color
from textual.theme import Theme
from textual.widgets import Input
from textual.widgets._toast import Toast

from console.widgets.cells import muted_colour
from console.widgets.live_table import LiveTable
from tests.support.console_fixtures import TERMINAL, settle

THEMES = sorted((Path(__file__).resolve().parents[2] / "themes").glob("*.toml"))
AA = 4.5
#: the theme colours cells, badges and labels are written in
TEXT = ("foreground", "primary", "secondary", "accent", "warning", "error", "success")


def luminance(colour: Color) -> float:
    def channel(value: int) -> float:
        v = value / 255
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(colour.r) + 0.7152 * channel(colour.g) + 0.0722 * channel(colour.b)


def contrast(a: Color, b: Color) -> float:
    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def backgrounds(variables: dict[str, str]) -> dict[str, Color]:
    """Where text sits: the screen, boxes and tables, the header and table headings,
    and a table's zebra stripe (DataTable: ``$surface-darken-1 40%`` over the surface)."""
    surface = Color.parse(variables["surface"])
    stripe = Color.parse(variables["surface-darken-1"]).with_alpha(0.4)
    return {
        "background": Color.parse(variables["background"]),
        "surface": surface,
        "panel": Color.parse(variables["panel"]),
        "even row": surface + stripe,
    }


def test_the_contrast_formula_matches_wcag() -> None:
    assert contrast(Color(0, 0, 0), Color(255, 255, 255)) == pytest.approx(21.0)
    assert contrast(Color.parse("#777777"), Color(255, 255, 255)) == pytest.approx(4.48, abs=0.01)


def in_256_colours(colour: Color) -> Color:
    """The colour a 256-colour terminal shows (tmux's default ``TERM``, no
    ``COLORTERM``): Rich picks the nearest of the xterm palette, as Textual renders."""
    r, g, b = RichColor.from_rgb(colour.r, colour.g, colour.b).downgrade(ColorSystem.EIGHT_BIT).get_truecolor()
    return Color(r, g, b)


@pytest.mark.parametrize("terminal", ["truecolor", "256 colours"])
@pytest.mark.parametrize("path", THEMES, ids=[p.stem for p in THEMES])
def test_every_text_colour_reads_at_aa_on_every_background(path: Path, terminal: str) -> None:
    spec = tomllib.loads(path.read_text())
    variables = Theme(**spec).to_color_system().generate()
    colours = {name: Color.parse(spec[name]) for name in TEXT}
    colours["muted"] = muted_colour(variables)
    grounds = backgrounds(variables)
    if terminal == "256 colours":
        colours = {name: in_256_colours(c) for name, c in colours.items()}
        grounds = {name: in_256_colours(c) for name, c in grounds.items()}
    low = {
        f"{text} on {where}": round(contrast(colour, background), 2)
        for text, colour in colours.items()
        for where, background in grounds.items()
        if contrast(colour, background) < AA
    }
    assert low == {}


def test_three_themes_dark_light_and_high_contrast() -> None:
    specs = [tomllib.loads(p.read_text()) for p in THEMES]
    assert sorted(s["name"] for s in specs) == ["ebbtide-dark", "ebbtide-high-contrast", "ebbtide-light"]


@pytest.mark.parametrize("theme", [p.stem for p in THEMES])
async def test_a_focused_table_heading_reads_at_aa(make_console, theme: str) -> None:
    """Every view has a focused table; DataTable tints a focused table's heading with
    5% of the foreground, which in the dark theme read at 4.43:1, and at 3.07:1 in 256
    colours (the panel tinted turned teal in tmux; walk2 finding 2). The colours as the
    app draws them, not as the theme file says."""
    app = make_console(theme=theme)
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        table = app.screen.query(LiveTable).first()
        assert app.focused is table
        style = table.get_component_rich_style("datatable--header")
        assert style.color is not None and style.bgcolor is not None
        text, ground = (Color(*c.get_truecolor()) for c in (style.color, style.bgcolor))
        assert contrast(text, ground) >= AA
        assert contrast(in_256_colours(text), in_256_colours(ground)) >= AA


@pytest.mark.parametrize("theme", [p.stem for p in THEMES])
async def test_toast_titles_read_at_aa(make_console, theme: str) -> None:
    """Textual draws toasts on ``$panel-lighten-1``: in the dark theme in 256 colours
    an error's title read 4.28:1 and a notice's 4.41:1 (walk2 finding 2, the toasts)."""
    app = make_console(theme=theme)
    async with app.run_test(size=TERMINAL, notifications=True) as pilot:
        await settle(pilot)
        for severity in ("information", "warning", "error"):
            app.notify("body", title=severity, severity=severity)
        await settle(pilot)
        toasts = list(app.screen.query(Toast))
        assert len(toasts) == 3
        for toast in toasts:
            style = toast.get_component_rich_style("toast--title")
            assert style.color is not None
            text, ground = Color(*style.color.get_truecolor()), toast.styles.background
            assert contrast(text, ground) >= AA, toast.classes
            assert contrast(in_256_colours(text), in_256_colours(ground)) >= AA, toast.classes


@pytest.mark.parametrize("theme", [p.stem for p in THEMES])
async def test_an_input_placeholder_reads_at_aa(make_console, theme: str) -> None:
    """A placeholder is where the truncate and move dialogs give the valid range (``an
    offset from 681 to 730``); Textual draws it in ``$text-disabled``: 2.61:1 in the
    light theme and 3.97:1 in the dark one in 256 colours (walk3 finding 5)."""
    app = make_console(theme=theme)
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        app.open_topic("orders")
        await settle(pilot)
        await pilot.press("T")
        await settle(pilot)
        value = app.screen.query_one("#target-value", Input)
        assert value.placeholder.startswith("an offset from")
        style = value.get_component_rich_style("input--placeholder")
        assert style.color is not None
        text, ground = Color(*style.color.get_truecolor()), value.background_colors[1]
        assert contrast(text, ground) >= AA
        assert contrast(in_256_colours(text), in_256_colours(ground)) >= AA
