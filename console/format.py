"""How figures read on screen: humanized sizes, ages and instants, one place for all views."""

from __future__ import annotations

import humanize

from engine.clock import utc_datetime
from engine.policy.units import describe_duration

MS_PER_SECOND = 1000


def size(n: int | None) -> str:
    """``1.5 MiB``; ``-`` for an unknown or absent size."""
    if n is None:
        return "-"
    if abs(n) < 1024:
        return f"{n} B"
    return humanize.naturalsize(n, binary=True, format="%.1f")


def age(ms: int | None) -> str:
    """A compact age such as ``3d 4h``, ``12m 5s`` or ``0s``; ``-`` when unknown.

    Two units at most: an operator reads "how old", not an exact duration."""
    if ms is None:
        return "-"
    if ms < 0:
        return "in " + age(-ms)
    seconds = ms // MS_PER_SECOND
    parts: list[str] = []
    for unit, width in (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        count, seconds = divmod(seconds, width)
        if count or (parts and len(parts) < 2):
            parts.append(f"{count}{unit}")
        if len(parts) == 2:
            break
    return " ".join(p for p in parts if not p.startswith("0")) or "0s"


def since(now: int, then: int | None) -> str:
    """The age of ``then`` at ``now`` (``-`` if there is no ``then``)."""
    return "-" if then is None else age(now - then)


def ago(now: int, then: int | None) -> str:
    """``2m 50s ago`` (``-`` if there is no ``then``): when something last happened."""
    return "-" if then is None else f"{age(now - then)} ago"


def elapsed(ms: int | None) -> str:
    """How long something took: ``900 ms``, ``2.5 s`` or ``3m 10s`` (cycles often take
    seconds, which :func:`age` would round down to whole ones)."""
    if ms is None:
        return "-"
    if ms < 1000:
        return f"{ms} ms"
    return f"{ms / 1000:.1f} s" if ms < 60_000 else age(ms)


def instant(ms: int | None) -> str:
    """``2026-11-21 10:07:20`` in UTC: short enough for a table cell."""
    if ms is None:
        return "-"
    moment = utc_datetime(ms)
    return f"{ms} ms" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S")


def duration(ms: int | None) -> str:
    """A policy duration as the operator would write it (``7d``, ``infinite``)."""
    return describe_duration(ms)


def count(n: int | None) -> str:
    """``12,345``; ``-`` when unknown."""
    return "-" if n is None else f"{n:,}"
