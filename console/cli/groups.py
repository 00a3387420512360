"""``ebb group create|list|commit|delete|expire|move``.

``expire`` and ``move`` are manual operations (engine/prune/operations.py): their
handlers import them when they run, so that the other commands do not pay for it.
"""

from __future__ import annotations

import argparse

from console import format
from console.cli.parser import command, non_negative_int
from console.cli.render import emit_json, instant, table
from engine.broker import Broker
from engine.catalog.lag import by_group, partition_lags
from engine.clock import parse_instant


def register(commands: argparse._SubParsersAction) -> None:
    group = commands.add_parser("group", help="consumer groups and their positions")
    sub = group.add_subparsers(dest="group_command", required=True, metavar="ACTION")

    create = sub.add_parser("create", help="create a group on a topic")
    create.add_argument("topic")
    create.add_argument("group")
    create.add_argument(
        "--kind",
        choices=("subscriber", "reader"),
        default="subscriber",
        help="subscriber: holds data back under consumption=protect; reader: never does [default: subscriber]",
    )
    create.add_argument("--from", dest="start", choices=("earliest", "latest"), default="earliest")
    command(create, run_create, mutates=True)

    listing = sub.add_parser("list", help="groups of a topic with positions, lag in messages and lag age")
    listing.add_argument("topic")
    listing.add_argument("--json", action="store_true")
    command(listing, run_list, mutates=False)

    commit = sub.add_parser("commit", help="set a group's position on a partition")
    commit.add_argument("topic")
    commit.add_argument("group")
    commit.add_argument("--partition", type=non_negative_int, required=True)
    commit.add_argument("--offset", type=non_negative_int, required=True, help="the next offset the group will read")
    commit.add_argument("--at", help="commit time: ISO 8601 or epoch ms [default: now]")
    command(commit, run_commit, mutates=True)

    delete = sub.add_parser("delete", help="delete a group")
    delete.add_argument("topic")
    delete.add_argument("group")
    command(delete, run_delete, mutates=True)

    expire = sub.add_parser("expire", help="expire a group now (journaled, as subscription_expiry would)")
    expire.add_argument("topic")
    expire.add_argument("group")
    expire.add_argument("--json", action="store_true")
    command(expire, run_expire, mutates=True)

    move = sub.add_parser("move", help="move a group's position on a partition, forwards or back (journaled)")
    move.add_argument("topic")
    move.add_argument("group")
    move.add_argument("--partition", type=non_negative_int, required=True)
    target = move.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-offset", type=non_negative_int, metavar="OFFSET")
    target.add_argument(
        "--to-time", metavar="TIME", help="the first record at or after this time (ISO 8601 or epoch ms)"
    )
    target.add_argument("--to-earliest", action="store_const", const="earliest", dest="to", help="the log start")
    target.add_argument("--to-latest", action="store_const", const="latest", dest="to", help="the log end")
    move.add_argument("--json", action="store_true")
    command(move, run_move, mutates=True)


def run_create(broker: Broker, args: argparse.Namespace) -> int:
    created = broker.create_group(args.topic, args.group, args.kind, args.start)
    positions = " ".join(f"{p}:{pos}" for p, (pos, _) in sorted(created.positions.items()))
    print(f"created {args.kind} group {args.group} on {args.topic} from {args.start} (positions {positions})")
    return 0


def run_list(broker: Broker, args: argparse.Namespace) -> int:
    catalog = broker.catalog
    with catalog.read():
        catalog.topic(args.topic)
        now = broker.clock()
        groups = by_group(partition_lags(catalog, broker.record_ages, args.topic))
    if args.json:
        emit_json(
            [
                {
                    "name": g.group,
                    "kind": g.kind,
                    "positions": {str(p.partition): p.position for p in g.partitions},
                    "lag": {str(p.partition): p.lag_messages for p in g.partitions},
                    "lag_ms": {str(p.partition): p.lag_ms(now) for p in g.partitions},
                    "committed_at": {str(p.partition): p.committed_at for p in g.partitions},
                }
                for g in groups
            ]
        )
    elif not groups:
        print(f"topic {args.topic} has no groups")
    else:
        rows = [
            (
                g.group,
                g.kind,
                p.partition,
                p.position,
                p.lag_messages,
                format.age(p.lag_ms(now)),
                instant(p.committed_at),
            )
            for g in groups
            for p in g.partitions
        ]
        print(table(("GROUP", "KIND", "PARTITION", "POSITION", "LAG", "LAG AGE", "LAST COMMIT"), rows))
    return 0


def run_commit(broker: Broker, args: argparse.Namespace) -> int:
    at = parse_instant(args.at) if args.at is not None else None
    broker.commit(args.topic, args.group, args.partition, args.offset, at)
    print(f"group {args.group} on {args.topic}/{args.partition} now at offset {args.offset}")
    return 0


def run_delete(broker: Broker, args: argparse.Namespace) -> int:
    broker.delete_group(args.topic, args.group)
    print(f"deleted group {args.group} of {args.topic}")
    return 0


def run_expire(broker: Broker, args: argparse.Namespace) -> int:
    from engine.prune import operations

    result = operations.expire_group(broker, args.topic, args.group, actor="cli")
    if args.json:
        emit_json(result.to_json())
    else:
        print(f"expired {result.kind} group {args.group} of {args.topic}")
    return 0


def run_move(broker: Broker, args: argparse.Namespace) -> int:
    from engine.prune import operations

    result = operations.move_group(
        broker,
        args.topic,
        args.group,
        args.partition,
        to_offset=args.to_offset,
        to_time=parse_instant(args.to_time) if args.to_time is not None else None,
        to=args.to,
        actor="cli",
    )
    if args.json:
        emit_json(result.to_json())
        return 0
    old, new = result.positions[args.partition]
    direction = "forward" if new > old else "back" if new < old else "nowhere"
    print(
        f"moved group {args.group} on {args.topic}/{args.partition} from {old} to {new} "
        f"({direction}, {abs(new - old)} record(s))"
    )
    return 0
