"""Hostile input (issue 5, item 5): every parser of operator input, fuzzed.

The contract, for every policy value, config file, CLI argument list and name:
accepted with a value inside its documented bounds, or refused with one clear line
(``ebb: error: ...`` and exit 2 on the CLI) — never a traceback, and a refused command
leaves the data directory's catalog and files exactly as they were.

Each test runs a modest number of examples so that the file stays fast in CI; set
``EBB_FUZZ_EXAMPLES`` to run a campaign (``EBB_FUZZ_EXAMPLES=2000 pytest
tests/faults/test_hostile_input.py --hypothesis-show-statistics``).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import math
import os
import shutil
import sqlite3
import sys
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr, redirect_stdout
from datetime import date, datetime, time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from console.cli import console_cmd
from console.cli.main import build_parser, main
from engine.broker import Broker
from engine.clock import MAX_INSTANT_MS, parse_instant
from engine.config import Config, load_config
from engine.errors import AlreadyExists, InvalidInput, InvalidName, InvalidPolicy
from engine.names import check_group_name, check_topic_name
from engine.policy.effective import EffectivePolicy, resolve
from engine.policy.fields import FIELDS, exact_text, parse_field, validate
from engine.policy.units import (
    MAX_COUNT,
    MAX_DURATION_MS,
    MAX_SIZE_BYTES,
    InvalidValue,
    parse_bool,
    parse_count,
    parse_duration,
    parse_size,
)
from engine.prune import spark_service
from engine.store.batch import NewRecord


def fuzz(examples: int) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Hypothesis settings: ``examples`` per test, or ``$EBB_FUZZ_EXAMPLES`` for a campaign."""
    return settings(
        max_examples=int(os.environ.get("EBB_FUZZ_EXAMPLES") or examples),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
    )


# -- hostile text ----------------------------------------------------------------------------

HOSTILE_PIECES = [
    # numbers: huge, negative, signed, exponent, separators, the 64-bit edges
    "0",
    "-0",
    "-1",
    "-2",
    "+1",
    "00",
    "1_000",
    "1e3",
    "1e400",
    "inf",
    "-inf",
    "nan",
    "0x10",
    "1.",
    ".5",
    "9" * 25,
    "9" * 5000,
    str(2**63 - 1),
    str(2**63),
    str(2**64),
    "-" + str(2**63),
    # digits of other scripts that look like 0-9: Arabic-Indic, fullwidth, superscript,
    # mathematical, Devanagari
    "\u0663",
    "\uff11",
    "\u00b2",
    "\U0001d7d9",
    "\u0967",
    "\u2160",
    # minus and dot lookalikes
    "\u2212",
    "\u2013",
    "\u2024",
    "\uff0e",
    # invisible and direction marks, odd whitespace, control characters, NUL
    "\u200f",
    "\u202e",
    "\u200b",
    "\ufeff",
    "\u00a0",
    "\u2028",
    "\u3000",
    "\x1c",
    "\t",
    "\n",
    "\r",
    "\x00",
    "\x1b[31m",
    "\x7f",
    " ",
    # lone surrogates (what undecodable argv bytes become)
    "\ud800",
    "\udcff",
    # units and words, some of them in other cases or scripts
    "s",
    "ms",
    "µs",
    "μs",
    "d",
    "M",
    "GiB",
    "gb",
    "K",
    "Ki",
    "XB",
    "infinite",
    "none",
    "unlimited",
    "İ",
    "ſ",
    "ＧｉＢ",
    "on",
    "off",
    "yes",
    "TRUE",
    # path tricks and reserved file names
    "..",
    ".",
    "/",
    "\\",
    "../../etc/passwd",
    "/etc/passwd",
    "C:\\Windows",
    "~",
    "~root",
    "$HOME",
    "%s",
    "{}",
    "*",
    "?",
    "CON",
    "nul",
    "aux",
    "com1",
    "lpt1",
    ".lock",
    "catalog.db",
    "topics",
    "-",
    "--",
    "x" * 249,
    "x" * 250,
    "é" * 200,
]
"""Pieces that break parsers: combined with each other and with random text."""

HOSTILE = st.sampled_from(HOSTILE_PIECES)


