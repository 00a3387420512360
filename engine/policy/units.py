"""Parsing and formatting of policy values: durations, sizes, counts and switches.

Operators arrive from Kafka, Pulsar, Fluvio, Iggy and Go tools, each with its own
habits, so one parser accepts all of their spellings (SPEC §3):

- durations: Go (``72h3m0.5s``, ``300ms``), humantime (``1d 2h 3m 4s``, ``7 days``,
  ``2 weeks``), Pulsar (``3h``, ``10m``, ``1w``) and plain seconds (``3600``);
- sizes: plain bytes (``2048``), SI (``1 GB`` = 10^9), IEC (``10 MiB``, ``2 Ki``) and
  Pulsar's single letters, which are binary (``10G`` = 10 * 2^30).

``infinite``, ``none``, ``unlimited`` and ``-1`` mean "no limit" and parse to ``None``;
``0`` is zero, never "no limit". Arithmetic is exact (``Decimal``) so that ``0.3 s``
is 300 ms, not 299. Every refusal is an :class:`InvalidValue` that carries the text
and the reason, so that callers can name the field the value was meant for.
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Context, Decimal

from engine.digits import is_digits
from engine.errors import InvalidPolicy

NO_LIMIT_WORDS = frozenset({"infinite", "none", "unlimited", "-1"})
"""Spellings of "no limit"; ``-1`` is Pulsar's."""
#: what a duration or size too large to hold is told to write instead
_NO_LIMIT = "use infinite for no limit"

MS_PER_DAY = 86_400_000
MAX_DURATION_MS = 36_525 * MS_PER_DAY
"""100 years of 365.25 days: anything longer is a typo, and ``infinite`` says "never"."""

MAX_SIZE_BYTES = 2**63 - 1
"""The largest size a signed 64-bit column (SQLite, Parquet, Spark) can hold."""

MAX_COUNT = 2**63 - 1

_DURATION_HINT = "use e.g. 7d, 72h3m0.5s, 2 weeks, or seconds"
_SIZE_HINT = "use e.g. 1 GiB, 10 MiB, 36 GB, 10G, or bytes"


def _duration_units() -> dict[str, Decimal]:
    """Milliseconds per unit spelling, lower case.

    Units are case-insensitive, so humantime's ``M`` (months) reads as minutes, like
    Go's and Pulsar's ``m``; months must be spelled out.
    """
    spellings = (
        (("ns", "nsec", "nsecs", "nanos", "nanosecond", "nanoseconds"), "0.000001"),
        (("us", "µs", "μs", "usec", "usecs", "micros", "microsecond", "microseconds"), "0.001"),
        (("ms", "msec", "msecs", "millis", "millisecond", "milliseconds"), "1"),
        (("s", "sec", "secs", "second", "seconds"), "1000"),
        (("m", "min", "mins", "minute", "minutes"), "60000"),
        (("h", "hr", "hrs", "hour", "hours"), "3600000"),
        (("d", "day", "days"), "86400000"),
        (("w", "wk", "wks", "week", "weeks"), "604800000"),
        (("month", "months"), "2630016000"),  # humantime: 30.44 days
        (("y", "yr", "yrs", "year", "years"), "31557600000"),  # humantime: 365.25 days
    )
    return {name: Decimal(ms) for names, ms in spellings for name in names}


def _size_units() -> dict[str, int]:
    """Bytes per unit spelling, lower case: SI, IEC and Pulsar's binary letters."""
    units = {"": 1, "b": 1, "byte": 1, "bytes": 1}
    for power, letter in enumerate("kmgtpe", start=1):
        units[letter + "b"] = 1000**power  # SI: 1 GB = 10^9
        units[letter + "i"] = 1024**power  # IEC: 2 Ki = 2048
        units[letter + "ib"] = 1024**power
    for power, letter in enumerate("kmgt", start=1):
        units[letter] = 1024**power  # Pulsar: 10G = 10 * 2^30
    return units


_DURATION_UNITS_MS = _duration_units()
_SIZE_UNITS = _size_units()

