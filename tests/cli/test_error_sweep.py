"""Failures of what surrounds ``ebb`` (its standard streams, a --config that is no file)
end in one ``ebb: error:`` line and exit 2: never a traceback, never a data directory
created for a refused command.

Each test runs a real ``ebb`` process, since a closed or full standard stream is a
property of the process's descriptors, not of Python objects a test could swap."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path
from typing import IO, Any

import pytest

from tests.support.cli import REPO, CliResult, ebb_command, subprocess_env


def _ebb(data_dir: Path, *args: str, closed: int | None = None, **streams: Any) -> CliResult:
    """``ebb --data-dir DATA ARGS`` with the standard streams given (default: pipes);
    with descriptor ``closed`` closed, as the shell's ``N>&-`` does.

    The shell closes it, not a ``preexec_fn``: that would make ``subprocess`` fork
    rather than spawn, and a test process that holds a Spark Connect client has gRPC
    threads, whose fork handlers can abort the child before it runs ``ebb``."""
    streams.setdefault("stdout", subprocess.PIPE)
    streams.setdefault("stderr", subprocess.PIPE)
    streams.setdefault("stdin", subprocess.DEVNULL)
    command = ebb_command(data_dir, *args)
    if closed is not None:
        command = ["sh", "-c", f'exec "$@" {closed}>&-', "sh", *command]
    done = subprocess.run(command, timeout=120, cwd=REPO, env=subprocess_env(), **streams)
    out = done.stdout.decode() if isinstance(done.stdout, bytes) else ""
    err = done.stderr.decode() if isinstance(done.stderr, bytes) else ""
    return CliResult(done.returncode, out, err)


def _assert_one_error(result: CliResult, *needles: str) -> None:
    assert result.code == 2, result
    assert "Traceback" not in result.err, result.err
    lines = result.err.splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("ebb: error: "), result.err
    for needle in needles:
        assert needle in lines[0], result.err


@pytest.fixture
def made(data_dir: Path, ebb) -> Path:
    """A data directory with a topic holding a few records."""
    assert ebb("topic", "create", "orders").code == 0
    assert ebb("produce", "orders", "--count", "5", "--size", "10").code == 0
    return data_dir


def _dev_full() -> IO[bytes]:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    return open("/dev/full", "wb")


# One command of each way of printing: print(), sys.stdout.write with flush, a csv
# writer, argparse's own help, a standalone command.
PRINTING = [
    ("topic", "list"),
    ("topic", "describe", "orders", "--json"),
    ("consume", "orders", "--group", "g", "--no-commit"),
    ("log", "--csv"),
    ("--help",),
    ("completion", "bash"),
]


@pytest.mark.parametrize("args", PRINTING, ids=" ".join)
def test_stdout_on_a_full_device_is_one_error_line(made: Path, args: tuple[str, ...]) -> None:
    with _dev_full() as full:
        result = _ebb(made, *args, stdout=full)
    _assert_one_error(result, "cannot write to standard output", "No space left on device")


def test_records_that_could_not_be_written_out_are_not_committed(made: Path, ebb) -> None:
    """A group's position moves only once its records are on stdout: on a full disk
    ``ebb consume`` failed, yet the group had moved past the 5 records it never
    showed, lost to it."""
    with _dev_full() as full:
        result = _ebb(made, "consume", "orders", "--group", "g", stdout=full)
    _assert_one_error(result, "cannot write to standard output")
    again = ebb("consume", "orders", "--group", "g", "--json")
    assert again.code == 0 and [json.loads(line)["offset"] for line in again.out.splitlines()] == [0, 1, 2, 3, 4]


def test_records_produced_to_a_full_stdout_are_said_acknowledged(made: Path, ebb) -> None:
    """The records are written before the line that says so fails: the error must say
    they were, or a script retrying on it writes them twice."""
    with _dev_full() as full:
        result = _ebb(made, "produce", "orders", "--count", "1", "--size", "10", stdout=full)
    _assert_one_error(result, "produced 1 record(s) to orders: partition 0 offsets 5..5, but cannot write")
    assert json.loads(ebb("topic", "describe", "orders", "--json").out)["partitions"][0]["next_offset"] == 6


@pytest.mark.parametrize("args", PRINTING, ids=" ".join)
def test_a_closed_stdout_is_refused_before_anything_is_done(made: Path, args: tuple[str, ...]) -> None:
    result = _ebb(made, *args, closed=1)
    _assert_one_error(result, "standard output is closed")


def test_a_closed_stdout_writes_nothing(made: Path) -> None:
    result = _ebb(made, "topic", "create", "never", closed=1)
    _assert_one_error(result, "standard output is closed")
    assert not (made / "topics" / "never").exists()


def test_a_closed_stdin_is_empty_input(made: Path) -> None:
    """``ebb produce TOPIC <&-``: no lines to produce, said as for an empty stdin."""
    result = _ebb(made, "produce", "orders", closed=0)
    _assert_one_error(result, "no records to produce")
    purge = _ebb(made, "purge", "orders", closed=0)
    _assert_one_error(purge, "--yes")


def test_a_closed_stderr_leaves_the_output_and_the_files_alone(made: Path) -> None:
    """With descriptor 2 closed, no file the command opens may take it (a child's
    stderr would write into it); the refusal still exits 2."""
    before = sorted((p, p.stat().st_size) for p in made.rglob("*.log"))
    created = _ebb(made, "produce", "orders", "--count", "3", "--size", "10", closed=2)
    assert created.code == 0
    refused = _ebb(made, "topic", "create", "orders", closed=2)
    assert refused.code == 2
    assert "ebb: error" not in refused.out  # a closed stderr is not a reason to print errors on stdout
    after = sorted((p, p.stat().st_size) for p in made.rglob("*.log"))
    assert [p for p, _ in after] == [p for p, _ in before]
    assert _ebb(made, "verify").code == 0


def test_a_config_that_is_a_directory_says_so_and_creates_nothing(tmp_path: Path) -> None:
    (tmp_path / "ebb.toml").mkdir()
    data_dir = tmp_path / "never-made"
    result = _ebb(data_dir, "--config", str(tmp_path / "ebb.toml"), "topic", "list")
    _assert_one_error(result, "is a directory")
    assert not data_dir.exists()


def test_a_config_that_is_not_a_regular_file_says_so(tmp_path: Path) -> None:
    result = _ebb(tmp_path / "data", "--config", os.devnull, "topic", "list")
    _assert_one_error(result, "is not a regular file")
    assert not (tmp_path / "data").exists()


def test_a_missing_config_creates_no_data_directory(tmp_path: Path) -> None:
    result = _ebb(tmp_path / "data", "--config", str(tmp_path / "absent.toml"), "topic", "list")
    _assert_one_error(result, "does not exist")
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(
    "args", [("verify",), ("verify", "--repair"), ("topic", "list"), ("--read-only", "topic", "list")]
)
def test_a_data_directory_that_is_a_file_is_one_error_line(tmp_path: Path, args: tuple[str, ...]) -> None:
    """`ebb verify` looked for topics under it first and crashed (NotADirectoryError)."""
    not_a_directory = tmp_path / "data"
    not_a_directory.write_text("x")
    result = _ebb(not_a_directory, *args)
    _assert_one_error(result, str(not_a_directory))
    assert not_a_directory.read_text() == "x"


def test_a_topics_entry_that_is_a_file_is_named(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "topics").write_text("")
    for args in (("topic", "list"), ("verify",)):
        _assert_one_error(_ebb(data_dir, *args), f"{data_dir / 'topics'} is a file, not a directory")


def test_a_partition_directory_replaced_by_a_file_is_reported_and_repaired(made: Path) -> None:
    """Reads said NotADirectoryError in a traceback, `ebb verify` too, and --repair
    died on mkdir: now one line, findings, and a repair that keeps the file aside."""
    partition = made / "topics" / "orders" / "0"
    shutil.rmtree(partition)
    partition.write_text("not a partition")

    consumed = _ebb(made, "consume", "orders", "--group", "g", "--no-commit")
    _assert_one_error(consumed, f"partition directory {partition} is not a directory")
    found = _ebb(made, "verify")
    assert found.code == 1 and "Traceback" not in found.err, found
    assert "segment file missing" in found.out
    repaired = _ebb(made, "verify", "--repair")
    assert repaired.code == 1 and "Traceback" not in repaired.err, repaired
    assert _ebb(made, "verify").code == 0
    kept = made / "quarantine" / "orders" / "0" / "0.not-a-directory"
    assert kept.read_text() == "not a partition"
    assert _ebb(made, "produce", "orders", "--count", "1", "--size", "3").code == 0


def test_a_lock_file_replaced_by_a_directory_is_reported_and_repaired(made: Path) -> None:
    """Producing failed with one line, but `ebb verify` said "no problems found" and
    --repair could not help: now an error finding, and a repair that moves the
    directory (kept whole: it is not ours) to the quarantine."""
    lock = made / "topics" / "orders" / "0" / ".lock"
    lock.unlink()
    (lock / "inside").mkdir(parents=True)

    produced = _ebb(made, "produce", "orders", "--count", "1", "--size", "3")
    _assert_one_error(produced, "partition orders/0: cannot take its lock: Is a directory (EISDIR)")
    found = _ebb(made, "verify")
    assert found.code == 1 and "orders/0/.lock: not a file" in found.out, found
    repaired = _ebb(made, "verify", "--repair")
    kept = made / "quarantine" / "orders" / "0" / ".lock.not-a-file"
    assert f"repaired: orders/0/.lock: moved to {kept}" in repaired.out, repaired
    assert (kept / "inside").is_dir() and lock.is_file()
    assert _ebb(made, "verify").code == 0
    assert _ebb(made, "produce", "orders", "--count", "1", "--size", "3").code == 0
    assert '"reason":"NOT_A_FILE"' in _ebb(made, "log", "--json").out.replace(" ", "")


def test_a_prune_lock_replaced_by_a_directory_is_one_line_reported_and_repaired(made: Path) -> None:
    """`ebb prune` and `ebb truncate` (cycles, which take the prune lock) died in a
    traceback (IsADirectoryError) and `ebb verify` said nothing; twice over, the
    second directory kept beside the first. (A truncate, not a prune: no Spark.)"""
    lock = made / "prune.lock"
    for time in (1, 2):
        truncate = ("truncate", "orders", "--partition", "0", "--before-offset", str(time))  # a record each
        lock.unlink(missing_ok=True)
        (lock / f"inside{time}").mkdir(parents=True)
        _assert_one_error(_ebb(made, *truncate), f"pruning of {made}: cannot take its lock: Is a directory (EISDIR)")
        found = _ebb(made, "verify")
        assert found.code == 1 and "prune.lock: not a file: every prune cycle fails" in found.out
        assert "repaired: prune.lock: moved to" in _ebb(made, "verify", "--repair").out
        assert _ebb(made, "verify").code == 0 and _ebb(made, *truncate).code == 0 and lock.is_file()
    assert (made / "quarantine" / "prune.lock.not-a-file" / "inside1").is_dir()
    assert (made / "quarantine" / "prune.lock.not-a-file.1" / "inside2").is_dir()


def test_a_reserve_replaced_by_a_directory_is_reported_and_made_again(made: Path) -> None:
    """A directory where reserve.ballast goes counted as the reserve: no room was kept
    for deleting on a full disk, and a deletion that released it would have failed on
    unlinking a directory; `ebb verify` said nothing."""
    reserve = made / "reserve.ballast"
    reserve.unlink(missing_ok=True)
    (reserve / "inside").mkdir(parents=True)
    assert _ebb(made, "produce", "orders", "--count", "1", "--size", "3").code == 0  # writing goes on
    found = _ebb(made, "verify")
    assert found.code == 1 and "reserve.ballast: not a file: no room is kept for deleting on a full disk" in found.out
    assert "repaired: reserve.ballast: moved to" in _ebb(made, "verify", "--repair").out
    assert _ebb(made, "verify").code == 0 and reserve.is_file() and reserve.stat().st_size > 0
    assert (made / "quarantine" / "reserve.ballast.not-a-file" / "inside").is_dir()


@pytest.mark.parametrize("name", ["start.lock", "attached.lock"])
def test_a_spark_service_lock_replaced_by_a_directory_is_one_line_reported_and_repaired(made: Path, name: str) -> None:
    """`ebb spark start` and `stop` ended in an IsADirectoryError traceback (start.lock),
    a plan in a line quoting Python's (attached.lock, which a plan takes once the
    service runs); `ebb verify` said nothing."""
    lock = made / "spark" / name
    lock.unlink(missing_ok=True)
    (lock / "inside").mkdir(parents=True)
    if name == "start.lock":
        try:
            started = _ebb(made, "spark", "start")
        finally:
            _ebb(made, "spark", "stop")  # should the start go through after all
        _assert_one_error(started, f"the Spark service's {name} cannot be opened: Is a directory (EISDIR): {lock}")
    found = _ebb(made, "verify")
    assert found.code == 1 and f"spark/{name}: not a file: " in found.out, found
    assert f"repaired: spark/{name}: moved to" in _ebb(made, "verify", "--repair").out
    assert _ebb(made, "verify").code == 0 and not lock.exists()  # made again when the service needs it
    assert (made / "quarantine" / f"{name}.not-a-file" / "inside").is_dir()


@pytest.mark.parametrize("name", ["topic.json", "groups.json"])
def test_a_metadata_file_replaced_by_a_directory_is_reported_and_repaired(made: Path, name: str) -> None:
    """`ebb verify` ended in a traceback for topic.json (IsADirectoryError), and
    --repair for either file, which it could not write over a directory."""
    path = made / "topics" / "orders" / name
    path.unlink()
    (path / "inside").mkdir(parents=True)

    found = _ebb(made, "verify")
    assert found.code == 1 and "Traceback" not in found.err, found
    assert f"orders/{name}: metadata file cannot be read: Is a directory (EISDIR): {path}" in found.out
    repaired = _ebb(made, "verify", "--repair")
    assert "Traceback" not in repaired.err and f"repaired: orders/{name}: rewritten" in repaired.out, repaired
    assert _ebb(made, "verify").code == 0 and path.is_file()
    assert (made / "quarantine" / "orders" / f"{name}.not-a-file" / "inside").is_dir()


def test_a_catalog_that_cannot_be_written_is_not_called_busy(made: Path) -> None:
    """A directory where catalog.db-shm goes makes every write fail at once: "the
    catalog is busy; another process holds it, try again" sent the operator to wait
    for a process that does not exist."""
    shm = made / "catalog.db-shm"
    shm.unlink(missing_ok=True)
    shm.mkdir()
    produced = _ebb(made, "produce", "orders", "--count", "1", "--size", "3")
    _assert_one_error(produced, "the catalog cannot be written (attempt to write a readonly database)", "-shm")
    assert "busy" not in produced.err


def _producer(command: list[str]) -> subprocess.Popen[bytes]:
    """``command`` (an ``ebb produce``) running, its three streams pipes."""
    process = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env=subprocess_env(),
    )
    assert process.stdin is not None and process.stdout is not None
    return process


def test_sigterm_stops_a_produce_as_ctrl_c_does(made: Path) -> None:
    """SIGTERM (kill, a service manager, a CI timeout) killed `ebb produce` between an
    append and its catalog row, without a word. Now it runs the interrupt's path: one
    line saying what was acknowledged, exit 143, the catalog up to the files."""
    process = _producer(ebb_command(made, "produce", "orders", "--json"))
    process.stdin.write(b"one\ntwo\n")
    process.stdin.flush()
    acknowledged = process.stdout.readline()  # written once the lines are durable
    assert b'"count": 2' in acknowledged, acknowledged
    process.send_signal(signal.SIGTERM)  # while it waits for more input
    out, err = process.communicate(timeout=120)
    result = CliResult(process.returncode, out.decode(), err.decode())
    assert result.code == 128 + signal.SIGTERM, result
    # "all 2 record(s) read were acknowledged" where SIGTERM came as it waited for input
    # (as it usually does); "2 record(s) before it were ..., the rest were not" where it
    # came as the producer still finished its acknowledgement, which cannot know that
    # nothing more had been read.
    (line,) = result.err.splitlines()
    assert re.fullmatch(
        r"ebb: terminated \(SIGTERM\); (all 2 record\(s\) read|2 record\(s\) before it) were acknowledged"
        r" \(partition 0 offsets 5\.\.6\)(, the rest were not acknowledged)?",
        line,
    ), line
    assert _ebb(made, "verify").code == 0
    consumed = _ebb(made, "consume", "orders", "--group", "check", "--no-commit")
    assert consumed.out.splitlines()[-2:] == ["one", "two"]


def test_an_ignored_sigterm_stays_ignored(made: Path) -> None:
    """`ebb` does not take over a disposition its parent chose (nohup-like wrappers)."""
    process = _producer(
        ["sh", "-c", 'trap "" TERM; exec "$@"', "sh", *ebb_command(made, "produce", "orders", "--json")]
    )
    process.stdin.write(b"kept\n")
    process.stdin.flush()
    assert b'"count": 1' in process.stdout.readline()  # running, past its start-up
    process.send_signal(signal.SIGTERM)
    # More input, then its end: it finishes as usual.
    out, err = process.communicate(b"also kept\n", timeout=120)
    assert process.returncode == 0, err
    assert out.count(b'"count": 1') == 1, out
    consumed = _ebb(made, "consume", "orders", "--group", "check", "--no-commit")
    assert consumed.out.splitlines()[-2:] == ["kept", "also kept"]


@pytest.mark.parametrize("command", [("explain", "orders"), ("engine", "--cycles", "1")])
def test_a_master_spark_refuses_is_one_line_and_the_command_ends(made: Path, command: tuple[str, ...]) -> None:
    """A master Spark itself refuses (no threads) printed a traceback from the thread
    that starts Spark, then waited for ever: Py4J reads a Java error's text from the
    JVM, and it was read after that JVM had been stopped."""
    result = _ebb(made, *command, "--spark-master", "local[0]")
    _assert_one_error(result, "cannot start Spark (local[0]): ", "Asked to run locally with 0 threads", "spark.log")


def test_a_system_error_no_command_foresaw_is_one_line(ebb, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An audit: `topic create` over a leftover directory it could not remove (a file
    made immutable) printed a PermissionError traceback. Any such error is one line
    with the system's words and the file, and the command's transaction rolls back."""
    import errno

    from engine import broker

    assert ebb("topic", "list").code == 0  # the data directory, without the topic
    leftover = data_dir / "topics" / "t" / "0"
    leftover.mkdir(parents=True)

    def refused(path: Path, *args: Any, **kwargs: Any) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted", str(path))

    monkeypatch.setattr(broker.shutil, "rmtree", refused)
    _assert_one_error(ebb("topic", "create", "t"), "Operation not permitted (EPERM)", str(leftover.parent))
    assert "t" not in ebb("topic", "list").out.split()


def test_a_topic_delete_that_leaves_files_says_so(ebb, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An audit: with a partition made immutable, `topic delete` said "deleted topic"
    and exit 0 while the partition's records stayed on disk, unsaid."""
    import errno

    from engine import broker

    assert ebb("topic", "create", "t").code == 0 and ebb("produce", "t", "--count", "3").code == 0
    segment = next((data_dir / "topics" / "t" / "0").glob("*.log"))
    refusal = PermissionError(errno.EPERM, "Operation not permitted", str(segment))

    def immutable(path: Path, onerror: Any) -> None:
        onerror(os.unlink, str(segment), (PermissionError, refusal, None))

    monkeypatch.setattr(broker.shutil, "rmtree", immutable)
    deleted = ebb("topic", "delete", "t")
    assert deleted.code == 0 and deleted.out == "deleted topic t\n"
    assert deleted.err.count("\n") == 1, deleted.err
    assert deleted.err.startswith("ebb: warning: some of its files could not be removed, and their space is not freed")
    assert f"Operation not permitted (EPERM): {segment}" in deleted.err
    assert "t" not in ebb("topic", "list").out.split()
