"""Standard streams that fail as one error line, never as a traceback.

Two ways an operator's shell can leave ``ebb`` without a usable stream:

- a stream closed at start (``ebb ... >&-``, ``<&-``, ``2>&-``): Python then sets
  ``sys.stdout`` (or ``stdin``, ``stderr``) to None, and the next file the command
  opens takes the free descriptor, so whatever a child process (the Spark supervisor,
  the JVM) writes to "its stdout" would land in a segment file;
- a stream that refuses writes (``>/dev/full``, a full disk, a revoked terminal):
  ``print`` raises ``OSError`` from deep inside a command.

A reader that went away (``ebb ... | head -1``) is not an error and stays a
``BrokenPipeError`` for console/cli/main.py.
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO

from engine.errors import EbbError

_STREAMS = (("stdin", 0, "r"), ("stdout", 1, "w"), ("stderr", 2, "w"))


class OutputFailed(EbbError):
    """Standard output could not be written (or is closed)."""


def reopen_closed_streams() -> set[str]:
    """Point every standard descriptor that is closed at /dev/null, so no file the
    command opens takes it, and give Python a stream on it; the names that were closed.

    Only a stream Python found closed (None) is touched: one a caller replaced (a test's
    StringIO) is left as it is."""
    closed = set()
    for name, fd, mode in _STREAMS:
        if getattr(sys, name) is not None:
            continue
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            closed.add(name)
        setattr(sys, name, os.fdopen(fd, mode, closefd=False))
    return closed


def discard_pending_output(stream: TextIO) -> None:
    """Send what is still buffered for ``stream`` to /dev/null: the interpreter flushes
    stdout at exit, and a second failure there would print an "Exception ignored"
    report and exit 120 after our one line. A stream without a descriptor (a test's
    StringIO) has nothing to discard."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError):  # io.UnsupportedOperation is both
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


class GuardedOutput:
    """``sys.stdout`` while a command runs: a write or flush that fails (other than a
    reader going away) raises :class:`OutputFailed`, one line naming the cause."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as error:
            raise _failed(error) from None

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            raise
        except OSError as error:
            raise _failed(error) from None

    def __getattr__(self, name: str) -> Any:
        # isatty, fileno, encoding, buffer...: the real stream's.
        return getattr(self.stream, name)


def _failed(error: OSError) -> OutputFailed:
    return OutputFailed(f"cannot write to standard output: {error.strerror or error}")
