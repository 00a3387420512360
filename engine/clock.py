"""Wall-clock time in epoch milliseconds, and instants given by an operator."""

from __future__ import annotations

import time
from datetime import datetime, timezone

from engine.errors import InvalidInput

# Instants outside these bounds are typos (seconds given as ms, an extra digit).
_MIN_MS = 0
_MAX_MS = 253402300799999  # 9999-12-31T23:59:59.999Z


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def parse_instant(text: str) -> int:
    """An ISO 8601 date-time (a naive one is UTC) or integer epoch milliseconds."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        if len(text) > 16:
            raise InvalidInput(f"invalid time {text!r}: out of range (epoch milliseconds up to year 9999)")
        value = int(text)
    else:
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
        except ValueError:
            raise InvalidInput(
                f"invalid time {text!r}: use ISO 8601 (2026-11-21T10:00:00Z) or epoch milliseconds"
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        value = int(moment.timestamp() * 1000)
    if not _MIN_MS <= value <= _MAX_MS:
        raise InvalidInput(f"invalid time {text!r}: out of range (1970 to 9999)")
    return value


def format_instant(ms: int | None) -> str:
    """ISO 8601 in UTC with milliseconds, for humans."""
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
