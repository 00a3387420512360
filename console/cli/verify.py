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

A catalog that cannot be used (missing while topics exist, emptied, failing SQLite's
``integrity_check``) is a finding of its own (code ``CATALOG_DAMAGED``, table
``catalog.db``); the rest cannot be checked against it. ``--repair`` then rebuilds the
catalog from the data directory (engine/integrity/rebuild.py) and checks and repairs
the rebuilt one as any other.

A repair is reported only when a check after it no longer finds what it repaired.

Exit status: 0 when nothing was found, 1 when something was (repaired or not: run
``ebb verify`` again to see that a repair left it clean), 2 for bad input.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Self

from console.cli.parser import command
from console.cli.render import emit_json
from engine.broker import Broker
from engine.clock import now_ms
from engine.config import load_config
from engine.datadir import DataDir
from engine.errors import CatalogDamaged
from engine.integrity.check import CATALOG_DAMAGED, Finding, Place, verify
from engine.integrity.rebuild import catalog_problems, rebuild_catalog
from engine.integrity.repair import Repair, RepairResult, repair
from engine.store.lock import directory_lock

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
    command(verify_cmd, run_verify, mutates=lambda args: args.repair, open_data=open_for_verify)


class UnusableCatalog:
    """What ``verify`` gets instead of a broker when the catalog cannot be opened."""

    def __init__(self, root: Path, config: Path | None, problems: list[str]) -> None:
        self.data = DataDir(root)
        self.config = config
        self.problems = problems

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def findings(self) -> list[Finding]:
        path = self.data.catalog_path
        return [
            Finding(
                "error",
                Place(table=path.name),
                f"the catalog {path} {problem} (--repair rebuilds it from the data directory)",
                True,
                CATALOG_DAMAGED,
            )
            for problem in self.problems
        ]


def open_for_verify(root: Path, config: Path | None) -> Broker | UnusableCatalog:
    """The data directory's broker, unless its catalog cannot be used (verify must
    say so, not fail opening it). A directory it cannot write is refused first: SQLite
    cannot open the catalog there either, which is no sign of damage (a backup on a
    read-only mount), and a rebuild could not write it anyway."""
    data = DataDir(root)
    data.ensure()
    problems = catalog_problems(data)
    if problems:
        return UnusableCatalog(root, config, problems)
    try:
        return Broker(root, config)
    except CatalogDamaged as error:
        return UnusableCatalog(root, config, [f"cannot be opened: {error}"])


def _rebuild(target: UnusableCatalog) -> RepairResult:
    """Rebuild the catalog, then check and repair the data directory against it."""
    found = target.findings()
    config_path = target.config or target.data.config_path
    # Two repairs at once: the second waits here, then finds the catalog the first
    # rebuilt, where both rebuilding had each moved the other's work aside.
    with directory_lock(target.data.root, wait=True):
        rebuilt = (
            rebuild_catalog(target.data, load_config(config_path).policy_defaults, now=now_ms(), actor=ACTOR)
            if catalog_problems(target.data)
            else None
        )
    if rebuilt is None:
        done = [Repair(found[0].where, "catalog rebuilt meanwhile by another repair", CATALOG_DAMAGED)]
    elif catalog_problems(target.data):
        return RepairResult(found, [], found)
    else:
        aside = f"; the old file moved to {rebuilt.moved_to}" if rebuilt.moved_to else ""
        done = [
            Repair(
                found[0].where,
                f"catalog rebuilt from the data directory: {len(rebuilt.topics)} topic(s), "
                f"{rebuilt.groups} group(s){aside}",
                CATALOG_DAMAGED,
            )
        ]
        done += [Repair(found[0].where, f"rebuilt, but: {note}", CATALOG_DAMAGED) for note in rebuilt.notes]
    with Broker(target.data.root, target.config) as broker:
        after = repair(broker, None, actor=ACTOR)
    return RepairResult(found + after.found, done + after.repairs, after.remaining)


def _line(finding: Finding) -> str:
    tail = ", repairable" if finding.repairable else ""
    return f"{finding}  ({finding.severity}{tail})"


def run_verify(broker: Broker | UnusableCatalog, args: argparse.Namespace) -> int:
    if isinstance(broker, UnusableCatalog):
        result = _rebuild(broker) if args.repair else RepairResult(broker.findings(), [], [])
    else:
        result = _check(broker, args)
    return _report(result, args)


def _check(broker: Broker, args: argparse.Namespace) -> RepairResult:
    for topic in args.topics or ():
        broker.catalog.topic(topic)  # an unknown topic is bad input, before anything is done
    if args.repair:
        return repair(broker, args.topics, actor=ACTOR)
    return RepairResult(verify(broker.data, broker.catalog, broker.config.policy_defaults, args.topics), [], [])


def _report(result: RepairResult, args: argparse.Namespace) -> int:
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
