"""``ebb produce``'s standard input as it arrives: its lines, and a lull a moment
after the first line not yet written, so that a producer fed by a pipe that stays
open (``tail -f app.log | ebb produce logs``) writes and acknowledges each line soon
after it arrives rather than when 1000 have (Kafka's console producer sends what it
has after ``linger.ms`` too)."""

from __future__ import annotations

import io
import os
import select
import time
from collections.abc import Iterator
from typing import BinaryIO

from engine.producing import LULL, InterruptedWaiting, Lull

#: how long input may pause before what arrived is written
LINGER_SECONDS = 0.1

#: bytes read at once
_CHUNK = 1 << 16


def lines_as_they_arrive(stream: BinaryIO, linger_seconds: float = LINGER_SECONDS) -> Iterator[bytes | Lull]:
    """The lines of ``stream`` without their ``\\n`` (the last one also where it has
    none), with :data:`LULL` once the first line not yet followed by one is
    ``linger_seconds`` old: input that never pauses (a line every 50 ms) is written
    every ``linger_seconds`` too, as Kafka's ``linger.ms`` counts from a batch's first
    record.

    It reads ``stream``'s file descriptor, under its buffer: nothing may have read
    from ``stream`` before. A stream with no descriptor (a test's) gives its lines
    without lulls."""
    try:
        fd = stream.fileno()
    except (OSError, io.UnsupportedOperation):
        for line in stream:
            yield line.removesuffix(b"\n")
        return
    partial = bytearray()  # the line being read, up to its newline
    deadline: float | None = None  # when the lines not yet followed by a lull must be
    while True:
        chunk: bytes | None = None
        try:
            lull = deadline is not None and (
                time.monotonic() >= deadline or not _readable(fd, deadline - time.monotonic())
            )
            if not lull:
                chunk = os.read(fd, _CHUNK)  # blocks until input or its end
        except KeyboardInterrupt:
            # Ctrl-C while waiting for input: every whole line read was given. Not
            # so where it came as a chunk was read (its lines were never given); a
            # line without its newline yet is not a record.
            if partial or chunk:
                raise
            raise InterruptedWaiting from None
        if chunk is None:
            yield LULL
            deadline = None
            continue
        if not chunk:
            break
        if b"\n" not in chunk:
            partial += chunk  # a long line is gathered, not split again at each chunk
            continue
        first, *lines, rest = chunk.split(b"\n")
        yield bytes(partial + first)
        yield from lines
        partial = bytearray(rest)
        if deadline is None:
            deadline = time.monotonic() + linger_seconds
    if partial:
        yield bytes(partial)


def _readable(fd: int, timeout: float) -> bool:
    """Whether ``fd`` has input (or its end) within ``timeout`` seconds (none: at once)."""
    readable, _, _ = select.select([fd], [], [], max(timeout, 0))
    return bool(readable)
