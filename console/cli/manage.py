"""``ebb truncate``, ``ebb purge``, ``ebb hold`` / ``ebb release``, ``ebb pause`` / ``ebb resume``:
the manual operations of SPEC §5 (engine/prune/operations.py). Each prints one line
saying what was done, or with ``--json`` one object.

``purge`` deletes every record of a topic, so it asks for ``--yes``; at a terminal,
typing the topic name confirms it instead (as the console asks).

Each handler imports the operations when it runs, so that every other command does
not pay for importing them and the executor (about 17 ms; no Arrow, which
engine/prune/operations.py never loads).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from console.cli.parser import command, non_negative_int, positive_int
from console.cli.render import emit_json, size
from engine.broker import Broker
from engine.clock import parse_instant
from engine.errors import InvalidInput

if TYPE_CHECKING:
    from engine.prune.operations import DeletionResult, SwitchResult

ACTOR = "cli"


def register(commands: argparse._SubParsersAction) -> None:
    truncate = commands.add_parser(
        "truncate", help="delete a partition's records below an offset or a time, or its oldest segments"
    )
    truncate.add_argument("topic")
    truncate.add_argument("--partition", type=non_negative_int, required=True)
    where = truncate.add_mutually_exclusive_group(required=True)
    where.add_argument("--before-offset", type=non_negative_int, metavar="OFFSET", help="the new log start")
    where.add_argument(
        "--before-time",
        metavar="TIME",
        help="the first record at or after this time (ISO 8601 or epoch ms) becomes the log start",
    )
    where.add_argument("--oldest-segments", type=positive_int, metavar="N", help="delete the oldest N sealed segments")
    truncate.add_argument("--json", action="store_true")
    command(truncate, run_truncate, mutates=True)

    purge = commands.add_parser("purge", help="delete every record of a topic (needs --yes)")
    purge.add_argument("topic")
    purge.add_argument("--yes", action="store_true", help="confirm: every record of the topic is deleted")
    purge.add_argument("--json", action="store_true")
    command(purge, run_purge, mutates=True)

    for name, on, text in (
        ("hold", True, "set a retention hold: nothing of the topic is deleted, by any path"),
        ("release", False, "release a topic's retention hold"),
    ):
        switch = commands.add_parser(name, help=text)
        switch.add_argument("topic")
        switch.add_argument("--json", action="store_true")
        command(switch, run_hold, mutates=True, hold_on=on)

    for name, paused, text in (
        ("pause", True, "pause all deletion (cycles still plan and report)"),
        ("resume", False, "resume deletion"),
    ):
        switch = commands.add_parser(name, help=text)
        switch.add_argument("--json", action="store_true")
        command(switch, run_pause, mutates=True, paused=paused)


def run_truncate(broker: Broker, args: argparse.Namespace) -> int:
    from engine.prune import operations

    if args.oldest_segments is not None:
        result = operations.delete_oldest(broker, args.topic, args.partition, args.oldest_segments, actor=ACTOR)
    elif args.before_time is not None:
        result = operations.truncate(
            broker, args.topic, args.partition, before_time=parse_instant(args.before_time), actor=ACTOR
        )
    else:
        result = operations.truncate(broker, args.topic, args.partition, before_offset=args.before_offset, actor=ACTOR)
    _print_deletion(result, args.json)
    return 0


def run_purge(broker: Broker, args: argparse.Namespace) -> int:
    from engine.prune import operations

    broker.catalog.topic(args.topic)
    if not args.yes:
        _confirm_purge(args.topic)
    _print_deletion(operations.purge(broker, args.topic, actor=ACTOR), args.json)
    return 0


def _confirm_purge(topic: str) -> None:
    """At a terminal, typing the topic name confirms; elsewhere ``--yes`` must."""
    refused = InvalidInput(f"purge deletes every record of topic {topic}: confirm with --yes")
    if not sys.stdin.isatty():
        raise refused
    sys.stderr.write(f"purge deletes every record of topic {topic}; type its name to confirm: ")
    sys.stderr.flush()
    if sys.stdin.readline().strip() != topic:
        raise refused


def _print_deletion(result: DeletionResult, as_json: bool) -> None:
    if as_json:
        emit_json(result.to_json())
        return
    where = result.topic if result.operation == "purge" else f"{result.topic}/{result.partitions[0].partition}"
    if not result.changed:
        starts = ", ".join(str(p.log_start_offset) for p in result.partitions)
        print(f"{result.operation} {where}: nothing to delete (log start {starts})")
        return
    verb = {"truncate": "truncated", "delete_oldest": "truncated", "purge": "purged"}[result.operation]
    if result.operation == "purge":
        moved = f"{result.messages} record(s) in {len(result.partitions)} partition(s)"
    else:
        p = result.partitions[0]
        moved = f"log start {p.log_start_offset} -> {p.new_log_start_offset} ({result.messages} record(s))"
    groups = sorted({g.group for g in result.groups_moved})
    skipped = sum(g.messages_skipped for g in result.groups_moved)
    tail = f"; moved {len(groups)} group(s) ({', '.join(groups)}), {skipped} unread record(s) skipped" if groups else ""
    print(
        f"{verb} {where}: {moved}, deleted {result.segments_deleted} segment(s), "
        f"{size(result.bytes_freed)} (cycle {result.cycle_id}){tail}"
    )


def run_hold(broker: Broker, args: argparse.Namespace) -> int:
    from engine.prune import operations

    _print_switch(operations.set_hold(broker, args.topic, args.hold_on, actor=ACTOR), args.json)
    return 0


def run_pause(broker: Broker, args: argparse.Namespace) -> int:
    from engine.prune import operations

    result = operations.pause(broker, actor=ACTOR) if args.paused else operations.resume(broker, actor=ACTOR)
    _print_switch(result, args.json)
    return 0


def _print_switch(result: SwitchResult, as_json: bool) -> None:
    if as_json:
        emit_json(result.to_json())
        return
    lines = {
        (
            "hold",
            True,
        ): f"topic {result.topic} is now on hold: nothing of it is deleted until `ebb release {result.topic}`",
        ("hold", False): f"topic {result.topic} was already on hold",
        ("release", True): f"topic {result.topic} released: retention applies again from the next cycle",
        ("release", False): f"topic {result.topic} was not on hold",
        ("pause", True): "engine paused: cycles still plan and report, nothing is deleted until `ebb resume`",
        ("pause", False): "engine was already paused",
        ("resume", True): "engine resumed: deletion applies again from the next cycle",
        ("resume", False): "engine was not paused",
    }
    print(lines[(result.operation, result.changed)])
