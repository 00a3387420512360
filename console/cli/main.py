"""``ebb``: the command-line interface of SPEC §7.

Every operator error is an :class:`~engine.errors.EbbError` and becomes one line on
stderr with exit status 2; nothing is written before the input is known to be good.

Every command module is imported here to build the parser, so a command module
imports what plans or applies a plan (Spark, Arrow: a second of start-up) inside the
handlers that need it, and `ebb topic list` starts in a fraction of a second
(tests/cli/test_startup.py).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TextIO

from console.cli import (
    completion,
    console_cmd,
    engine_cmd,
    forecast,
    groups,
    journal_log,
    manage,
    prune,
    records,
    spark_cmd,
    topics,
    verify,
)
from console.cli.parser import (
    OneLineParser,
    Run,
    dash_values_joined,
    mutates,
    one_line,
    options_taking_values,
    warn,
)
from console.cli.standard_streams import GuardedOutput, OutputFailed, discard_pending_output, reopen_closed_streams
from engine.broker import Broker
from engine.catalog.damage import damaged, holds_topics
from engine.datadir import DataDir, default_data_dir
from engine.errors import EbbError, InvalidInput
from engine.store.segment import describe


def _path(text: str) -> Path:
    # An empty --data-dir (an unset variable: --data-dir "$DIR") would be the current
    # directory, and a data directory would be created wherever the command ran.
    if not text.strip():
        raise argparse.ArgumentTypeError("the path is empty")
    return Path(text)


def _installed_version() -> str:
    """The installed distribution's version (pyproject.toml's), as `pip show ebbtide` says."""
    try:
        return importlib.metadata.version("ebbtide")
    except importlib.metadata.PackageNotFoundError:  # run from a tree that was never installed
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="ebb",
        description="Ebbtide: retention engine and admin console for segmented message logs.",
    )
    parser.add_argument(
        "--data-dir",
        type=_path,
        default=None,
        help=f"data directory [default: $EBB_DATA_DIR or {default_data_dir()}]",
    )
    parser.add_argument("--config", type=_path, default=None, help="config file [default: DATA_DIR/ebb.toml]")
    parser.add_argument("--version", action="version", version=f"ebb {_installed_version()}")
    # Its own dest: the console's `--read-only` (dest read_only) would overwrite it with
    # its default, since a subcommand's defaults replace the main parser's values.
    parser.add_argument(
        "--read-only",
        dest="read_only_all",
        action="store_true",
        help="refuse every command that writes to the data directory (the console hides them)",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    topics.register(commands)
    records.register(commands)
    groups.register(commands)
    prune.register(commands)
    forecast.register(commands)
    manage.register(commands)
    journal_log.register(commands)
    engine_cmd.register(commands)
    spark_cmd.register(commands)
    console_cmd.register(commands)
    verify.register(commands)
    completion.register(commands)
    return parser


#: the global options that take a value, and those that do not
_GLOBAL_VALUED = ("--data-dir", "--config")
_GLOBAL_FLAGS = ("--read-only",)


def global_options_first(argv: Sequence[str]) -> list[str]:
    """``argv`` with the global options given after the command moved before it:
    ``ebb topic list --data-dir D`` as ``ebb --data-dir D topic list``, as Kafka's
    and Pulsar's tools take their options anywhere. Nothing after ``--`` moves, nor
    the console's own ``--read-only``."""
    front: list[str] = []
    rest: list[str] = []
    remaining = list(argv)
    while remaining:
        argument = remaining.pop(0)
        if argument == "--":
            rest += [argument, *remaining]
            break
        name = argument.split("=", 1)[0]
        command = next((a for a in rest if not a.startswith("-")), None)
        if name in _GLOBAL_VALUED and "=" not in argument and remaining:
            front += [argument, remaining.pop(0)]
        elif name in _GLOBAL_VALUED or (argument in _GLOBAL_FLAGS and command != "console"):
            front.append(argument)
        else:
            rest.append(argument)
    return front + rest


def _check_argv(argv: Sequence[str]) -> None:
    """Refuse what no shell can pass and SQLite cannot store: a NUL character, or
    bytes that are not UTF-8 (Python hands them over as lone surrogates)."""
    for index, argument in enumerate(argv, start=1):
        if "\0" in argument:
            raise InvalidInput(f"argument {index} ({argument!r}) contains a NUL character")
        try:
            argument.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput(f"argument {index} ({argument!r}) is not valid UTF-8 text") from None


def _read_only(args: argparse.Namespace, run: Run, data: DataDir) -> None:
    """``--read-only``: refuse a command that writes, before anything is opened, and
    a data directory that does not exist (opening it would create it)."""
    if run is console_cmd.run_console:
        # The console has a read-only mode of its own (hide and refuse every mutating
        # action): the flag is passed on (its --demo is then refused, see main).
        args.read_only = True
    elif mutates(args):
        name = getattr(args, "command_name", f"ebb {args.command}")  # undeclared: see parser.command
        raise InvalidInput(f"--read-only: `{name}` writes to the data directory")
    if not data.catalog_path.exists() and holds_topics(data.root):
        raise damaged(data.catalog_path, f"is missing, and {data.topics_root} holds topics")
    if not data.catalog_path.exists():
        raise InvalidInput(f"--read-only: {data.root} is not a data directory yet (no {data.catalog_path.name})")


def _warn_if_new(args: argparse.Namespace, run: Run, data: DataDir) -> None:
    """A command that only reads, given a data directory that does not exist: it
    still runs (opening creates the directory, and every command works on a new one),
    but one line says so, since a mistyped ``--data-dir`` would otherwise read as an
    empty data directory, and ``ebb verify`` would call it clean."""
    if run is not console_cmd.run_console and not mutates(args) and not data.root.exists():
        warn(f"data directory {data.root} did not exist; created it empty (check --data-dir or $EBB_DATA_DIR)")


