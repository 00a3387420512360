"""How fast each group reads in the forecast, per position row of the snapshot.

A group named ``--stalled`` reads nothing (``stalled``), nor does one that has not
committed within the rate window, or never since it was created (``idle``: its
creation stamps its commit time, yet reads nothing; a subscriber created ``--from
earliest`` whose consumer never came holds everything). Any other reads at the pace
observed from its commits (``observed``: from its reading anchor to its last commit,
engine/catalog/anchors.py), or as fast as records arrive (``keeps_up``: it keeps its
lag) with no anchor yet or at the log end: a group that has read everything read as
fast as records came, whatever its pace says.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa

from engine.catalog.catalog import Catalog

Source = Literal["observed", "keeps_up", "stalled", "idle"]
#: the sources whose group reads (and commits) in the future
READING: tuple[Source, ...] = ("observed", "keeps_up")

#: (topic, group, partition) -> offsets read per ms, as (offsets, per ms)
ObservedReads = Mapping[tuple[str, str, int], tuple[int, int]]


@dataclass(frozen=True)
class Reading:
    """How one group reads one partition; ``offsets`` per ``per_ms`` ms if observed."""

    group: str
    partition: int
    source: Source
    offsets: int = 0
    per_ms: int = 1
    #: no consumer has committed for the group since it was created (then it is
    #: ``idle``, or ``stalled`` where named so)
    never_committed: bool = False

    @property
    def records_per_second(self) -> float | None:
        return self.offsets * 1000 / self.per_ms if self.source == "observed" else None

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "partition": self.partition,
            "source": self.source,
            "records_per_second": self.records_per_second,
            "never_committed": self.never_committed,
        }


def observed_reads(catalog: Catalog, topics: Collection[str]) -> dict[tuple[str, str, int], tuple[int, int]]:
    """The observed pace of every position of ``topics`` with an anchor to measure from."""
    return {
        (topic, group, partition): (position - anchor_position, committed_at - anchor_at)
        for topic, group, partition, position, committed_at, anchor_position, anchor_at in catalog.reading_anchors(
            set(topics)
        )
        if committed_at > anchor_at and position >= anchor_position
    }


def readings(
    tables: Mapping[str, pa.Table],
    observed: ObservedReads,
    now: int,
    window_ms: int,
    stalled: Collection[str],
    never_committed: Collection[tuple[str, str]],
) -> list[Reading]:
    """How each row of a snapshot's positions (``tables``) reads from ``now`` on;
    ``never_committed``: the (topic, group) no consumer has committed for since it
    was created (:meth:`~engine.catalog.catalog.Catalog.never_committed`)."""
    partitions, positions = tables["partitions"], tables["positions"]
    ends = dict(
        zip(
            zip(partitions["topic"].to_pylist(), partitions["partition"].to_pylist()),
            partitions["next_offset"].to_pylist(),
        )
    )
    out = []
    for topic, group, partition, position, last in zip(
        *(positions[c].to_pylist() for c in ("topic", "group", "partition", "position", "group_last_commit"))
    ):
        pace = observed.get((topic, group, partition))
        never = (topic, group) in never_committed
        if group in stalled:
            out.append(Reading(group, partition, "stalled", never_committed=never))
        elif never or last < now - window_ms:
            # Its creation's commit time may be in the window, but no consumer reads
            # for it: kept up, a subscriber's barrier moved on with the ingest where
            # it holds every record.
            out.append(Reading(group, partition, "idle", never_committed=never))
        elif pace is not None and position < ends.get((topic, partition), position):
            out.append(Reading(group, partition, "observed", *pace))
        else:
            out.append(Reading(group, partition, "keeps_up"))
    return out


def by_topic(positions: pa.Table, readings_: Sequence[Reading]) -> dict[str, list[Reading]]:
    """``readings_`` (one per row of ``positions``) per topic, by group and partition."""
    out: dict[str, list[Reading]] = {}
    for topic, reading in zip(positions["topic"].to_pylist(), readings_):
        out.setdefault(topic, []).append(reading)
    return {topic: sorted(rs, key=lambda r: (r.group, r.partition)) for topic, rs in out.items()}
