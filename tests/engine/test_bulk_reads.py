"""The catalog read in bulk for the snapshot (engine/catalog/bulk_reads.py): the same
snapshot whichever way it is read, and ADBC's own SQLite never in this process.

ADBC links a second copy of SQLite; in the process that writes the catalog through
``sqlite3`` the two copies reset each other's locks and shared memory (SIGBUS in the
console, a sound catalog read as malformed). Large catalogs are therefore read by a
child process; :data:`BULK_FROM` is lowered here so that small catalogs take that path.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from engine.broker import Broker
from engine.catalog import bulk_reads
from engine.errors import CatalogDamaged
from engine.prune.record_times import StoreRecordTimes
from engine.prune.snapshot import Snapshot, build_snapshot
from tests.support.cli import REPO
from tests.support.seed_scenarios import MIN, T0, write

NOW = T0 + 2 * 60 * MIN


def fill(broker: Broker) -> None:
    """Topics of both granularities (record-level cuts), groups and policy changes."""
    broker.create_topic("t", 2, {"segment_size": "1000", "retention_time": "1h", "consumption": "protect"})
    broker.create_topic("m", 1, {"segment_size": "1000", "retention_time": "40m", "granularity": "message"})
    broker.create_topic("idle", 1, {})
    for partition in range(2):
        write(broker, "t", [T0 + i * MIN for i in range(30 + 10 * partition)], partition=partition)
    write(broker, "m", [T0 + i * MIN for i in range(90)])
    broker.create_group("t", "g", "subscriber", "earliest")
    broker.commit("t", "g", 1, 15, at_ms=T0)
    broker.create_group("m", "r", "reader", "latest")
    broker.alter_topic("t", {"retention_time": "50m"})


def as_rows(snapshot: Snapshot) -> dict[str, list[dict]]:
    return {name: table.to_pylist() for name, table in snapshot.tables.items()} | {"rejected": [snapshot.rejected]}


def snapshot_of(broker: Broker, topics: list[str] | None = None) -> Snapshot:
    return build_snapshot(broker.catalog, StoreRecordTimes(broker.data), defaults={}, now=NOW, topics=topics)


@pytest.mark.parametrize("topics", [None, ["m", "t"], ["idle"]])
def test_the_child_reads_the_same_snapshot_as_this_process(
    broker: Broker, monkeypatch: pytest.MonkeyPatch, topics: list[str] | None
) -> None:
    fill(broker)
    here = as_rows(snapshot_of(broker, topics))
    monkeypatch.setattr(bulk_reads, "BULK_FROM", 0)
    in_child = as_rows(snapshot_of(broker, topics))
    assert in_child == here
    assert [row["topic"] for row in here["topics"]] == sorted(topics or ["idle", "m", "t"])
    assert bool(here["time_cuts"]) == (topics != ["idle"])  # m's record-level cut


def test_record_level_cuts_are_found_among_the_snapshots_segments(broker: Broker) -> None:
    fill(broker)
    cuts = {
        (r["topic"], r["partition"], r["kind"]): r["offset"]
        for r in snapshot_of(broker).tables["time_cuts"].to_pylist()
    }
    # m: one record a minute from T0, 40 min retention at T0 + 120 min: the first
    # record kept is the one at T0 + 80 min, offset 80.
    assert cuts[("m", 0, "retention")] == 80
    # t has a subscriber and no TTL or backlog age: no record-level cut is needed.
    assert not [key for key in cuts if key[0] == "t"]


def test_a_damaged_catalog_read_by_the_child_is_one_line(tmp_path: Path) -> None:
    database = tmp_path / "catalog.db"
    database.write_bytes(b"not a database at all" * 200)
    with pytest.raises(CatalogDamaged, match=r"catalog .*catalog\.db is damaged .*ebb verify --repair"):
        bulk_reads.read_in_child(database, None)


def test_adbc_never_loads_in_a_process_that_writes_the_catalog(tmp_path: Path) -> None:
    """The crash's recipe, in a process of its own: write through ``sqlite3``, close
    and reopen the catalog between bulk reads, while the reads go through the child.
    Before, the second ADBC connection found the sound catalog malformed."""
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from engine.broker import Broker
        from engine.catalog import bulk_reads
        from engine.prune.record_times import StoreRecordTimes
        from engine.prune.snapshot import build_snapshot
        from tests.support.seed_scenarios import MIN, T0, write

        bulk_reads.BULK_FROM = 0
        root = Path({str(tmp_path / "data")!r})
        counts = []
        for round in range(4):
            with Broker(root) as broker:
                if round == 0:
                    broker.create_topic("t", 1, {{"segment_size": "1000"}})
                write(broker, "t", [T0 + (round * 50 + i) * MIN for i in range(50)])
                snapshot = build_snapshot(broker.catalog, StoreRecordTimes(broker.data), defaults={{}}, now=T0)
                counts.append(snapshot.tables["partitions"]["next_offset"][0].as_py())
        print(counts, "adbc_driver_manager" in sys.modules)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[50,", "100,", "150,", "200]", "False"]
