"""Applying a plan to the store, crash-safely (SPEC §5).

Order of one cycle, each step durable before the next:

1. take the data directory's prune lock (one cycle at a time, across processes) and
   recover the cycles a dead process left ``running``;
2. journal the cycle and every action it plans (``planned``), in one transaction;
3. per topic, then per partition, Kafka's shape: under the partition's writer lock
   (waited for at most :data:`PARTITION_LOCK_WAIT`, else the partition is skipped
   until the next cycle) roll the active segment if asked; select what goes, a pure
   check of the plan against the store (:func:`select`); in ONE transaction move
   positions and the log start, mark those actions applied and drop the doomed
   segments' catalog rows (the durable point); rename the doomed segments to
   ``.log.deleted`` with one directory fsync; release the lock; then, holding only
   the partition's deletion lock (engine/store/partition.py), unlink them and mark
   their actions applied, a batch per transaction. Appends wait only for the durable
   point and the renames, never for the unlinks (docs/RELIABILITY.md);
4. record the topic's backlog-quota state;
5. finish the cycle row.

A crash before the durable point leaves the data untouched (the planned actions are
rolled back by recovery); a crash after it leaves segments wholly below the log start,
or ``.log.deleted`` files, whose deletion the store's next writer finishes
(engine/store/partition.py) and recovery journals; both tolerate a file already
gone. The plan is re-checked, never forced: a topic whose policy changed,
a group that expired by the plan but committed since, a segment that is gone or
changed, a log start that moved, a subscriber below what the plan assumed: the topic
or partition is skipped (journaled) and the next cycle plans it again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from engine.broker import Broker
from engine.catalog.database import on_full, share_again
from engine.datadir import PRUNE_LOCK_NAME
from engine.errors import NotFound, StoreError
from engine.faults import fault_point
from engine.journal.history import DiskHistory
from engine.journal.journal import Entry, Journal
from engine.journal.rows import Action, ActionStatus, CycleStatus
from engine.journal.state import EngineState
from engine.prune.cycle_result import CycleResult
from engine.prune.work import MOVE_ACTIONS, GroupMove, PartitionWork, SegmentDeletion, TopicWork
from engine.store.lock import FileLock, LockTimeout
from engine.store.partition import PartitionWriter, deleting, unlink_detached
from engine.store.segment import SegmentInfo

#: how long a cycle waits for a partition's writer lock before it skips the partition
#: until the next cycle (a producer stopped while holding it: SIGSTOP, a debugger)
PARTITION_LOCK_WAIT = 5.0
#: unlinked segments journaled per transaction
_UNLINK_BATCH = 100


class _Stale(Exception):
    """The store changed since the snapshot so that the plan is no longer safe."""


#: the data directories whose prune lock this thread holds through hold_prune_lock
_held_prune_locks: ContextVar[frozenset[Path]] = ContextVar("held_prune_locks", default=frozenset())


@contextmanager
def hold_prune_lock(
    root: Path, *, patience: float | None, waiting: Callable[[LockTimeout | None], None] | None = None
) -> Iterator[None]:
    """Hold ``root``'s prune lock for a session: a cycle executed inside it, on this
    thread, takes no lock of its own, and every other cycle (another process's, or
    another thread's) waits until the session ends. A confirmed preview re-plans and
    applies in one session, so no cycle slips in between.

    Tries for ``patience`` seconds (None: forever), then calls ``waiting`` with the
    timeout (which names the holder) and tries again, and calls it with None once the
    lock is taken after a wait; without ``waiting`` it raises."""
    lock = FileLock(root / PRUNE_LOCK_NAME, what=f"pruning of {root}")
    waited = False
    while True:
        try:
            lock.acquire(patience)
            break
        except LockTimeout as held:
            if waiting is None:
                raise
            waiting(held)  # says who holds it; raises to stop waiting
            waited = True
    token = _held_prune_locks.set(_held_prune_locks.get() | {root.resolve()})
    try:
        if waited and waiting is not None:
            waiting(None)
        yield
    finally:
        _held_prune_locks.reset(token)
        lock.release()


@contextmanager
def _prune_lock(broker: Broker, timeout: float | None) -> Iterator[None]:
    root = broker.data.root
    if root.resolve() in _held_prune_locks.get():
        yield  # the caller's session holds it
        return
    with hold_prune_lock(root, patience=timeout):
        yield


@contextmanager
def _room_to_delete(broker: Broker) -> Iterator[None]:
    """Let a cycle write its journal on a full disk: release the data directory's
    reserve before the first write if the disk is (nearly) full, or as soon as a write
    fails for lack of space; make it again after the cycle (engine/store/reserve.py)."""
    broker.reserve.release_if_low()
    with on_full(broker.catalog.db, broker.reserve.release):
        yield
    broker.reserve.ensure()
    # A catalog opened on a full disk holds the database exclusively (database.py):
    # with space back, it lets the others in again. The metadata files' triggers are
    # temporary, bound to the connection that was replaced: install them again.
    if share_again(broker.catalog.db):
        broker.catalog.track_metadata()


# -- planned actions ----------------------------------------------------------------------


@dataclass
class _PartitionIds:
    #: per move, one id per skip
    moves: list[list[int]]
    log_start: int | None
    deletions: list[int]

    def all(self) -> list[int]:
        log_start = [] if self.log_start is None else [self.log_start]
        return [i for ids in self.moves for i in ids] + log_start + self.deletions


@dataclass
class _TopicIds:
    expired: list[int]
    partitions: dict[int, _PartitionIds]


def _segment_entry(
    action: str, topic: str, partition: int, base: int, next_offset: int, size: int, reason: str | None = None
) -> Entry:
    """A journal entry about one whole segment (its offsets, messages and bytes)."""
    return Entry(
        action,
        topic,
        partition,
        segment=base,
        start_offset=base,
        end_offset=next_offset,
        messages=next_offset - base,
        bytes=size,
        reason=reason,
    )


def _move_entries(topic: str, move: GroupMove, log_start: int) -> list[Entry]:
    """One entry per cause of the move; offsets chain from where the group stood
    (data below the log start was gone already) to its new position."""
    entries = []
    start = move.old_position
    reached = max(move.old_position, log_start)
    for i, skip in enumerate(move.skips):
        end = move.new_position if i == len(move.skips) - 1 else reached + skip.messages
        entries.append(
            Entry(
                skip.action,
                topic,
                move.partition,
                start_offset=start,
                end_offset=end,
                messages=skip.messages,
                details={"group": move.group, "kind": move.kind},
            )
        )
        start = reached = end
    return entries


def _record_planned(journal: Journal, tw: TopicWork, *, cycle: int, time: int, trigger: str, actor: str) -> _TopicIds:
    def append(entries: Sequence[Entry]) -> list[int]:
        return journal.append(entries, time=time, trigger=trigger, actor=actor, status="planned", cycle=cycle)

    expired = append(
        [Entry("group_expired", tw.topic, details={"group": g.group, "kind": g.kind}) for g in tw.expired_groups]
    )
    partitions = {}
    for pw in tw.partitions:
        moves = [append(_move_entries(tw.topic, m, pw.log_start_offset)) for m in pw.moves]
        log_start = None
        if pw.new_log_start_offset != pw.log_start_offset:
            (log_start,) = append(
                [
                    Entry(
                        "move_log_start",
                        tw.topic,
                        pw.partition,
                        start_offset=pw.log_start_offset,
                        end_offset=pw.new_log_start_offset,
                        messages=pw.new_log_start_offset - pw.log_start_offset,
                    )
                ]
            )
        deletions = append(
            [
                _segment_entry(
                    "delete_segment", tw.topic, pw.partition, d.base_offset, d.next_offset, d.size_bytes, d.reason
                )
                for d in pw.deletions
            ]
        )
        partitions[pw.partition] = _PartitionIds(moves, log_start, deletions)
    return _TopicIds(expired, partitions)


# -- the cycle ------------------------------------------------------------------------------


class _Cycle:
    """One cycle being applied: its journal, counters and outcome."""

    def __init__(self, broker: Broker, journal: Journal, cycle_id: int, *, now: int, trigger: str, actor: str) -> None:
        self.broker = broker
        self.catalog = broker.catalog
        self.journal = journal
        self.state = EngineState(broker.catalog)
        self.id = cycle_id
        self.now = now
        self.trigger = trigger
        self.actor = actor
        self.applied = 0
        #: deletions journaled on the way that the plan did not name (sealed since)
        self.unplanned = 0
        self.bytes_freed = 0
        self.skipped: dict[str, str] = {}
        self.locked: dict[str, str] = {}
        self.failed: dict[str, str] = {}

    def record(self, entries: Sequence[Entry], status: ActionStatus = "applied") -> list[int]:
        return self.journal.append(
            entries, time=self.broker.clock(), trigger=self.trigger, actor=self.actor, status=status, cycle=self.id
        )

    def settle(self, ids: Sequence[int], status: ActionStatus, details: Mapping[str, Any] | None = None) -> None:
        self.journal.settle(ids, status, time=self.broker.clock(), details=details)

    def skip(self, topic: str, partition: int | None, ids: Sequence[int], why: str, reason: str = "STALE_PLAN") -> None:
        """Journal that the plan was not applied to a topic or partition, and why."""
        self.skipped[topic if partition is None else f"{topic}/{partition}"] = why
        with self.catalog.write():
            self.settle(ids, "skipped", {"message": why})
            self.record([Entry("skipped", topic, partition, reason=reason, details={"message": why})], "skipped")

    # -- per topic ----------------------------------------------------------------

    def check_topic(self, tw: TopicWork) -> None:
        if not self.catalog.has_topic(tw.topic):
            raise _Stale("topic deleted since the plan")
        if self.journal.policy_version(tw.topic) != tw.policy_version:
            raise _Stale("policy changed since the plan")

    def apply_topic(self, tw: TopicWork, ids: _TopicIds) -> None:
        self.check_topic(tw)
        self.expire_groups(tw, ids.expired)
        for pw in tw.partitions:
            pids = ids.partitions[pw.partition]
            try:
                self.apply_partition(pw, pids)
            except _Stale as stale:
                self.skip(tw.topic, pw.partition, pids.all(), str(stale))
            except LockTimeout as locked:
                # A frozen writer must not stall the cycle: this partition waits for
                # the next cycle, which plans it again; the others go on.
                self.skip(tw.topic, pw.partition, pids.all(), str(locked), "PARTITION_LOCKED")
                self.locked[f"{tw.topic}/{pw.partition}"] = str(locked)
        self.record_quota(tw)

    def expire_groups(self, tw: TopicWork, ids: list[int]) -> None:
        """Remove the groups the plan expired, unless one committed since: then the
        plan's barriers ignored a live group and the whole topic waits for a new plan.
        A topic-level fact, so it goes before any partition in its own transaction."""
        if not tw.expired_groups:
            return
        expiry = self.broker.policy(tw.topic).limit("subscription_expiry")
        with self.catalog.write():
            current = {g.name: g for g in self.catalog.groups(tw.topic)}
            for expired, action_id in zip(tw.expired_groups, ids):
                group = current.get(expired.group)
                if group is None:
                    self.settle([action_id], "skipped", {"message": "group removed since the plan"})
                    continue
                last = max((at for _pos, at in group.positions.values()), default=group.created_at)
                if expiry is None or self.now - last <= expiry:
                    raise _Stale(f"group {expired.group!r} committed since the plan expired it")
                self.catalog.remove_group(tw.topic, expired.group)
                self.settle([action_id], "applied")

    def record_quota(self, tw: TopicWork) -> None:
        """Store the plan's quota state; journal only the transitions."""
        if self.state.quota_state(tw.topic).exceeded == tw.quota_exceeded:
            return
        with self.catalog.write():
            self.state.set_quota_state(tw.topic, tw.quota_exceeded, self.now)
            self.record([Entry("quota_exceeded" if tw.quota_exceeded else "quota_cleared", tw.topic)])

    # -- per partition ----------------------------------------------------------------
    #
    # Kafka's shape: select what goes (pure), make the log start move durable under
    # the partition's lock, rename the doomed segments out of the way, release the
    # lock, then unlink them and journal it while appends go on.

    def apply_partition(self, pw: PartitionWork, ids: _PartitionIds) -> None:
        _check_plan(pw)
        with ExitStack() as unlinking:
            with self.broker.locked_partition(pw.topic, pw.partition, timeout=PARTITION_LOCK_WAIT) as writer:
                if pw.roll:
                    self.roll(pw, writer)
                if not (pw.deletions or pw.moves or pw.new_log_start_offset != pw.log_start_offset):
                    return
                segments = writer.segments()
                log_start = self.catalog.partition(pw.topic, pw.partition).log_start_offset
                doomed = self.commit(pw, ids, select(pw, ids.deletions, log_start, segments), segments)
                fault_point("after_log_start_moved")
                if not doomed:
                    return
                unlinking.enter_context(deleting(writer.directory))
                writer.detach([segment.base_offset for segment, _id in doomed])
                fault_point("after_segment_renamed")
            self.unlink(writer.directory, doomed)

    def roll(self, pw: PartitionWork, writer: PartitionWriter) -> None:
        sealed = writer.roll()
        if sealed is None:
            return
        with self.catalog.write():
            self.catalog.reconcile_segments(pw.topic, pw.partition, writer.segments())
            self.record(
                [
                    _segment_entry(
                        "roll", pw.topic, pw.partition, sealed.base_offset, sealed.next_offset, sealed.size_bytes
                    )
                ]
            )

    def commit(
        self, pw: PartitionWork, ids: _PartitionIds, chosen: _Selection, segments: Sequence[SegmentInfo]
    ) -> list[tuple[SegmentInfo, int]]:
        """The durable point, one transaction: move positions and the log start,
        settle the planned deletions already done, journal the segments sealed since
        the plan (planned), and drop the doomed segments' catalog rows. Returns the
        segments to delete with their action ids."""
        with self.catalog.write():
            self.move(pw, ids)
            self.settle([action_id for _d, action_id in chosen.gone], "applied", {"already_removed": True})
            sealed_since_ids = self.record(
                [
                    _segment_entry(
                        "delete_segment",
                        pw.topic,
                        pw.partition,
                        s.base_offset,
                        s.next_offset,
                        s.size_bytes,
                        "DELETE_BELOW_LOG_START",
                    )
                    for s in chosen.sealed_since
                ],
                "planned",
            )
            doomed = [*chosen.doomed, *zip(chosen.sealed_since, sealed_since_ids)]
            bases = {segment.base_offset for segment, _id in doomed}
            self.catalog.reconcile_segments(pw.topic, pw.partition, [s for s in segments if s.base_offset not in bases])
        self.unplanned += len(chosen.sealed_since)
        self.applied += len(chosen.gone)
        self.bytes_freed += sum(d.size_bytes for d, _id in chosen.gone)
        return doomed

    def unlink(self, directory: Path, doomed: Sequence[tuple[SegmentInfo, int]]) -> None:
        """Unlink detached segments and journal them, a batch at a time, without the
        partition's lock (the caller holds its deletion lock)."""
        for start in range(0, len(doomed), _UNLINK_BATCH):
            batch = doomed[start : start + _UNLINK_BATCH]
            unlink_detached(directory, [segment.base_offset for segment, _id in batch])
            fault_point("after_segment_unlinked")
            with self.catalog.write():
                self.settle([action_id for _segment, action_id in batch], "applied")
            fault_point("after_segment_journaled")
            self.applied += len(batch)
            self.bytes_freed += sum(segment.size_bytes for segment, _id in batch)

    def move(self, pw: PartitionWork, ids: _PartitionIds) -> None:
        """Inside the durable point's transaction: re-check the log start and the
        subscribers, move positions and the log start, mark them applied. Checked in
        the same transaction as the change, so that no commit slips in between."""
        row = self.catalog.partition(pw.topic, pw.partition)
        if row.log_start_offset != pw.log_start_offset:
            raise _Stale(f"log start is {row.log_start_offset}, the plan assumed {pw.log_start_offset}")
        if pw.new_log_start_offset > row.next_offset:
            raise _Stale(f"log end is {row.next_offset}, below the planned log start {pw.new_log_start_offset}")
        groups = {g.name: g for g in self.catalog.groups(pw.topic)}
        planned_from = {m.group: m.old_position for m in pw.moves}
        for group in groups.values():
            if group.kind != "subscriber":
                continue
            position = group.positions.get(pw.partition, (row.log_start_offset, 0))[0]
            # Below the new log start is safe only where the plan decided to put it
            # there from where it stood (a hard cap overran it).
            assumed = planned_from.get(group.name)
            if position < pw.new_log_start_offset and (assumed is None or position < assumed):
                raise _Stale(f"subscriber group {group.name!r} is at {position}, below what the plan assumed")

        for move, move_ids in zip(pw.moves, ids.moves):
            target = groups.get(move.group)
            if target is None:
                self.settle(move_ids, "skipped", {"message": "group removed since the plan"})
                continue
            position, committed_at = target.positions.get(pw.partition, (row.log_start_offset, target.created_at))
            if position >= move.new_position:
                self.settle(move_ids, "skipped", {"message": f"group already at {position}"})
                continue
            # Positions never move backwards; the commit time stays the group's own:
            # an engine move is not a sign of life (subscription_expiry), nor reading.
            self.catalog.move_position(pw.topic, move.group, pw.partition, move.new_position, committed_at)
            self.settle(move_ids, "applied", None if position == move.old_position else {"moved_from": position})

        if ids.log_start is not None:
            self.catalog.set_log_start(pw.topic, pw.partition, pw.new_log_start_offset)
            self.settle([ids.log_start], "applied")


@dataclass(frozen=True)
class _Selection:
    """What one partition's apply will delete, decided before anything changes."""

    #: planned deletions present as planned, with their action ids
    doomed: tuple[tuple[SegmentInfo, int], ...]
    #: planned deletions already removed (wholly below the log start), with their ids
    gone: tuple[tuple[SegmentDeletion, int], ...]
    #: segments not planned, sealed since, wholly below the new log start
    sealed_since: tuple[SegmentInfo, ...]


def select(
    pw: PartitionWork, deletion_ids: Sequence[int], log_start: int, segments: Sequence[SegmentInfo]
) -> _Selection:
    """Check the plan's deletions against the store (the partition's current log
    start and segments) and choose what goes; raises :class:`_Stale` if a planned
    segment is gone or changed otherwise than by a finished deletion."""
    present = {s.base_offset: s for s in segments}
    doomed, gone = [], []
    for d, action_id in zip(pw.deletions, deletion_ids):
        segment = present.get(d.base_offset)
        if segment is None and d.next_offset <= log_start:
            # Wholly below the log start already: the store removed it when a
            # writer (this cycle's, or an appender's) took the partition lock.
            gone.append((d, action_id))
        elif segment is None or not segment.sealed or segment.next_offset != d.next_offset:
            raise _Stale(f"segment {d.base_offset} is gone or changed since the plan")
        else:
            doomed.append((segment, action_id))
    # A segment that was active when planned may have been sealed since (by a
    # producer's roll or this cycle's idle roll) and now lie wholly below the new log
    # start (message granularity cuts inside the active segment). The store removes
    # such a segment once the log start passes it, so it is journaled and deleted
    # here, with the same durable point as the others.
    planned = {d.base_offset for d in pw.deletions}
    sealed_since = tuple(
        s for s in segments if s.sealed and s.next_offset <= pw.new_log_start_offset and s.base_offset not in planned
    )
    return _Selection(tuple(doomed), tuple(gone), sealed_since)


def _check_plan(pw: PartitionWork) -> None:
    """Refuse a plan that breaks the rules of a cut (a planner bug): deleting must
    never reach above the log start, which only moves forwards."""
    if pw.new_log_start_offset < pw.log_start_offset:
        raise ValueError(
            f"plan moves the log start of {pw.topic}/{pw.partition} back from {pw.log_start_offset} "
            f"to {pw.new_log_start_offset}"
        )
    for d in pw.deletions:
        if d.next_offset > pw.new_log_start_offset:
            raise ValueError(
                f"plan deletes segment {d.base_offset} of {pw.topic}/{pw.partition}, which ends at "
                f"{d.next_offset}, above its new log start {pw.new_log_start_offset}"
            )
    bases = [d.base_offset for d in pw.deletions]
    if bases != sorted(set(bases)):
        raise ValueError(f"plan deletions of {pw.topic}/{pw.partition} are not in offset order")


# -- settling what a crash or an error left planned -----------------------------------------


def _effect(broker: Broker, action: Action) -> ActionStatus:
    """Whether a planned action's effect is visible in the catalog."""
    catalog = broker.catalog
    topic, partition, end = action.topic, action.partition, action.end_offset
    if topic is None or not catalog.has_topic(topic):
        return "skipped"
    kind = action.action
    if kind in ("delete_segment", "move_log_start") and partition is not None and end is not None:
        # The deletion's durable point is the log start move: past it, the store
        # finishes the deletion; before it, the data stays.
        moved = catalog.partition(topic, partition).log_start_offset >= end
        return "applied" if moved else "rolled_back"
    group = (action.details or {}).get("group")
    current = next((g for g in catalog.groups(topic) if g.name == group), None)
    if kind == "group_expired":
        return "applied" if current is None else "rolled_back"
    if kind in MOVE_ACTIONS and current is not None and partition is not None and end is not None:
        position = current.positions.get(partition, (-1, 0))[0]
        return "applied" if position >= end else "rolled_back"
    return "rolled_back"


@dataclass(frozen=True)
class _Settled:
    deletions: int
    bytes_freed: int
    rolled_back: int


def _settle_by_effect(broker: Broker, journal: Journal, planned: Sequence[Action], *, how: str) -> _Settled:
    """Give actions left ``planned`` (by a crash, or an error half-way) the status
    their visible effect shows, noted in their details as ``completed_<how>``,
    ``rolled_back_<how>`` or ``skipped_<how>`` (a topic deleted since)."""
    touched = sorted({(a.topic, a.partition) for a in planned if a.topic is not None and a.partition is not None})
    for topic, partition in touched:
        try:
            # Taking the writer lock makes the files follow the log start (finishing
            # or undoing an interrupted deletion) and the catalog follow the files.
            with broker.locked_partition(topic, partition, timeout=PARTITION_LOCK_WAIT):
                pass
        except (NotFound, StoreError, OSError):
            pass  # a deleted topic, or a partition still failing: the catalog decides
    note = {"applied": f"completed_{how}", "rolled_back": f"rolled_back_{how}", "skipped": f"skipped_{how}"}
    deletions = freed = rolled_back = 0
    with broker.catalog.write():
        for action in planned:
            status = _effect(broker, action)
            journal.settle([action.id], status, time=broker.clock(), details={note[status]: True})
            rolled_back += status == "rolled_back"
            if status == "applied" and action.action == "delete_segment":
                deletions += 1
                freed += action.bytes or 0
    return _Settled(deletions, freed, rolled_back)


def _recover(broker: Broker, journal: Journal) -> tuple[int, ...]:
    """Settle the cycles still ``running``: under the prune lock, their process died."""
    recovered = []
    for cycle in journal.cycles(status="running", limit=None):
        actions = journal.actions(cycle=cycle.id, limit=None)
        planned = [a for a in actions if a.status == "planned"]
        settled = _settle_by_effect(broker, journal, planned, how="on_recovery")
        deletions = [a for a in actions if a.action == "delete_segment"]
        done_before = [a for a in deletions if a.status == "applied"]
        journal.finish_cycle(
            cycle.id,
            status="interrupted",
            finished=broker.clock(),
            planned=len(deletions),
            applied=len(done_before) + settled.deletions,
            bytes_freed=sum(a.bytes or 0 for a in done_before) + settled.bytes_freed,
            error=(
                f"interrupted: its process died; recovery completed {settled.deletions} segment deletion(s) "
                f"and rolled back {settled.rolled_back} planned action(s)"
            ),
        )
        recovered.append(cycle.id)
    return tuple(recovered)


def recover_interrupted(broker: Broker, *, lock_timeout: float | None = 300.0) -> tuple[int, ...]:
    """Recover the cycles a dead process left ``running``, outside a cycle (each cycle
    recovers them itself first, :func:`execute`): for tools and the fault campaigns,
    which check the data directory as a restarted engine would find it. Returns
    their ids."""
    with _prune_lock(broker, lock_timeout):
        return _recover(broker, Journal(broker.catalog))


# -- entry point ----------------------------------------------------------------------------


def execute(
    broker: Broker,
    work: Sequence[TopicWork],
    *,
    now: int,
    trigger: str = "schedule",
    actor: str = "engine",
    scope: Sequence[str] | Literal["all"] = "all",
    spark_master: str | None = None,
    dry_run: bool = False,
    lock_timeout: float | None = 300.0,
    plan_ms: int | None = None,
) -> CycleResult:
    """Apply ``work`` (planned at ``now``, in ``plan_ms``) and journal it as one cycle.

    ``dry_run`` journals the cycle alone (status ``dry_run``) and changes nothing.
    While the engine is paused, only the topics' quota states are recorded (status
    ``paused``). One topic's failure is journaled (``topic_failed``) and the others
    go on; the cycle is then ``done`` with the failures in its ``error``."""
    begun = broker.clock()
    journal = Journal(broker.catalog)
    planned = sum(tw.deletions for tw in work)

    def start(status: CycleStatus) -> int:
        return journal.start_cycle(
            trigger=trigger,
            actor=actor,
            scope=scope,
            now=now,
            started=broker.clock(),
            spark_master=spark_master,
            status=status,
            plan_ms=plan_ms,
        )

    if dry_run:
        with broker.catalog.write():
            cycle_id = start("dry_run")
            journal.finish_cycle(
                cycle_id, status="dry_run", finished=broker.clock(), planned=planned, applied=0, bytes_freed=0
            )
        return CycleResult(cycle_id, "dry_run", begun, broker.clock(), planned)

    with _prune_lock(broker, lock_timeout), _room_to_delete(broker):
        recovered = _recover(broker, journal)
        paused = EngineState(broker.catalog).is_paused()
        with broker.catalog.write():
            cycle_id = start("running")
            ids = {
                tw.topic: _record_planned(
                    journal, tw, cycle=cycle_id, time=broker.clock(), trigger=trigger, actor=actor
                )
                for tw in ([] if paused else work)
            }
        fault_point("after_cycle_recorded")
        cycle = _Cycle(broker, journal, cycle_id, now=now, trigger=trigger, actor=actor)
        try:
            for tw in work:
                _apply_topic_guarded(cycle, tw, None if paused else ids[tw.topic])
        except BaseException as error:
            applied = _fail(cycle, planned + cycle.unplanned, error)
            if isinstance(error, KeyboardInterrupt) and not str(error) and applied is not None:
                # What the interrupted command prints (after "ebb: interrupted; "): a
                # partition past its durable point completed, so some may be done.
                raise KeyboardInterrupt(
                    f"cycle {cycle.id} stopped with {applied} of {planned + cycle.unplanned} segment deletion(s) done; "
                    f"`ebb log --cycle {cycle.id}` shows which"
                ) from None
            raise
        fault_point("before_cycle_finished")
        status: CycleStatus = "paused" if paused else "done"
        failures = "; ".join(f"{t}: {e}" for t, e in cycle.failed.items())
        planned += cycle.unplanned
        journal.finish_cycle(
            cycle_id,
            status=status,
            finished=broker.clock(),
            planned=planned,
            applied=cycle.applied,
            bytes_freed=cycle.bytes_freed,
            error=f"{len(cycle.failed)} topic(s) failed: {failures}" if failures else None,
        )
        DiskHistory(broker.catalog).record(cycle_id, time=broker.clock())
        # The journal's own retention runs on the wall clock, never on the cycle's
        # ``now``, which may be a simulated future.
        journal.apply_retention(now=broker.clock(), retention_ms=broker.config.journal_retention_ms)
    return CycleResult(
        cycle_id,
        status,
        begun,
        broker.clock(),
        planned,
        cycle.applied,
        cycle.bytes_freed,
        cycle.skipped,
        cycle.failed,
        recovered,
        cycle.locked,
    )


def _apply_topic_guarded(cycle: _Cycle, tw: TopicWork, ids: _TopicIds | None) -> None:
    """Apply one topic (or, paused, only its quota state), journaling a stale plan
    as ``skipped`` and any error as ``topic_failed`` so that other topics go on."""
    planned_ids = [] if ids is None else [*ids.expired, *(i for p in ids.partitions.values() for i in p.all())]
    try:
        if ids is None:
            cycle.check_topic(tw)
            cycle.record_quota(tw)
        else:
            cycle.apply_topic(tw, ids)
    except _Stale as stale:
        cycle.skip(tw.topic, None, planned_ids, str(stale))
    except Exception as error:  # noqa: BLE001 - one topic's failure must not stop the others (SPEC §5)
        message = str(error) or type(error).__name__
        cycle.failed[tw.topic] = message
        left = cycle.journal.actions(cycle=cycle.id, topic=tw.topic, status="planned", limit=None)
        settled = _settle_by_effect(cycle.broker, cycle.journal, left, how="after_error")
        cycle.applied += settled.deletions
        cycle.bytes_freed += settled.bytes_freed
        cycle.record([Entry("topic_failed", tw.topic, details={"error": message, "type": type(error).__name__})])


def _why_stopped(error: BaseException) -> str:
    """The journal's words for what stopped a cycle: an interrupt (Ctrl-C, or SIGTERM,
    which the CLI raises as one) is not a Python class name to an operator."""
    if isinstance(error, KeyboardInterrupt):
        return f"interrupted (Ctrl-C or SIGTERM){': ' + str(error) if str(error) else ''}"
    return str(error) or type(error).__name__


def _fail(cycle: _Cycle, planned: int, error: BaseException) -> int | None:
    """Close a cycle that an error outside any one topic stopped (the journal failing,
    an interrupt): settle what it left planned, then mark it failed; the actions it
    applied in all. If that fails too (None), the cycle stays ``running`` and the next
    cycle's recovery settles it."""
    try:
        left = cycle.journal.actions(cycle=cycle.id, status="planned", limit=None)
        settled = _settle_by_effect(cycle.broker, cycle.journal, left, how="after_error")
        applied = cycle.applied + settled.deletions
        cycle.journal.finish_cycle(
            cycle.id,
            status="failed",
            finished=cycle.broker.clock(),
            planned=planned,
            applied=applied,
            bytes_freed=cycle.bytes_freed + settled.bytes_freed,
            error=_why_stopped(error),
        )
    except Exception:  # noqa: BLE001 - the original error is the one to raise
        return None
    return applied
