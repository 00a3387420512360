"""Expire a group and move its position: the group operations of SPEC §5, opened by
``E`` and ``m`` (:mod:`console.screens.group_actions`).

Both run :func:`engine.prune.operations.expire_group` / ``move_group`` (actor
``console``, journaled as ``group_expired`` / ``manual_move``) through
:meth:`~console.app.EbbApp.perform`. Expiring removes the group and its positions for
good, so it is confirmed by typing the group's name; a move can be undone by another
move (while the data is still there) and goes ahead from its own dialog once the
target is valid, showing how many messages the group would skip or read again.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Literal

from rich.console import RenderableType
from rich.text import Text

from console import format
from console.modals.ask import AskScreen
from console.modals.confirm import ConfirmScreen
from console.modals.facts_loader import FactsLoader
from console.modals.target_form import Mode, TargetDialog
from console.model.topic_facts import PartitionFacts, TopicFacts
from engine.broker import Broker
from engine.clock import parse_instant
from engine.prune.operations import GroupResult, expire_group, move_group

#: who the journal says did it
ACTOR = "console"


def _missing(facts: TopicFacts, group: str) -> str | None:
    if group not in facts.groups:
        return f"group {group!r} does not exist on topic {facts.topic!r} (expired or deleted since?)"
    return None


# -- expire ---------------------------------------------------------------------------------


def describe_expiry(result: GroupResult) -> str:
    return f"expired {result.kind} group {result.group} of {result.topic}"


def expiry_text(facts: TopicFacts, group: str) -> Text:
    positions = facts.group_positions(group)
    where = ", ".join(f"{p}: {pos:,}" for p, pos in sorted(positions.items())) or "none"
    return Text.assemble(
        "Removes the ",
        (f"{facts.groups[group]} group {group}", "bold"),
        f" of {facts.topic} now, as "
        f"subscription_expiry would (journaled as group_expired, with its positions: {where}). "
        "From then on it holds no data back.",
    )


class GroupExpireScreen(FactsLoader, ConfirmScreen):
    """Expire one group, confirmed by typing its name."""

    def __init__(self, topic: str, group: str) -> None:
        super().__init__(f"Expire group {group} of {topic}", "loading…", group, verb="Expire")
        self.topic = topic
        self.group = group

    def on_mount(self) -> None:
        self.load_facts()

    def show_facts(self, facts: TopicFacts) -> None:
        missing = _missing(facts, self.group)
        if missing is not None:
            self.refuse(missing)
        else:
            self.set_body(expiry_text(facts, self.group))

    def show_load_error(self, error: str) -> None:
        self.refuse(error)

    def confirmed(self) -> None:
        topic, group = self.topic, self.group
        self.app.perform(
            f"Expire group {group}",
            lambda broker: expire_group(broker, topic, group, actor=ACTOR),
            describe_expiry,
        )
        self.dismiss(True)


# -- move -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MoveRequest:
    """One valid move: exactly one of an offset, a time, earliest or latest."""

    topic: str
    group: str
    partition: int
    #: where the group is now
    position: int
    to_offset: int | None = None
    to_time: int | None = None
    to: Literal["earliest", "latest"] | None = None
    #: where it lands, known beforehand unless given by a time
    new_position: int | None = None

    def run(self, broker: Broker) -> GroupResult:
        return move_group(
            broker,
            self.topic,
            self.group,
            self.partition,
            to_offset=self.to_offset,
            to_time=self.to_time,
            to=self.to,
            actor=ACTOR,
        )

    def describe(self) -> str:
        start = f"{self.group} on {self.topic}/{self.partition} from {self.position:,}"
        if self.new_position is None:
            return (
                f"Moves {start} to the first record at or after {format.instant(self.to_time)} UTC "
                "(found when it runs; the log end if there is none)"
            )
        steps = self.new_position - self.position
        if steps > 0:
            effect = f"forward {steps:,} message(s), which it will not read"
        elif steps < 0:
            effect = f"back {-steps:,} message(s), which it will read again"
        else:
            effect = "nowhere: it is there already"
        return f"Moves {start} to {self.new_position:,}: {effect}"


def describe_move(result: GroupResult) -> str:
    ((partition, (old, new)),) = result.positions.items()
    direction = "forward" if new > old else "back" if new < old else "nowhere"
    return (
        f"moved group {result.group} on {result.topic}/{partition} from {old:,} to {new:,} "
        f"({direction}, {abs(new - old):,} record(s))"
    )


class GroupMoveScreen(TargetDialog[MoveRequest]):
    """Move one group's position on one partition, forwards or back."""

    MODES = (Mode("offset", "offset"), Mode("earliest", "earliest"), Mode("latest", "latest"), Mode("time", "time"))
    MODE_LABEL = "Move to"
    VERB = "Move"

    def __init__(self, topic: str, group: str) -> None:
        super().__init__(topic)
        self.group = group

    def heading(self) -> str:
        return f"Move group {self.group} of {self.topic}"

    def intro(self) -> RenderableType:
        return Text(
            "Set the group's position on one partition, forwards (it skips what it has not read) or back "
            "(it reads again), within the data still there: from the log start to the log end."
        )

    def position(self, partition: PartitionFacts) -> int:
        """Where the group is on ``partition`` (the log start when it has no position
        there, as the engine takes it)."""
        assert self.facts is not None
        return self.facts.group_positions(self.group).get(partition.partition, partition.log_start_offset)

    def partition_label(self, partition: PartitionFacts) -> str:
        offsets = f"offsets {partition.log_start_offset:,} to {partition.next_offset:,}"
        return f"{partition.partition}  ·  at {self.position(partition):,}  ·  {offsets}"

    def placeholder(self, mode: str, partition: PartitionFacts) -> str | None:
        if mode == "offset":
            return f"an offset from {partition.log_start_offset:,} to {partition.next_offset:,}"
        if mode == "time":
            return "ISO 8601 (2026-11-21T10:00:00Z) or epoch milliseconds"
        return None

    def refusal(self, facts: TopicFacts) -> str | None:
        return _missing(facts, self.group)

    def check(self, partition: PartitionFacts, mode: str, text: str) -> MoveRequest:
        request = partial(MoveRequest, self.topic, self.group, partition.partition, self.position(partition))
        if mode == "offset":
            offset = partition.offset(text, "move the group")
            return request(to_offset=offset, new_position=offset)
        if mode == "time":
            return request(to_time=parse_instant(text))
        if mode == "earliest":
            return request(to="earliest", new_position=partition.log_start_offset)
        return request(to="latest", new_position=partition.next_offset)

    def describe(self, request: MoveRequest) -> RenderableType:
        return request.describe()

    def submit(self, request: MoveRequest) -> None:
        """Asks ``y`` first, over this dialog (``n`` returns to it): a move forward
        skips messages the group has not read."""

        def answered(yes: bool | None) -> None:
            if yes:
                self.app.perform(f"Move group {request.group}", request.run, describe_move)
                self.dismiss()

        self.app.push_screen(AskScreen(f"Move group {request.group}?", request.describe()), answered)