def hostile_text(valid: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[str]:
    """Random text, hostile pieces, and pieces glued around valid values."""
    parts = st.one_of(HOSTILE, st.text(max_size=6), *(() if valid is None else (valid,)))
    return st.one_of(
        st.text(max_size=40),
        HOSTILE,
        st.lists(parts, min_size=1, max_size=5).map("".join),
        *(
            ()
            if valid is None
            else (valid, st.tuples(valid, HOSTILE).map("".join), st.tuples(HOSTILE, valid).map("".join))
        ),
    )


VALID_DURATIONS = st.sampled_from(["7d", "72h3m0.5s", "300ms", "1d 2h", "2 weeks", "3600", "0", "1 month", "-1"])
VALID_SIZES = st.sampled_from(["1 GiB", "10 MiB", "36 GB", "10G", "2 Ki", "2048", "0", "1.5 KiB", "-1"])
VALID_VALUES = st.one_of(
    VALID_DURATIONS,
    VALID_SIZES,
    st.sampled_from(["segment", "message", "protect", "ignore", "producer_exception", "on", "off", "10"]),
)


def one_line(message: str) -> None:
    # splitlines(), not "\n": U+2028, U+0085 and \x1c-\x1e break lines too.
    assert len(message.splitlines()) == 1, repr(message)


# -- policy value parsers ----------------------------------------------------------------------


@fuzz(400)
@given(hostile_text(VALID_DURATIONS))
@example("²s")
@example("٣d")
@example("1" + "0" * 5000 + "s")
@example("0." + "0" * 100 + "1s")
def test_parse_duration_accepts_in_bounds_or_refuses_in_one_line(text: str) -> None:
    try:
        ms = parse_duration(text)
    except InvalidValue as error:
        one_line(str(error))
        return
    assert ms is None or (isinstance(ms, int) and 0 <= ms <= MAX_DURATION_MS)
    assert ms is None or any("0" <= c <= "9" for c in text)  # no digit of another script counts


@fuzz(400)
@given(hostile_text(VALID_SIZES))
@example("1e3 GiB")
@example("\uff11 GiB")
@example(str(2**63) + " B")
def test_parse_size_accepts_in_bounds_or_refuses_in_one_line(text: str) -> None:
    try:
        size = parse_size(text)
    except InvalidValue as error:
        one_line(str(error))
        return
    assert size is None or (isinstance(size, int) and 0 <= size <= MAX_SIZE_BYTES)
    assert size is None or any("0" <= c <= "9" for c in text)


@fuzz(300)
@given(hostile_text(st.sampled_from(["10", "0", "unlimited", "-1", str(MAX_COUNT)])))
def test_parse_count_and_parse_bool(text: str) -> None:
    try:
        count = parse_count(text)
    except InvalidValue as error:
        one_line(str(error))
    else:
        assert count is None or 0 <= count <= MAX_COUNT
    try:
        switch = parse_bool(text)
    except InvalidValue as error:
        one_line(str(error))
    else:
        assert text.strip().lower() in {"true", "on", "yes", "1", "false", "off", "no", "0"} and isinstance(
            switch, bool
        )


@fuzz(400)
@given(st.sampled_from(sorted(FIELDS)), hostile_text(VALID_VALUES))
def test_parse_field_of_every_field(name: str, text: str) -> None:
    try:
        value = parse_field(name, text)
    except InvalidPolicy as error:
        one_line(str(error))
        assert name in str(error)
        return
    # What is accepted has a normal form that parses back to the very same value.
    assert parse_field(name, exact_text(name, value)) == value
    one_line(FIELDS[name].normalize(value))


FIELD_NAMES = st.one_of(st.sampled_from(sorted(FIELDS)), hostile_text())
POLICY_TEXTS = st.dictionaries(FIELD_NAMES, hostile_text(VALID_VALUES), max_size=6)


@fuzz(300)
@given(overrides=POLICY_TEXTS, defaults=POLICY_TEXTS)
def test_resolve_and_validate_any_combination(overrides: dict[str, str], defaults: dict[str, str]) -> None:
    try:
        policy = resolve(overrides, defaults)
    except InvalidPolicy as error:
        one_line(str(error))
        return
    assert isinstance(policy, EffectivePolicy) and list(policy) == list(FIELDS)
    validate(dict(policy))  # what resolve accepts keeps every rule of SPEC §3
    for entry in policy.entries():
        assert entry.source == ("topic" if entry.field in overrides else "default")
        one_line(entry.normalized)


# -- instants ------------------------------------------------------------------------------------


@fuzz(300)
@given(hostile_text(st.sampled_from(["2026-11-21T10:00:00Z", "1763719200000", "2026-11-21", "0"])))
@example("²")  # str.isdigit() is true and int() refuses it: was a ValueError traceback
@example("--5")  # lstrip("-") made it look like a number: the same
@example("1969-12-31T23:59:59.9999Z")  # a float timestamp rounded it up to 0 and let it in
def test_parse_instant_in_range_or_one_line(text: str) -> None:
    try:
        ms = parse_instant(text)
    except InvalidInput as error:
        one_line(str(error))
        return
    assert 0 <= ms <= MAX_INSTANT_MS


# -- names ---------------------------------------------------------------------------------------

NAME_CANDIDATES = st.one_of(
    hostile_text(st.sampled_from(["orders", "a.b", "x_1-2", "A9"])),
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True),
)


