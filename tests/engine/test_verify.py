"""``ebb verify`` and ``--repair`` (engine/integrity): corruption found at its exact
place, never served, repaired when the files prove the fix, quarantined otherwise.

Data is written through the broker; damage is done to the files and the catalog by
hand, and batch positions come from the independent parser of test_crash_recovery."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from engine.broker import Broker
from engine.errors import DataQuarantined, StoreError
from engine.integrity.check import verify
from engine.journal.journal import Journal
from engine.store.batch import NewRecord
from engine.store.segment import CorruptBatch
from tests.support.segment_files import (
    _PREFIX,
    TOPIC,
    assert_describe_agrees_with_files,
    assert_records,
    expected_index_files,
    fill,
    flip,
    key_of,
    log_files,
    parse_log,
    partition_dir,
    read_all,
    ts_of,
    value_of,
)


def check(broker: Broker):
    return verify(broker.data, broker.catalog, broker.config.policy_defaults)


def codes(findings) -> list[str]:
    return [f.code for f in findings]


def state_of(data_dir: Path, broker: Broker) -> tuple[dict[str, str], list[str]]:
    """Every file under the data directory but the catalog's (hashed), and the
    catalog's content."""
    files = {
        str(p.relative_to(data_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(data_dir.rglob("*"))
        if p.is_file() and not p.name.startswith("catalog.db")
    }
    return files, list(broker.catalog.db.conn.iterdump())


def journal_actions(broker: Broker, action: str) -> list[dict]:
    return Journal(broker.catalog).actions(action=action)


@pytest.fixture
def filled(broker: Broker, data_dir: Path) -> tuple[int, Path, list[Path]]:
    """~4 sealed segments of ~5 batches each, and an active one."""
    n = fill(broker, 20)
    pdir = partition_dir(data_dir)
    logs = log_files(pdir)
    assert len(logs) >= 4 and all(len(parse_log(p)[0]) >= 3 for p in logs[:-1])
    return n, pdir, logs


def base_of(path: Path) -> int:
    return int(path.name[: -len(".log")])


# -- a clean directory -------------------------------------------------------------------


def test_a_clean_directory_has_no_findings_and_exits_0(ebb, broker: Broker, data_dir: Path, filled) -> None:
    broker.create_topic("empty", 3)
    broker.create_group(TOPIC, "audit", "subscriber")
    assert check(broker) == []
    result = ebb("verify")
    assert (result.code, result.out.strip(), result.err) == (0, "verify: no problems found", "")
    as_json = ebb("verify", "--json", "--topic", TOPIC)
    assert as_json.code == 0 and json.loads(as_json.out) == {"clean": True, "findings": []}
    repaired = ebb("verify", "--repair", "--json")
    assert repaired.code == 0
    assert json.loads(repaired.out) == {"clean": True, "findings": [], "repaired": [], "remaining": []}
    assert journal_actions(broker, "repair") == [] and journal_actions(broker, "quarantine") == []


def test_bad_input_exits_2(ebb, filled) -> None:
    result = ebb("verify", "--topic", "nope")
    assert result.code == 2 and "nope" in result.err and result.out == ""
    # A check only reads; a repair writes, which --read-only refuses.
    assert ebb("--read-only", "verify").code == 0
    refused = ebb("--read-only", "verify", "--repair")
    assert refused.code == 2 and "--read-only" in refused.err


# -- a flipped byte in a sealed segment ----------------------------------------------------------

FLIPS = {
    "record_payload": lambda batch: batch.size // 2,
    "batch_header_base_offset": lambda batch: _PREFIX.size + 2,
    "batch_magic": lambda batch: 1,
}


@pytest.mark.parametrize("where", list(FLIPS))
def test_a_flipped_byte_in_a_sealed_segment_is_reported_at_its_place_and_never_served(
    ebb, broker: Broker, data_dir: Path, filled, where: str
) -> None:
    n, _pdir, logs = filled
    sealed, successor = logs[1], base_of(logs[2])
    batches = parse_log(sealed)[0]
    bad = batches[len(batches) // 2]
    flip(sealed, bad.position + FLIPS[where](bad))
    corrupted = sealed.read_bytes()
    before = state_of(data_dir, broker)

    (finding,) = check(broker)
    assert state_of(data_dir, broker) == before, "verify modified the data directory"
    assert (finding.severity, finding.code, finding.repairable) == ("error", "CORRUPT_DATA", False)
    assert (finding.where.topic, finding.where.partition, finding.where.file) == (TOPIC, 0, sealed.name)
    assert (finding.where.position, finding.where.offset) == (bad.position, bad.base)
    assert finding.lost == (base_of(sealed), successor)
    result = ebb("verify")
    assert result.code == 1
    line = result.out.splitlines()[0]
    assert line.startswith(f"{TOPIC}/0/{sealed.name} @ byte {bad.position} (offset {bad.base}): "), line
    assert len(result.out.splitlines()) == 2  # the finding and the summary

    # Reads: up to the bad batch, then an error naming the file and byte; never its data.
    assert_records(broker.read(TOPIC, 0, base_of(sealed), 10_000), base_of(sealed), bad.base)
    for offset in (bad.base, bad.next - 1):
        with pytest.raises(CorruptBatch) as error:
            broker.read(TOPIC, 0, offset, 5)
        assert str(sealed) in str(error.value) and f"byte {bad.position}" in str(error.value)
    broker.create_group(TOPIC, "audit", "reader")
    broker.commit(TOPIC, "audit", 0, bad.base - 3)
    # the records before it, committed, then what stopped the read: said at once
    consumed = ebb("consume", TOPIC, "--group", "audit", "--json", "--max", "50")
    assert consumed.code == 2 and str(sealed) in consumed.err and f"byte {bad.position}" in consumed.err
    assert [json.loads(line)["offset"] for line in consumed.out.splitlines()] == [
        bad.base - 3,
        bad.base - 2,
        bad.base - 1,
    ]
    stuck = ebb("consume", TOPIC, "--group", "audit", "--json")
    assert stuck.code == 2 and stuck.out == ""
    assert str(sealed) in stuck.err and f"byte {bad.position}" in stuck.err
    assert broker.catalog.group(TOPIC, "audit").positions[0][0] == bad.base

    # --repair quarantines the segment; the range reads as lost, naming the quarantine.
    repaired = ebb("verify", "--repair")
    assert repaired.code == 1 and "repaired: " in repaired.out and "remains" not in repaired.out
    assert ebb("verify").code == 0
    quarantine = data_dir / "quarantine" / TOPIC / "0"
    assert sorted(p.name for p in quarantine.iterdir()) == sorted(
        sealed.name.replace(".log", s) for s in (".log", ".index", ".timeindex", ".note.json")
    )
    assert (quarantine / sealed.name).read_bytes() == corrupted and not sealed.exists()
    note = json.loads((quarantine / sealed.name.replace(".log", ".note.json")).read_text())
    assert (note["position"], note["offset"], note["lost_offsets"]) == (
        bad.position,
        bad.base,
        [base_of(sealed), successor],
    )
    (lost,) = broker.catalog.quarantined(TOPIC, 0)
    assert (lost.base_offset, lost.next_offset, lost.path) == (
        base_of(sealed),
        successor,
        f"quarantine/{TOPIC}/0/{sealed.name}",
    )
    for offset in (base_of(sealed), bad.base, successor - 1):
        with pytest.raises(DataQuarantined) as gone:
            broker.read(TOPIC, 0, offset, 5)
        assert str(quarantine / sealed.name) in str(gone.value) and f"--offset {successor}" in str(gone.value)
    assert_records(broker.read(TOPIC, 0, 0, 10_000), 0, base_of(sealed))
    assert_records(read_all(broker, TOPIC, 0, start=successor), successor, n)
    (entry,) = journal_actions(broker, "quarantine")
    assert (entry.topic, entry.partition, entry.start_offset, entry.end_offset) == (
        TOPIC,
        0,
        base_of(sealed),
        successor,
    )
    assert entry.reason == "CORRUPT_DATA" and entry.details["quarantined_to"] == lost.path
    assert broker.catalog.partition(TOPIC, 0).log_start_offset == 0  # in the middle: the log start stays

    # The operator moves the group past the lost range; consuming goes on.
    stuck = ebb("consume", TOPIC, "--group", "audit")
    assert stuck.code == 2 and "quarantine" in stuck.err
    assert ebb("group", "commit", TOPIC, "audit", "--partition", "0", "--offset", str(successor)).code == 0
    assert ebb("consume", TOPIC, "--group", "audit", "--max", "5").code == 0
    # Appends go on, and a later check is still clean.
    assert broker.append(TOPIC, 0, [NewRecord(value_of(n), key_of(n), ts_of(n))]).base_offset == n
    assert check(broker) == []


def test_a_corrupt_oldest_segment_is_quarantined_and_the_log_start_moves_past_it(
    ebb, broker: Broker, data_dir: Path, filled
) -> None:
    _n, _pdir, logs = filled
    oldest, second = logs[0], base_of(logs[1])
    first_batch = parse_log(oldest)[0][0]
    flip(oldest, first_batch.position + 40)
    broker.create_group(TOPIC, "sub", "subscriber")

    (finding,) = check(broker)
    assert finding.code == "CORRUPT_DATA" and finding.lost == (0, second)
    repaired = ebb("verify", "--repair", "--json")
    assert repaired.code == 1
    out = json.loads(repaired.out)
    assert [f["code"] for f in out["findings"]] == ["CORRUPT_DATA"] and out["remaining"] == []
    assert {r["code"] for r in out["repaired"]} == {"CORRUPT_DATA", "LOG_START"}

    assert broker.catalog.partition(TOPIC, 0).log_start_offset == second
    assert broker.catalog.quarantined(TOPIC, 0) == []  # below the log start: nothing left to fail on
    assert (data_dir / "quarantine" / TOPIC / "0" / oldest.name).exists() and not oldest.exists()
    (moved,) = journal_actions(broker, "move_log_start")
    assert (moved.start_offset, moved.end_offset, moved.reason) == (0, second, "REPAIR")
    (quarantined,) = journal_actions(broker, "quarantine")
    assert quarantined.details["effect"] == f"below the log start, now {second}"
    # Readers and groups start at the new log start, as after a prune.
    assert_records(broker.read(TOPIC, 0, 0, 5), second, second + 5)
    assert [c.record.offset for c in broker.consume(TOPIC, "sub", max_records=3)] == [second, second + 1, second + 2]
    assert ebb("verify").code == 0
    assert_describe_agrees_with_files(ebb, data_dir)


def test_a_corrupt_batch_in_the_active_segment_quarantines_it_and_offsets_are_never_reused(
    ebb, broker: Broker, data_dir: Path, filled
) -> None:
    n, pdir, logs = filled
    active = logs[-1]
    batches = parse_log(active)[0]
    assert len(batches) >= 2
    flip(active, batches[0].position + batches[0].size // 2)  # acknowledged, with valid batches after it

    (finding,) = check(broker)
    assert (finding.code, finding.where.file, finding.lost) == ("CORRUPT_DATA", active.name, (base_of(active), n))
    assert ebb("verify", "--repair").code == 1
    assert ebb("verify").code == 0
    assert [base_of(p) for p in log_files(pdir)] == [base_of(p) for p in logs[:-1]] + [n]
    with pytest.raises(DataQuarantined):
        broker.read(TOPIC, 0, base_of(active), 1)
    result = broker.append(TOPIC, 0, [NewRecord(value_of(n), key_of(n), ts_of(n))])
    assert (result.base_offset, result.next_offset) == (n, n + 1)
    assert_records(broker.read(TOPIC, 0, n, 10), n, n + 1)


def test_a_torn_tail_is_saved_to_the_quarantine_and_cut(ebb, broker: Broker, data_dir: Path, filled) -> None:
    n, _pdir, logs = filled
    active = logs[-1]
    size = active.stat().st_size
    with open(active, "ab") as f:
        f.write(b"\x00torn")

    (finding,) = check(broker)
    assert (finding.severity, finding.code, finding.repairable) == ("warning", "TRAILING_BYTES", True)
    assert (finding.where.file, finding.where.position, finding.lost) == (active.name, size, None)
    assert ebb("verify", "--repair").code == 1
    assert active.stat().st_size == size
    (saved,) = (data_dir / "quarantine" / TOPIC / "0").glob("*.bin")
    assert saved.read_bytes() == b"\x00torn"
    assert ebb("verify").code == 0
    assert_records(read_all(broker, TOPIC, 0), 0, n)


# -- index files --------------------------------------------------------------------------------


def test_a_truncated_or_garbled_index_is_repairable_and_rebuilt(ebb, broker: Broker, data_dir: Path, filled) -> None:
    n, _pdir, logs = filled
    os.truncate(logs[0].with_suffix(".index"), 2 * 16 + 7)
    with open(logs[1].with_suffix(".timeindex"), "r+b") as f:
        f.write(b"\x07" * 16)  # the first entry garbled
    logs[2].with_suffix(".index").unlink()

    findings = check(broker)
    assert codes(findings) == ["INDEX_DAMAGED"] * 3
    assert all(f.severity == "warning" and f.repairable for f in findings)
    assert [(f.where.file, f.where.position) for f in findings] == [
        (logs[0].with_suffix(".index").name, 32),
        (logs[1].with_suffix(".timeindex").name, 0),
        (logs[2].with_suffix(".index").name, 0),
    ]
    assert "truncated: 2 of" in findings[0].what and "partial entry" in findings[0].what
    # Reads are right before the repair too (indexes are hints).
    assert_records(read_all(broker, TOPIC, 0), 0, n)

    assert ebb("verify", "--repair").code == 1
    assert ebb("verify").code == 0
    for p in logs:
        offsets, times = expected_index_files(parse_log(p)[0])
        assert (p.with_suffix(".index").read_bytes(), p.with_suffix(".timeindex").read_bytes()) == (offsets, times)
    assert_records(read_all(broker, TOPIC, 0), 0, n)
    assert [a.reason for a in journal_actions(broker, "repair")] == ["INDEX_DAMAGED"] * 3


# -- catalog rows ---------------------------------------------------------------------------------


def _sql(broker: Broker, sql: str, *params: object) -> None:
    with broker.catalog.write():
        broker.catalog.db.execute(sql, params)


CATALOG_DAMAGE = {
    # name: (damage(broker, bases, n), expected finding codes)
    "sealed_next_offset": (
        lambda b, bases, n: _sql(
            b, "UPDATE segments SET next_offset = next_offset + 7 WHERE base_offset = ?", bases[1]
        ),
        ["ROW_MISMATCH"],
    ),
    "size_bytes": (
        lambda b, bases, n: _sql(b, "UPDATE segments SET size_bytes = 1 WHERE base_offset = ?", bases[2]),
        ["ROW_MISMATCH"],
    ),
    "partition_next_offset": (
        lambda b, bases, n: _sql(b, "UPDATE partitions SET next_offset = ?", n + 100),
        ["PARTITION_ROW"],
    ),
    "a_row_of_no_file": (
        lambda b, bases, n: _sql(
            b, "INSERT INTO segments VALUES (?, 0, ?, ?, 99, NULL, NULL, 1)", TOPIC, bases[1] + 3, bases[1] + 9
        ),
        ["STRAY_ROW"],
    ),
    "a_file_without_row": (
        lambda b, bases, n: _sql(b, "DELETE FROM segments WHERE base_offset = ?", bases[2]),
        ["ROW_MISSING"],
    ),
    "position_past_the_end": (
        lambda b, bases, n: (b.create_group(TOPIC, "g"), _sql(b, "UPDATE positions SET position = ?", n + 5)),
        ["POSITION_OUT_OF_RANGE"],
    ),
    "log_start_past_the_end": (
        lambda b, bases, n: _sql(b, "UPDATE partitions SET log_start_offset = ?", n + 1000),
        ["LOG_START"],
    ),
}


@pytest.mark.parametrize("damage", list(CATALOG_DAMAGE))
def test_a_damaged_catalog_row_is_reported_and_set_from_the_files(
    ebb, broker: Broker, data_dir: Path, filled, damage: str
) -> None:
    n, pdir, logs = filled
    bases = [base_of(p) for p in logs]
    do, expected = CATALOG_DAMAGE[damage]
    do(broker, bases, n)
    before = state_of(data_dir, broker)

    findings = check(broker)
    assert state_of(data_dir, broker) == before
    assert codes(findings) == expected and all(f.repairable for f in findings), findings
    assert all(f.where.table is not None and f.where.topic == TOPIC for f in findings)
    result = ebb("verify")
    assert result.code == 1 and result.out.startswith("catalog ")

    assert ebb("verify", "--repair").code == 1
    assert ebb("verify").code == 0
    assert [base_of(p) for p in log_files(pdir)] == bases, "a repair of the catalog lost a segment file"
    assert_records(read_all(broker, TOPIC, 0), 0, n)
    assert_describe_agrees_with_files(ebb, data_dir)
    assert broker.catalog.partition(TOPIC, 0).log_start_offset == 0
    assert len(journal_actions(broker, "repair")) + len(journal_actions(broker, "move_log_start")) >= 1


def test_a_missing_segment_file_is_lost_data_and_the_log_start_moves_past_it(
    ebb, broker: Broker, data_dir: Path, filled
) -> None:
    _n, _pdir, logs = filled
    second = base_of(logs[1])
    logs[0].unlink()

    finding, *orphans = check(broker)
    assert (finding.code, finding.severity, finding.lost) == ("SEGMENT_MISSING", "error", (0, second))
    assert finding.where.file == logs[0].name
    # Its index files stayed behind.
    assert [(f.code, f.where.file) for f in orphans] == [
        ("ORPHAN_INDEX", logs[0].with_suffix(".index").name),
        ("ORPHAN_INDEX", logs[0].with_suffix(".timeindex").name),
    ]
    with pytest.raises(StoreError):
        broker.read(TOPIC, 0, 0, 5)  # offsets in no segment are never skipped
    assert ebb("verify", "--repair").code == 1
    assert ebb("verify").code == 0
    assert broker.catalog.partition(TOPIC, 0).log_start_offset == second
    assert_records(broker.read(TOPIC, 0, 0, 5), second, second + 5)
    assert not logs[0].with_suffix(".index").exists()
    (quarantined,) = journal_actions(broker, "quarantine")
    assert (quarantined.reason, quarantined.details["quarantined_to"]) == ("SEGMENT_MISSING", None)


def test_an_interrupted_deletion_is_a_warning_and_recovery_undoes_it(
    ebb, broker: Broker, data_dir: Path, filled
) -> None:
    n, pdir, logs = filled
    os.replace(logs[1], logs[1].with_name(logs[1].name + ".deleted"))  # a crash after the rename

    (finding,) = check(broker)
    assert (finding.code, finding.severity, finding.repairable) == ("INTERRUPTED_DELETION", "warning", True)
    assert finding.where.file == logs[1].name + ".deleted" and finding.lost is None
    assert ebb("verify", "--repair").code == 1
    assert ebb("verify").code == 0
    assert [base_of(p) for p in log_files(pdir)] == [base_of(p) for p in logs]
    assert_records(read_all(broker, TOPIC, 0), 0, n)


def test_what_no_file_proves_is_reported_and_left_to_the_operator(ebb, broker: Broker, data_dir: Path, filled) -> None:
    _sql(broker, "INSERT INTO policies VALUES (?, 'retention_time', 'forever-ish')", TOPIC)

    findings = check(broker)
    assert [(f.code, f.repairable) for f in findings] == [("POLICY_INVALID", False)]
    assert str(findings[0].where) == f"catalog policies[{TOPIC}]" and "forever-ish" in findings[0].what
    repaired = ebb("verify", "--repair", "--json")
    assert repaired.code == 1
    out = json.loads(repaired.out)
    assert out["repaired"] == [] and out["remaining"] == out["findings"] and len(out["findings"]) == 1


def test_a_directory_of_no_topic_is_removed_when_empty_and_quarantined_when_it_holds_records(
    ebb, broker: Broker, data_dir: Path, filled
) -> None:
    """What a crashed create (empty partitions) or delete (records the operator
    deleted, the catalog's commit of it done) leaves: never a wedge for the operator
    to clear by hand, never a record deleted by a repair."""
    (data_dir / "topics" / "ghost" / "0").mkdir(parents=True)
    (data_dir / "topics" / "ghost" / "0" / "00000000000000000000.log").touch()
    deleted = data_dir / "topics" / "gone" / "0"
    deleted.mkdir(parents=True)
    (deleted / "00000000000000000000.log").write_bytes(log_files(partition_dir(data_dir))[0].read_bytes())

    assert [(f.code, str(f.where), f.repairable) for f in check(broker)] == [
        ("STRAY_TOPIC", "ghost", True),
        ("STRAY_TOPIC", "gone", True),
    ]
    repaired = ebb("verify", "--repair")
    assert "repaired: ghost: removed (it held no record)" in repaired.out
    assert "repaired: gone: moved to quarantine/stray-topics/gone-" in repaired.out
    assert not (data_dir / "topics" / "ghost").exists() and not (data_dir / "topics" / "gone").exists()
    (moved,) = (data_dir / "quarantine" / "stray-topics").iterdir()
    assert (moved / "0" / "00000000000000000000.log").stat().st_size > 0
    assert ebb("verify").code == 0


def test_an_unreadable_segment_file_is_a_finding_not_a_crash_and_repair_quarantines_it(
    ebb, broker: Broker, data_dir: Path, filled
) -> None:
    """A file the system refuses to read (here a directory in its place: EISDIR, as EIO
    or EACCES would be) is reported at its place like corrupt data; the other files
    still get their verdict, and --repair moves it away."""
    _n, _pdir, logs = filled
    second = base_of(logs[1])
    logs[0].unlink()
    logs[0].mkdir()

    (finding,) = check(broker)
    assert (finding.code, finding.severity, finding.lost) == ("CORRUPT_DATA", "error", (0, second))
    assert finding.where.file == logs[0].name
    assert "cannot be read" in finding.what and "EISDIR" in finding.what
    with pytest.raises(StoreError, match="cannot read segment file"):
        broker.read(TOPIC, 0, 0, 5)
    cli = ebb("verify")
    assert cli.code == 1 and "Traceback" not in cli.err
    assert ebb("verify", "--repair").code == 1
    assert ebb("verify").code == 0
    assert broker.catalog.partition(TOPIC, 0).log_start_offset == second
    assert_records(broker.read(TOPIC, 0, second, 5), second, second + 5)
