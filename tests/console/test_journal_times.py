"""One truth about a cycle's duration (issue 14, item 6): the journal records how long
a cycle planned and applied, and every place that shows a cycle's time (the Journal's
cycles, the Engine view, the Overview's engine panel, ``ebb log --cycles`` as a table
and as JSON, the metrics' histogram) shows the same whole cycle with that split. A
journal written before the split opens and reads the old cycles' whole time as
unknown."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

from rich.style import Style

from console import format
from console.screens.journal import CYCLE_COLUMNS, ENGINE_CYCLE_COLUMNS, cycle_row
from console.widgets.cells import Palette
from console.widgets.engine_panel import last_cycle_line
from engine.broker import Broker
from engine.clock import format_instant
from engine.datadir import DataDir
from engine.integrity.rebuild import rebuild_catalog
from engine.journal.journal import Journal
from engine.metrics.collector import EbbCollector

PLAIN = Palette(*(Style() for _ in range(5)))
T = 1_790_000_000_000
#: a dry run planned a day ahead (``--now``): its plan instant says nothing of its time
FUTURE = T + 86_400_000
PLAN_MS, APPLY_MS = 1_600, 500


def _journal_one_cycle(data_dir: Path) -> int:
    with Broker(data_dir, clock=lambda: T) as broker:
        journal = Journal(broker.catalog)
        cycle = journal.start_cycle(
            trigger="manual", actor="ops", scope="all", now=FUTURE, started=T, spark_master=None, plan_ms=PLAN_MS
        )
        journal.finish_cycle(cycle, status="done", finished=T + APPLY_MS, planned=2, applied=2, bytes_freed=10)
    return cycle


def _cells(row, columns) -> dict[str, str]:
    return {c.key: str(cell) for c, cell in zip(columns, row.cells, strict=True)}


def _histogram_sums(data_dir: Path) -> dict[str, float]:
    families = {f.name: f for f in EbbCollector(data_dir, None).collect()}
    return {
        s.labels["phase"]: s.value
        for s in families["ebbtide_cycle_duration_seconds"].samples
        if s.name.endswith("_sum")
    }


def test_every_surface_shows_the_same_cycle_time(data_dir: Path, ebb) -> None:
    cycle_id = _journal_one_cycle(data_dir)
    with Broker(data_dir) as broker:
        (cycle,) = Journal(broker.catalog).cycles()
    assert (cycle.duration_ms, cycle.plan_ms, cycle.apply_ms) == (PLAN_MS + APPLY_MS, PLAN_MS, APPLY_MS)

    whole, planning, applying = "2.1 s", "1.6 s", "500 ms"
    assert _cells(cycle_row(cycle, PLAIN), CYCLE_COLUMNS)["duration"] == whole
    engine_view = _cells(cycle_row(cycle, PLAIN, split=True), ENGINE_CYCLE_COLUMNS)
    assert (engine_view["duration"], engine_view["plan"], engine_view["apply"]) == (whole, planning, applying)
    assert f", took {whole} (plan {planning}, apply {applying})" in last_cycle_line(cycle, T + 1_000)

    table = ebb("log", "--cycles")
    assert table.code == 0, table.err
    header, row = (re.split(r"\s{2,}", line) for line in table.out.splitlines())
    columns = dict(zip(header, row, strict=False))
    assert (columns["DURATION"], columns["PLAN"], columns["APPLY"]) == (whole, planning, applying)

    # Started is when the cycle began, its planning included: started + took = finished
    # (the journal's `started`, in JSON, is when applying began).
    began = T - PLAN_MS
    assert cycle.began == began and cycle.began + (cycle.duration_ms or 0) == cycle.finished
    assert _cells(cycle_row(cycle, PLAIN), CYCLE_COLUMNS)["started"] == format.instant(began)
    assert columns["STARTED"] == format_instant(began)
    listed = ebb("log", "--cycles", "--json")
    (exported,) = json.loads(listed.out)
    assert exported["id"] == cycle_id
    assert (exported["duration_ms"], exported["plan_ms"], exported["apply_ms"]) == (2_100, PLAN_MS, APPLY_MS)

    assert _histogram_sums(data_dir) == {"plan": 1.6, "apply": 0.5, "cycle": 2.1}


def _age_journal(data_dir: Path) -> None:
    """Make the journal one written before the split: no plan_ms or apply_ms, and
    ``duration_ms`` the applying alone."""
    conn = sqlite3.connect(data_dir / "catalog.db")
    with conn:
        conn.execute("UPDATE cycles SET duration_ms = apply_ms")
        conn.execute("ALTER TABLE cycles DROP COLUMN plan_ms")
        conn.execute("ALTER TABLE cycles DROP COLUMN apply_ms")
    conn.close()


def test_an_old_journal_reads_its_cycles_time_as_unknown(data_dir: Path, ebb) -> None:
    _journal_one_cycle(data_dir)
    _age_journal(data_dir)

    # read as it is, without altering it: a read-only user's view
    before = (data_dir / "catalog.db").read_bytes()
    with Broker(data_dir) as broker:
        (old,) = Journal(broker.catalog).cycles()
    assert (old.duration_ms, old.plan_ms, old.apply_ms) == (None, None, APPLY_MS)
    assert (data_dir / "catalog.db").read_bytes() == before
    cells = _cells(cycle_row(old, PLAIN, split=True), ENGINE_CYCLE_COLUMNS)
    assert (cells["duration"], cells["plan"], cells["apply"]) == ("unknown", "unknown", "500 ms")
    assert ", took unknown (plan unknown, apply 500 ms)" in last_cycle_line(old, T)
    listed = ebb("--read-only", "log", "--cycles", "--json")
    assert listed.code == 0, listed.err
    (exported,) = json.loads(listed.out)
    assert (exported["duration_ms"], exported["plan_ms"], exported["apply_ms"]) == (None, None, APPLY_MS)
    assert _histogram_sums(data_dir) == {"plan": 0.0, "apply": 0.5, "cycle": 0.0}

    # the next cycle gives the journal the new columns; the old cycle stays unknown
    _journal_one_cycle(data_dir)
    with Broker(data_dir) as broker:
        new, old = Journal(broker.catalog).cycles()
    assert (new.duration_ms, new.plan_ms, new.apply_ms) == (PLAN_MS + APPLY_MS, PLAN_MS, APPLY_MS)
    assert (old.duration_ms, old.plan_ms, old.apply_ms) == (None, None, APPLY_MS)


def test_a_rebuilt_catalog_keeps_an_old_journals_cycles_as_unknown(data_dir: Path) -> None:
    """``ebb verify --repair`` carries an older journal's cycles into a new catalog:
    their duration (the applying alone) must not turn into a whole cycle's."""
    _journal_one_cycle(data_dir)
    _age_journal(data_dir)
    rebuild_catalog(DataDir(data_dir), {}, now=T, actor="test")
    with Broker(data_dir) as broker:
        old = next(c for c in Journal(broker.catalog).cycles() if c.trigger == "manual")
    assert (old.duration_ms, old.plan_ms, old.apply_ms) == (None, None, APPLY_MS)