@fuzz(400)
@given(NAME_CANDIDATES)
def test_any_accepted_name_is_one_plain_path_component(name: str) -> None:
    for check in (check_topic_name, check_group_name):
        try:
            assert check(name) == name
        except InvalidName as error:
            one_line(str(error))
            continue
        root = Path("/data/topics")
        assert (root / name).resolve() == root / name and os.sep not in name and "\\" not in name
        assert name.isascii() and name.isprintable() and not name.startswith((".", "-"))
        assert ".." not in name and 1 <= len(name) <= 249


def tree(root: Path) -> dict[str, str]:
    """Every directory and file under ``root`` (catalog files aside): path -> digest."""
    return {
        str(p.relative_to(root)): "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if not p.name.startswith("catalog.db")
    }


def catalog_rows(root: Path) -> dict[str, list[tuple]]:
    """Every row of every table of the catalog (and journal)."""
    conn = sqlite3.connect(root / "catalog.db")
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        # Table names come from sqlite_master, not from input.
        return {t: sorted(conn.execute(f'SELECT * FROM "{t}"').fetchall(), key=repr) for t in tables}
    finally:
        conn.close()


def snapshot(root: Path) -> tuple[dict[str, str], dict[str, list[tuple]]]:
    return tree(root), catalog_rows(root)