# One term: a number, optional blanks, an optional unit made of letters. The classes
# are disjoint, so matching is linear even on hostile input.
_TERM = re.compile(r"\s*([0-9.]+)\s*([^\W\d_]*)")
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+", re.ASCII)
_MAX_INTEGER_DIGITS = 24
"""Longer integer parts exceed every cap in every unit: refused before any arithmetic."""
_MAX_NUMBER_CHARS = 64
_EXACT = Context(prec=60)
_SHOWN_CHARS = 40


class InvalidValue(InvalidPolicy):
    """A value text that does not parse, with the text and reason kept apart.

    ``str()`` is a complete line on its own; :mod:`engine.policy.fields` uses
    ``text`` and ``reason`` to rephrase it with the name of the field.
    """

    def __init__(self, kind: str, text: str, reason: str, no_limit: str = "") -> None:
        """``no_limit``: how to write "no limit" instead, where that is what was meant.
        A value that must be finite (a CLI flag's step, a prune interval) is refused
        with :attr:`finite_reason`, which leaves that hint out."""
        self.text = text
        self.finite_reason = reason
        self.reason = f"{reason}; {no_limit}" if no_limit else reason
        super().__init__(f"invalid {kind}: {shown(text)} ({self.reason})")


def shown(text: str) -> str:
    """Quote ``text`` for a one-line message: escaped, and cut if very long."""
    if len(text) > _SHOWN_CHARS:
        text = text[:_SHOWN_CHARS] + "…"
    return repr(text)


def _number(kind: str, text: str, digits: str, too_large: str) -> Decimal:
    """The exact value of a number token, refusing malformed or absurdly long ones."""
    if not _NUMBER.fullmatch(digits):
        raise InvalidValue(kind, text, f"malformed number {shown(digits)}")
    if len(digits.split(".", 1)[0].lstrip("0")) > _MAX_INTEGER_DIGITS:
        raise InvalidValue(kind, text, too_large, _NO_LIMIT)
    if len(digits) > _MAX_NUMBER_CHARS:
        raise InvalidValue(kind, text, f"too many digits; at most {_MAX_NUMBER_CHARS}")
    return Decimal(digits)


def _prepare(kind: str, text: str, hint: str) -> str | None:
    """Trim ``text``; ``None`` for "no limit"; refuse empty and negative values."""
    cleaned = text.strip()
    if not cleaned:
        raise InvalidValue(kind, text, f"empty value; {hint}")
    if cleaned.lower() in NO_LIMIT_WORDS:
        return None
    if cleaned.startswith("-"):
        raise InvalidValue(kind, text, "negative values are invalid", "use -1 or infinite for no limit")
    return cleaned


def _round_half_up(value: Decimal) -> int:
    return int(value.quantize(Decimal(1), rounding=ROUND_HALF_UP, context=_EXACT))


def parse_duration(text: str) -> int | None:
    """Milliseconds in ``text``, or ``None`` for no limit.

    Terms may be chained with or without blanks (``1h30m``, ``1d 2h``), fractions are
    allowed in every term (``1.5h``), and a lone number without unit is seconds. The
    total is rounded to the nearest millisecond, halves up, so ``1ns`` is 0 ms and
    ``500us`` is 1 ms. Durations over 100 years are refused.
    """
    kind = "duration"
    cleaned = _prepare(kind, text, _DURATION_HINT)
    if cleaned is None:
        return None
    too_large = "more than 100 years"
    total = Decimal(0)
    position = 0
    while position < len(cleaned):
        match = _TERM.match(cleaned, position)
        if match is None:
            rest = cleaned[position:].lstrip()
            raise InvalidValue(kind, text, f"expected a number before {shown(rest)}; {_DURATION_HINT}")
        digits, unit = match.groups()
        amount = _number(kind, text, digits, too_large)
        alone = position == 0 and match.end() == len(cleaned)
        position = match.end()
        if not unit:
            if not alone:
                raise InvalidValue(kind, text, f"missing unit after {digits}; {_DURATION_HINT}")
            unit = "s"
        unit_ms = _DURATION_UNITS_MS.get(unit.lower())
        if unit_ms is None:
            raise InvalidValue(kind, text, f"unknown unit {shown(unit)}; {_DURATION_HINT}")
        total = _EXACT.add(total, _EXACT.multiply(amount, unit_ms))
        if total > MAX_DURATION_MS:
            raise InvalidValue(kind, text, too_large, _NO_LIMIT)
    return _round_half_up(total)


