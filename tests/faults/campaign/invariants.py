"""What must hold after every kill, checked on a quiet data directory (every child
dead) by reopening it as a new process would.

Before recovery: the only damage a SIGKILL may leave in a segment file is a torn
tail of an active segment (an incomplete last batch). After the store's own recovery
(``recover_interrupted`` and each partition's lock taken once):

1. every acknowledged record at or above the log start is there, intact, at its
   acknowledged offset; every record from the log start on is whole and dense;
2. segment files and catalog rows are the same set (and agree on extents, sizes and
   timestamps, by an independent parser of the file format);
3. no cycle is left running and no action planned; every segment that disappeared
   since the last check has an applied ``delete_segment`` row, and no such row names
   a segment that is still there;
4. log starts and group positions never move backwards, and no group is left below
   its partition's log start;
5. under ``consumption = protect``, a deletion above the position a subscriber held
   (as the cycle's journaled moves show it) is a hard cap's (``DELETE_MAX_*``), and
   every journaled move of a subscriber has a policy behind it (TTL, eviction, cap).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.broker import Broker
from engine.policy.effective import EffectivePolicy
from engine.prune.executor import recover_interrupted
from tests.faults.campaign.workload import ACK_DIR, PROBLEM_DIR, TOPICS, Ack, decode_value, read_acks
from tests.support.cli import CliResult
from tests.support.prune_driver import read_all
from tests.support.segment_files import _PREFIX, assert_describe_agrees_with_files, parse_log

HARD_CAP_REASONS = ("DELETE_MAX_TIME", "DELETE_MAX_SIZE", "DELETE_BELOW_LOG_START")
SUBSCRIBER_MOVES = ("ttl_advance", "backlog_eviction", "subscriber_overrun")

Key = tuple[str, int]  # topic, partition


@dataclass
class Tally:
    """What the checks covered, for the campaign's summary."""

    checks: int = 0
    acked_records_checked: int = 0
    records_read: int = 0
    deletions_checked: int = 0
    protected_deletions_checked: int = 0
    torn_tails: int = 0
    cycles: Counter = field(default_factory=Counter)


