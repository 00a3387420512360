"""``ebb --read-only COMMAND`` (issue 5, item 6b): every command that writes to the data
directory is refused with one line and exit 2 before anything is opened; every command
that only reads works and writes nothing.

A dry run (``prune --dry-run``) journals its cycle, so it writes and is refused; ``explain``
plans the same without writing.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
from pathlib import Path

import pytest

from console.cli import console_cmd
from console.cli import main as cli_main
from console.cli.main import build_parser
from engine.broker import Broker
from engine.prune.session import SparkEngine
from engine.store.batch import NewRecord
from tests.support.cli import ebb_command, subprocess_env

# Every command with arguments that succeed on the seeded directory (without
# --read-only), and whether it writes. ("console",) is the console's own: below.
COMMANDS: dict[tuple[str, ...], tuple[list[str], bool]] = {
    ("topic", "create"): (["topic", "create", "new"], True),
    ("topic", "alter"): (["topic", "alter", "t", "--retention-time", "1d"], True),
    ("topic", "list"): (["topic", "list", "--json"], False),
    ("topic", "describe"): (["topic", "describe", "t"], False),
    ("topic", "delete"): (["topic", "delete", "t"], True),
    ("produce",): (["produce", "t", "--count", "2"], True),
    ("consume",): (["consume", "t", "--group", "g"], True),
    ("group", "create"): (["group", "create", "t", "new"], True),
    ("group", "list"): (["group", "list", "t"], False),
    ("group", "commit"): (["group", "commit", "t", "g", "--partition", "0", "--offset", "1"], True),
    ("group", "delete"): (["group", "delete", "t", "g"], True),
    ("group", "expire"): (["group", "expire", "t", "g"], True),
    ("group", "move"): (["group", "move", "t", "g", "--partition", "0", "--to-latest"], True),
    ("prune",): (["prune"], True),
    ("explain",): (["explain", "t"], False),
    ("truncate",): (["truncate", "t", "--partition", "0", "--before-offset", "2"], True),
    ("purge",): (["purge", "t", "--yes"], True),
    ("hold",): (["hold", "t"], True),
    ("release",): (["release", "t"], True),
    ("pause",): (["pause"], True),
    ("resume",): (["resume"], True),
    ("log",): (["log", "--cycles"], False),
    ("engine",): (["engine", "--cycles", "1"], True),
    ("verify",): (["verify"], False),
    ("spark", "status"): (["spark", "status"], False),
    ("spark", "start"): (["spark", "start"], True),
    ("spark", "stop"): (["spark", "stop"], True),
    ("forecast",): (["forecast", "t", "--rate", "0", "--horizon", "1h"], False),
    ("completion",): (["completion", "bash"], False),
}
# Cases that are not a command of their own.
WRITING_VARIANTS = {
    "prune --dry-run": ["prune", "--dry-run"],
    "console --demo": ["console", "--demo"],
    "verify --repair": ["verify", "--repair"],
}
READING_VARIANTS = {"consume --no-commit": ["consume", "t", "--group", "g", "--no-commit"]}
# Not run for real here: `spark start` would leave a server (tests/prune/test_spark_service.py runs them).
SPARK_COMMANDS = {("prune",), ("explain",), ("engine",), ("forecast",), ("spark", "start"), ("spark", "stop")}


def leaf_commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subcommands:
        return {path}
    return {leaf for name, sub in subcommands[0].choices.items() for leaf in leaf_commands(sub, (*path, name))}


def test_every_command_is_classified() -> None:
    assert leaf_commands(build_parser()) == {*COMMANDS, ("console",)}


@pytest.fixture
def seeded(data_dir: Path) -> Path:
    with Broker(data_dir) as broker:
        broker.create_topic("t", 1, {"segment_size": "1 KiB"})
        broker.produce("t", [NewRecord(b"record %d" % i, None, 1_700_000_000_000 + i) for i in range(50)])
        broker.create_group("t", "g", "subscriber", "earliest")
    return data_dir


def everything(root: Path) -> dict[str, str]:
    """Every path under ``root`` with its content digest: the catalog file included,
    since a read-only run must not even rewrite its header."""
    return {
        str(p.relative_to(root)): "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
    }


class SparkReached(Exception):
    """Where ``prune`` and ``engine`` start Spark: their input was accepted."""


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> SparkEngine:
        raise SparkReached

    monkeypatch.setattr("engine.prune.session.spark_engine_for", refuse)


@pytest.fixture
def consoles(monkeypatch: pytest.MonkeyPatch) -> list[argparse.Namespace]:
    """The console replaced by a stub that records the arguments it was given."""
    calls: list[argparse.Namespace] = []

    def run_console(broker: Broker, args: argparse.Namespace) -> int:
        calls.append(args)
        return 0

    monkeypatch.setattr(console_cmd, "run_console", run_console)
    return calls


def refused(result, command: str) -> None:
    assert result.code == 2 and result.out == "", result
    lines = result.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ebb: error: --read-only: "), result.err
    assert command in lines[0]


WRITERS = {" ".join(c): argv for c, (argv, writes) in COMMANDS.items() if writes} | WRITING_VARIANTS


@pytest.mark.parametrize("argv", WRITERS.values(), ids=WRITERS.keys())
def test_a_writing_command_is_refused_before_anything_is_opened(
    ebb, seeded: Path, argv: list[str], monkeypatch: pytest.MonkeyPatch, consoles: list, no_spark: None
) -> None:
    before = everything(seeded)
    with monkeypatch.context() as patched:
        # Refused before the data directory is opened at all.
        patched.setattr(cli_main, "Broker", lambda *a, **k: pytest.fail("the data directory was opened"))
        refused(ebb("--read-only", *argv), argv[0])
    assert everything(seeded) == before
    assert consoles == []


@pytest.mark.parametrize("argv", WRITERS.values(), ids=WRITERS.keys())
def test_a_refused_command_does_not_even_create_the_data_directory(ebb, tmp_path: Path, argv: list[str]) -> None:
    fresh = tmp_path / "fresh"
    result = ebb("--data-dir", str(fresh), "--read-only", *argv)
    assert result.code == 2 and not fresh.exists()


def test_the_consoles_own_read_only_refuses_its_demo(
    ebb, seeded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, consoles: list
) -> None:
    """``ebb console --demo --read-only`` would run the demo's producers under a
    read-only badge: refused like ``ebb --read-only console --demo``, nothing opened."""
    before = everything(seeded)
    with monkeypatch.context() as patched:
        patched.setattr(cli_main, "Broker", lambda *a, **k: pytest.fail("the data directory was opened"))
        refused(ebb("console", "--demo", "--read-only"), "--demo")
        refused(ebb("console", "--read-only", "--demo"), "--demo")
    assert everything(seeded) == before and consoles == []
    fresh = tmp_path / "fresh"
    assert ebb("--data-dir", str(fresh), "console", "--read-only", "--demo").code == 2 and not fresh.exists()
    assert ebb("console", "--read-only").code == 0 and consoles[-1].read_only and not consoles[-1].demo


@pytest.mark.parametrize(
    "argv",
    [argv for c, (argv, writes) in COMMANDS.items() if writes and c not in SPARK_COMMANDS],
    ids=[" ".join(c) for c, (argv, writes) in COMMANDS.items() if writes and c not in SPARK_COMMANDS],
)
def test_the_refused_arguments_are_valid_without_read_only(ebb, seeded: Path, argv: list[str]) -> None:
    # So that the refusal above is the flag's doing, not the arguments'.
    result = ebb(*argv)
    assert result.code == 0, result.err


@pytest.mark.parametrize("argv", [["prune"], ["prune", "--dry-run"], ["engine", "--cycles", "1"]])
def test_the_refused_spark_commands_are_valid_without_read_only(
    ebb, seeded: Path, argv: list[str], no_spark: None
) -> None:
    with pytest.raises(SparkReached):
        ebb(*argv)


READERS = {" ".join(c): argv for c, (argv, writes) in COMMANDS.items() if not writes and c not in SPARK_COMMANDS}
READERS |= READING_VARIANTS


@pytest.mark.parametrize("argv", READERS.values(), ids=READERS.keys())
def test_a_reading_command_works_and_writes_nothing(ebb, seeded: Path, argv: list[str]) -> None:
    before = everything(seeded)
    result = ebb("--read-only", *argv)
    assert result.code == 0 and result.err == "", result.err
    assert result.out
    assert everything(seeded) == before


def test_consume_no_commit_reads_without_creating_the_group(ebb, seeded: Path) -> None:
    before = everything(seeded)
    result = ebb("--read-only", "consume", "t", "--group", "newcomer", "--no-commit", "--max", "3")
    assert result.code == 0 and result.out.splitlines() == ["record 0", "record 1", "record 2"]
    assert everything(seeded) == before
    refused(ebb("--read-only", "consume", "t", "--group", "newcomer"), "consume")


def test_explain_works_read_only_and_changes_neither_catalog_nor_segments(
    ebb, seeded: Path, shared_spark: SparkEngine
) -> None:
    def kept(root: Path) -> dict[str, str]:
        # The planner's scratch snapshot (removed after the plan) is no state.
        return {p: digest for p, digest in everything(root).items() if not p.startswith("snapshots")}

    before = kept(seeded)
    result = ebb("--read-only", "explain", "t", "--now", "2030-01-01T00:00:00Z", "--json")
    assert result.code == 0, result.err
    assert kept(seeded) == before
    result = ebb("--read-only", "forecast", "t", "--horizon", "2h", "--json")
    assert result.code == 0, result.err
    assert kept(seeded) == before


def test_the_console_gets_the_flag(ebb, seeded: Path, consoles: list[argparse.Namespace]) -> None:
    assert ebb("--read-only").code == 0
    assert ebb("--read-only", "console", "--theme", "ebbtide-light").code == 0
    assert ebb("console").code == 0
    assert [args.read_only for args in consoles] == [True, True, False]


def test_read_only_never_creates_a_data_directory(ebb, tmp_path: Path, consoles: list) -> None:
    fresh = tmp_path / "fresh"
    for argv in (["topic", "list"], ["log"], []):
        result = ebb("--data-dir", str(fresh), "--read-only", *argv)
        assert result.code == 2 and "not a data directory yet" in result.err, result.err
    assert not fresh.exists() and consoles == []


def test_read_only_is_the_global_option_after_the_command_too(ebb, seeded: Path) -> None:
    """``ebb topic list --read-only`` is ``ebb --read-only topic list`` (global options
    may follow the command): a reading command runs and writes nothing, a writing one
    is refused."""
    before = everything(seeded)
    listed = ebb("topic", "list", "--read-only")
    assert listed.code == 0 and listed.out.startswith("TOPIC"), listed.err
    refused(ebb("topic", "alter", "t", "--retention-time", "1d", "--read-only"), "ebb topic alter")
    assert everything(seeded) == before


def test_a_directory_on_a_read_only_mount_is_refused_not_called_damaged(seeded: Path) -> None:
    """A backup on a read-only mount (a bind mount remounted read-only, in a mount
    namespace of the test's own): SQLite cannot open its catalog there, which verify
    took for damage and offered to rebuild. It is refused for what it is, by verify and
    by a reading command alike, and nothing in it changes."""
    before = everything(seeded)
    shell = (
        'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift'
        ' && for argv in verify "--read-only topic list"; do "$@" $argv; echo "rc=$?"; done'
    )
    done = subprocess.run(
        ["unshare", "--mount", "sh", "-c", shell, "sh", str(seeded), *ebb_command(seeded)],
        capture_output=True, text=True, timeout=120, env=subprocess_env(),
    )  # fmt: skip
    assert done.stdout.split() == ["rc=2", "rc=2"], done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 2 and all(
        line.startswith(f"ebb: error: data directory {seeded} is not writable") for line in lines
    ), done.stderr
    assert "damaged" not in done.stderr
    assert everything(seeded) == before
