"""The engine as a library: topics, policies, appends, reads and groups over one data
directory. The CLI and the console are thin layers over this class.

Ordering rules that keep the catalog and the files in step:

- topic creation writes the directories first, then the catalog rows; a directory
  without rows is a leftover of a crashed create or delete and is cleared on the
  next create of that name;
- an append is durable in its segment file before the catalog records it, both under
  the partition lock; a writer that finds the files ahead of the catalog (a producer
  killed between the two) brings the catalog up to the files.
"""

from __future__ import annotations

import shutil
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from engine.catalog.catalog import Catalog, GroupKind, GroupRow, PartitionRow, StartFrom
from engine.clock import format_instant, now_ms
from engine.config import Config, load_config
from engine.datadir import DataDir
from engine.errors import DataQuarantined, InvalidInput, NotFound, QuotaExceeded, StoreError
from engine.journal.journal import Entry, Journal
from engine.journal.schema import ensure_journal_schema
from engine.journal.state import EngineState, QuotaState
from engine.names import check_group_name, check_topic_name
from engine.policy.effective import EffectivePolicy, merge_overrides, resolve
from engine.producing import (
    MAX_PENDING_BYTES,
    Acked,
    AckedSpan,
    Acknowledgements,
    InterruptedWaiting,
    KeylessBatches,
    Lull,
    described,
    pending_cost,
)
from engine.prune.record_times import RecordAges
from engine.store.batch import NewRecord, Record, record_size
from engine.store.partition import (
    MAX_BATCH_RECORDS,
    AppendResult,
    OffsetGap,
    PartitionWriter,
    create_partition,
    largest_record,
    offset_for_time,
    read_records,
    unfit_record,
)
from engine.store.reserve import Reserve
from engine.store.segment import SegmentInfo, describe

MAX_PARTITIONS = 10_000

#: how often a held append (backlog_policy = producer_request_hold) looks again
QUOTA_POLL_SECONDS = 0.1
#: the backlog policies under which a topic over quota stops its producers
PRODUCER_POLICIES = ("producer_request_hold", "producer_exception")


@dataclass(frozen=True)
class PartitionView:
    row: PartitionRow
    segments: list[SegmentInfo]

    @property
    def size_bytes(self) -> int:
        return sum(s.size_bytes for s in self.segments)


@dataclass(frozen=True)
class TopicDescription:
    name: str
    policy: EffectivePolicy
    partitions: list[PartitionView]
    groups: list[GroupRow]
    #: the last cycle's backlog-quota verdict (SPEC §4)
    quota: QuotaState

    def to_json(self) -> dict:
        """The ``topic describe --json`` contract of SPEC §7."""
        return {
            "name": self.name,
            "partitions": [
                {
                    "partition": p.row.partition,
                    "log_start_offset": p.row.log_start_offset,
                    "next_offset": p.row.next_offset,
                    "size_bytes": p.size_bytes,
                    "segments": [
                        {
                            "base_offset": s.base_offset,
                            "next_offset": s.next_offset,
                            "size_bytes": s.size_bytes,
                            "first_timestamp": s.first_timestamp,
                            "max_timestamp": s.max_timestamp,
                            "sealed": s.sealed,
                        }
                        for s in p.segments
                    ],
                }
                for p in self.partitions
            ],
            "policy": self.policy.to_json(),
            "groups": [
                {
                    "name": g.name,
                    "kind": g.kind,
                    "positions": {str(p): pos for p, (pos, _at) in sorted(g.positions.items())},
                    "committed_at": {str(p): at for p, (_pos, at) in sorted(g.positions.items())},
                }
                for g in self.groups
            ],
            "quota": {"exceeded": self.quota.exceeded, "since": self.quota.since},
        }


def _flushed_when_interrupted(
    records: Iterable[NewRecord | Lull], flush: Callable[[], None]
) -> Iterator[NewRecord | Lull]:
    """``records``; where getting the next one is interrupted, ``flush`` runs before
    the interrupt goes on: what an operator typed or piped just before Ctrl-C was
    read, and a producer stopped with Ctrl-C does not drop what it was handed."""
    source = iter(records)
    while True:
        try:
            record = next(source)
        except StopIteration:
            return
        except KeyboardInterrupt:
            flush()
            raise
        yield record


