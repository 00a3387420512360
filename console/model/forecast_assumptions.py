"""What a capacity forecast assumed, in the words ``ebb forecast`` prints and the
console's Forecast view and what-if show (one wording, so that they never disagree):
each partition's ingest rate and where it came from, and how each group reads."""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING

from engine.clock import format_instant
from engine.policy.units import describe_duration, describe_size

if TYPE_CHECKING:  # they import pyarrow and numpy, which `ebb` loads only to forecast
    from engine.forecast.rates import Rate
    from engine.forecast.reading import Reading

#: where each way of reading comes from, after the pace
_PACES = {
    "observed": "observed from its commits",
    "keeps_up": "keeps up: at the log end, or no pace observed yet",
    "stalled": "--stalled",
    "idle": "no commit in the window",
}
#: why an ``idle`` group that never committed reads nothing: created within the
#: window, it has a commit time there (its creation's), so "no commit in the window"
#: would not say why
_NEVER_COMMITTED = "no commit since it was created"


def _per_second(value: float) -> str:
    """Three significant figures, never an exponent: ``0.00833``, ``2.25``, ``1,000``
    (``1e+03`` records/s read as a typo)."""
    return format(Decimal(f"{value:.3g}"), ",f")


def window(window_ms: int) -> str:
    """``ingest rates observed over the last 1h``: the window the rates were measured over."""
    return f"ingest rates observed over the last {describe_duration(window_ms)}"


def ingest(rate: Rate, *, hint: str = "") -> str:
    """``97.7 KiB/s, 12 records/s in batches of 4 (observed since 2026-11-21T11:00:00.000Z)``
    (the batches where a producer sends them, engine/forecast/rates.py); ``hint``
    follows the reason a partition has no ingest (how the CLI would see one)."""
    if rate.source == "observed":
        since = f"observed since {format_instant(rate.since)}"
    elif rate.source == "none":
        since = f"none: no record in the window{hint}"
    else:
        since = rate.source  # given (--rate)
    batches = f" in batches of {rate.batch}" if rate.batch > 1 else ""
    records = f"{_per_second(rate.records_per_second)} records/s{batches}"
    return f"{_bytes_per_second(rate.bytes_per_second)}, {records} ({since})"


def _bytes_per_second(value: float) -> str:
    """``870 B/s``, ``0.26 B/s`` (a sparse partition's, not ``0 B/s`` beside its records),
    ``97.7 KiB/s``."""
    return f"{_per_second(value)} B/s" if value < 1000 else f"{describe_size(round(value))}/s"


def pace(reading: Reading) -> str:
    """``reads 0.00833 records/s (observed from its commits)``, ``reads nothing (...)``."""
    rate = reading.records_per_second
    pace = "reads nothing" if reading.source in ("stalled", "idle") else "reads as fast as records arrive"
    why = _NEVER_COMMITTED if reading.source == "idle" and reading.never_committed else _PACES[reading.source]
    return f"{pace if rate is None else f'reads {_per_second(rate)} records/s'} ({why})"
