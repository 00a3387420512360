"""``ebb`` as a child forked from the test process, for tests that kill a command
with SIGKILL: the child has the engine imported already, so it starts in
milliseconds rather than an interpreter start, and a SIGKILL ends it as it ends any
process (tests/faults/campaign forks its workers the same way)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import BinaryIO

from console.cli.main import main


class ForkedEbb:
    """``ebb --data-dir DATA ARGS...`` running in a forked child, its stdout a pipe
    (as ``subprocess.Popen(..., stdout=PIPE, stderr=DEVNULL)`` would give)."""

    def __init__(self, data_dir: Path, *args: str) -> None:
        read_end, write_end = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns into the test's stack
            code = 1
            try:
                os.close(read_end)
                os.dup2(write_end, 1)
                os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
                # Block-buffered like a fresh interpreter's stdout on a pipe.
                sys.stdout = open(1, "w", closefd=False)
                sys.stderr = open(2, "w", closefd=False)
                code = main(["--data-dir", str(data_dir), *args])
                sys.stdout.flush()
            finally:
                os._exit(code)
        os.close(write_end)
        self.stdout: BinaryIO = os.fdopen(read_end, "rb", buffering=0)
        self.returncode: int | None = None

    def kill(self) -> None:
        if self.returncode is None:
            os.kill(self.pid, signal.SIGKILL)

    def communicate(self) -> bytes:
        """The rest of its stdout, once it has ended (reaped)."""
        chunks = []
        while chunk := self.stdout.read(1 << 16):
            chunks.append(chunk)
        self.stdout.close()
        _pid, status = os.waitpid(self.pid, 0)
        self.returncode = os.waitstatus_to_exitcode(status)
        return b"".join(chunks)