@pytest.fixture(scope="module")
def names_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One broker for every example (hypothesis runs them all in one test call)."""
    with Broker(tmp_path_factory.mktemp("names") / "data") as broker:
        broker.create_topic("t")
        yield broker


@fuzz(200)
@given(NAME_CANDIDATES)
def test_hostile_names_through_the_broker_create_nothing(names_broker: Broker, name: str) -> None:
    data = names_broker.data.root
    before = snapshot(data)
    try:
        names_broker.create_topic(name)
    except (InvalidInput, AlreadyExists) as error:
        one_line(str(error))
        assert snapshot(data) == before
        return
    assert (data / "topics" / name / "0").is_dir()
    try:
        names_broker.create_group(name, name)
    except InvalidName:
        pytest.fail(f"a valid topic name {name!r} is not a valid group name")
    names_broker.delete_topic(name)
    assert not (data / "topics" / name).exists()


# -- the config file -----------------------------------------------------------------------------


def toml_string(text: str) -> str:
    """A TOML basic string: every control character escaped as TOML allows."""
    escaped = []
    for c in text:
        if c in '"\\':
            escaped.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            escaped.append(f"\\u{ord(c):04x}")
        else:
            escaped.append(c)
    return '"' + "".join(escaped) + '"'


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{toml_string(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


def toml_document(document: dict[str, Any]) -> str:
    """Top-level scalars first, then one ``[table]`` per table."""
    lines = [f"{toml_string(k)} = {toml_value(v)}" for k, v in document.items() if not isinstance(v, dict)]
    for name, table in document.items():
        if isinstance(table, dict):
            lines.append(f"[{toml_string(name)}]")
            lines += [f"{toml_string(k)} = {toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


UTF8_TEXT = hostile_text(VALID_VALUES).filter(lambda s: not any(0xD800 <= ord(c) <= 0xDFFF for c in s))
TOML_SCALARS = st.one_of(
    UTF8_TEXT,
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(),
    st.booleans(),
    st.datetimes(),
    st.dates(),
)
TOML_VALUES = st.recursive(
    TOML_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(UTF8_TEXT, inner, max_size=3),
    max_leaves=6,
)
CONFIG_KEYS = [
    *FIELDS,
    "prune_interval",
    "fsync",
    "journal_retention",
    "producer_hold_timeout",
    "master",
    "remote",
    "conf",
    "theme",
    "refresh",
]
TABLES = st.dictionaries(st.one_of(st.sampled_from(CONFIG_KEYS), UTF8_TEXT), TOML_VALUES, max_size=5)
DOCUMENTS = st.dictionaries(
    st.one_of(st.sampled_from(["policy", "engine", "spark", "console"]), UTF8_TEXT),
    st.one_of(TABLES, TOML_VALUES),
    max_size=4,
)


def check_config(path: Path) -> None:
    try:
        config = load_config(path)
    except InvalidInput as error:
        one_line(str(error))
        assert str(error).startswith(f"config file {path}: ")
        return
    assert isinstance(config, Config)
    resolve({}, config.policy_defaults)
    assert config.prune_interval_ms > 0 and config.console_refresh_ms > 0
    assert config.journal_retention_ms is None or config.journal_retention_ms > 0


@pytest.fixture(scope="module")
def config_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("config") / "ebb.toml"


@fuzz(300)
@given(document=DOCUMENTS)
def test_config_documents(config_path: Path, document: dict[str, Any]) -> None:
    config_path.write_text(toml_document(document), encoding="utf-8")
    check_config(config_path)


CONFIG_BYTES = [
    b"[policy]\n",
    b"[engine]\n",
    b"[spark.conf]\n",
    b"retention_time = ",
    b'"7d"',
    b"1e400",
    b"[",
    b"{",
    b"]",
    b"}",
    b"=",
    b"\n",
    b"\x00",
    b"\xff",
    b"\xed\xa0\x80",
    b'"\\ud800"',
    b"[[policy]]\n",
    b"a.b.c = 1\n",
]


@fuzz(200)
@given(data=st.one_of(st.binary(max_size=200), st.lists(st.sampled_from(CONFIG_BYTES), max_size=12).map(b"".join)))
def test_config_bytes(config_path: Path, data: bytes) -> None:
    config_path.write_bytes(data)
    check_config(config_path)


@pytest.mark.parametrize(
    "text",
    [
        "a = " + "[" * 5000 + "]" * 5000,  # tomllib recursed past Python's limit: RecursionError
        "a = " + "{b=" * 2000 + "1" + "}" * 2000,
        "[spark]\nmaster = " + "[" * 300 + "]" * 300,  # a deep value quoted in the refusal
    ],
    ids=["deep-array", "deep-inline-table", "deep-value-in-message"],
)
def test_deeply_nested_config_is_one_line(tmp_path: Path, text: str) -> None:
    path = tmp_path / "ebb.toml"
    path.write_text(text)
    with pytest.raises(InvalidInput) as refused:
        load_config(path)
    one_line(str(refused.value))
    assert len(str(refused.value)) < 300


# -- the CLI ----------------------------------------------------------------------------------------


class EngineReached(Exception):
    """Raised where ``prune``, ``explain`` and ``engine`` would start Spark: the input
    got past every check. Spark itself is tested elsewhere (tests/cli/test_prune.py)."""


def seed(root: Path) -> None:
    """The data directory every CLI example starts from."""
    with Broker(root) as broker:
        broker.create_topic("t", 2, {"segment_size": "1 KiB", "max_time": "8d"})
        broker.create_topic("u", 1, {"segment_size": "64 KiB"})
        broker.produce("t", [NewRecord(b"v%d" % i, None, 1_700_000_000_000 + i) for i in range(40)])
        broker.create_group("t", "g", "subscriber", "earliest")


def leaf_commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command of ``ebb`` (``("topic", "create")``, ...) and its parser."""
    subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subcommands:
        yield path, parser
        return
    for name, sub in subcommands[0].choices.items():
        yield from leaf_commands(sub, (*path, name))


