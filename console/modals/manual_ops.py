"""Truncate (``T``) and purge (``D``): the deleting manual operations of SPEC §5.

Both run the engine's own operations (:mod:`engine.prune.operations`, actor
``console``) through :meth:`~console.app.EbbApp.perform`, so the console refuses what
the CLI refuses, in the same words: a held topic, paused deletion, an offset outside
the log. The dialogs refuse the first two up front and check values as they are
typed; both go ahead only once the topic's name is typed (:class:`ConfirmScreen`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from rich.console import RenderableType
from rich.text import Text

from console import format
from console.modals.confirm import ConfirmScreen
from console.modals.facts_loader import FactsLoader
from console.modals.target_form import Mode, TargetDialog
from console.model.topic_facts import CutEffect, PartitionFacts, TopicFacts
from engine.broker import Broker
from engine.clock import parse_instant
from engine.prune.operations import DeletionResult, delete_oldest, purge, truncate

#: who the journal says did it
ACTOR = "console"


@dataclass(frozen=True)
class TruncateRequest:
    """One valid truncate: exactly one of an offset, a time and a segment count."""

    topic: str
    partition: int
    before_offset: int | None = None
    before_time: int | None = None
    oldest_segments: int | None = None
    #: what it does, known beforehand for an offset or a count (a time is resolved
    #: against the records when it runs)
    effect: CutEffect | None = None

    @property
    def where(self) -> str:
        return f"{self.topic}/{self.partition}"

    def run(self, broker: Broker) -> DeletionResult:
        if self.oldest_segments is not None:
            return delete_oldest(broker, self.topic, self.partition, self.oldest_segments, actor=ACTOR)
        return truncate(
            broker,
            self.topic,
            self.partition,
            before_offset=self.before_offset,
            before_time=self.before_time,
            actor=ACTOR,
        )

    def describe(self) -> str:
        if self.oldest_segments is not None:
            what = f"Delete the oldest {self.oldest_segments} sealed segment(s) of {self.where}"
        elif self.before_offset is not None:
            what = f"Truncate {self.where} below offset {self.before_offset:,}"
        else:
            return (
                f"Truncate {self.where} before {format.instant(self.before_time)} UTC: every record up to "
                "the first one at or after that time (found when it runs) is deleted"
            )
        assert self.effect is not None
        return f"{what}: {self.effect.describe()}"


def describe_deletion(result: DeletionResult) -> str:
    """One line for the notification of a truncate, delete-oldest or purge."""
    where = result.topic if result.operation == "purge" else f"{result.topic}/{result.partitions[0].partition}"
    verb = {"truncate": "truncate", "delete_oldest": "delete oldest", "purge": "purge"}[result.operation]
    if not result.changed:
        return f"{verb} {where}: nothing to delete"
    text = (
        f"{verb} {where}: deleted {result.segments_deleted} segment(s), {format.size(result.bytes_freed)}, "
        f"{result.messages:,} message(s) (cycle {result.cycle_id})"
    )
    moved = sorted({g.group for g in result.groups_moved})
    return text + (f"; moved {', '.join(moved)}" if moved else "")


class TruncateScreen(TargetDialog[TruncateRequest]):
    """Truncate one partition before an offset, before a time, or by its oldest
    segments; see the module docstring."""

    MODES = (Mode("offset", "before offset"), Mode("time", "before time"), Mode("oldest", "oldest segments"))
    MODE_LABEL = "Delete"
    VERB = "Truncate…"

    def heading(self) -> str:
        return f"Truncate {self.topic}"

    def intro(self) -> RenderableType:
        return Text(
            "Delete every record of one partition below a point (DELETE_MANUAL): sealed segments wholly "
            "below it go, groups below it move up to it. Confirmed by typing the topic's name."
        )

    def placeholder(self, mode: str, partition: PartitionFacts) -> str | None:
        if mode == "offset":
            return f"an offset from {partition.log_start_offset:,} to {partition.next_offset:,}"
        if mode == "time":
            return "ISO 8601 (2026-11-21T10:00:00Z) or epoch milliseconds"
        return f"how many of the {len(partition.sealed)} sealed segment(s), oldest first"

    def refusal(self, facts: TopicFacts) -> str | None:
        return facts.deletion_refused()

    def check(self, partition: PartitionFacts, mode: str, text: str) -> TruncateRequest:
        number = partition.partition
        if mode == "offset":
            offset = partition.offset(text, "truncate")
            return TruncateRequest(self.topic, number, before_offset=offset, effect=partition.cut_effect(offset))
        if mode == "time":
            return TruncateRequest(self.topic, number, before_time=parse_instant(text))
        cut = partition.oldest_cut(text)
        return TruncateRequest(self.topic, number, oldest_segments=int(text.strip()), effect=partition.cut_effect(cut))

    def describe(self, request: TruncateRequest) -> RenderableType:
        return request.describe()

    def submit(self, request: TruncateRequest) -> None:
        confirm = ConfirmScreen(f"Truncate {request.where}", request.describe(), self.topic, verb="Truncate")
        self.app.push_screen(confirm, partial(self._confirmed, request))

    def _confirmed(self, request: TruncateRequest, confirmed: bool | None) -> None:
        if confirmed:
            self.app.perform(f"Truncate {request.where}", request.run, describe_deletion)
            self.dismiss()


def purge_text(facts: TopicFacts) -> Text:
    """What a purge of the topic deletes, from its facts."""
    groups = sorted({g.group for p in facts.partitions for g in p.groups})
    text = Text.assemble(
        "Deletes every record of ",
        (facts.topic, "bold"),
        f": {len(facts.partitions)} partition(s), {facts.segments} segment(s), {format.size(facts.bytes)}. "
        "Each active segment is rolled and deleted too; the log start moves to the log end and offsets go "
        "on from there (never reused).",
    )
    if groups:
        text.append(f" Groups moved to the end: {', '.join(groups)}.")
    return text


class PurgeScreen(FactsLoader, ConfirmScreen):
    """Purge a whole topic; see the module docstring."""

    def __init__(self, topic: str) -> None:
        super().__init__(f"Purge {topic}", "loading…", topic, verb="Purge")
        self.topic = topic

    def on_mount(self) -> None:
        self.load_facts()

    def show_facts(self, facts: TopicFacts) -> None:
        self.set_body(purge_text(facts))
        refused = facts.deletion_refused()
        if refused is not None:
            self.refuse(refused)

    def show_load_error(self, error: str) -> None:
        self.refuse(error)

    def confirmed(self) -> None:
        topic = self.topic
        self.app.perform(f"Purge {topic}", lambda broker: purge(broker, topic, actor=ACTOR), describe_deletion)
        self.dismiss(True)
