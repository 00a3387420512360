"""``ebb``: the command-line interface of SPEC §7.

Every operator error is an :class:`~engine.errors.EbbError` and becomes one line on
stderr with exit status 2; nothing is written before the input is known to be good.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Sequence

from console.cli import engine_cmd, groups, journal_log, manage, prune, records, topics
from console.cli.parser import OneLineParser
from engine.broker import Broker
from engine.datadir import default_data_dir
from engine.errors import EbbError


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="ebb",
        description="Ebbtide: retention engine and admin console for segmented message logs.",
    )
    parser.add_argument(
        "--data-dir", type=Path, default=None,
        help=f"data directory [default: $EBB_DATA_DIR or {default_data_dir()}]",
    )
    parser.add_argument("--config", type=Path, default=None, help="config file [default: DATA_DIR/ebb.toml]")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    topics.register(commands)
    records.register(commands)
    groups.register(commands)
    prune.register(commands)
    manage.register(commands)
    journal_log.register(commands)
    engine_cmd.register(commands)
    return parser


def run_overview(broker: Broker, args: argparse.Namespace) -> int:
    """``ebb`` alone: what this data directory holds, until the console takes over."""
    print(f"Ebbtide data directory {broker.data.root}")
    args.json = False
    topics.run_list(broker, args)
    print("\nrun `ebb --help` for the commands")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run = getattr(args, "run", run_overview)
    try:
        with Broker(args.data_dir or default_data_dir(), args.config) as broker:
            return run(broker, args)
    except EbbError as error:
        print(f"ebb: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ebb: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of our output went away (``| head``): not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
