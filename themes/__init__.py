"""Console themes: one TOML file per theme, each a set of Textual theme colours.

The console's CSS uses only Textual's variables (``$primary``, ``$error``...), so a
theme is just these colours; adding a theme is adding a file here.
"""

from __future__ import annotations

import tomllib
from importlib import resources

from textual.theme import Theme

DEFAULT_THEME = "ebbtide-dark"


def load_themes() -> list[Theme]:
    """Every theme shipped in this package, in file-name order."""
    themes = []
    for entry in sorted(resources.files(__package__).iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml"):
            spec = tomllib.loads(entry.read_text(encoding="utf-8"))
            themes.append(Theme(**spec))
    return themes


def theme_names() -> list[str]:
    return [theme.name for theme in load_themes()]