def _warn_if_metadata_unwritten(opened: object) -> None:
    """The command's changes are committed to the catalog, but the metadata files a
    lost catalog is rebuilt from (engine/catalog/metadata_files.py) could not follow:
    one line says so, where it would otherwise surface only in `ebb verify`. (A
    command that opens the data directory its own way has no catalog of a broker.)"""
    why = opened.catalog.metadata_unwritten if isinstance(opened, Broker) else None
    if why:
        warn(
            f"done, but the metadata files beside the segments could not be updated ({why}); "
            "the next change tries again, and `ebb verify` reports what they lack"
        )


def _check_config_path(config: Path | None) -> None:
    """A ``--config`` that names no readable file is refused before the data directory
    is opened (opening creates it), with what is wrong with it: a directory is not a
    file that "does not exist"."""
    if config is None or config.is_file():
        return
    if config.is_dir():
        raise InvalidInput(f"config file {config} is a directory; name a TOML file")
    if config.exists():
        raise InvalidInput(f"config file {config} is not a regular file; name a TOML file")
    raise InvalidInput(f"config file {config} does not exist")


class Terminated(Exception):
    """The command was stopped by SIGTERM; its text says what a produce had
    acknowledged, as an interrupt's does."""


@contextmanager
def _sigterm_as_interrupt(wanted: bool) -> Iterator[list[bool]]:
    """SIGTERM (``kill``, a service manager, a CI timeout) stops a command the way
    Ctrl-C does: the command's own interrupt handling runs (a produce writes and
    acknowledges what it read, a plan's Spark jobs are cancelled, a prune stops
    before applying or between durable steps), one line says so, and the catalog is
    left up to the files, where the default action killed the process between an
    append and its catalog row. The list it yields is non-empty once SIGTERM came.

    Only on the main thread, and not over a disposition someone chose (an ignored
    SIGTERM stays ignored); `ebb engine` installs its own (a clean stop, exit 0); the
    console leaves signals to Textual."""
    came: list[bool] = []
    if not wanted or threading.current_thread() is not threading.main_thread():
        yield came
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield came
        return

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        came.append(True)
        ctrl_c = signal.getsignal(signal.SIGINT)
        if callable(ctrl_c):
            # Ctrl-C's handler of the moment: during a plan it also cancels the plan's
            # Spark jobs (engine/prune/session.py), where a bare interrupt waits for them.
            ctrl_c(signal.SIGINT, frame)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield came
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    closed = reopen_closed_streams()
    real_stdout = sys.stdout
    sys.stdout = GuardedOutput(real_stdout)  # a TextIO by delegation (its __getattr__)
    try:
        return _main(argv, closed, real_stdout)
    finally:
        sys.stdout = real_stdout


def _main(argv: list[str], closed: set[str], real_stdout: TextIO) -> int:
    try:
        if "stdout" in closed:
            # Every command prints what it did; with nowhere to print it the operator
            # would not know. Refused before anything is done, as `ls >&-` fails.
            raise OutputFailed("standard output is closed; redirect it (>/dev/null) instead of closing it")
        _check_argv(argv)
        parser = build_parser()
        completion.autocomplete(parser)
        args = parser.parse_args(dash_values_joined(global_options_first(argv), options_taking_values(parser)))
        if getattr(args, "standalone", None):
            code = int(args.standalone(args))
            sys.stdout.flush()
            return code
        # ``ebb`` alone opens the console with its defaults.
        run = getattr(args, "run", console_cmd.run_console)
        data = DataDir(args.data_dir or default_data_dir())
        if args.read_only_all:
            _read_only(args, run, data)
        if run is console_cmd.run_console:
            console_cmd.refuse_conflicts(args)
            # Textual drives the terminal itself: it gets the real stream.
            sys.stdout = real_stdout
        _check_config_path(args.config)
        _warn_if_new(args, run, data)
        # A command may open the data directory its own way (verify: a damaged catalog).
        with _sigterm_as_interrupt(run is not console_cmd.run_console) as terminated:
            try:
                with getattr(args, "open_data", Broker)(data.root, args.config) as broker:
                    code = run(broker, args)
                _warn_if_metadata_unwritten(broker)
            except KeyboardInterrupt as interrupt:
                if terminated:
                    raise Terminated(str(interrupt)) from None
                raise
        # Output still buffered fails here, inside the handlers below, rather than in
        # the interpreter's exit with a traceback.
        sys.stdout.flush()
        return int(code)
    except EbbError as error:
        if isinstance(error, OutputFailed):
            discard_pending_output(real_stdout)
        # one_line: a message quoting operator input must stay one line whatever it holds.
        print(f"ebb: error: {one_line(str(error))}", file=sys.stderr)
        return 2
    except MemoryError:
        # numpy's "Unable to allocate 1.76 GiB for an array" and its 50 lines of
        # traceback say no more than this.
        print("ebb: error: out of memory: this machine cannot hold what the command needed", file=sys.stderr)
        return 2
    except Terminated as stop:
        said = f"; {one_line(str(stop))}" if str(stop) else ""
        print(f"ebb: terminated (SIGTERM){said}", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt as interrupt:
        # what a produce had acknowledged when it was stopped, where it says
        said = f"; {one_line(str(interrupt))}" if str(interrupt) else ""
        print(f"ebb: interrupted{said}", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of our output went away (``| head``): not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as error:
        # What the engine did not foresee of the system (a file made immutable, a
        # directory where a file was): the system's own words and the file, never
        # a traceback. Every write before it was committed whole or not at all.
        print(f"ebb: error: {one_line(describe(error))}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
