"""What the Engine view shows: this console's Spark engine and schedule (from memory),
the pause switch and the recent cycles of any process (from the journal)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from console.host import ConsoleHost, EngineStatus
from console.model.overview import CYCLE_HISTORY
from engine.journal.journal import Journal
from engine.journal.rows import Cycle
from engine.journal.state import EngineState


@dataclass(frozen=True)
class EngineData:
    now: int
    status: EngineStatus
    #: where this console's Spark engine writes its diagnostics
    log_file: Path
    paused: bool
    #: newest first, journal rows of any process
    cycles: tuple[Cycle, ...]


def load_engine(host: ConsoleHost) -> EngineData:
    with host.reading() as broker:
        catalog = broker.catalog
        with catalog.read():
            paused = EngineState(catalog).is_paused()
            cycles = Journal(catalog).cycles(limit=CYCLE_HISTORY)
    status = host.engine_status()
    return EngineData(host.clock(), status, status.log_file, paused, tuple(cycles))
