"""Backlog quotas as the cycles read them.

A virtual topic (engine/forecast/extend.py) is planned as if no cycle ran between now
and its instant. That holds for what goes (every rule only deletes more as time
passes) but not for what a backlog quota reads. Each cycle moves a group the log start
passed up to it (docs/RETENTION.md), and the next cycle reads the group's backlog from
there, before its own deletions. A group that does not read (stalled, idle) on a topic
whose retention passes it would otherwise be read from today's log start: over a quota
the cycles never find it over.

So where the plan of an instant finds a group over a quota below the log start that
instant leaves, its quotas are read again with every position below the log start the
cycle before leaves (the last one before the instant: one runs now, then one every
prune interval) moved up to it. That log start lies between an earlier instant's and
the instant's own (a log start only moves up), and a backlog only shrinks as its
group moves up; so a first plan moves the groups up to the instant's own log start,
and an instant whose verdicts stay the same there has them wherever the cycle before
left its groups. Only the others need the cycle before's log start: from an earlier
instant where that settles it (the instant of that cycle, or one whose log starts the
instant's equal), else from a plan at that cycle; then, unless it is the instant's
own, a plan with the groups moved up to it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.forecast.extend import Extension, last_cycle
from engine.prune.planner import Planner
from engine.prune.snapshot import Snapshot

#: (topic, instants, label) -> the virtual snapshot of the topic at those instants
ExtendAt = Callable[[str, list[int], str], Extension]

#: virtual topic -> partition -> log start
_Starts = dict[str, dict[int, int]]


@dataclass(frozen=True)
class Part:
    """One variant's share of a job (engine/forecast/forecast.py): its extension, and
    how to extend its topics to other instants."""

    extension: Extension
    extend_at: ExtendAt


def as_the_cycles_read(
    plan: Mapping[str, pa.Table],
    parts: Sequence[Part],
    *,
    prune_interval_ms: int,
    planner: Planner,
    rejected: dict[str, str],
    tag: str | None,
) -> Mapping[str, pa.Table]:
    """``plan`` (of the parts' extensions, in one job) with the quota verdicts of the
    virtual topics whose over-quota groups a cycle before would have moved up, as the
    cycles read them (the module's docstring says how); at most three more Spark jobs."""
    starts = _log_starts(plan["partitions"])
    passed = _passed_over(plan["groups"], starts)
    #: virtual topic -> (part, topic, instant, cycle before)
    located: dict[str, tuple[int, int, int, int]] = {}
    now = parts[0].extension.snapshot.now  # one job: one snapshot instant
    for k, part in enumerate(parts):
        extension = part.extension
        width = len(extension.topics)
        for v, name in enumerate(extension.names):
            i, t = divmod(v, width)
            cycle = last_cycle(extension.instants[i] - now, prune_interval_ms, now)
            # at now, the groups are where the catalog has them
            if name in passed and cycle is not None:
                located[name] = (k, t, i, cycle)
    if not located:
        return plan
    own = {name: _starts_of(parts[k].extension, t, i, starts) for name, (k, t, i, _) in located.items()}
    bounded = planner.plan(Snapshot(now, _moved_up(parts, own), rejected), tag=tag, every_segment=False).tables
    moved, unmoved = _verdicts(bounded["groups"]), _verdicts(plan["groups"])
    before: dict[str, dict[int, int]] = {}  # virtual topic -> partition -> the cycle before's log start
    unsettled: list[tuple[int, str, int, str]] = []  # (part, topic, cycle, virtual topic)
    for name, (k, t, i, cycle) in located.items():
        if moved.get(name) == unmoved.get(name):
            continue
        extension = parts[k].extension
        settled = _settled_by_an_instant(extension, t, i, cycle, starts, own[name])
        if settled is None:
            unsettled.append((k, extension.topics[t], cycle, name))
        else:
            before[name] = settled
    before.update(_planned_at_cycles(parts, unsettled, planner, rejected, tag))
    as_bounded = {name for name, found in before.items() if found == own[name]}
    result = _replaced(plan, bounded, as_bounded)
    others = {name: found for name, found in before.items() if name not in as_bounded}
    if not others:
        return result
    replanned = planner.plan(Snapshot(now, _moved_up(parts, others), rejected), tag=tag, every_segment=False).tables
    return _replaced(result, replanned, others)


def _verdicts(groups: pa.Table) -> dict[str, frozenset[tuple[str, int, bool, bool]]]:
    """Virtual topic -> its groups over a quota: (group, partition, over backlog_size,
    over backlog_age). The topic's quota state follows from them."""
    over = groups.filter(groups["over_quota"])
    found: dict[str, set[tuple[str, int, bool, bool]]] = {}
    columns = ("topic", "group", "partition", "over_backlog_size", "over_backlog_age")
    for topic, group, partition, size, age in zip(*(over[c].to_pylist() for c in columns)):
        found.setdefault(topic, set()).add((group, partition, size, age))
    return {topic: frozenset(verdicts) for topic, verdicts in found.items()}


def _replaced(
    plan: Mapping[str, pa.Table], source: Mapping[str, pa.Table], topics: Collection[str]
) -> dict[str, pa.Table]:
    """``plan`` with the groups and quota state of ``topics`` taken from ``source``."""
    names = pa.array(sorted(topics), pa.string())
    out = dict(plan)
    for table in ("groups", "topics"):
        kept = plan[table].filter(pc.invert(pc.is_in(plan[table]["topic"], value_set=names)))
        taken = source[table].filter(pc.is_in(source[table]["topic"], value_set=names))
        out[table] = pa.concat_tables([kept, taken.cast(kept.schema)])
    return out


def _log_starts(partitions: pa.Table) -> _Starts:
    """The log starts a plan leaves, from its partitions."""
    starts: _Starts = {}
    for topic, partition, start in zip(
        *(partitions[c].to_pylist() for c in ("topic", "partition", "new_log_start_offset"))
    ):
        starts.setdefault(topic, {})[partition] = start
    return starts


def _passed_over(groups: pa.Table, starts: _Starts) -> set[str]:
    """The virtual topics with a group over a quota below the log start the plan
    leaves: the cycles before may have moved it up (a group at or above it is where a
    cycle before would leave it)."""
    over = groups.filter(groups["over_quota"])
    return {
        topic
        for topic, partition, position in zip(*(over[c].to_pylist() for c in ("topic", "partition", "position")))
        if position < starts[topic][partition]
    }


def _starts_of(extension: Extension, t: int, i: int, starts: _Starts) -> dict[int, int]:
    """Partition -> the log start the plan of topic ``t`` at instant ``i`` leaves."""
    return starts[extension.names[i * len(extension.topics) + t]]


def _settled_by_an_instant(
    extension: Extension, t: int, i: int, cycle: int, starts: _Starts, own: Mapping[int, int]
) -> dict[int, int] | None:
    """The log starts the cycle at ``cycle`` leaves in topic ``t`` of ``extension``
    (before instant ``i``, which leaves ``own``), where an instant planned with it
    settles them: that of the cycle, or the latest before it whose log starts are
    ``own``; else None."""
    earlier = [j for j in range(i) if extension.instants[j] <= cycle]
    if not earlier:
        return None
    found = _starts_of(extension, t, earlier[-1], starts)
    if extension.instants[earlier[-1]] == cycle or found == own:
        return found
    return None


def _planned_at_cycles(
    parts: Sequence[Part],
    unsettled: Sequence[tuple[int, str, int, str]],
    planner: Planner,
    rejected: dict[str, str],
    tag: str | None,
) -> dict[str, dict[int, int]]:
    """The log starts of each of ``unsettled``'s topics (of ``parts[k]``) at its cycle,
    planned in one job, a topic extended once to all its cycles: virtual topic ->
    partition -> log start."""
    cycles: dict[tuple[int, str], list[int]] = {}  # (part's index, topic) -> its cycles
    for k, topic, cycle, _ in unsettled:
        cycles.setdefault((k, topic), []).append(cycle)
    extensions = {
        key: parts[key[0]].extend_at(key[1], sorted(set(at)), f"cycle{k}:")
        for k, (key, at) in enumerate(cycles.items())
    }
    if not extensions:
        return {}
    tables = [extension.snapshot.tables for extension in extensions.values()]
    joined = {name: pa.concat_tables([t[name] for t in tables]) for name in tables[0]}
    now = next(iter(extensions.values())).snapshot.now
    starts = _log_starts(
        planner.plan(Snapshot(now, joined, rejected), tag=tag, every_segment=False).tables["partitions"]
    )
    found = {}
    for k, topic, cycle, name in unsettled:
        extension = extensions[(k, topic)]
        found[name] = _starts_of(extension, 0, extension.instants.index(cycle), starts)
    return found


def _moved_up(parts: Sequence[Part], floors: Mapping[str, Mapping[int, int]]) -> dict[str, pa.Table]:
    """The virtual topics of ``floors`` (of the parts' extensions) with each group
    position below its partition's floor moved up to it, for their quota verdicts.

    The floor is also the partition's log start, and the sealed segments wholly below
    it are left out: a verdict reads the log from each group's position on (the bytes
    after it, and time cuts as offsets), and every position is at the floor or above
    (docs/RETENTION.md, "Per topic, before the cut"). What the plan deletes there is
    not read."""
    names = pa.array(sorted(floors), pa.string())
    tables = {
        name: pa.concat_tables(
            [
                table.filter(pc.is_in(table["topic"], value_set=names))
                for table in (part.extension.snapshot.tables[name] for part in parts)
            ]
        )
        for name in parts[0].extension.snapshot.tables
    }

    by_name = np.zeros((len(names), 1 + max(p for floor in floors.values() for p in floor)), dtype=np.int64)
    for row, name in enumerate(names.to_pylist()):
        for partition, floor in floors[name].items():
            by_name[row, partition] = floor

    def floor_of(table: pa.Table) -> np.ndarray:
        rows = pc.index_in(table["topic"], value_set=names).to_numpy()
        return by_name[rows, table["partition"].to_numpy()]

    def raised(table: pa.Table, column: str) -> pa.Table:
        field = table.schema.get_field_index(column)
        return table.set_column(field, column, pa.array(np.maximum(table[column].to_numpy(), floor_of(table))))

    segments = tables["segments"]
    above = pc.or_(pc.greater(segments["next_offset"], pa.array(floor_of(segments))), pc.invert(segments["sealed"]))
    return {
        **tables,
        "positions": raised(tables["positions"], "position"),
        "partitions": raised(tables["partitions"], "log_start_offset"),
        "segments": segments.filter(above),
    }
