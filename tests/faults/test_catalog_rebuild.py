"""The catalog can be rebuilt from the data directory: after ``rm catalog.db`` (or a
damaged or cut-short one) and ``ebb verify --repair``, every topic, policy, group and
acknowledged record above the log start is back, ``ebb verify`` is clean, and
``topic describe --json`` is what it was (positions at most one cycle old, never
ahead of an acknowledged commit)."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.broker import Broker
from engine.catalog import metadata_files
from engine.catalog.metadata_files import read_groups, read_topic
from engine.errors import DataQuarantined
from engine.journal.journal import Journal
from engine.journal.state import EngineState
from engine.store.batch import NewRecord
from tests.support.catalog_damage import DAMAGES, corrupt_table
from tests.support.cli import REPO, ebb_command, subprocess_env

TOPIC = "orders"
OTHER = "audit-log"


def describe(ebb, topic: str) -> dict:
    result = ebb("topic", "describe", topic, "--json")
    assert result.code == 0, result
    return json.loads(result.out)


def consume_all(ebb, topic: str, group: str) -> list[str]:
    result = ebb("consume", topic, "--group", group, "--max", "100000", "--no-commit", "--json")
    assert result.code == 0, result
    return sorted(result.out.splitlines())


@pytest.fixture
def populated(ebb, data_dir: Path) -> Path:
    """Two topics with overrides, sealed segments, a log start moved inside a segment,
    a subscriber and a reader with committed positions."""
    for args in (
        ("topic", "create", TOPIC, "--partitions", "3", "--segment-size", "4096", "--retention-time", "7d"),
        ("topic", "create", OTHER, "--retention-size", "1MiB", "--hold"),
        *(("produce", TOPIC, "--partition", str(p), "--count", "200", "--size", "50") for p in range(3)),
        ("produce", OTHER, "--count", "40"),
        ("truncate", TOPIC, "--partition", "1", "--before-offset", "77"),
        ("group", "create", TOPIC, "billing"),
        ("group", "create", TOPIC, "peek", "--kind", "reader"),
        ("consume", TOPIC, "--group", "billing", "--max", "130"),
        ("group", "commit", TOPIC, "peek", "--partition", "2", "--offset", "150"),
    ):
        result = ebb(*args)
        assert result.code == 0, (args, result)
    return data_dir / "catalog.db"


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_verify_repair_rebuilds_a_lost_catalog_as_it_was(ebb, populated: Path, damage: str) -> None:
    before = {t: describe(ebb, t) for t in (TOPIC, OTHER)}
    records = {t: consume_all(ebb, t, "check") for t in (TOPIC, OTHER)}
    assert before[TOPIC]["partitions"][1]["log_start_offset"] == 77
    assert before[OTHER]["policy"]["hold"]["value"] == "on"
    DAMAGES[damage](populated)

    repaired = ebb("verify", "--repair")
    assert repaired.code == 1, repaired
    assert "catalog rebuilt from the data directory: 2 topic(s), 2 group(s)" in repaired.out
    assert "remains:" not in repaired.out
    if damage == "a directory":  # no journal in it to keep, and no error opening one
        assert "rebuilt, but" not in repaired.out
    assert ebb("verify").code == 0

    assert {t: describe(ebb, t) for t in (TOPIC, OTHER)} == before
    assert {t: consume_all(ebb, t, "check") for t in (TOPIC, OTHER)} == records
    with Broker(populated.parent) as broker:
        assert [a.reason for a in Journal(broker.catalog).actions(action="repair")] == ["CATALOG_REBUILT"]
    aside = [p for p in populated.parent.glob("catalog.db.damaged-*") if not p.name.endswith(("-wal", "-shm"))]
    assert len(aside) == (0 if damage == "deleted" else 1)


def test_a_rebuilt_catalog_takes_appends_commits_and_changes_on(ebb, populated: Path) -> None:
    end = describe(ebb, TOPIC)["partitions"][0]["next_offset"]
    corrupt_table(populated)
    assert ebb("verify", "--repair").code == 1
    assert ebb("produce", TOPIC, "--partition", "0", "--count", "5").code == 0
    assert describe(ebb, TOPIC)["partitions"][0]["next_offset"] == end + 5
    assert ebb("topic", "alter", TOPIC, "--retention-time", "1d").code == 0
    assert ebb("verify").code == 0


def test_the_metadata_files_follow_every_change(ebb, populated: Path) -> None:
    topic_dir = populated.parent / "topics" / TOPIC
    assert ebb("topic", "alter", TOPIC, "--max-time", "30d").code == 0
    meta = read_topic(topic_dir)
    assert meta is not None and meta.partitions == 3 and meta.policy["max_time"] == "30d"
    assert meta.log_starts[1] == 77
    assert ebb("truncate", TOPIC, "--partition", "0", "--before-offset", "10").code == 0
    assert read_topic(topic_dir).log_starts[0] == 10  # type: ignore[union-attr]
    assert ebb("group", "delete", TOPIC, "peek").code == 0
    assert [g.name for g in read_groups(topic_dir)] == ["billing"]
    assert ebb("topic", "delete", TOPIC).code == 0
    assert not topic_dir.exists()


def test_positions_in_the_file_lag_the_catalog_never_lead_it(data_dir: Path) -> None:
    with Broker(data_dir) as broker:
        broker.create_topic(TOPIC, 1)
        broker.produce(TOPIC, [NewRecord(b"v%d" % i) for i in range(50)])
        broker.create_group(TOPIC, "g")
        topic_dir = broker.data.topic_dir(TOPIC)
        broker.commit(TOPIC, "g", 0, 40)
        # Forward: lazily written (at close or at the end of a cycle); the file lags.
        assert read_groups(topic_dir)[0].positions[0][0] == 0
        broker.commit(TOPIC, "g", 0, 25)
        # Back: written before the commit returns; the file never leads.
        assert read_groups(topic_dir)[0].positions[0][0] == 25
        broker.commit(TOPIC, "g", 0, 45)
    # Closing writes what was committed.
    assert read_groups(data_dir / "topics" / TOPIC)[0].positions[0][0] == 45


def test_a_topic_whose_metadata_file_was_never_written_comes_back_with_its_records(ebb, populated: Path) -> None:
    """A crash between the commit of a create and the file's write: the directory
    alone brings the topic back, with its partitions and records, default policy."""
    before = describe(ebb, OTHER)
    (populated.parent / "topics" / OTHER / "topic.json").unlink()
    assert ebb("verify").code == 1  # the missing file is reported
    populated.unlink()
    result = ebb("verify", "--repair")
    assert "had no topic.json" in result.out
    after = describe(ebb, OTHER)
    assert after["partitions"] == before["partitions"]
    assert ebb("verify").code == 0


def test_a_damaged_metadata_file_is_named_as_damaged_not_as_missing(ebb, populated: Path) -> None:
    """The rebuild says what was wrong with the file it found, not that there was
    none, and brings the topic back from its partition directories."""
    before = describe(ebb, OTHER)
    topic_file = populated.parent / "topics" / OTHER / "topic.json"
    topic_file.write_text('{"format": 1, "name": ')  # cut off mid-write
    populated.unlink()
    result = ebb("verify", "--repair")
    assert "had no topic.json" not in result.out
    assert f"{topic_file} cannot be read" in result.out
    count = len(before["partitions"])
    assert f"topic {OTHER} rebuilt from its {count} partition(s), no overrides" in result.out
    assert describe(ebb, OTHER)["partitions"] == before["partitions"]
    assert ebb("verify").code == 0


def test_verify_repair_rewrites_a_stale_metadata_file(ebb, populated: Path) -> None:
    topic_file = populated.parent / "topics" / TOPIC / "topic.json"
    topic_file.write_text(topic_file.read_text().replace('"partitions": 3', '"partitions": 2'))
    found = ebb("verify")
    assert found.code == 1 and "orders/topic.json: metadata file not what the catalog holds" in found.out
    repaired = ebb("verify", "--repair")
    assert "repaired: orders/topic.json: rewritten from the catalog" in repaired.out
    assert read_topic(topic_file.parent).partitions == 3  # type: ignore[union-attr]
    assert ebb("verify").code == 0


def test_a_rebuild_is_refused_while_another_process_has_the_catalog_open(ebb, populated: Path) -> None:
    corrupt_table(populated)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sqlite3, time\n"
                f"c = sqlite3.connect({str(populated)!r}); c.execute('PRAGMA schema_version').fetchone()\n"
                "print('open', flush=True); time.sleep(60)\n"
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        result = ebb("verify", "--repair")
        assert result.code == 2 and f"still open in process {holder.pid}" in result.err
        assert not list(populated.parent.glob("catalog.db.damaged-*"))
    finally:
        holder.kill()
        holder.wait()
    assert ebb("verify", "--repair").code == 1
    assert ebb("verify").code == 0


def test_a_prune_cycle_writes_the_positions_committed_since(data_dir: Path) -> None:
    """Forward positions are written at the latest at the end of each cycle, by the
    engine, whoever committed them: at most one cycle old."""
    from engine.prune.executor import execute
    from tests.faults.campaign.workload import reference_work

    with Broker(data_dir) as engine, Broker(data_dir) as consumer:
        engine.create_topic(TOPIC, 1)
        engine.produce(TOPIC, [NewRecord(b"v%d" % i) for i in range(20)])
        consumer.create_group(TOPIC, "g")
        consumer.commit(TOPIC, "g", 0, 12)
        topic_dir = engine.data.topic_dir(TOPIC)
        assert read_groups(topic_dir)[0].positions[0][0] == 0  # the consumer's process is still up
        execute(engine, reference_work(engine, engine.clock()), now=engine.clock())
        assert read_groups(topic_dir)[0].positions[0][0] == 12


@pytest.mark.parametrize("damage", ["truncated", "deleted"])
def test_two_repairs_at_once_leave_one_rebuilt_catalog(ebb, populated: Path, damage: str) -> None:
    """An audit: two `ebb verify --repair` at once each rebuilt the catalog, one moving
    the other's aside; one died with a traceback, and in one run of four neither left
    a catalog in place. The second now waits and repairs what the first rebuilt."""
    before = describe(ebb, TOPIC)
    DAMAGES[damage](populated)
    command = ebb_command(populated.parent, "verify", "--repair")
    runs = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, env=subprocess_env())
        for _ in range(2)
    ]
    done = [run.communicate(timeout=120) for run in runs]
    for run, (out, err) in zip(runs, done, strict=True):
        assert run.returncode in (0, 1) and b"Traceback" not in err and err == b"", (out, err)
    said = b"".join(out for out, _err in done)
    assert said.count(b"catalog rebuilt from the data directory: 2 topic(s)") == 1, said
    assert populated.exists() and ebb("verify").code == 0
    assert describe(ebb, TOPIC) == before
    with Broker(populated.parent) as broker:
        assert [a.reason for a in Journal(broker.catalog).actions(action="repair")] == ["CATALOG_REBUILT"]


def _full_disk(path: Path, data: bytes, flags: int = 0) -> None:
    path.write_bytes(data[:5])  # what a write cut by ENOSPC leaves
    raise OSError(errno.ENOSPC, "No space left on device", str(path))


def test_a_metadata_file_that_cannot_be_written_fails_nothing_and_catches_up(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk when the file is written: the change is committed (acknowledged)
    all the same, the old file stays whole, and the next commit writes it."""
    written = metadata_files.write_durably
    with Broker(data_dir) as broker:
        broker.create_topic(TOPIC, 1)
        topic_dir = broker.data.topic_dir(TOPIC)
        monkeypatch.setattr(metadata_files, "write_durably", _full_disk)
        broker.alter_topic(TOPIC, {"retention_time": "2d"})
        assert broker.policy(TOPIC)["retention_time"] == 2 * 86_400_000
        assert read_topic(topic_dir).policy == {}  # type: ignore[union-attr]
        assert not (topic_dir / ".topic.json.tmp").exists()
        monkeypatch.setattr(metadata_files, "write_durably", written)
        broker.create_group(TOPIC, "later")
        assert read_topic(topic_dir).policy == {"retention_time": "2d"}  # type: ignore[union-attr]


