"""A Rich renderable (a Static's content) as the plain lines it prints."""

from __future__ import annotations

import io

from rich.console import Console, RenderableType


def plain_lines(renderable: RenderableType, width: int = 200) -> list[str]:
    """``renderable`` printed ``width`` wide (wide enough not to wrap), without trailing blanks."""
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return [line.rstrip() for line in console.export_text().splitlines()]
