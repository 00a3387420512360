"""What the console remembers between runs for this user (not for the data
directory: two operators on one data directory may like different themes).

Kept in ``$XDG_CONFIG_HOME/ebbtide/console.json`` (``~/.config`` by default). A missing
or unreadable file means "nothing remembered"; the console never fails over it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def settings_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "ebbtide" / "console.json"


class ConsoleSettings:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or settings_path()

    def _read(self) -> dict:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    @property
    def theme(self) -> str | None:
        value = self._read().get("theme")
        return value if isinstance(value, str) else None

    def remember_theme(self, name: str) -> None:
        """Save the theme (atomically: a crash leaves the old file or the new one)."""
        data = self._read()
        data["theme"] = name
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            scratch = self.path.with_suffix(".tmp")
            scratch.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
            os.replace(scratch, self.path)
        except OSError:
            pass  # a read-only home: the theme is simply not remembered
