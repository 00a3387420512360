"""Manual operations (SPEC §5): truncate, delete the oldest segments, purge, hold and
release, pause and resume, expire and move a group. Each is journaled with its actor
and the trigger ``manual``.

Operations that delete data are hand-built :class:`~engine.prune.work.TopicWork`
applied by the executor as a cycle of their own (trigger ``manual``), so they get the
executor's crash safety and its re-checks for free: the log start moves (the durable
point) before any file goes, and a store that changed since the work was built (an
append, a commit, a prune of another process) makes the executor skip the partition;
the operation then builds its work again, a few times, before it gives up. The
operator's request itself is journaled in that cycle as one ``truncate`` or ``purge``
action next to the executor's ``move_log_start``, ``delete_segment`` and group moves.

They are refused (:class:`~engine.errors.InvalidInput`) while the topic is on hold,
and while the engine is paused: a pause stops all deletion, manual or not.

Group operations and the switches change catalog rows only: each is one SQLite
transaction that also writes its journal row, which is crash-safe on its own (no
file is touched), and is journaled outside any cycle (``cycle`` null).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from engine.broker import Broker
from engine.errors import EbbError, InvalidInput, StoreError
from engine.journal.journal import Entry, Journal
from engine.journal.rows import Action
from engine.journal.state import EngineState
from engine.policy.effective import resolve
from engine.prune.cycle_result import CycleResult
from engine.prune.executor import execute
from engine.prune.record_times import StoreRecordTimes, time_cut
from engine.prune.work import GroupMove, MoveAction, PartitionWork, SegmentDeletion, Skip, TopicWork

TRIGGER = "manual"
DELETE_MANUAL = "DELETE_MANUAL"
#: times an operation rebuilds its work when the store changed under it
ATTEMPTS = 3

MoveTarget = Literal["earliest", "latest"]


class StoreChanged(EbbError):
    """The store kept changing while a manual operation was being applied."""


@dataclass(frozen=True)
class MovedGroup:
    """A group that a deleting operation moved up to the new log start."""

    group: str
    kind: str
    partition: int
    old_position: int
    new_position: int
    #: messages it had not read that are gone (0 if it was below the old log start)
    messages_skipped: int

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "kind": self.kind,
            "partition": self.partition,
            "old_position": self.old_position,
            "new_position": self.new_position,
            "messages_skipped": self.messages_skipped,
        }


@dataclass(frozen=True)
class PartitionChange:
    partition: int
    log_start_offset: int
    new_log_start_offset: int
    segments_deleted: int
    bytes_freed: int

    def to_json(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "log_start_offset": self.log_start_offset,
            "new_log_start_offset": self.new_log_start_offset,
            "messages": self.new_log_start_offset - self.log_start_offset,
            "segments_deleted": self.segments_deleted,
            "bytes_freed": self.bytes_freed,
        }


@dataclass(frozen=True)
class DeletionResult:
    """What truncate, delete_oldest or purge did (``changed`` False: nothing to do)."""

    operation: Literal["truncate", "delete_oldest", "purge"]
    topic: str
    changed: bool
    #: the manual cycle that applied it; None when there was nothing to do
    cycle_id: int | None
    partitions: tuple[PartitionChange, ...]
    groups_moved: tuple[MovedGroup, ...] = ()

    @property
    def segments_deleted(self) -> int:
        return sum(p.segments_deleted for p in self.partitions)

    @property
    def bytes_freed(self) -> int:
        return sum(p.bytes_freed for p in self.partitions)

    @property
    def messages(self) -> int:
        return sum(p.new_log_start_offset - p.log_start_offset for p in self.partitions)

    def to_json(self) -> dict[str, Any]:
        return {
            "operation": self.operation,
            "topic": self.topic,
            "changed": self.changed,
            "cycle_id": self.cycle_id,
            "partitions": [p.to_json() for p in self.partitions],
            "segments_deleted": self.segments_deleted,
            "bytes_freed": self.bytes_freed,
            "groups_moved": [g.to_json() for g in self.groups_moved],
        }


@dataclass(frozen=True)
class SwitchResult:
    """What hold/release or pause/resume did (``changed`` False: it was so already)."""

    operation: Literal["hold", "release", "pause", "resume"]
    topic: str | None
    changed: bool

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"operation": self.operation, "changed": self.changed}
        if self.topic is not None:
            out["topic"] = self.topic
            out["hold"] = self.operation == "hold"
        else:
            out["paused"] = self.operation == "pause"
        return out


@dataclass(frozen=True)
class GroupResult:
    """What expire_group or move_group did."""

    operation: Literal["group_expire", "group_move"]
    topic: str
    group: str
    kind: str
    #: partition -> (old position, new position); for an expiry, the last positions
    positions: dict[int, tuple[int, int]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"operation": self.operation, "topic": self.topic, "group": self.group, "kind": self.kind}
        if self.operation == "group_move":
            ((partition, (old, new)),) = self.positions.items()
            out.update({"partition": partition, "old_position": old, "new_position": new, "messages": new - old})
        else:
            out["positions"] = {str(p): old for p, (old, _new) in sorted(self.positions.items())}
        return out


# -- deleting operations ---------------------------------------------------------------------------


def _moves_below(
    broker: Broker, topic: str, partition: int, log_start: int, new_log_start: int
) -> tuple[GroupMove, ...]:
    """Every group (either kind) below ``new_log_start`` on ``partition``, moved up to
    it; the messages skipped are those it had not read above the old log start."""
    moves = []
    for group in broker.catalog.groups(topic):
        if partition not in group.positions:
            continue
        position = group.positions[partition][0]
        if position >= new_log_start:
            continue
        action: MoveAction = "reader_moved" if group.kind == "reader" else "subscriber_overrun"
        skipped = new_log_start - max(position, log_start)
        moves.append(GroupMove(group.name, group.kind, partition, position, new_log_start, (Skip(action, skipped),)))
    return tuple(moves)


def _partition_work(
    broker: Broker, topic: str, partition: int, new_log_start: int, *, with_active: bool = False
) -> PartitionWork:
    """Move the log start of one partition up to ``new_log_start`` and delete every
    sealed segment wholly below it (``with_active``: the active one too, rolled first)."""
    row = broker.catalog.partition(topic, partition)
    segments = broker.catalog.segments(topic, partition)
    doomed = [s for s in segments if s.sealed and s.next_offset <= new_log_start]
    active = segments[-1]
    if with_active and active.size_bytes > 0 and active.next_offset <= new_log_start:
        # Sealed by the roll the executor does first; it re-checks the deletion against
        # the sealed segment, and skips the partition if an append changed it since.
        doomed.append(active)
    return PartitionWork(
        topic,
        partition,
        row.log_start_offset,
        max(row.log_start_offset, new_log_start),
        tuple(SegmentDeletion(s.base_offset, s.next_offset, s.size_bytes, DELETE_MANUAL) for s in doomed),
        _moves_below(broker, topic, partition, row.log_start_offset, new_log_start),
        with_active and active.size_bytes > 0,
    )


def cut_work(broker: Broker, topic: str, cuts: Mapping[int, int]) -> TopicWork:
    """The work of moving each given partition's log start up to its cut and deleting
    the sealed segments wholly below it (``DELETE_MANUAL``): what ``truncate`` hands
    the executor (``bench/load.py`` does too, to prune without Spark)."""
    return _topic_work(broker, topic, [_partition_work(broker, topic, p, cut) for p, cut in cuts.items()])


def _topic_work(broker: Broker, topic: str, partitions: Sequence[PartitionWork]) -> TopicWork:
    """The work of one manual operation. The quota state is carried over unchanged:
    the executor records a topic's quota state from its work, and only a prune cycle
    decides it."""
    return TopicWork(
        topic,
        Journal(broker.catalog).policy_version(topic),
        EngineState(broker.catalog).quota_state(topic).exceeded,
        (),
        tuple(partitions),
    )


def _changes(work: TopicWork) -> bool:
    return any(
        pw.deletions or pw.moves or pw.roll or pw.new_log_start_offset != pw.log_start_offset for pw in work.partitions
    )


def _apply(
    broker: Broker,
    operation: Literal["truncate", "delete_oldest", "purge"],
    topic: str,
    build: Callable[[], TopicWork],
    *,
    actor: str,
    request: dict[str, Any],
) -> DeletionResult:
    """Build the work, apply it as a manual cycle, journal the request in it; build
    again if the executor found the store changed since (a skipped partition)."""
    broker.catalog.topic(topic)
    last_skip = ""
    for _attempt in range(ATTEMPTS):
        broker.refuse_if_held(topic)
        broker.refuse_if_paused()
        began = time.monotonic()
        work = build()
        plan_ms = round((time.monotonic() - began) * 1000)
        if not _changes(work):
            return DeletionResult(
                operation,
                topic,
                False,
                None,
                tuple(
                    PartitionChange(pw.partition, pw.log_start_offset, pw.log_start_offset, 0, 0)
                    for pw in work.partitions
                ),
            )
        result = execute(
            broker, [work], now=broker.clock(), trigger=TRIGGER, actor=actor, scope=[topic], plan_ms=plan_ms
        )
        if result.status == "paused":
            broker.refuse_if_paused()  # paused between the check and the cycle
        if result.failed:
            raise EbbError(
                f"{operation} of topic {topic} failed: {result.failed[topic]} (see `ebb log --cycle {result.cycle_id}`)"
            )
        if result.locked:
            # A writer holds the partition (a producer stopped while appending):
            # building the work again would only wait for it again.
            raise StoreError(f"{operation} of topic {topic} not applied: {'; '.join(result.locked.values())}")
        if result.skipped:
            last_skip = "; ".join(f"{where}: {why}" for where, why in result.skipped.items())
            continue
        return _journal_request(broker, operation, topic, work, result, actor=actor, request=request)
    raise StoreChanged(
        f"{operation} of topic {topic} not applied: the store kept changing while it ran ({last_skip}); try again"
    )


def _journal_request(
    broker: Broker,
    operation: Literal["truncate", "delete_oldest", "purge"],
    topic: str,
    work: TopicWork,
    result: CycleResult,
    *,
    actor: str,
    request: dict[str, Any],
) -> DeletionResult:
    """Record the operator's request in its cycle, next to what the executor did."""
    journal = Journal(broker.catalog)
    applied = journal.actions(cycle=result.cycle_id, status="applied", limit=None)
    deleted: dict[int | None, list[Action]] = {}
    for a in applied:
        if a.action == "delete_segment":
            deleted.setdefault(a.partition, []).append(a)
    changes = tuple(
        PartitionChange(
            pw.partition,
            pw.log_start_offset,
            pw.new_log_start_offset,
            len(deleted.get(pw.partition, [])),
            sum(a.bytes or 0 for a in deleted.get(pw.partition, [])),
        )
        for pw in work.partitions
    )
    moved = tuple(
        MovedGroup(m.group, m.kind, m.partition, m.old_position, m.new_position, sum(s.messages for s in m.skips))
        for pw in work.partitions
        for m in pw.moves
    )
    outcome = DeletionResult(operation, topic, True, result.cycle_id, changes, moved)
    details = {
        **request,
        "operation": operation,
        "segments_deleted": outcome.segments_deleted,
        "groups_moved": sorted({g.group for g in moved}),
    }
    if operation == "purge":
        entries = [
            Entry(
                "purge",
                topic,
                messages=outcome.messages,
                bytes=outcome.bytes_freed,
                reason=DELETE_MANUAL,
                details=details,
            )
        ]
    else:
        (change,) = changes
        entries = [
            Entry(
                "truncate",
                topic,
                change.partition,
                start_offset=change.log_start_offset,
                end_offset=change.new_log_start_offset,
                messages=outcome.messages,
                bytes=outcome.bytes_freed,
                reason=DELETE_MANUAL,
                details=details,
            )
        ]
    journal.append(entries, time=broker.clock(), trigger=TRIGGER, actor=actor, status="applied", cycle=result.cycle_id)
    return outcome


