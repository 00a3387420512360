"""Wall-clock time in epoch milliseconds, and instants given by an operator."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta

from engine.errors import InvalidInput

# Instants outside these bounds are typos (seconds given as ms, an extra digit).
_MIN_MS = 0
MAX_INSTANT_MS = 253402300799999  # 9999-12-31T23:59:59.999Z
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# ASCII digits only: str.isdigit() also takes '²' and '٣', which int() refuses or
# silently reads as other digits.
_EPOCH_MS = re.compile(r"-?[0-9]+", re.ASCII)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def parse_instant(text: str) -> int:
    """An ISO 8601 date-time (a naive one is UTC) or integer epoch milliseconds."""
    text = text.strip()
    if _EPOCH_MS.fullmatch(text):
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
            moment = moment.replace(tzinfo=UTC)
        # Exact integer arithmetic, floored: a float timestamp would round an instant
        # just before 1970 up to 0 and let it through.
        value = (moment - _EPOCH) // timedelta(milliseconds=1)
    if not _MIN_MS <= value <= MAX_INSTANT_MS:
        raise InvalidInput(f"invalid time {text!r}: out of range (1970 to 9999)")
    return value


def utc_datetime(ms: int) -> datetime | None:
    """Epoch milliseconds as an aware UTC datetime, exactly (``ms / 1000`` as a float is
    not); None past what a date can hold (year 1 to 9999): a timestamp a library caller
    stored, or an eligibility time computed from one, must not make every listing of
    its topic fail."""
    try:
        return _EPOCH + timedelta(milliseconds=ms)
    except OverflowError:
        return None


def format_instant(ms: int | None) -> str:
    """ISO 8601 in UTC with milliseconds, for humans."""
    if ms is None:
        return "-"
    moment = utc_datetime(ms)
    return f"{ms} ms" if moment is None else moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
