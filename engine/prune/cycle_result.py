"""What one prune cycle did: the one result type of a cycle, from the executor that
applies it to the scheduler, the CLI and the console that report it.

The executor fills in what it applied; :meth:`Pruner.cycle` adds the plan; the
scheduler adds its wall-clock span, and makes one itself for a cycle that failed or
was cancelled before the executor ran (``status`` ``failed`` or ``cancelled``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from engine.journal.rows import CycleStatus

if TYPE_CHECKING:
    # Type only: the plan's module loads Arrow, which a cycle's reader need not.
    from engine.prune.planner import Plan


@dataclass(frozen=True)
class CycleResult:
    #: the journal's cycle id; None if nothing could be journaled
    cycle_id: int | None
    #: the journal's cycle status, or ``cancelled`` for a scheduled plan stopped by
    #: ``Scheduler.stop`` (not journaled)
    status: CycleStatus | Literal["cancelled"]
    #: wall clock (epoch ms) of the start and the end: the executor's own, or the
    #: scheduler's for a scheduled cycle (planning included)
    started: int
    finished: int
    #: segment deletions planned and done
    planned: int = 0
    applied: int = 0
    bytes_freed: int = 0
    #: topic, or "topic/partition", -> why the plan was not applied there
    skipped: dict[str, str] = field(default_factory=dict)
    #: topic -> error
    failed: dict[str, str] = field(default_factory=dict)
    #: ids of interrupted cycles recovered before this one
    recovered: tuple[int, ...] = ()
    #: the part of ``skipped`` whose writer lock another process held too long
    locked: dict[str, str] = field(default_factory=dict)
    #: the plan applied; None from the executor alone and for a cycle that never planned
    plan: Plan | None = None
    #: why the cycle failed, or the topics that failed in it (scheduled cycles)
    error: str | None = None

    @property
    def duration_ms(self) -> int:
        return self.finished - self.started
