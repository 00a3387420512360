"""``ebb log``: the journal (SPEC §6), newest first, as a table, CSV or JSON.

By default the actions; ``--cycles`` lists the cycles, ``--policy-changes`` the policy
changes. CSV and JSON carry the journal's stable field names
(engine/journal/journal.py), timestamps in epoch milliseconds.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, get_args

from console.cli.parser import command, non_negative_int, positive_int
from console.cli.render import instant, size, table
from console.model.journal import cycle_time, reason_text
from engine.broker import Broker
from engine.errors import InvalidInput
from engine.journal.export import write_csv, write_json
from engine.journal.journal import ACTION_KINDS, POLICY_CHANGE_FIELDS, Journal
from engine.journal.rows import ACTION_FIELDS, CYCLE_FIELDS, Action, ActionStatus, Cycle, CycleStatus
from engine.policy.units import InvalidValue, parse_duration

DEFAULT_LIMIT = 100
ACTION_STATUSES = get_args(ActionStatus)
CYCLE_STATUSES = get_args(CycleStatus)


def register(commands: argparse._SubParsersAction) -> None:
    log = commands.add_parser("log", help="the journal: actions (default), cycles or policy changes, newest first")
    what = log.add_mutually_exclusive_group()
    what.add_argument("--cycles", action="store_true", help="list prune cycles instead of actions")
    what.add_argument("--policy-changes", action="store_true", help="list policy changes instead of actions")
    log.add_argument("--since", metavar="DURATION", help="only the last DURATION (e.g. 1h, 7d)")
    log.add_argument("--topic", help="only actions or policy changes of this topic")
    log.add_argument("--action", help=f"only this kind of action ({', '.join(sorted(ACTION_KINDS))})")
    log.add_argument(
        "--cycle", type=positive_int, metavar="ID", help="only the actions of this cycle (or, with --cycles, it)"
    )
    log.add_argument("--status", help="only actions or cycles with this status")
    log.add_argument(
        "--limit",
        type=non_negative_int,
        default=DEFAULT_LIMIT,
        help=f"at most this many rows, 0 for all [default: {DEFAULT_LIMIT}]",
    )
    form = log.add_mutually_exclusive_group()
    form.add_argument("--csv", action="store_true", help="CSV with a header line")
    form.add_argument("--json", action="store_true", help="a JSON array of objects")
    command(log, run_log, mutates=False)


def _since(broker: Broker, text: str | None) -> int | None:
    if text is None:
        return None
    if text.strip().startswith("-"):
        raise InvalidInput(
            f"invalid --since {text!r}: a duration back from now, e.g. 1h or 7d (infinite: the whole journal)"
        )
    try:
        duration = parse_duration(text)
    except InvalidValue as error:
        raise InvalidInput(f"invalid --since {text!r}: {error.reason}") from None
    if duration is None:
        return None  # infinite: the whole journal
    return broker.clock() - duration


def _check(args: argparse.Namespace) -> None:
    if args.action is not None and args.action not in ACTION_KINDS:
        raise InvalidInput(f"unknown action {args.action!r}: use one of {', '.join(sorted(ACTION_KINDS))}")
    statuses = CYCLE_STATUSES if args.cycles else ACTION_STATUSES
    if args.status is not None and args.status not in statuses:
        what = "cycle" if args.cycles else "action"
        raise InvalidInput(f"unknown {what} status {args.status!r}: use one of {', '.join(statuses)}")
    if args.cycles and (args.topic is not None or args.action is not None):
        raise InvalidInput("--topic and --action filter actions, not cycles: leave out --cycles")
    if args.policy_changes and (args.action is not None or args.cycle is not None or args.status is not None):
        raise InvalidInput("--action, --cycle and --status filter actions or cycles, not policy changes")


def run_log(broker: Broker, args: argparse.Namespace) -> int:
    _check(args)
    since = _since(broker, args.since)
    journal = Journal(broker.catalog)
    # A deleted topic's rows stay in the journal: filtering by it is no error.
    if args.topic is not None and not journal.mentions_topic(args.topic):
        broker.catalog.topic(args.topic)  # neither in the journal nor the catalog: a typo
    limit = None if args.limit == 0 else args.limit
    if args.cycles:
        cycles = (
            [journal.cycle(args.cycle)]
            if args.cycle is not None
            else journal.cycles(since=since, status=args.status, limit=limit)
        )
        _print(args, [c.to_json() for c in cycles], CYCLE_FIELDS, lambda: _cycle_table(cycles))
    elif args.policy_changes:
        changes = journal.policy_changes(since=since, topic=args.topic, limit=limit)
        _print(args, changes, POLICY_CHANGE_FIELDS, lambda: _policy_change_table(changes))
    else:
        if args.cycle is not None:
            journal.cycle(args.cycle)  # an unknown cycle is an error, not an empty list
        actions = journal.actions(
            since=since, topic=args.topic, action=args.action, cycle=args.cycle, status=args.status, limit=limit
        )
        _print(args, [a.to_json() for a in actions], ACTION_FIELDS, lambda: _action_table(actions))
    sys.stdout.flush()
    return 0


def _print(
    args: argparse.Namespace, rows: Sequence[Mapping[str, Any]], fields: Sequence[str], text: Callable[[], str]
) -> None:
    """``rows`` as CSV, JSON or, by default, the table ``text`` makes."""
    if args.csv:
        write_csv(rows, fields, sys.stdout)
    elif args.json:
        write_json(rows, fields, sys.stdout)
    else:
        print(text() if rows else "no journal rows match")


def _policy_change_table(rows: Sequence[Mapping[str, Any]]) -> str:
    return table(
        ("TIME", "ACTOR", "TOPIC", "FIELD", "OLD", "NEW"),
        [(instant(r["time"]), r["actor"], r["topic"], r["field"], r["old"], r["new"]) for r in rows],
    )


def _offsets(row: Action) -> str | None:
    if row.start_offset is None and row.end_offset is None:
        return None
    return f"{row.start_offset}..{row.end_offset}"


def _details(row: Action) -> str | None:
    details = row.details
    if not details:
        return None
    return json.dumps(details, sort_keys=True, separators=(",", ":"))


def _action_table(rows: Sequence[Action]) -> str:
    return table(
        (
            "TIME",
            "CYCLE",
            "TRIGGER",
            "ACTOR",
            "ACTION",
            "TOPIC",
            "PART",
            "OFFSETS",
            "MESSAGES",
            "BYTES",
            "REASON",
            "STATUS",
            "DETAILS",
        ),
        [
            (
                instant(r.time),
                r.cycle,
                r.trigger,
                r.actor,
                r.action,
                r.topic,
                r.partition,
                _offsets(r),
                r.messages,
                None if r.bytes is None else size(r.bytes),
                reason_text(r) or None,
                r.status,
                _details(r),
            )
            for r in rows
        ],
    )


def _cycle_table(rows: Sequence[Cycle]) -> str:
    return table(
        (
            "ID",
            "STARTED",
            "TRIGGER",
            "ACTOR",
            "SCOPE",
            "STATUS",
            "PLANNED",
            "APPLIED",
            "FREED",
            "DURATION",
            "PLAN",
            "APPLY",
            "SPARK",
            "ERROR",
        ),
        [
            (
                r.id,
                instant(r.began),
                r.trigger,
                r.actor,
                "all" if r.scope == "all" else ",".join(r.scope),
                r.status,
                r.planned,
                r.applied,
                size(r.bytes_freed),
                # the console's words: the whole cycle, then its planning and applying
                cycle_time(r.duration_ms, r),
                cycle_time(r.plan_ms, r),
                cycle_time(r.apply_ms, r),
                r.spark_master,
                r.error,
            )
            for r in rows
        ],
    )