COMMANDS = list(leaf_commands(build_parser()))
NAME_ARGS = {"name", "topic", "group", "topics"}
PLAUSIBLE = st.sampled_from(
    [
        "t",
        "u",
        "g",
        "0",
        "1",
        "3",
        "7d",
        "1 KiB",
        "2026-11-21T00:00:00Z",
        "1700000000000",
        "earliest",
        "latest",
        "subscriber",
        "reader",
        "retention_time",
        "1s",
        "infinite",
        "on",
    ]
)
# A huge --count with a valid size would legitimately produce for hours.
MAX_FUZZ_COUNT = 50


def value_for(action: argparse.Action) -> st.SearchStrategy[str]:
    if action.choices:
        return st.one_of(st.sampled_from(list(action.choices)), hostile_text())
    if action.dest in NAME_ARGS:
        return st.one_of(st.sampled_from(["t", "u", "g", "nope"]), hostile_text(PLAUSIBLE))
    return st.one_of(PLAUSIBLE, hostile_text(PLAUSIBLE))


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    """An argv for one command of the parser: its positionals, some of its options, in
    any order, with plausible or hostile values, and now and then a stray token."""
    path, parser = draw(st.sampled_from(COMMANDS))
    argv: list[str] = ["--read-only"] if draw(st.integers(0, 9)) == 0 else []
    argv += list(path)
    for action in parser._actions:
        if action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        if draw(st.integers(0, 9)):  # now and then leave a positional out
            argv.append(draw(value_for(action)))
    options = [a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]
    for action in draw(st.lists(st.sampled_from(options), max_size=4)) if options else []:
        flag = draw(st.sampled_from(action.option_strings))
        if action.nargs == 0:
            argv.append(flag)
            continue
        value = draw(value_for(action))
        if action.dest == "count" and value.strip().isascii() and value.strip().isdigit():
            value = str(min(int(value), MAX_FUZZ_COUNT))
        if draw(st.booleans()):
            argv.append(f"{flag}={value}")
        else:
            argv += [flag, value]
    if draw(st.integers(0, 5)) == 0:
        argv.insert(draw(st.integers(0, len(argv))), draw(hostile_text()))
    return argv


def _not_a_data_dir_flag(token: str) -> bool:
    # Another --data-dir (or an abbreviation of it) would send the command out of the
    # scratch directory.
    flag = token.split("=", 1)[0]
    return not (len(flag) >= 3 and "--data-dir".startswith(flag))


RANDOM_ARGV = st.lists(hostile_text(PLAUSIBLE), max_size=6).filter(lambda argv: all(map(_not_a_data_dir_flag, argv)))


class Cli:
    """``ebb --data-dir DATA ...`` in-process, on a fresh copy of the seeded directory,
    with stdin empty and Spark and the console replaced by stubs."""

    def __init__(self, pristine: Path, work: Path) -> None:
        self.pristine = pristine
        self.data = work / "data"
        self.consoles: list[argparse.Namespace] = []

    def run(self, argv: list[str], stdin: bytes = b"") -> tuple[int | str, str, str]:
        shutil.rmtree(self.data, ignore_errors=True)
        shutil.copytree(self.pristine, self.data)
        out, err = io.StringIO(), io.StringIO()
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
        code: int | str
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = main(["--data-dir", str(self.data), *argv])
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else 1
            except EngineReached:
                code = "engine"
        return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cli]:
    pristine = tmp_path_factory.mktemp("pristine") / "data"
    seed(pristine)
    work = tmp_path_factory.mktemp("cli")
    runner = Cli(pristine, work)

    def no_spark(*args: object, **kwargs: object) -> None:
        raise EngineReached

    def no_console(broker: Broker, args: argparse.Namespace) -> int:
        runner.consoles.append(args)
        return 0

    with pytest.MonkeyPatch.context() as patch:
        # prune, explain, forecast and engine import it when run
        patch.setattr("engine.prune.session.spark_engine_for", no_spark)
        # `ebb spark start` would leave a real server behind (tests/prune/test_spark_service.py starts them).
        patch.setattr(spark_service, "ensure_running", no_spark)
        patch.setattr(console_cmd, "run_console", no_console)
        patch.setattr(sys, "stdin", sys.stdin)  # Cli.run replaces it: put back after the tests
        patch.chdir(work)  # nothing may land in the current directory either
        patch.setenv("EBB_DATA_DIR", str(work / "default"))
        yield runner


