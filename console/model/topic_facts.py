"""What the manual-operation dialogs (truncate, purge, group moves) need to know of a
topic before they ask for confirmation: its partitions with their offsets, segments
and groups, whether it is held and whether deletion is paused; and the checks and
effects of a cut, worked out here in plain Python so that the dialogs can validate
as the operator types (no I/O on the UI thread) and tests can check them directly.

The engine re-checks everything when the operation runs (the store may have moved
meanwhile): these facts are for the operator's eyes and for refusing early.
"""

from __future__ import annotations

from dataclasses import dataclass

from console.format import size
from engine.broker import Broker
from engine.digits import is_digits
from engine.errors import InvalidInput
from engine.journal.state import EngineState
from engine.store.segment import SegmentInfo


@dataclass(frozen=True)
class GroupAt:
    """A group's position on one partition."""

    group: str
    kind: str
    position: int


@dataclass(frozen=True)
class CutEffect:
    """What moving a partition's log start up to ``cut`` would do."""

    log_start_offset: int
    cut: int
    segments: int
    bytes: int
    #: groups below the cut, moved up to it
    groups_moved: tuple[GroupAt, ...]

    @property
    def messages(self) -> int:
        return self.cut - self.log_start_offset

    def describe(self) -> str:
        """``log start 0 → 48 (48 messages); 3 whole segment(s) deleted, 5.7 KiB; ...``"""
        text = (
            f"log start {self.log_start_offset:,} → {self.cut:,} ({self.messages:,} message(s)); "
            f"{self.segments} whole segment(s) deleted, {size(self.bytes)}"
        )
        if self.groups_moved:
            text += "; moved up: " + ", ".join(f"{g.group} (at {g.position:,})" for g in self.groups_moved)
        return text


@dataclass(frozen=True)
class PartitionFacts:
    partition: int
    log_start_offset: int
    next_offset: int
    segments: tuple[SegmentInfo, ...]
    groups: tuple[GroupAt, ...]

    @property
    def sealed(self) -> tuple[SegmentInfo, ...]:
        return tuple(s for s in self.segments if s.sealed)

    @property
    def bytes(self) -> int:
        return sum(s.size_bytes for s in self.segments)

    def label(self) -> str:
        """One line for a partition picker."""
        return (
            f"{self.partition}  ·  offsets {self.log_start_offset:,} to {self.next_offset:,}  ·  "
            f"{len(self.segments)} segment(s), {size(self.bytes)}"
        )

    def offset(self, text: str, what: str) -> int:
        """``text`` as an offset from the log start to the log end, as the engine's
        truncate and group move accept; ``what`` names the operation in the error."""
        text = text.strip().replace(",", "").replace("_", "")
        if not is_digits(text):
            raise InvalidInput(f"invalid offset {text!r}: a whole number is needed")
        offset = int(text)
        if not self.log_start_offset <= offset <= self.next_offset:
            raise InvalidInput(
                f"invalid offset {offset:,}: {what} to an offset from the log start "
                f"{self.log_start_offset:,} to the log end {self.next_offset:,}"
            )
        return offset

    def oldest_cut(self, text: str) -> int:
        """The log start after deleting the oldest ``text`` sealed segments, as
        :func:`engine.prune.operations.delete_oldest` would put it."""
        text = text.strip()
        if not is_digits(text) or int(text) < 1:
            raise InvalidInput(f"invalid segment count {text!r}: delete at least 1")
        count, sealed = int(text), self.sealed
        if count > len(sealed):
            raise InvalidInput(
                f"partition {self.partition} has {len(sealed)} sealed segment(s), fewer than {count} "
                "(the active segment is never deleted by this; purge rolls and deletes it)"
            )
        return sealed[count - 1].next_offset

    def cut_effect(self, cut: int) -> CutEffect:
        """What the engine's truncate to ``cut`` does: sealed segments wholly below it
        go, groups below it move up to it."""
        doomed = [s for s in self.sealed if s.next_offset <= cut]
        return CutEffect(
            self.log_start_offset,
            max(cut, self.log_start_offset),
            len(doomed),
            sum(s.size_bytes for s in doomed),
            tuple(g for g in self.groups if g.position < cut),
        )


@dataclass(frozen=True)
class TopicFacts:
    topic: str
    held: bool
    paused: bool
    partitions: tuple[PartitionFacts, ...]
    #: every group of the topic: name -> kind
    groups: dict[str, str]

    def partition(self, number: int) -> PartitionFacts:
        return next(p for p in self.partitions if p.partition == number)

    def group_positions(self, group: str) -> dict[int, int]:
        """partition -> ``group``'s position there."""
        return {p.partition: g.position for p in self.partitions for g in p.groups if g.group == group}

    def deletion_refused(self) -> str | None:
        """Why a deleting operation would be refused now (the engine's two guards)."""
        if self.held:
            return f"topic {self.topic} is on hold: release it first (h); nothing of it is deleted while held"
        if self.paused:
            return "deletion is paused, which stops manual deletion too: resume it first (z)"
        return None

    @property
    def segments(self) -> int:
        return sum(len(p.segments) for p in self.partitions)

    @property
    def bytes(self) -> int:
        return sum(p.bytes for p in self.partitions)


def load_topic_facts(broker: Broker, topic: str) -> TopicFacts:
    """Read ``topic``'s facts in one read transaction (a worker thread)."""
    catalog = broker.catalog
    with catalog.read():
        catalog.topic(topic)  # NotFound names the topic
        held = bool(broker.policy(topic)["hold"])
        paused = EngineState(catalog).is_paused()
        groups = catalog.groups(topic)
        partitions = tuple(
            PartitionFacts(
                row.partition,
                row.log_start_offset,
                row.next_offset,
                tuple(catalog.segments(topic, row.partition)),
                tuple(
                    GroupAt(g.name, g.kind, g.positions[row.partition][0])
                    for g in groups
                    if row.partition in g.positions
                ),
            )
            for row in catalog.partitions(topic)
        )
    return TopicFacts(topic, held, paused, partitions, {g.name: g.kind for g in groups})
