"""Named crash points for the crash tests of the prune cycle.

Crash safety is a claim about every instant between two durable steps, and the only
honest test of it is a process that really dies there: no ``finally`` blocks, no
flushes, no lock releases but the kernel's. A test starts a child process with
``EBB_KILL_AT=<name>``; when the child reaches the point of that name it kills itself
with SIGKILL. Unset (always, outside tests), a fault point is one dictionary lookup.
"""

from __future__ import annotations

import os
import signal

KILL_AT_ENV = "EBB_KILL_AT"

#: every fault point, in the order a prune cycle reaches them
FAULT_POINTS = (
    "after_cycle_recorded",
    "after_log_start_moved",
    "after_segment_renamed",
    "after_segment_unlinked",
    "after_segment_journaled",
    "before_cycle_finished",
)


def fault_point(name: str) -> None:
    """Die here, at once, if the environment asks for a crash at ``name``."""
    if os.environ.get(KILL_AT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