def check_cli(cli: Cli, argv: list[str]) -> str:
    """Run ``argv`` and check the contract; returns how far the input got: refused by
    argparse, refused later, accepted, or accepted up to Spark."""
    before = snapshot(cli.pristine)
    code, out, err = cli.run(argv)
    assert "Traceback" not in err
    if code == 2:
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("ebb: error: "), (argv, err)
        assert err.endswith("\n") and out == "", (argv, out)
        assert snapshot(cli.data) == before, f"refused {argv!r} changed the data directory"
    else:
        assert code in (0, "engine"), (argv, code, err)
    assert sorted(os.listdir(cli.data.parent)) == ["data"], "something was written beside the data directory"
    return "refused by argparse" if code == 2 and "--help`)" in err else f"exit {code}"


@fuzz(250)
@given(argv=command_lines())
def test_cli_argv_for_every_command(cli: Cli, argv: list[str]) -> None:
    event(check_cli(cli, argv))  # shown by --hypothesis-show-statistics


@fuzz(150)
@given(argv=RANDOM_ARGV)
def test_cli_random_argv(cli: Cli, argv: list[str]) -> None:
    event(check_cli(cli, argv))


# Every input that once escaped as a traceback, a second line or a write (bugs found by
# the fuzzing above), kept as fixed regression examples.
REGRESSIONS = [
    ["topic", "describe", "\udcff"],  # UnicodeEncodeError from SQLite
    ["log", "--topic", "\udcff"],
    ["produce", "t", "--count", "1", "--key", "\udcff"],  # UnicodeEncodeError from str.encode
    ["hold", "t\x00"],
    ["consume", "t", "--group", "g", "--partition", str(2**70)],  # OverflowError from SQLite
    ["group", "commit", "t", "g", "--partition", str(2**64), "--offset", "1"],
    ["group", "move", "t", "g", "--partition", str(2**64), "--to-offset", "1"],
    ["truncate", "t", "--partition", str(2**70), "--before-offset", "1"],
    ["log", "--cycle", str(2**70)],
    ["log", "--limit", str(2**63)],
    ["group", "commit", "t", "g", "--partition", "0", "--offset", "1", "--at", "²"],  # ValueError from int()
    ["group", "commit", "t", "g", "--partition", "0", "--offset", "1", "--at=--5"],
    ["topic", "list", "a\nb"],  # "unrecognized arguments: a<newline>b": two lines
    ["topic", "list", "\x1b[2J"],  # a terminal escape went out raw
    ["consume", "t", "--group", "new", "--partition", "9"],  # created the group, then refused
    ["--data-dir", "", "topic", "list"],  # a data directory in the current directory
    ["log", "--topic", "nope"],  # created the journal's tables, then refused
    ["group", "expire", "t", "nope"],
]


@pytest.mark.parametrize("argv", REGRESSIONS, ids=[repr(a)[:60] for a in REGRESSIONS])
def test_cli_regressions(cli: Cli, argv: list[str]) -> None:
    code, _out, err = cli.run(argv)
    assert code == 2, (code, err)
    check_cli(cli, argv)
    assert not (Path.cwd() / "catalog.db").exists()


@pytest.mark.parametrize(
    ("argv", "value"),
    [
        (["group", "commit", "t", "g", "--partition", "\u0661", "--offset", "1"], "'\u0661'"),  # Arabic-Indic 1
        (["group", "commit", "t", "g", "--partition", "0", "--offset", "\uff11"], "'\uff11'"),  # fullwidth 1
        (["consume", "t", "--group", "g", "--max", "1_0"], "'1_0'"),
    ],
)
def test_lookalike_digits_are_refused_not_read_as_other_numbers(cli: Cli, argv: list[str], value: str) -> None:
    # int() reads '١' as 1: the group would have been committed at an offset the
    # operator never typed in digits 0-9.
    code, _out, err = cli.run(argv)
    assert code == 2 and value in err and "whole number" in err