def truncate(
    broker: Broker,
    topic: str,
    partition: int,
    *,
    before_offset: int | None = None,
    before_time: int | None = None,
    actor: str = "cli",
) -> DeletionResult:
    """Delete every record of one partition below an offset (Kafka's DeleteRecords),
    or below the first record at or after a time (scanning from the log start).

    The log start moves to the offset, which must lie in [log start, log end]; sealed
    segments wholly below it are deleted (``DELETE_MANUAL``); groups below it are moved
    up to it, journaled with the messages they skipped. Logical, like a message
    granularity cut: the segment holding the offset stays until a later cut."""
    if (before_offset is None) == (before_time is None):
        raise InvalidInput("truncate needs exactly one of a before offset and a before time")
    broker.catalog.partition(topic, partition)

    def build() -> TopicWork:
        row = broker.catalog.partition(topic, partition)
        if before_offset is not None:
            if not row.log_start_offset <= before_offset <= row.next_offset:
                raise InvalidInput(
                    f"invalid offset {before_offset} for {topic}/{partition}: truncate to an offset from the log "
                    f"start {row.log_start_offset} to the log end {row.next_offset}"
                )
            cut = before_offset
        else:
            assert before_time is not None
            found = time_cut(
                broker.catalog, StoreRecordTimes(broker.data), topic, partition, row.log_start_offset, before_time
            )
            cut = row.next_offset if found is None else found
        return cut_work(broker, topic, {partition: cut})

    request: dict[str, Any] = (
        {"before_offset": before_offset} if before_offset is not None else {"before_time": before_time}
    )
    return _apply(broker, "truncate", topic, build, actor=actor, request=request)


