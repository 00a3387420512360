"""The console's six views, by mode name: the key that goes there and its title.
A leaf module: the app binds the keys, the palette and the breadcrumb name them."""

from __future__ import annotations

VIEWS: dict[str, tuple[str, str]] = {
    "overview": ("1", "Overview"),
    "groups": ("2", "Groups"),
    "quotas": ("3", "Quotas"),
    "journal": ("4", "Journal"),
    "engine": ("5", "Engine"),
    "forecast": ("6", "Forecast"),
}