def _acknowledged(spans: Sequence[AckedSpan], *, rest: str | None = "written") -> str:
    """What a produce acknowledged before it stopped, for its error message; ``rest``:
    what is sure of the records after (a storage fault may have written some; None:
    there were none)."""
    if not spans:
        return "no record was read" if rest is None else f"no record was {rest}"
    count, where = described(spans)
    if rest is None:
        return f"all {count} record(s) read were acknowledged ({where})"
    return f"{count} record(s) before it were acknowledged ({where}), the rest were not {rest}"


@dataclass(frozen=True)
class Consumed:
    partition: int
    record: Record


class Broker:
    """One data directory, opened by one process (several may open the same one)."""

    def __init__(
        self,
        root: Path,
        config_path: Path | None = None,
        *,
        clock: Callable[[], int] = now_ms,
        config: Config | None = None,
    ) -> None:
        """``config``: the file's content, where the caller has just loaded it (a
        second read could find the file changed in between)."""
        self.data = DataDir(root)
        self.data.ensure()
        if config_path is not None and not config_path.is_file():
            # The default file may be absent (all defaults); a file named on purpose may not.
            raise InvalidInput(f"config file {config_path} does not exist")
        self.config_path = config_path or self.data.config_path
        self.config: Config = config if config is not None else load_config(self.config_path)
        self.catalog = Catalog.open(self.data.catalog_path)
        # The journal's tables are made with the catalog's, not by the first reader of
        # the journal: a command that reads it (or is refused) must write nothing.
        ensure_journal_schema(self.catalog.db)
        self.clock = clock
        #: free space kept for the deletion path (made by writes, never by opening)
        self.reserve = Reserve(self.data.root)
        self._writers: dict[tuple[str, int], PartitionWriter] = {}
        self._state: EngineState | None = None
        #: the timestamps of the records at groups' positions (engine/catalog/lag.py),
        #: kept while the broker is: the console's reader refreshes through one
        self.record_ages = RecordAges(self.data)

    def close(self) -> None:
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()
        self.catalog.close()

    def __enter__(self) -> Broker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def reload_config(self) -> None:
        self.config = load_config(self.config_path)

    # -- topics and policies ------------------------------------------------------

    def policy(self, topic: str, overrides: Mapping[str, str] | None = None) -> EffectivePolicy:
        """A topic's effective policy (or what it would be with other ``overrides``)."""
        if overrides is None:
            self.catalog.topic(topic)
            overrides = self.catalog.overrides(topic)
        return resolve(overrides, self.config.policy_defaults)

    def create_topic(
        self, name: str, partitions: int = 1, policy: Mapping[str, str | None] | None = None, *, actor: str = "cli"
    ) -> EffectivePolicy:
        check_topic_name(name)
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise InvalidInput(f"invalid partition count {partitions}: use 1 to {MAX_PARTITIONS}")
        overrides = merge_overrides({}, policy or {})
        effective = resolve(overrides, self.config.policy_defaults)
        # The write transaction serializes concurrent creates of one name across
        # processes, so the leftover check below never removes a live topic.
        with self.catalog.write():
            self.catalog.add_topic(name, partitions, self.clock())
            self.catalog.replace_overrides(name, overrides, actor=actor, now_ms=self.clock())
            topic_dir = self.data.topic_dir(name)
            # Rows absent, files present: a create or delete that crashed, or files a
            # delete could not remove.
            if topic_dir.exists() and (kept := _remove_tree(topic_dir)) is not None:
                raise StoreError(f"cannot clear what a deleted topic {name} left in {topic_dir}: {kept}")
            for p in range(partitions):
                create_partition(self.data.partition_dir(name, p))
            self._journal_hold_switch(name, False, bool(effective["hold"]), actor)
        self.reserve.ensure()
        return effective

    def alter_topic(
        self, name: str, changes: Mapping[str, str | None], *, actor: str = "cli"
    ) -> list[tuple[str, str | None, str | None]]:
        """Apply policy changes (None resets a field); returns (field, old, new) per change."""
        with self.catalog.write():
            current = self.catalog.overrides(self.catalog.topic(name).name)
            merged = merge_overrides(current, changes)
            was_held = bool(resolve(current, self.config.policy_defaults)["hold"])
            held = bool(resolve(merged, self.config.policy_defaults)["hold"])
            changed = self.catalog.replace_overrides(name, merged, actor=actor, now_ms=self.clock())
            self._journal_hold_switch(name, was_held, held, actor)
            return changed

    def _journal_hold_switch(self, topic: str, was_held: bool, held: bool, actor: str) -> None:
        """Journal a ``hold`` or ``release`` action where the topic's hold switched, by
        whatever path (`ebb hold`, `topic create --hold`, `topic alter --no-hold`, the
        console's editor): `ebb log --action hold` must list every hold. Inside the
        caller's write transaction, with the policy change it records."""
        if was_held == held:
            return
        switch = Entry("hold" if held else "release", topic, details={"old": _on_off(was_held), "new": _on_off(held)})
        Journal(self.catalog).append([switch], time=self.clock(), trigger="manual", actor=actor, status="applied")

    def refuse_if_held(self, topic: str) -> None:
        """Refuse a deletion of ``topic``'s data while it is on hold: nothing of a held
        topic goes, by any path (SPEC §5)."""
        if self.policy(topic)["hold"]:
            raise InvalidInput(f"topic {topic} is on hold: release it first (`ebb release {topic}`)")

    def refuse_if_paused(self) -> None:
        """Refuse a deletion while the engine is paused: a pause stops all deletion."""
        if self._engine_state().is_paused():
            raise InvalidInput("the engine is paused, which stops all deletion: resume it first (`ebb resume`)")

    def delete_topic(self, name: str, *, actor: str = "cli") -> str | None:
        """Delete a topic and all its data, journaled as a ``topic_deleted`` action (by
        ``actor``, trigger manual) with what it held, in the same transaction; refused
        while the topic is on hold or the engine is paused, as every deletion is.

        Returns why some of its files could not be removed (None: all were). The topic
        is deleted all the same (its rows are gone); what is left ``ebb verify``
        lists, and creating the name again clears."""
        topic = self.catalog.topic(name)
        self.refuse_if_held(name)
        self.refuse_if_paused()
        writers = [self._writer(name, p) for p in range(topic.partitions)]
        locked = []
        try:
            for p, writer in enumerate(writers):
                writer.locked(self.catalog.partition(name, p).log_start_offset).__enter__()
                locked.append(writer)
            with self.catalog.write():
                self.refuse_if_held(name)  # held or paused since the check above
                self.refuse_if_paused()
                rows = self.catalog.partitions(name)
                segments = [s for row in rows for s in self.catalog.segments(name, row.partition)]
                held = Entry(
                    "topic_deleted",
                    name,
                    messages=sum(row.next_offset - row.log_start_offset for row in rows),
                    bytes=sum(s.size_bytes for s in segments),
                    details={"partitions": len(rows), "segments": len(segments)},
                )
                Journal(self.catalog).append([held], time=self.clock(), trigger="manual", actor=actor, status="applied")
                self.catalog.remove_topic(name)
            return _remove_tree(self.data.topic_dir(name))
        finally:
            for writer in locked:
                writer.__exit__(None, None, None)
            for p in range(topic.partitions):
                self._writers.pop((name, p), None)
            for writer in writers:
                writer.close()

    def describe(self, name: str) -> TopicDescription:
        self.catalog.topic(name)
        return TopicDescription(
            name,
            self.policy(name),
            [PartitionView(row, self.catalog.segments(name, row.partition)) for row in self.catalog.partitions(name)],
            self.catalog.groups(name),
            self._engine_state().quota_state(name),
        )

    # -- appending --------------------------------------------------------------------

    def _writer(self, topic: str, partition: int) -> PartitionWriter:
        key = (topic, partition)
        if key not in self._writers:
            self.catalog.partition(topic, partition)
            self._writers[key] = PartitionWriter(
                self.data.partition_dir(topic, partition), durable=self.config.fsync, label=f"{topic}/{partition}"
            )
        return self._writers[key]

    def _keyless_start(self, topic: str) -> int:
        """The partition a producer's first keyless batch goes to: the one written
        least (lowest end offset; the first of equals). Producers that send a record
        or a batch at a time then spread over the partitions as one long run does,
        rather than each beginning at partition 0 and piling onto it."""
        return min(self.catalog.partitions(topic), key=lambda row: (row.next_offset, row.partition)).partition

    def append(self, topic: str, partition: int, records: Sequence[NewRecord]) -> AppendResult:
        """Append to one partition; returns once the records are durable and cataloged.

        Raises :class:`QuotaExceeded` while the topic is over its backlog quota under a
        producer policy (SPEC §4): at once with ``producer_exception``; with
        ``producer_request_hold`` after waiting up to ``[engine]
        producer_hold_timeout`` for a prune cycle to clear the quota."""
        policy = self._quota_gate(topic, self.policy(topic))
        row = self.catalog.partition(topic, partition)
        writer = self._writer(topic, partition)
        with writer.locked(row.log_start_offset):
            try:
                if writer.reloaded:
                    self._reconcile(topic, partition, writer)
                result = writer.append(
                    records,
                    now_ms=self.clock(),
                    segment_size=policy.segment_size,
                    segment_roll_ms=policy.limit("segment_roll"),
                )
                with self.catalog.write():
                    self.catalog.update_segments(topic, partition, result.changed, result.next_offset)
            except StoreError:
                # A storage fault: the files may now be ahead of the catalog (batches
                # written, even durable, but not acknowledged). They stay in the log, as
                # a killed producer's do (Kafka keeps what is in its log): forgetting
                # the writer's view makes the next lock re-read the files and bring the
                # catalog up to them.
                writer.close()
                raise
            except KeyboardInterrupt:
                # Ctrl-C or SIGTERM inside the append: its batches may be on disk, even
                # durable, yet not cataloged. The catalog is brought up to the files
                # now, as the next writer would, so that the process does not leave
                # "an append not yet cataloged" behind (ebb verify); a second interrupt
                # or a fault here leaves that, as a killed producer does.
                try:
                    writer.reload(row.log_start_offset)
                    self._reconcile(topic, partition, writer)
                except StoreError:
                    writer.close()
                raise
        return result

    def _quota_gate(self, topic: str, policy: EffectivePolicy) -> EffectivePolicy:
        """Let an append through, hold it, or refuse it by the topic's quota state;
        returns the policy to append with (re-read if the append was held).

        The quota state is written by the prune cycle (engine/journal/state.py). A
        topic without a finite backlog quota under a producer policy is never stopped
        (a state left by an earlier policy is stale), so the common path costs no
        query; otherwise one primary-key read of ``topic_state``."""
        if not self._stops_producers(policy):
            return policy
        state = self._engine_state()
        if not state.quota_state(topic).exceeded:
            return policy
        timeout = self.config.producer_hold_timeout_ms
        if policy["backlog_policy"] == "producer_exception" or timeout == 0:
            raise self._over_quota(topic, policy.choice("backlog_policy"), "appends are refused until it clears")
        deadline = None if timeout is None else time.monotonic() + timeout / 1000
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if timeout is not None and left is not None and left <= 0:
                raise self._over_quota(
                    topic, "producer_request_hold", f"held {timeout / 1000:g} s and it did not clear"
                )
            time.sleep(QUOTA_POLL_SECONDS if left is None else min(QUOTA_POLL_SECONDS, left))
            # The policy may change while held (another backlog policy, the quota
            # removed): the gate follows it.
            policy = self.policy(topic)
            if not self._stops_producers(policy) or not state.quota_state(topic).exceeded:
                return policy
            if policy["backlog_policy"] == "producer_exception":
                raise self._over_quota(topic, "producer_exception", "appends are refused until it clears")

    @staticmethod
    def _stops_producers(policy: EffectivePolicy) -> bool:
        return policy["backlog_policy"] in PRODUCER_POLICIES and (
            policy["backlog_size"] is not None or policy["backlog_age"] is not None
        )

    def _engine_state(self) -> EngineState:
        if self._state is None:
            self._state = EngineState(self.catalog)
        return self._state

    @staticmethod
    def _over_quota(topic: str, backlog_policy: str, what: str) -> QuotaExceeded:
        return QuotaExceeded(
            f"topic {topic} is over its backlog quota (backlog_policy={backlog_policy}): {what}; "
            f"a subscriber group must catch up (see `ebb group list {topic}`) and a prune cycle "
            "clear the quota"
        )

    def produce(
        self,
        topic: str,
        records: Iterable[NewRecord | Lull],
        partition: int | None = None,
        *,
        on_ack: Callable[[Acked], None] | None = None,
    ) -> list[AckedSpan]:
        """Append records, choosing partitions when none is given (a key's by its
        hash; keyless records round-robin from the partition written least, a batch
        of a second or 1000 records at a time: :class:`~engine.producing.KeylessBatches`),
        a partition's records up to one store batch to an append (the partition of the
        oldest run goes early where the records held back reach
        :data:`~engine.producing.MAX_PENDING_BYTES`); calls ``on_ack`` as
        it acknowledges each run of records produced one after another to one
        partition, once durable, in production order; returns what it acknowledged,
        partition by partition. Interrupted (``KeyboardInterrupt``) while ``records``
        gives the next record (a producer waiting for its input), it first writes
        what it was given, as a Kafka producer's ``close()`` flushes; interrupted
        anywhere (again while it writes), it acknowledges what is durable, as on an
        error, before it stops. A :class:`~engine.producing.Lull`
        among ``records`` writes what is held back at once (a pipe that stays open).

        A :class:`QuotaExceeded`, a record too large for a segment or an
        :class:`InvalidInput` from ``records`` itself stops producing; its message
        says which records were acknowledged (durable) before it and that the rest
        were not written. A record too large is refused as it arrives, before the
        records buffered with it are written, and a run of equal records (``produce
        --count``) is refused before anything is."""
        count = self.catalog.topic(topic).partitions
        if partition is not None and not 0 <= partition < count:
            raise NotFound(f"topic {topic!r} has no partition {partition} (it has partitions 0..{count - 1})")
        segment_size = self.policy(topic).segment_size
        largest = largest_record(segment_size)
        pending: dict[int, list[NewRecord]] = {}
        acks = Acknowledgements(on_ack)
        pending_costs: dict[int, int] = {}  # partition -> what its pending records take
        sequence = held = 0

        def append(p: int) -> None:
            nonlocal held
            chunk = pending.pop(p)
            held -= pending_costs.pop(p)
            result = self.append(topic, p, chunk)
            acks.appended(p, result.base_offset, result.next_offset)

        def append_all() -> None:
            while (oldest := acks.oldest_waiting()) is not None:
                append(oldest)

        keyless: KeylessBatches | None = None
        try:
            for record in _flushed_when_interrupted(records, append_all):
                if isinstance(record, Lull):
                    append_all()
                    if keyless is not None:
                        keyless.end_batch()
                    continue
                size = record_size(record)
                if size > largest:
                    raise unfit_record(sequence, size, segment_size)
                if partition is not None:
                    p = partition
                elif record.key is not None:
                    p = zlib.crc32(record.key) % count  # stable: a key's records stay in order
                else:
                    if keyless is None:
                        keyless = KeylessBatches(self._keyless_start(topic), count)
                    p = keyless.partition_of(record.timestamp)
                sequence += 1
                pending.setdefault(p, []).append(record)
                cost = pending_cost(size)
                pending_costs[p] = pending_costs.get(p, 0) + cost
                held += cost
                acks.produced(p)
                if len(pending[p]) >= MAX_BATCH_RECORDS:
                    append(p)
                elif held >= MAX_PENDING_BYTES and (oldest := acks.oldest_waiting()) is not None:
                    # spread over many partitions: the oldest run's partition goes now,
                    # so that memory stays bounded and acknowledgements flow
                    append(oldest)
            append_all()
        except (InvalidInput, QuotaExceeded) as error:
            acks.acknowledge_durable()
            raise type(error)(f"{error}; {_acknowledged(acks.spans())}") from None
        except StoreError as error:
            acks.acknowledge_durable()
            raise StoreError(f"{error}; {_acknowledged(acks.spans(), rest='acknowledged')}") from None
        except KeyboardInterrupt as interrupt:
            # Interrupted (Ctrl-C): what is durable but waited behind a run not
            # appended yet is acknowledged as on an error, and said in the interrupt,
            # or its producer would not learn it was written and would send it again
            # (an append the interrupt landed in may be durable yet not acknowledged,
            # as a killed producer's).
            acks.acknowledge_durable()
            # Every record read was written only where the input was being waited for
            # (a line being split when Ctrl-C came was read, never given).
            rest = None if isinstance(interrupt, InterruptedWaiting) else "acknowledged"
            raise KeyboardInterrupt(_acknowledged(acks.spans(), rest=rest)) from None
        return acks.spans()

    def _reconcile(self, topic: str, partition: int, writer: PartitionWriter) -> None:
        with self.catalog.write():
            self.catalog.reconcile_segments(topic, partition, writer.segments())

    @contextmanager
    def locked_partition(
        self, topic: str, partition: int, *, timeout: float | None = None
    ) -> Iterator[PartitionWriter]:
        """A partition's writer under its lock (waited for ``timeout`` seconds, default
        the writer's), its files repaired and the catalog's segments made exactly the
        files' (what pruning re-checks its plan against)."""
        writer = self._writer(topic, partition)
        with writer.locked(self.catalog.partition(topic, partition).log_start_offset, timeout=timeout):
            self._reconcile(topic, partition, writer)
            yield writer

    def recover(self, topic: str) -> None:
        """Take each partition's lock once: repairs torn tails and brings the catalog up
        to the files (what a killed producer may have left behind)."""
        for row in self.catalog.partitions(topic):
            writer = self._writer(topic, row.partition)
            with writer.locked(row.log_start_offset):
                self._reconcile(topic, row.partition, writer)

    # -- reading ----------------------------------------------------------------------

    def read(self, topic: str, partition: int, offset: int, max_records: int) -> list[Record]:
        """Records from ``offset`` on (never below the log start), without a group."""
        row = self.catalog.partition(topic, partition)
        start = max(offset, row.log_start_offset)
        try:
            records = read_records(self.data.partition_dir(topic, partition), start, max_records)
        except OffsetGap as gap:
            # A prune may have moved the log start past ``start`` since it was read;
            # then the gap is legitimate and reading resumes at the new log start.
            moved = self.catalog.partition(topic, partition).log_start_offset
            if moved <= gap.first_missing:
                lost = self._quarantined(topic, partition, gap)
                if lost is not None:
                    raise lost from None
                raise
            return self.read(topic, partition, moved, max_records)
        return [r for r in records if r.offset >= row.log_start_offset]

    def _quarantined(self, topic: str, partition: int, gap: OffsetGap) -> DataQuarantined | None:
        """The error for a gap that ``ebb verify --repair`` recorded as lost data: it
        names the quarantined file and how to move past (Kafka leaves a consumer stuck
        on a corrupt record until an operator seeks past it; so does Ebbtide)."""
        for lost in self.catalog.quarantined(topic, partition):
            if lost.base_offset <= gap.first_missing < lost.next_offset:
                where = (
                    f"the segment file was moved to {self.data.root / lost.path} (see its .note.json)"
                    if lost.path
                    else "its segment file was missing"
                )
                return DataQuarantined(
                    f"offsets {lost.base_offset} to {lost.next_offset - 1} of {topic}/{partition} were lost "
                    f"({lost.reason}) and quarantined at {format_instant(lost.quarantined_at)}: {where}; "
                    f"move a group past them with `ebb group commit {topic} GROUP --partition {partition} "
                    f"--offset {lost.next_offset}`"
                )
        return None

    def offset_for_time(self, topic: str, partition: int, timestamp: int) -> int | None:
        self.catalog.partition(topic, partition)
        return offset_for_time(self.data.partition_dir(topic, partition), timestamp)

    # -- groups -------------------------------------------------------------------------

    def create_group(
        self, topic: str, name: str, kind: GroupKind = "subscriber", start_from: StartFrom = "earliest"
    ) -> GroupRow:
        check_group_name(name)
        if kind not in ("subscriber", "reader"):
            raise InvalidInput(f"invalid group kind {kind!r}: use subscriber or reader")
        if start_from not in ("earliest", "latest"):
            raise InvalidInput(f"invalid start {start_from!r}: use earliest or latest")
        with self.catalog.write():
            rows = self.catalog.partitions(self.catalog.topic(topic).name)
            positions = {r.partition: (r.log_start_offset if start_from == "earliest" else r.next_offset) for r in rows}
            self.catalog.add_group(topic, name, kind, start_from, positions, self.clock())
        return self.catalog.group(topic, name)

    def delete_group(self, topic: str, name: str) -> None:
        with self.catalog.write():
            self.catalog.remove_group(topic, name)

    def commit(self, topic: str, group: str, partition: int, offset: int, at_ms: int | None = None) -> None:
        """Set a group's position (the next offset it will read) on one partition."""
        with self.catalog.write():
            self.catalog.group(topic, group)
            row = self.catalog.partition(topic, partition)
            if not 0 <= offset <= row.next_offset:
                raise InvalidInput(
                    f"invalid offset {offset} for {topic}/{partition}: use 0 to {row.next_offset} (the log end)"
                )
            self.catalog.commit_position(topic, group, partition, offset, self.clock() if at_ms is None else at_ms)

    def consume(
        self,
        topic: str,
        group: str,
        *,
        partition: int | None = None,
        max_records: int = 100,
        commit: bool = True,
        deliver: Callable[[list[Consumed]], None] | None = None,
    ) -> list[Consumed]:
        """Read from a group's positions and (unless ``commit=False``) advance them,
        after ``deliver`` took what was read: where it raises (its output failed),
        nothing is committed, and the group reads the same records again (at least
        once, as a Kafka consumer that commits after processing).

        A group that does not exist yet is created as a ``reader`` from ``earliest``:
        a reader never holds data back, so consuming can never block retention by
        accident (create a ``subscriber`` on purpose with ``group create``). Without
        ``commit`` nothing is written, not even that group: it reads from the log
        start, as the new reader would."""
        check_group_name(group)
        # Everything that can be refused is checked before the group may be created.
        rows = self.catalog.partitions(self.catalog.topic(topic).name)
        wanted = [r for r in rows if partition is None or r.partition == partition]
        if partition is not None and not wanted:
            self.catalog.partition(topic, partition)
        try:
            positions = self.catalog.group(topic, group).positions
        except NotFound:
            positions = self.create_group(topic, group, "reader", "earliest").positions if commit else {}
        out: list[Consumed] = []
        moved: dict[int, int] = {}
        #: partition -> offsets below the log start the group moves past without reading
        skipped: dict[int, int] = {}
        #: (partition, offset) where a read stopped short of the log end and of the
        #: records asked for: a corrupt batch or a missing segment there
        stopped: list[tuple[int, int]] = []
        for row in wanted:
            if len(out) >= max_records:
                break
            position = positions.get(row.partition, (row.log_start_offset, 0))[0]
            asked = max_records - len(out)
            records = self.read(topic, row.partition, position, asked)
            out.extend(Consumed(row.partition, r) for r in records)
            skipped[row.partition] = max(0, row.log_start_offset - position)
            if records:
                moved[row.partition] = records[-1].offset + 1
                if len(records) < asked and moved[row.partition] < row.next_offset:
                    stopped.append((row.partition, moved[row.partition]))
            elif position < row.log_start_offset:
                moved[row.partition] = row.log_start_offset
        if deliver is not None:
            deliver(out)
        if commit and moved:
            now = self.clock()
            with self.catalog.write():
                # Commit only where the position is still the one read from: a prune
                # cycle may have moved it up meanwhile (past data it deleted), and
                # committing from the stale one would move it back, below the log
                # start. The records are returned all the same; a consumer that lost
                # the race reads on from the newer position.
                current = self.catalog.group(topic, group).positions
                for p, position in moved.items():
                    if current.get(p, (None, 0))[0] == positions.get(p, (None, 0))[0]:
                        self.catalog.commit_position(topic, group, p, position, now, skipped=skipped[p])
        for p, position in stopped:
            # What was read before it is delivered (and committed), as a Kafka fetch
            # returns the batches before a corrupt one; what stopped the read is then
            # said now, not left for the next consume to find.
            self.read(topic, p, position, 1)
        return out


def _remove_tree(path: Path) -> str | None:
    """Remove ``path`` and all it holds, going on past what cannot be removed; why the
    first such file could not be (None: all went, or nothing was there)."""
    kept: list[str] = []

    def not_removed(_function: object, where: str, exc: tuple) -> None:
        error = exc[1]
        if not isinstance(error, FileNotFoundError):
            # rmtree's own error names the file relative to its directory (".lock")
            kept.append(describe(OSError(error.errno, error.strerror, where)))

    shutil.rmtree(path, onerror=not_removed)
    return kept[0] if kept else None


def _on_off(flag: bool) -> str:
    return "on" if flag else "off"