def parse_size(text: str) -> int | None:
    """Bytes in ``text``, or ``None`` for no limit.

    Units are case-insensitive: ``kB``/``GB`` are SI, ``Ki``/``GiB`` are IEC, and a
    single letter ``K``/``M``/``G``/``T`` is binary, as Pulsar reads it. Fractions are
    allowed (``1.5 GiB``) and rounded to the nearest byte, halves up.
    """
    kind = "size"
    cleaned = _prepare(kind, text, _SIZE_HINT)
    if cleaned is None:
        return None
    too_large = "more than 2^63-1 bytes"
    match = _TERM.fullmatch(cleaned)
    if match is None:
        raise InvalidValue(kind, text, f"expected one number and an optional unit; {_SIZE_HINT}")
    digits, unit = match.groups()
    amount = _number(kind, text, digits, too_large)
    unit_bytes = _SIZE_UNITS.get(unit.lower())
    if unit_bytes is None:
        raise InvalidValue(kind, text, f"unknown unit {shown(unit)}; {_SIZE_HINT}")
    size = _round_half_up(_EXACT.multiply(amount, Decimal(unit_bytes)))
    if size > MAX_SIZE_BYTES:
        raise InvalidValue(kind, text, too_large, _NO_LIMIT)
    return size


def parse_count(text: str) -> int | None:
    """A whole number >= 0 in ``text``, or ``None`` for no limit."""
    kind = "count"
    cleaned = _prepare(kind, text, "use a whole number or unlimited")
    if cleaned is None:
        return None
    if not is_digits(cleaned):
        raise InvalidValue(kind, text, "not a whole number; use e.g. 10 or unlimited")
    if len(cleaned.lstrip("0")) > len(str(MAX_COUNT)) or int(cleaned) > MAX_COUNT:
        raise InvalidValue(kind, text, "too large", "use unlimited for no limit")
    return int(cleaned)


_TRUE_WORDS = frozenset({"true", "on", "yes", "1"})
_FALSE_WORDS = frozenset({"false", "off", "no", "0"})


def parse_bool(text: str) -> bool:
    """A switch: true/false, on/off, yes/no or 1/0, in any case."""
    cleaned = text.strip().lower()
    if cleaned in _TRUE_WORDS:
        return True
    if cleaned in _FALSE_WORDS:
        return False
    raise InvalidValue("switch", text, "use on or off (also true/false, yes/no, 1/0)")


def format_duration(ms: int | None) -> str:
    """Normalized form shown next to every duration: exact seconds (``0.3 s``).

    The output parses back to the same value with :func:`parse_duration`.
    """
    if ms is None:
        return "infinite"
    seconds, millis = divmod(ms, 1000)
    if millis == 0:
        return f"{seconds} s"
    return f"{seconds}.{millis:03d}".rstrip("0") + " s"


def format_size(size: int | None) -> str:
    """Normalized form shown next to every size: exact bytes (``1073741824 B``)."""
    return "infinite" if size is None else f"{size} B"


_DESCRIBE_DURATION_UNITS = (("d", MS_PER_DAY), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1))


def describe_duration(ms: int | None) -> str:
    """Short form for UIs, largest units first (``1d 2h 3m 4s``, ``300ms``, ``7d``).

    Exact, and accepted back by :func:`parse_duration`.
    """
    if ms is None:
        return "infinite"
    if ms == 0:
        return "0s"
    parts = []
    for unit, unit_ms in _DESCRIBE_DURATION_UNITS:
        amount, ms = divmod(ms, unit_ms)
        if amount:
            parts.append(f"{amount}{unit}")
    return " ".join(parts)


_IEC_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def describe_size(size: int | None) -> str:
    """Short form for UIs in IEC units (``1 GiB``, ``34.3 GiB``, ``512 B``).

    A whole number means exact; one decimal means rounded (``1.0 GiB`` is close to,
    but not exactly, 1 GiB).
    """
    if size is None:
        return "infinite"
    if size < 1024:
        return f"{size} B"
    power = 1
    while power < len(_IEC_UNITS) and round(size / 1024**power, 1) >= 1024:
        power += 1
    scale = 1024**power
    unit = _IEC_UNITS[power - 1]
    if size % scale == 0:
        return f"{size // scale} {unit}"
    return f"{size / scale:.1f} {unit}"
