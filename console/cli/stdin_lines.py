"""``ebb produce``'s standard input as it arrives: its lines, and a lull each time
nothing more came for a moment, so that a producer fed by a pipe that stays open
(``tail -f app.log | ebb produce logs``) writes and acknowledges each line soon
after it arrives rather than when 1000 have (Kafka's console producer sends what it
has after ``linger.ms`` too)."""

from __future__ import annotations

import io
import os
import select
from collections.abc import Iterator
from typing import BinaryIO

from engine.producing import LULL, Lull

#: how long input may pause before what arrived is written
LINGER_SECONDS = 0.1

#: bytes read at once
_CHUNK = 1 << 16


def lines_as_they_arrive(stream: BinaryIO, linger_seconds: float = LINGER_SECONDS) -> Iterator[bytes | Lull]:
    """The lines of ``stream`` without their ``\\n`` (the last one also where it has
    none), with :data:`LULL` after the lines that arrived before a pause. A stream
    with no file descriptor (a test's) is read whole, as lines only."""
    try:
        fd = stream.fileno()
    except (OSError, io.UnsupportedOperation):
        for line in stream:
            yield line.removesuffix(b"\n")
        return
    pending = b""
    since_lull = False
    while True:
        if since_lull and not _readable(fd, linger_seconds):
            yield LULL
            since_lull = False
        chunk = os.read(fd, _CHUNK)  # blocks until input or its end
        if not chunk:
            break
        *lines, pending = (pending + chunk).split(b"\n")
        yield from lines
        since_lull = since_lull or bool(lines)
    if pending:
        yield pending


def _readable(fd: int, timeout: float) -> bool:
    readable, _, _ = select.select([fd], [], [], timeout)
    return bool(readable)