def test_a_command_whose_metadata_files_cannot_follow_says_so_in_one_warning(
    ebb, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the files a lost catalog is rebuilt from, the change would be lost with
    it: the operator hears of it from the command, not only from `ebb verify`."""
    assert ebb("topic", "create", TOPIC).code == 0
    written = metadata_files.write_durably
    monkeypatch.setattr(metadata_files, "write_durably", _full_disk)
    altered = ebb("topic", "alter", TOPIC, "--retention-time", "2d")
    assert altered.code == 0 and "retention_time" in altered.out
    assert altered.err.count("\n") == 1, altered.err
    assert altered.err.startswith("ebb: warning: done, but the metadata files beside the segments could not be updated")
    assert "No space left on device (ENOSPC)" in altered.err and "ebb verify" in altered.err
    monkeypatch.setattr(metadata_files, "write_durably", written)
    caught_up = ebb("topic", "alter", TOPIC, "--retention-size", "1GiB")
    assert caught_up.code == 0 and caught_up.err == "", caught_up.err
    assert read_topic(data_dir / "topics" / TOPIC).policy == {"retention_time": "2d", "retention_size": "1GiB"}  # type: ignore[union-attr]


def test_a_quarantined_range_is_still_named_after_a_rebuild(ebb, data_dir: Path) -> None:
    assert ebb("topic", "create", TOPIC, "--segment-size", "4096").code == 0
    for _ in range(5):
        assert ebb("produce", TOPIC, "--count", "50", "--size", "40").code == 0
    middle = sorted((data_dir / "topics" / TOPIC / "0").glob("*.log"))[1]
    with open(middle, "r+b") as f:
        f.seek(100)
        f.write(b"\0" * 10)
    assert "recorded as lost" in ebb("verify", "--repair").out
    (data_dir / "catalog.db").unlink()
    assert ebb("verify", "--repair").code == 1
    assert ebb("verify").code == 0
    base = int(middle.name[: -len(".log")])
    with Broker(data_dir) as broker, pytest.raises(DataQuarantined, match=f"quarantine/{TOPIC}/0/{middle.name}"):
        broker.read(TOPIC, 0, base, 10)


def test_a_pause_of_all_deletion_survives_a_rebuild(ebb, populated: Path) -> None:
    assert ebb("pause").code == 0
    populated.unlink()
    assert ebb("verify", "--repair").code == 1
    with Broker(populated.parent) as broker:
        assert EngineState(broker.catalog).is_paused()
    assert ebb("resume").code == 0
    corrupt_table(populated)
    assert ebb("verify", "--repair").code == 1
    with Broker(populated.parent) as broker:
        assert not EngineState(broker.catalog).is_paused()


@pytest.mark.parametrize("damage", ["says resumed", "deleted", "a directory"])
def test_verify_finds_and_repair_rewrites_an_engine_file_the_catalog_contradicts(
    ebb, populated: Path, damage: str
) -> None:
    """A rebuild takes the pause of all deletion from engine.json: a wrong one would
    resume deletion that an operator paused, and verify said nothing of it."""
    engine_file = populated.parent / "engine.json"
    assert ebb("pause").code == 0 and ebb("verify").code == 0
    if damage == "says resumed":
        engine_file.write_text(engine_file.read_text().replace("true", "false"))
    else:
        engine_file.unlink()
        if damage == "a directory":
            engine_file.mkdir()
    found = ebb("verify")
    assert found.code == 1 and found.out.startswith("engine.json: metadata file "), found.out
    repaired = ebb("verify", "--repair")
    assert "repaired: engine.json: rewritten from the catalog" in repaired.out, repaired.out
    assert ebb("verify").code == 0
    populated.unlink()  # and the rebuild that file is for keeps the pause
    assert ebb("verify", "--repair").code == 1
    with Broker(populated.parent) as broker:
        assert EngineState(broker.catalog).is_paused()


def test_the_journal_is_kept_as_far_as_the_old_catalog_can_be_read(ebb, populated: Path) -> None:
    def actions() -> list[tuple[str, str | None]]:
        with Broker(populated.parent) as broker:
            return [(a.action, a.topic) for a in Journal(broker.catalog).actions(limit=None)]

    before = actions()
    assert ("move_log_start", TOPIC) in before  # the truncate
    corrupt_table(populated)
    repaired = ebb("verify", "--repair")
    assert repaired.code == 1
    after = actions()
    assert after[0] == ("repair", None) and set(before) <= set(after[1:])
    assert ebb("log", "--policy").code == 0


def test_the_charts_past_is_kept_for_the_topics_rebuilt(ebb, populated: Path, shared_spark) -> None:
    from engine.journal.history import DiskHistory

    def samples() -> list[tuple[str, int, int, int]]:
        with Broker(populated.parent) as broker:
            found = DiskHistory(broker.catalog).samples(since=0, until=2**62)
            return [(s.topic, s.time, s.bytes, s.segments) for s in found]

    assert ebb("prune").code == 0
    before = samples()
    assert {topic for topic, *_ in before} == {TOPIC, OTHER}
    corrupt_table(populated)
    assert ebb("verify", "--repair").code == 1
    assert samples() == before


def test_an_unreadable_old_journal_is_said_once(ebb, populated: Path) -> None:
    """An audit: the journal and the disk samples are salvaged from the same file,
    and a rebuild said twice that it could not read it."""
    with open(populated, "r+b") as catalog:
        catalog.write(b"not a database at all" * 5)
    repaired = ebb("verify", "--repair")
    assert "catalog rebuilt from the data directory" in repaired.out, repaired
    assert repaired.out.count("the old journal could not be") == 1, repaired.out
