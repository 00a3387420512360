"""``ebb topic create|alter|list|describe|delete``."""

from __future__ import annotations

import argparse

from console.cli.parser import command, positive_int, warn
from console.cli.policy_flags import add_policy_flags, policy_changes
from console.cli.render import emit_json, instant, size, table
from engine.broker import Broker, TopicDescription
from engine.errors import InvalidPolicy


def register(commands: argparse._SubParsersAction) -> None:
    topic = commands.add_parser("topic", help="create, alter, list, describe and delete topics")
    sub = topic.add_subparsers(dest="topic_command", required=True, metavar="ACTION")

    create = sub.add_parser("create", help="create a topic")
    create.add_argument("name")
    create.add_argument("--partitions", type=positive_int, default=1)
    create.add_argument("--json", action="store_true", help="print the effective policy as JSON")
    add_policy_flags(create)
    command(create, run_create, mutates=True)

    alter = sub.add_parser("alter", help="change a topic's policy (journaled)")
    alter.add_argument("name")
    alter.add_argument("--json", action="store_true")
    add_policy_flags(alter, allow_reset=True)
    command(alter, run_alter, mutates=True)

    listing = sub.add_parser("list", help="list topics")
    listing.add_argument("--json", action="store_true")
    command(listing, run_list, mutates=False)

    describe = sub.add_parser("describe", help="effective policy with sources, partitions, segments, groups")
    describe.add_argument("name")
    describe.add_argument("--json", action="store_true")
    command(describe, run_describe, mutates=False)

    delete = sub.add_parser(
        "delete", help="delete a topic and all its data (refused while it is on hold or the engine is paused)"
    )
    delete.add_argument("name")
    command(delete, run_delete, mutates=True)


def run_create(broker: Broker, args: argparse.Namespace) -> int:
    policy = broker.create_topic(args.name, args.partitions, policy_changes(args))
    if args.json:
        emit_json({"name": args.name, "partitions": args.partitions, "policy": policy.to_json()})
    else:
        overrides = policy.overrides()
        shown = ", ".join(f"{k}={v}" for k, v in overrides.items()) or "engine defaults"
        print(f"created topic {args.name} with {args.partitions} partition(s); policy: {shown}")
    return 0


def run_alter(broker: Broker, args: argparse.Namespace) -> int:
    changes = broker.alter_topic(args.name, policy_changes(args))
    if args.json:
        emit_json({"name": args.name, "changes": [{"field": f, "old": o, "new": n} for f, o, n in changes]})
    elif not changes:
        print(f"topic {args.name}: nothing changed")
    else:
        for field, old, new in changes:
            print(f"topic {args.name}: {field} {old or '(default)'} -> {new or '(default)'}")
    return 0


def run_list(broker: Broker, args: argparse.Namespace) -> int:
    """Every topic, even one whose effective policy is invalid (a config default
    changed under its overrides): that one's retention is null and its error said,
    and the others are still listed."""
    rows = []
    for topic in broker.catalog.topics():
        segments = [broker.catalog.segments(topic.name, row.partition) for row in broker.catalog.partitions(topic.name)]
        try:
            retention, error = broker.policy(topic.name).entry("retention_time").text, None
        except InvalidPolicy as invalid:
            retention, error = None, str(invalid)
        count, total = sum(map(len, segments)), sum(s.size_bytes for listed in segments for s in listed)
        rows.append((topic.name, topic.partitions, count, total, retention, error))
    if args.json:
        emit_json(
            [
                {"name": n, "partitions": p, "segments": s, "size_bytes": b, "retention_time": r}
                | ({} if e is None else {"policy_error": e})
                for n, p, s, b, r, e in rows
            ]
        )
    elif not rows:
        print("no topics yet; create one with `ebb topic create NAME`")
    else:
        print(
            table(
                ("TOPIC", "PARTITIONS", "SEGMENTS", "SIZE", "RETENTION"),
                [(n, p, s, size(b), r if e is None else f"({e})") for n, p, s, b, r, e in rows],
            )
        )
    return 0


def run_describe(broker: Broker, args: argparse.Namespace) -> int:
    described = broker.describe(args.name)
    if args.json:
        emit_json(described.to_json())
    else:
        print(render_description(described))
    return 0


def render_description(d: TopicDescription) -> str:
    quota = "exceeded" if d.quota.exceeded else "not exceeded"
    if d.quota.since is not None:
        quota += f" since {instant(d.quota.since)}"
    out = [f"topic {d.name}: {len(d.partitions)} partition(s); backlog quota {quota}", "", "policy:"]
    out.append(
        table(
            ("FIELD", "VALUE", "NORMALIZED", "SOURCE"),
            [(e.field, e.text, e.normalized, e.source) for e in d.policy.entries()],
        )
    )
    for p in d.partitions:
        out += [
            "",
            f"partition {p.row.partition}: offsets [{p.row.log_start_offset}, {p.row.next_offset}), "
            f"{size(p.size_bytes)} in {len(p.segments)} segment(s)",
            table(
                ("BASE", "NEXT", "SIZE", "FIRST TIMESTAMP", "MAX TIMESTAMP", "STATE"),
                [
                    (
                        s.base_offset,
                        s.next_offset,
                        s.size_bytes,
                        instant(s.first_timestamp),
                        instant(s.max_timestamp),
                        "sealed" if s.sealed else "active",
                    )
                    for s in p.segments
                ],
            ),
        ]
    out += ["", "groups:" if d.groups else "groups: none"]
    if d.groups:
        out.append(
            table(
                ("GROUP", "KIND", "POSITIONS"),
                [
                    (g.name, g.kind, " ".join(f"{p}:{pos}" for p, (pos, _) in sorted(g.positions.items())))
                    for g in d.groups
                ],
            )
        )
    return "\n".join(out)


def run_delete(broker: Broker, args: argparse.Namespace) -> int:
    kept = broker.delete_topic(args.name)
    print(f"deleted topic {args.name}")
    if kept is not None:
        warn(
            f"some of its files could not be removed, and their space is not freed ({kept}); "
            "`ebb verify` lists them, and creating the topic again removes them"
        )
    return 0