def test_a_record_too_large_is_refused_before_anything_is_written(cli: Cli) -> None:
    # Was: written batch by batch, refused at the append of its batch.
    before = snapshot(cli.pristine)
    code, _out, err = cli.run(["produce", "t", "--count", "3", "--size", "2 KiB"])
    assert code == 2 and "does not fit a segment" in err and "no record was written" in err
    assert snapshot(cli.data) == before


def test_a_late_record_too_large_says_what_was_written(cli: Cli) -> None:
    # From stdin the bad record cannot be seen before the ones ahead of it are written.
    # Was: "record 0 is ... bytes" (its index in its batch) and nothing about the 5000
    # records of the same command already written.
    code, _out, err = cli.run(["produce", "t", "--partition", "1"], stdin=b"a\n" * 5000 + b"x" * 2000 + b"\n")
    assert code == 2 and err.count("\n") == 1
    assert "record 5000 is" in err and "5000 record(s) before it were acknowledged (partition 1 offsets 0..4999)" in err
    with Broker(cli.data) as broker:
        assert broker.catalog.partition("t", 1).next_offset == 5000


def test_timestamps_past_year_9999_are_refused_and_never_break_a_listing(cli: Cli) -> None:
    # Was: accepted, and from then on `topic describe` died on a ValueError.
    before = snapshot(cli.pristine)
    argv = ["produce", "t", "--count", "3", "--timestamp", "9999-12-31T00:00:00Z", "--timestamp-step", "1d"]
    code, _out, err = cli.run(argv)
    assert code == 2 and "record 2" in err and "9999-12-31T23:59:59.999Z" in err
    assert snapshot(cli.data) == before
    # A library caller may store any timestamp: listings show it as epoch ms.
    with Broker(cli.data) as broker:
        broker.produce("u", [NewRecord(b"far", None, 10**16)])
    for argv in (["topic", "describe", "u"], ["topic", "list"], ["consume", "u", "--group", "r", "--json"]):
        code, _out, err = main_on(cli.data, argv)
        assert code == 0 and err == "", (argv, err)
    assert "10000000000000000 ms" in main_on(cli.data, ["topic", "describe", "u"])[1]


def main_on(data: Path, argv: list[str]) -> tuple[int, str, str]:
    """``ebb --data-dir DATA ...`` on ``data`` as it is (no fresh copy)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["--data-dir", str(data), *argv])
    return code, out.getvalue(), err.getvalue()


def test_the_console_gets_its_arguments_through(cli: Cli) -> None:
    cli.consoles.clear()
    assert cli.run([])[0] == 0 and cli.run(["console", "--theme", "\u202e"])[0] == 0
    assert len(cli.consoles) == 2


def test_the_console_takes_one_place_to_plan_as_every_command_does(cli: Cli) -> None:
    cli.consoles.clear()
    code, _out, err = cli.run(["console", "--spark-master", "local[1]", "--spark-remote", "sc://127.0.0.1:1"])
    assert code == 2 and not cli.consoles
    assert err.count("\n") == 1 and "not allowed with argument --spark-master" in err


def test_help_is_exit_0_on_stdout(cli: Cli) -> None:
    code, out, err = cli.run(["topic", "create", "--help"])
    assert code == 0 and "--retention-time" in out and err == ""


def test_running_out_of_memory_is_one_error_line(ebb, monkeypatch: pytest.MonkeyPatch) -> None:
    assert ebb("topic", "create", "t").code == 0

    def too_large(*_: object) -> None:
        raise MemoryError("Unable to allocate 1.76 GiB for an array with shape (236333490,)")

    monkeypatch.setattr(Broker, "describe", too_large)
    result = ebb("topic", "describe", "t")
    assert result.code == 2 and result.out == ""
    assert result.err.splitlines() == ["ebb: error: out of memory: this machine cannot hold what the command needed"]
