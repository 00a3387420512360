"""``ebb verify [--topic T ...] [--repair] [--json]``: check a data directory for
corruption and inconsistency (engine/integrity/check.py), and with ``--repair`` fix
what the files prove and quarantine what is lost (engine/integrity/repair.py).

One line per finding, ``WHERE: WHAT (SEVERITY[, repairable])``, where WHERE is
``topic/partition/segment-file @ byte N (offset O)`` or ``catalog TABLE[KEY]``; then,
with ``--repair``, one line per thing done and what a second check still finds.

``--json``: one object ``{"clean", "findings": [FINDING]}``, with ``--repair`` also
``"repaired": [{"code", "where", "what"}]`` and ``"remaining": [FINDING]``, where
FINDING is ``{"severity": "error"|"warning", "code", "where": {"topic", "partition",
"segment", "file", "position", "offset", "table", "key", "text"}, "what", "repairable",
"lost": [START, END] | null}`` (fields may be added, never renamed).

Exit status: 0 when nothing was found, 1 when something was (repaired or not: run
``ebb verify`` again to see that a repair left it clean), 2 for bad input.
"""

from __future__ import annotations

import argparse

from console.cli.parser import command
from console.cli.render import emit_json
from engine.broker import Broker
from engine.integrity.check import Finding, verify
from engine.integrity.repair import RepairResult, repair

ACTOR = "cli"


def register(commands: argparse._SubParsersAction) -> None:
    verify_cmd = commands.add_parser(
        "verify", help="check segments, indexes and catalog for corruption; --repair fixes or quarantines"
    )
    verify_cmd.add_argument(
        "--topic", dest="topics", action="append", metavar="T", help="check only this topic (repeatable) [default: all]"
    )
    verify_cmd.add_argument(
        "--repair",
        action="store_true",
        help="rebuild indexes, fix catalog rows from the files, quarantine corrupt segments (journaled)",
    )
    verify_cmd.add_argument("--json", action="store_true")
    # A check only reads; a repair moves files and writes the catalog and journal.
    command(verify_cmd, run_verify, mutates=lambda args: args.repair)


def _line(finding: Finding) -> str:
    tail = ", repairable" if finding.repairable else ""
    return f"{finding}  ({finding.severity}{tail})"


def run_verify(broker: Broker, args: argparse.Namespace) -> int:
    for topic in args.topics or ():
        broker.catalog.topic(topic)  # an unknown topic is bad input, before anything is done
    result = (
        repair(broker, args.topics, actor=ACTOR)
        if args.repair
        else RepairResult(verify(broker.data, broker.catalog, broker.config.policy_defaults, args.topics), [], [])
    )
    found = result.found
    if args.json:
        payload: dict[str, object] = {"clean": not found, "findings": [f.to_json() for f in found]}
        if args.repair:
            payload["repaired"] = [r.to_json() for r in result.repairs]
            payload["remaining"] = [f.to_json() for f in result.remaining]
        emit_json(payload)
        return 1 if found else 0
    for finding in found:
        print(_line(finding))
    for done in result.repairs:
        print(f"repaired: {done}")
    for finding in result.remaining if args.repair else ():
        print(f"remains: {_line(finding)}")
    print(_summary(found, result if args.repair else None))
    return 1 if found else 0


def _summary(found: list[Finding], repaired: RepairResult | None) -> str:
    if not found:
        return "verify: no problems found"
    errors = sum(f.severity == "error" for f in found)
    text = f"verify: {len(found)} problem(s) found ({errors} error(s), {len(found) - errors} warning(s))"
    if repaired is None:
        return text + "; `ebb verify --repair` fixes what is repairable and quarantines what is lost"
    return text + f"; {len(repaired.repairs)} repair(s) done, {len(repaired.remaining)} problem(s) remain"