class Checker:
    """Checks one data directory again and again, remembering what it saw last."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.tally = Tally()
        self._ack_read: dict[Path, int] = {}
        self._acks: dict[Key, list[Ack]] = {}
        self._segments: set[tuple[str, int, int]] = set()
        self._log_starts: dict[Key, int] = {}
        self._positions: dict[tuple[str, str, int], int] = {}
        self._last_action = 0
        self._last_cycle = 0
        self._problems_seen: set[Path] = set()

    def check(self) -> list[str]:
        """Every invariant once; the violations found (empty: all hold)."""
        self.tally.checks += 1
        violations = self._torn_tails_only()
        with Broker(self.data_dir) as broker:
            recover_interrupted(broker, lock_timeout=10)
            for topic in TOPICS:
                broker.recover(topic)
            actions = self._new_rows(broker, "actions", self._last_action)
            cycles = self._new_rows(broker, "cycles", self._last_cycle)
            violations += self._files_match_catalog(broker)
            violations += self._acknowledged_records(broker)
            violations += self._journal(broker, actions, cycles)
            violations += self._positions_forward(broker)
            violations += self._protection(broker, actions)
            if actions:
                self._last_action = actions[-1]["id"]
            if cycles:
                self._last_cycle = cycles[-1]["id"]
        return violations + self._child_problems()

    # -- 0. before recovery: only torn tails ----------------------------------------------

    def _torn_tails_only(self) -> list[str]:
        """A kill can tear the last batch of an active segment, never damage a batch
        that a whole one follows, nor a sealed segment (fsynced before its successor
        was created). Recovery cuts the active segment at its first bad batch, so a
        bad batch in the middle would lose the acknowledged batches after it."""
        out = []
        for topic, (partitions, _policy, _groups) in TOPICS.items():
            for p in range(partitions):
                logs = sorted((self.data_dir / "topics" / topic / str(p)).glob("*.log"))
                for i, path in enumerate(logs):
                    _batches, valid_end, size = parse_log(path)
                    if valid_end == size:
                        continue
                    if i < len(logs) - 1 or not _torn(path.read_bytes()[valid_end:]):
                        out.append(
                            f"{path}: {size - valid_end} bytes after the last valid batch are not a torn tail "
                            f"({'sealed' if i < len(logs) - 1 else 'active'} segment, valid up to byte {valid_end})"
                        )
                    else:
                        self.tally.torn_tails += 1
        return out

    # -- 1. acknowledged records --------------------------------------------------------

    def _acknowledged_records(self, broker: Broker) -> list[str]:
        for path in sorted((self.data_dir / ACK_DIR).glob("*.jsonl")):
            acks, self._ack_read[path] = read_acks(path, self._ack_read.get(path, 0))
            for ack in acks:
                self._acks.setdefault((ack.topic, ack.partition), []).append(ack)
        out = []
        for topic, (partitions, _policy, _groups) in TOPICS.items():
            for p in range(partitions):
                row = broker.catalog.partition(topic, p)
                records = read_all(broker, topic, p)
                self.tally.records_read += len(records)
                where = f"{topic}/{p}"
                if [r.offset for r in records] != list(range(row.log_start_offset, row.next_offset)):
                    out.append(
                        f"{where}: records from the log start {row.log_start_offset}"
                        f" are not dense up to {row.next_offset}"
                    )
                found = {}
                for r in records:
                    found[r.offset] = decode_value(r.value)
                    if found[r.offset] is None:
                        out.append(f"{where}@{r.offset}: the record is not intact")
                # Acks wholly below the log start are done with: it never moves back.
                live = [a for a in self._acks.get((topic, p), []) if a.next > row.log_start_offset]
                self._acks[(topic, p)] = live
                for ack in live:
                    for offset in range(max(ack.base, row.log_start_offset), ack.next):
                        expected = (ack.producer, ack.first_seq + offset - ack.base)
                        self.tally.acked_records_checked += 1
                        if found.get(offset) != expected:
                            out.append(
                                f"{where}@{offset}: acknowledged record {expected} (log start "
                                f"{row.log_start_offset}, end {row.next_offset})"
                                f" reads as {found.get(offset, 'missing')}"
                            )
                            break
        return out

    # -- 2. files and catalog --------------------------------------------------------------

    def _files_match_catalog(self, broker: Broker) -> list[str]:
        def describe(*args: str) -> CliResult:
            # what `ebb topic describe NAME --json` prints
            return CliResult(0, json.dumps(broker.describe(args[2]).to_json()), "")

        out = []
        for topic in TOPICS:
            try:
                assert_describe_agrees_with_files(describe, self.data_dir, topic)
            except AssertionError as error:
                out.append(f"{topic}: catalog and files differ: {str(error).splitlines()[0]}")
        return out

    # -- 3. the journal ---------------------------------------------------------------------

    @staticmethod
    def _new_rows(broker: Broker, table: str, after: int) -> list[dict[str, Any]]:
        # ``table`` is one of two literals of this module.
        return [dict(r) for r in broker.catalog.db.query(f"SELECT * FROM {table} WHERE id > ? ORDER BY id", (after,))]

    def _journal(self, broker: Broker, actions: list[dict[str, Any]], cycles: list[dict[str, Any]]) -> list[str]:
        out = []
        running = list(broker.catalog.db.query("SELECT id FROM cycles WHERE status = 'running'"))
        planned = list(broker.catalog.db.query("SELECT id FROM actions WHERE status = 'planned'"))
        if running or planned:
            out.append(f"after recovery: cycles still running {running}, actions still planned {len(planned)}")
        self.tally.cycles.update(c["status"] for c in cycles)

        present = {
            (topic, p, s.base_offset)
            for topic, (partitions, _policy, _groups) in TOPICS.items()
            for p in range(partitions)
            for s in broker.catalog.segments(topic, p)
        }
        journaled = {
            (a["topic"], a["partition"], a["segment"]): a
            for a in actions
            if a["action"] == "delete_segment" and a["status"] == "applied"
        }
        for key in sorted(self._segments - present):
            self.tally.deletions_checked += 1
            if key not in journaled:
                out.append(f"segment {key} was deleted without an applied delete_segment in the journal")
        for key, action in journaled.items():
            if key in present:
                out.append(f"segment {key} is still there, but journal action {action['id']} says it was deleted")
        self._segments = present
        return out

    # -- 4. forwards only --------------------------------------------------------------------

    def _positions_forward(self, broker: Broker) -> list[str]:
        out = []
        for topic in TOPICS:
            log_starts = {r.partition: r.log_start_offset for r in broker.catalog.partitions(topic)}
            for p, start in log_starts.items():
                before = self._log_starts.get((topic, p), 0)
                if start < before:
                    out.append(f"{topic}/{p}: the log start moved back from {before} to {start}")
                self._log_starts[(topic, p)] = start
            for group in broker.catalog.groups(topic):
                for p, (position, _at) in group.positions.items():
                    key = (topic, group.name, p)
                    before = self._positions.get(key, 0)
                    if position < before:
                        out.append(f"group {group.name} on {topic}/{p} moved back from {before} to {position}")
                    if position < log_starts[p]:
                        out.append(
                            f"group {group.name} on {topic}/{p} is at {position}, below the log start {log_starts[p]}"
                        )
                    self._positions[key] = position
        return out

    # -- 5. protection -----------------------------------------------------------------------

    def _protection(self, broker: Broker, actions: list[dict[str, Any]]) -> list[str]:
        out = []
        policies = {topic: broker.policy(topic) for topic in TOPICS}
        by_cut: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
        for a in actions:
            protected = a["topic"] in policies and policies[a["topic"]]["consumption"] == "protect"
            if protected and a["status"] == "applied" and a["cycle"] is not None:
                by_cut.setdefault((a["cycle"], a["topic"], a["partition"]), []).append(a)
        for (cycle, topic, partition), cut in by_cut.items():
            out += _check_protected_cut(f"cycle {cycle} on {topic}/{partition}", policies[topic], cut, self.tally)
        return out

    # -- children's own reports -----------------------------------------------------------

    def _child_problems(self) -> list[str]:
        out = []
        for path in sorted((self.data_dir / PROBLEM_DIR).glob("*.txt")):
            if path not in self._problems_seen:
                self._problems_seen.add(path)
                out.append(f"{path.name}: {path.read_text().strip()}")
        return out


def _torn(rest: bytes) -> bool:
    """Whether the bytes after a segment's last valid batch are the beginning of one
    batch whose write never finished (its length reaches past the end of the file)."""
    if len(rest) < _PREFIX.size:
        return True
    magic, length, _crc = _PREFIX.unpack_from(rest)
    return magic == b"EBB1" and _PREFIX.size + length > len(rest)


def _check_protected_cut(
    where: str, policy: EffectivePolicy, cut: Iterable[Mapping[str, Any]], tally: Tally
) -> list[str]:
    """One cycle's applied actions on one partition of a protected topic.

    A subscriber the cycle moved held the data from where the cut found it: the start
    of its ``subscriber_overrun`` entry (the moves chain their offsets), else the end
    of its TTL or eviction moves. Subscribers the cycle did not move were at or above
    the new log start already, so they bound nothing."""
    out = []
    held: dict[str, int] = {}
    overrun: set[str] = set()
    for a in cut:
        details = json.loads(a["details"] or "{}")
        if a["action"] not in SUBSCRIBER_MOVES or details.get("kind") != "subscriber":
            continue
        group = details["group"]
        if a["action"] == "ttl_advance" and policy["message_ttl"] is None:
            out.append(f"{where}: ttl_advance of subscriber {group} without a message_ttl")
        if a["action"] == "backlog_eviction" and policy["backlog_policy"] != "consumer_backlog_eviction":
            out.append(f"{where}: backlog_eviction of {group} under backlog_policy {policy['backlog_policy']}")
        if a["action"] == "subscriber_overrun":
            held[group] = a["start_offset"]
            overrun.add(group)
        elif group not in overrun:
            held[group] = max(held.get(group, a["end_offset"]), a["end_offset"])
    if not held:
        return out
    barrier = min(held.values())
    capped = policy["max_time"] is not None or policy["max_partition_size"] is not None
    for a in cut:
        if a["action"] == "delete_segment":
            tally.protected_deletions_checked += 1
            if a["end_offset"] > barrier and a["reason"] not in HARD_CAP_REASONS:
                out.append(
                    f"{where}: segment {a['segment']}..{a['end_offset']} deleted ({a['reason']})"
                    f" above a subscriber at {barrier}"
                )
        if a["action"] == "move_log_start" and a["end_offset"] > barrier and not capped:
            out.append(
                f"{where}: log start moved to {a['end_offset']} past a subscriber at {barrier} without a hard cap"
            )
    return out
