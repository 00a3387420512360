"""What a plan asks the executor to change, as small immutable objects: the
executor's input, made from a plan by :mod:`engine.prune.plan_work` or by a manual
operation (engine/prune/operations.py), which needs no Arrow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

MoveAction = Literal["ttl_advance", "backlog_eviction", "reader_moved", "subscriber_overrun", "manual_move"]
#: the journal actions that move a group's position
MOVE_ACTIONS: tuple[MoveAction, ...] = get_args(MoveAction)


@dataclass(frozen=True)
class SegmentDeletion:
    base_offset: int
    next_offset: int
    size_bytes: int
    #: the plan's reason code, e.g. DELETE_TIME
    reason: str


@dataclass(frozen=True)
class Skip:
    """One cause of a group's move, journaled as one action."""

    action: MoveAction
    messages: int


@dataclass(frozen=True)
class GroupMove:
    """A group's position on one partition moves from ``old_position`` (as planned
    from) to ``new_position``, for the causes in ``skips`` (in the order they apply)."""

    group: str
    kind: str
    partition: int
    old_position: int
    new_position: int
    skips: tuple[Skip, ...]


@dataclass(frozen=True)
class PartitionWork:
    topic: str
    partition: int
    log_start_offset: int
    new_log_start_offset: int
    #: oldest first
    deletions: tuple[SegmentDeletion, ...]
    moves: tuple[GroupMove, ...]
    roll: bool


@dataclass(frozen=True)
class ExpiredGroup:
    group: str
    kind: str


@dataclass(frozen=True)
class TopicWork:
    topic: str
    #: the topic's policy version the plan was made with (0: no change ever)
    policy_version: int
    quota_exceeded: bool
    expired_groups: tuple[ExpiredGroup, ...]
    #: partitions with something to change, in partition order
    partitions: tuple[PartitionWork, ...]

    @property
    def deletions(self) -> int:
        return sum(len(p.deletions) for p in self.partitions)