def delete_oldest(broker: Broker, topic: str, partition: int, count: int, *, actor: str = "cli") -> DeletionResult:
    """Delete the oldest ``count`` sealed segments of one partition (``DELETE_MANUAL``);
    the log start moves to the next segment's base. The active segment never goes
    (purge rolls it first)."""
    if count < 1:
        raise InvalidInput(f"invalid segment count {count}: delete at least 1")
    broker.catalog.partition(topic, partition)

    def build() -> TopicWork:
        sealed = [s for s in broker.catalog.segments(topic, partition) if s.sealed]
        if count > len(sealed):
            raise InvalidInput(
                f"{topic}/{partition} has {len(sealed)} sealed segment(s), fewer than {count} "
                "(the active segment is never deleted by this; `ebb purge` rolls and deletes it)"
            )
        cut = sealed[count - 1].next_offset
        return cut_work(broker, topic, {partition: cut})

    return _apply(broker, "delete_oldest", topic, build, actor=actor, request={"oldest_segments": count})


def purge(broker: Broker, topic: str, *, actor: str = "cli") -> DeletionResult:
    """Delete every record of a topic: per partition, roll the active segment, move
    the log start to the log end and delete every segment but the new empty active
    one. Groups are moved to the end. Offsets go on from there (never reused)."""
    broker.catalog.topic(topic)

    def build() -> TopicWork:
        # The log end is the files', not the catalog's: batches a failed producer left
        # in the files join the log at the next lock (Broker.append), and a purge
        # built on the catalog alone left them behind it. Bringing the catalog up to
        # the files writes it: on a full disk that needs the reserve, which the cycle
        # makes again afterwards (executor._room_to_delete).
        broker.reserve.release_if_low()
        broker.recover(topic)
        partitions = [
            _partition_work(broker, topic, row.partition, row.next_offset, with_active=True)
            for row in broker.catalog.partitions(topic)
        ]
        return _topic_work(broker, topic, partitions)

    return _apply(broker, "purge", topic, build, actor=actor, request={})


