"""A damaged catalog is diagnosed, never a traceback: every command that meets a
malformed, cut short, emptied or missing ``catalog.db`` says so in one line naming
the file and the remedy (exit 2); ``ebb verify`` reports it as a finding (exit 1)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.broker import Broker
from engine.errors import CatalogBusy, CatalogDamaged
from tests.support.catalog_damage import DAMAGES, corrupt_table

TOPIC = "orders"


@pytest.fixture
def filled(ebb, data_dir: Path) -> Path:
    assert ebb("topic", "create", TOPIC, "--partitions", "2").code == 0
    assert ebb("produce", TOPIC, "--count", "200", "--size", "40").code == 0
    assert ebb("group", "create", TOPIC, "audit").code == 0
    return data_dir / "catalog.db"


def assert_one_line_with_remedy(result, catalog: Path) -> None:
    assert result.code == 2, result
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ebb: error: "), result.err
    assert str(catalog) in lines[0] and "ebb verify --repair" in lines[0]
    assert "Traceback" not in result.err


COMMANDS = [("topic", "list"), ("topic", "describe", TOPIC), ("produce", TOPIC, "--count", "3")]


@pytest.mark.parametrize(
    ("damage", "command"),
    [(d, c) for d in sorted(DAMAGES) for c in COMMANDS]
    # A consumer reads no segment row: a damaged page of that table is not its to meet.
    + [(d, ("consume", TOPIC, "--group", "audit")) for d in sorted(DAMAGES) if d != "corrupted"],
)
def test_a_command_on_a_damaged_catalog_says_so_in_one_line(ebb, filled: Path, damage: str, command) -> None:
    DAMAGES[damage](filled)
    assert_one_line_with_remedy(ebb(*command), filled)


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_verify_reports_a_damaged_catalog_as_a_finding(ebb, filled: Path, damage: str) -> None:
    DAMAGES[damage](filled)
    result = ebb("verify", "--json")
    assert result.code == 1, result
    assert "Traceback" not in result.err
    report = json.loads(result.out)
    assert [f["code"] for f in report["findings"]] == ["CATALOG_DAMAGED"]
    assert report["findings"][0]["repairable"] is True
    assert str(filled) in report["findings"][0]["what"]


def test_verify_names_what_sqlites_integrity_check_found(ebb, filled: Path) -> None:
    corrupt_table(filled)
    result = ebb("verify")
    assert result.code == 1
    assert "catalog.db" in result.out and ("integrity check" in result.out or "malformed" in result.out)
    # Nothing was changed by looking.
    assert not list(filled.parent.glob("catalog.db.damaged-*"))


def test_the_damage_reaches_the_terminal_as_one_line_from_a_real_process(filled: Path) -> None:
    corrupt_table(filled)
    done = subprocess.run(
        [sys.executable, "-m", "console.cli.main", "--data-dir", str(filled.parent), "topic", "describe", TOPIC],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "ebb verify --repair" in done.stderr


def test_a_new_data_directory_is_still_created_without_a_catalog(ebb, data_dir: Path) -> None:
    """Missing is damage only where topics exist: a fresh directory starts a catalog."""
    assert ebb("topic", "list").code == 0
    assert (data_dir / "catalog.db").exists()


def test_the_broker_refuses_a_missing_catalog_instead_of_starting_an_empty_one(filled: Path) -> None:
    filled.unlink()
    with pytest.raises(CatalogDamaged, match="is missing"):
        Broker(filled.parent)
    assert not filled.exists()


def test_a_busy_catalog_names_the_process_that_holds_it(filled: Path, tmp_path: Path) -> None:
    """A process holding the catalog's write lock (frozen, say): the one waiting is
    told who it is once its busy timeout passes."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sqlite3, sys, time\n"
                f"c = sqlite3.connect({str(filled)!r}, isolation_level=None)\n"
                "c.execute('BEGIN IMMEDIATE'); c.execute('DELETE FROM engine_state')\n"
                "print('locked', flush=True); time.sleep(60)\n"
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with Broker(filled.parent) as broker:
            broker.catalog.db.conn.execute("PRAGMA busy_timeout = 100")
            with pytest.raises(CatalogBusy, match=f"process {holder.pid} holds it"):
                broker.create_group(TOPIC, "late")
    finally:
        holder.kill()
        holder.wait()


async def test_the_console_shows_a_damaged_catalog_as_a_notification(make_console, console_data: Path) -> None:
    from tests.support.console_fixtures import TERMINAL, raised_toasts, settle

    corrupt_table(console_data / "catalog.db")
    app = make_console()
    async with app.run_test(size=TERMINAL) as pilot:
        await settle(pilot)
        messages = [str(n.message) for n in raised_toasts(app)]
        assert any(str(console_data / "catalog.db") in m and "ebb verify --repair" in m for m in messages), messages
        assert app.is_running


class _ReadySpark:
    """A Spark engine that is ready at once: the engine's loop without a JVM."""

    state, description, error, log_file = "ready", "fake", None, Path("spark.log")

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


def test_the_engine_stops_on_a_damaged_catalog_with_one_line(
    ebb, filled: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class PrunerMeetingTheDamage:
        def __init__(self, broker: Broker, spark: object) -> None:
            self.broker, self.spark = broker, spark

        def cycle(self, **_kwargs: object) -> None:
            self.broker.describe(TOPIC)  # reads the damaged segments page

    # engine_cmd imports both when run
    monkeypatch.setattr("engine.prune.session.spark_engine_for", lambda *args, **kwargs: _ReadySpark())
    monkeypatch.setattr("engine.prune.pruner.Pruner", PrunerMeetingTheDamage)
    corrupt_table(filled)
    # Without the stop, three failed cycles and exit 0.
    result = ebb("engine", "--prune-interval", "100ms", "--cycles", "3")
    assert_one_line_with_remedy(result, filled)
    assert result.out.count("failed") == 1


def test_a_process_whose_catalog_was_deleted_under_it_refuses_to_write(filled: Path) -> None:
    """A long-running process (the engine, the console) keeps the deleted file open:
    its writes would reach no one, so it refuses them."""
    with Broker(filled.parent) as broker:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{filled}{suffix}").unlink(missing_ok=True)
        with pytest.raises(CatalogDamaged, match="was deleted while this process had it open"):
            broker.create_group(TOPIC, "late")
        assert broker.catalog.damage is not None