# -- switches ----------------------------------------------------------------------------------


def set_hold(broker: Broker, topic: str, on: bool, *, actor: str = "cli") -> SwitchResult:
    """Set (``on``) or release a topic's retention hold: its ``hold`` policy field,
    journaled as a policy change and a ``hold`` or ``release`` action (by
    :meth:`Broker.alter_topic`). A release returns the field to the default where
    that is off, as Kafka's ``--delete-config`` does, instead of pinning "off" over
    it. Nothing changes, and nothing is journaled, if the topic is so already."""
    operation: Literal["hold", "release"] = "hold" if on else "release"
    with broker.catalog.write():  # the check and the change: one transaction
        if bool(broker.policy(topic)["hold"]) == on:
            return SwitchResult(operation, topic, False)
        held_by_default = bool(resolve({}, broker.config.policy_defaults)["hold"])
        broker.alter_topic(topic, {"hold": "on" if on else ("off" if held_by_default else None)}, actor=actor)
    return SwitchResult(operation, topic, True)


def _set_paused(broker: Broker, paused: bool, actor: str) -> SwitchResult:
    operation: Literal["pause", "resume"] = "pause" if paused else "resume"
    state = EngineState(broker.catalog)
    journal = Journal(broker.catalog)
    with broker.catalog.write():
        if state.is_paused() == paused:
            return SwitchResult(operation, None, False)
        state.set_paused(paused)
        journal.append([Entry(operation)], time=broker.clock(), trigger=TRIGGER, actor=actor, status="applied")
    return SwitchResult(operation, None, True)


def pause(broker: Broker, *, actor: str = "cli") -> SwitchResult:
    """Stop all deletion: cycles still plan, report and track quotas; the executor
    applies nothing, and manual deleting operations are refused."""
    return _set_paused(broker, True, actor)


def resume(broker: Broker, *, actor: str = "cli") -> SwitchResult:
    return _set_paused(broker, False, actor)


# -- groups --------------------------------------------------------------------------------------


def expire_group(broker: Broker, topic: str, group: str, *, actor: str = "cli") -> GroupResult:
    """Remove a group now, as ``subscription_expiry`` would: a ``group_expired``
    action (trigger manual) with its last positions, in the same transaction."""
    journal = Journal(broker.catalog)
    with broker.catalog.write():
        row = broker.catalog.group(topic, group)
        broker.catalog.remove_group(topic, group)
        journal.append(
            [
                Entry(
                    "group_expired",
                    topic,
                    details={
                        "group": group,
                        "kind": row.kind,
                        "positions": {str(p): pos for p, (pos, _at) in sorted(row.positions.items())},
                    },
                )
            ],
            time=broker.clock(),
            trigger=TRIGGER,
            actor=actor,
            status="applied",
        )
    return GroupResult(
        "group_expire", topic, group, row.kind, {p: (pos, pos) for p, (pos, _at) in row.positions.items()}
    )


def move_group(
    broker: Broker,
    topic: str,
    group: str,
    partition: int,
    *,
    to_offset: int | None = None,
    to_time: int | None = None,
    to: MoveTarget | None = None,
    actor: str = "cli",
) -> GroupResult:
    """Set a group's position on one partition (forwards or backwards), journaled as
    ``manual_move`` with the old and new positions and ``messages = new - old``
    (negative when moved back). The position must lie in [log start, log end]: data
    below the log start is gone, so a move there is refused. ``to_time`` is the
    first record at or after that time (the log end if none); the group's commit
    time is left as it was: an operator's move is not a sign of life of its consumer
    (``subscription_expiry``)."""
    if sum(x is not None for x in (to_offset, to_time, to)) != 1:
        raise InvalidInput("move a group with exactly one of an offset, a time, earliest or latest")
    if to is not None and to not in ("earliest", "latest"):
        raise InvalidInput(f"invalid target {to!r}: use earliest or latest")
    journal = Journal(broker.catalog)
    records = StoreRecordTimes(broker.data)
    broker.catalog.partition(topic, partition)
    with broker.catalog.write():
        row = broker.catalog.partition(topic, partition)
        state = broker.catalog.group(topic, group)
        old, committed_at = state.positions.get(partition, (row.log_start_offset, state.created_at))
        if to == "earliest":
            new = row.log_start_offset
        elif to == "latest":
            new = row.next_offset
        elif to_time is not None:
            found = time_cut(broker.catalog, records, topic, partition, row.log_start_offset, to_time)
            new = row.next_offset if found is None else found
        else:
            assert to_offset is not None
            new = to_offset
            if not row.log_start_offset <= new <= row.next_offset:
                raise InvalidInput(
                    f"invalid offset {new} for {topic}/{partition}: move the group to an offset from the log start "
                    f"{row.log_start_offset} (older data is deleted) to the log end {row.next_offset}"
                )
        broker.catalog.set_position(topic, group, partition, new, committed_at)
        journal.append(
            [
                Entry(
                    "manual_move",
                    topic,
                    partition,
                    start_offset=old,
                    end_offset=new,
                    messages=new - old,
                    details={
                        "group": group,
                        "kind": state.kind,
                        "to": to or ("time" if to_time is not None else "offset"),
                    },
                )
            ],
            time=broker.clock(),
            trigger=TRIGGER,
            actor=actor,
            status="applied",
        )
    return GroupResult("group_move", topic, group, state.kind, {partition: (old, new)})


__all__ = [
    "DeletionResult",
    "GroupResult",
    "MovedGroup",
    "PartitionChange",
    "StoreChanged",
    "SwitchResult",
    "delete_oldest",
    "expire_group",
    "move_group",
    "pause",
    "purge",
    "resume",
    "set_hold",
    "truncate",
]
