"""The capacity forecast: every instant from now to the horizon, as a timeline of
every topic in one Spark job (engine/forecast/timeline.py); or asked by plans, a
virtual topic per topic and instant (engine/forecast/extend.py) planned by the
planner's own query in one Spark job per batch of topics (at most three more where a
backlog quota must be read as the cycles read it, engine/forecast/quotas.py), read
back per topic and instant (engine/forecast/summary.py). Here: what is asked
(:class:`Request`), the batches, and the disk budget's breach, which is over every
topic forecast.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from engine.catalog.catalog import Catalog
from engine.config import DEFAULT_CONFIG
from engine.errors import InvalidInput, InvalidPolicy
from engine.forecast import quotas
from engine.forecast.extend import Extension, extend
from engine.forecast.rates import Rate, given_rate, observed_rates, unobserved_record_bytes
from engine.forecast.reading import Reading, observed_reads, readings
from engine.forecast.result import Breach, Forecast, TopicForecast, many_points
from engine.forecast.summary import summarize
from engine.forecast.timeline import timeline
from engine.policy.effective import EffectivePolicy, resolve
from engine.prune.planner import Planner
from engine.prune.record_times import FirstRecord, RecordTimes, first_record
from engine.prune.snapshot import Snapshot, build_snapshot

#: more instants than this is a typo (a step of 1s over a week), not a forecast
MAX_INSTANTS = 5000

_Item = TypeVar("_Item")
_Result = TypeVar("_Result")


@dataclass(frozen=True)
class Request:
    """What to forecast: ``instants`` (the first is now), the rate window, an
    ingest rate that replaces the observed ones (bytes/s per partition), groups
    assumed stopped, the disk budget (bytes, over all topics forecast), and how often
    cycles run (``max_deletes_per_cycle`` is a cycle's limit: by an instant, as many
    cycles have run as prune intervals have passed, and one now); ``by_plans``: plan
    the virtual topic of every topic at every instant with the planner's own query
    (engine/forecast/extend.py), not the timeline (engine/forecast/timeline.py): the
    same forecast, slower, from the one statement of the rules the cycles run."""

    instants: list[int]
    window_ms: int
    rate: int | None = None
    stalled: frozenset[str] = frozenset()
    disk_budget: int | None = None
    prune_interval_ms: int = DEFAULT_CONFIG.prune_interval_ms
    by_plans: bool = False


def instants(now: int, horizon_ms: int, step_ms: int) -> list[int]:
    """``now``, ``now + step``, ... and ``now + horizon`` last (a shorter last step
    where the horizon is not a whole number of steps away: a breach between the last
    whole step and the horizon is within the horizon asked for)."""
    if step_ms <= 0 or horizon_ms < 0:
        raise InvalidInput("the step must be above 0 and the horizon at least 0")
    whole = horizon_ms // step_ms + 1
    count = whole + (horizon_ms % step_ms > 0)
    if count > MAX_INSTANTS:
        raise InvalidInput(f"{count} instants: at most {MAX_INSTANTS} (a longer --step or a shorter --horizon)")
    return [now + i * step_ms for i in range(whole)] + [now + horizon_ms] * (count - whole)


def forecast(
    planner: Planner,
    catalog: Catalog,
    records: RecordTimes,
    request: Request,
    *,
    defaults: Mapping[str, str],
    topics: Sequence[str] | None = None,
    overrides: Mapping[str, Mapping[str, str]] | None = None,
    progress: Callable[[int, int], None] | None = None,
    tag: str | None = None,
) -> Forecast:
    """Forecast ``topics`` (all if None) of ``catalog``; ``overrides`` as in
    :func:`~engine.prune.snapshot.build_snapshot` (a what-if over time).

    The topics are planned in batches of about :data:`MAX_VIRTUAL_ROWS` virtual
    segments at most, one Spark job each, every instant of a topic in one job but
    for a topic larger than that (:func:`batches`).
    ``progress(done, batches)`` is called after each batch: a large catalog's
    forecast takes minutes (README, "The capacity forecast"); what it raises stops
    the forecast there. ``tag`` names the jobs, for ``Planner.cancel``."""
    now = request.instants[0]

    # A what-if is planned with the saved policy too, in the same job: virtual
    # topics of both, told apart by a label. Only the topics it changes: the others
    # (forecast beside them, a disk budget being over all) are the same under both.
    variants = [Variant.of(catalog, records, request, defaults, topics, "", overrides)]
    forecast_names = variants[0].snapshot.tables["topics"]["topic"].to_pylist()
    if overrides is not None:
        changed = [name for name in forecast_names if name in overrides]
        variants.append(Variant.of(catalog, records, request, defaults, changed, "saved:", None))
    observed = observed_reads(catalog, forecast_names)
    never_committed = catalog.never_committed(forecast_names)
    # Each variant's topics as a timeline, in one job; or asked by plans, their
    # virtual topics planned in batches by the planner's own query.
    timelines = [] if request.by_plans else variants
    for share in timelines:
        segments_by_the_horizon(share, request.instants)
    variants = variants if request.by_plans else [variant.of_topics([]) for variant in variants]
    Part = tuple[Extension, Snapshot, list[Rate], list[Reading]]
    Parts = list[Part | None]

    def extended(variant: Variant, topics: list[str], at: list[int], label: str) -> Part:
        snapshot, rates = variant.only(topics)
        reads = readings(snapshot.tables, observed, now, request.window_ms, request.stalled, never_committed)
        extension = extend(
            snapshot, at, rates, variant.segment_sizes, label=label,
            readings=reads, records=records, prune_interval_ms=request.prune_interval_ms,
        )  # fmt: skip
        return extension, snapshot, rates, reads

    def virtual(batch: Batch) -> Parts:
        """Each variant's virtual snapshot of ``batch`` (None: it has none of its topics)."""
        at = request.instants[batch.first : batch.stop]
        return [
            extended(variant, mine, at, variant.label) if (mine := variant.topics_of(batch)) else None
            for variant in variants
        ]

    def with_quotas_read(variant: Variant, part: Part) -> quotas.Part:
        def extend_at(topic: str, at: list[int], label: str) -> Extension:
            return extended(variant, [topic], at, label + variant.label)[0]

        return quotas.Part(part[0], extend_at)

    def summarize_part(part: Part, plan: Mapping[str, pa.Table], batch: Batch) -> Forecast:
        extension, snapshot, rates, reads = part
        with many_points():
            return summarize(
                extension, plan, snapshot, rates, reads, request.window_ms, carried=batch.first < batch.start
            )

    results: list[list[Forecast | None]] = []
    topic_batches = batches(variants[0], request.instants, variants[1:]) if variants[0].segment_sizes else []
    jobs = len(topic_batches) + sum(bool(share.segment_sizes) for share in timelines)
    for v, share in enumerate(timelines):
        if share.segment_sizes:
            tables_ = share.snapshot.tables
            reads = readings(tables_, observed, now, request.window_ms, request.stalled, never_committed)
            part = timeline(
                planner, share.snapshot, share.rates, reads, share.segment_sizes, request.instants,
                request.window_ms, prune_interval_ms=request.prune_interval_ms, records=records, tag=tag,
            )  # fmt: skip
            results.append([part if i == v else None for i in range(len(timelines))])
            if progress is not None:
                progress(len(results), jobs)
    # The next batch's virtual snapshot is built (numpy, in this process) while Spark
    # plans this one (in the JVM); the plans stay on the calling thread (Ctrl-C).
    for batch, parts in zip(topic_batches, _one_ahead(virtual, topic_batches)):
        present = [part for part in parts if part is not None]
        joined = {
            name: pa.concat_tables([extension.snapshot.tables[name] for extension, *_ in present])
            for name in present[0][0].snapshot.tables
        }
        # Deleted segments only: the kept ones' rows would be collected and split for
        # nothing (a quarter of the forecast's time at 100K segments).
        rejected = present[0][1].rejected
        plan = quotas.as_the_cycles_read(
            planner.plan(Snapshot(now, joined, rejected), tag=tag, every_segment=False).tables,
            [with_quotas_read(variant, part) for variant, part in zip(variants, parts) if part is not None],
            prune_interval_ms=request.prune_interval_ms, planner=planner, rejected=rejected, tag=tag,
        )  # fmt: skip
        results.append([None if part is None else summarize_part(part, plan, batch) for part in parts])
        if progress is not None:
            progress(len(results), jobs)
    orders = [forecast_names, *([changed] if overrides is not None else [])]
    result, *saved = (
        _merged([piece for r in results if (piece := r[v]) is not None], request, order)
        for v, order in enumerate(orders)
    )
    return replace(result, saved=saved[0].topics if saved else None, rejected=variants[0].snapshot.rejected)


def _one_ahead(work: Callable[[_Item], _Result], items: Sequence[_Item]) -> Iterator[_Result]:
    """``work`` of each of ``items`` in order, each computed in a thread while the
    caller still uses the one before.

    Daemon threads, not a pool: a caller stopped by Ctrl-C (``ebb forecast``) returns
    at once, where a pool's worker is joined, on leaving the pool and again at the
    interpreter's exit, until the batch it builds is done (minutes for a large
    catalog: Ctrl-C seemed ignored). The abandoned batch's thread dies with the
    process."""
    pending: deque[Future[_Result]] = deque()
    for item in items:
        pending.append(_in_daemon_thread(work, item))
        if len(pending) == 2:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def _in_daemon_thread(work: Callable[[_Item], _Result], item: _Item) -> Future[_Result]:
    future: Future[_Result] = Future()

    def run() -> None:
        future.set_running_or_notify_cancel()
        try:
            future.set_result(work(item))
        except BaseException as error:  # noqa: BLE001 - handed to the caller, as a pool does
            future.set_exception(error)

    threading.Thread(target=run, name="ebb-forecast", daemon=True).start()
    return future


#: virtual segment rows (segments x instants) one Spark job plans at most (about:
#: :func:`batches` estimates them): the rows are built in this process, about 0.3
#: KiB each, and the job of a 1M-segment catalog's 168 instants in one would need
#: tens of GiB
MAX_VIRTUAL_ROWS = 4_000_000
#: segments one topic may hold at one instant: its instants can be planned in runs,
#: never one instant in parts, so a topic over this is refused (taken apart from
#: :data:`MAX_VIRTUAL_ROWS`, which tests lower to make runs of single instants)
MAX_SEGMENTS_AT_AN_INSTANT = MAX_VIRTUAL_ROWS


@dataclass(frozen=True)
class Variant:
    """The catalog under one policy (the saved one, or a what-if's): its snapshot,
    rates and segment sizes."""

    label: str
    snapshot: Snapshot
    rates: list[Rate]
    segment_sizes: dict[str, int]

    @classmethod
    def of(
        cls,
        catalog: Catalog,
        records: RecordTimes,
        request: Request,
        defaults: Mapping[str, str],
        topics: Sequence[str] | None,
        label: str,
        overrides: Mapping[str, Mapping[str, str]] | None,
    ) -> Variant:
        now = request.instants[0]
        snapshot = build_snapshot(catalog, records, defaults=defaults, now=now, topics=topics, overrides=overrides)
        names = snapshot.tables["topics"]["topic"].to_pylist()
        sizes = {
            name: _segment_size(resolve((overrides or {}).get(name, catalog.overrides(name)), defaults))
            for name in names
        }
        return cls(label, snapshot, rates_for(snapshot, request, catalog, records, sizes), sizes)

    def of_topics(self, topics: list[str]) -> Variant:
        """This variant with only ``topics``."""
        snapshot, rates = self.only(topics)
        return replace(self, snapshot=snapshot, rates=rates, segment_sizes={t: self.segment_sizes[t] for t in topics})

    def topics_of(self, batch: Batch) -> list[str]:
        """The topics of ``batch`` this variant plans (a what-if's saved policy: the changed ones)."""
        return [name for name in batch.topics if name in self.segment_sizes]

    def only(self, topics: Sequence[str]) -> tuple[Snapshot, list[Rate]]:
        """The snapshot of ``topics`` alone, and the rates of its partitions."""
        keep = pa.array(topics, pa.string())
        tables_ = {name: t.filter(pc.is_in(t["topic"], value_set=keep)) for name, t in self.snapshot.tables.items()}
        wanted = set(topics)
        partitions = self.snapshot.tables["partitions"]["topic"].to_pylist()
        rates = [rate for rate, topic in zip(self.rates, partitions) if topic in wanted]
        return Snapshot(self.snapshot.now, tables_, self.snapshot.rejected), rates


@dataclass(frozen=True)
class Batch:
    """What one Spark job plans: ``topics``, at the request's instants ``[start, stop)``."""

    topics: list[str]
    start: int
    stop: int

    @property
    def first(self) -> int:
        """The first instant planned: a run of a topic's instants after its first
        begins with the last instant of the run before, to tell the segments that go
        after it (engine/forecast/summary.py counts each where it goes first)."""
        return max(0, self.start - 1)


def segments_by_the_horizon(variant: Variant, instants: Sequence[int]) -> dict[str, tuple[float, float]]:
    """Per topic of ``variant``, its segments today and about how many its ingest adds
    by the horizon. A topic that would hold more than
    :data:`MAX_SEGMENTS_AT_AN_INSTANT` then is refused: its segments would not fit in
    this process (a rate of 1 GiB/s over an hour took 21 GB, and the kernel killed it)."""
    tables_ = variant.snapshot.tables
    today = dict.fromkeys(tables_["topics"]["topic"].to_pylist(), 0.0)
    for count in pc.value_counts(tables_["segments"]["topic"]).to_pylist():
        today[count["values"]] += count["counts"]
    horizon_ms = instants[-1] - instants[0]
    added = dict.fromkeys(today, 0.0)
    roll = dict(zip(tables_["topics"]["topic"].to_pylist(), tables_["topics"]["segment_roll"].to_pylist()))
    for topic, rate in zip(tables_["partitions"]["topic"].to_pylist(), variant.rates):
        filled = rate.bytes_per_second * horizon_ms / 1000 / variant.segment_sizes[topic]
        # a roll ends a segment every segment_roll at most (one per record at least)
        rolled = (
            0.0
            if roll[topic] is None
            else min(rate.records * horizon_ms / rate.per_ms, horizon_ms / max(roll[topic], 1))
        )
        added[topic] += max(filled, rolled)
    for topic, count in added.items():
        if today[topic] + count > MAX_SEGMENTS_AT_AN_INSTANT:
            raise InvalidInput(
                f"topic {topic} would hold about {today[topic] + count:,.0f} segments by the horizon, more than "
                f"the {MAX_SEGMENTS_AT_AN_INSTANT:,} a forecast plans at one instant: a shorter --horizon, a lower "
                "--rate or a larger --segment-size"
            )
    return {topic: (today[topic], added[topic]) for topic in today}


def batches(variant: Variant, instants: Sequence[int], others: Sequence[Variant] = ()) -> list[Batch]:
    """The topics of ``variant`` in batches, in order, each of about
    :data:`MAX_VIRTUAL_ROWS` virtual segments at most over ``instants`` (and again
    for each of the ``others`` that holds the topic too): its segments today, plus
    the segments its ingest adds by the horizon, at each instant
    (:func:`segments_by_the_horizon`, which refuses a topic too large). A topic
    larger than that alone is planned over runs of its instants, a batch each (the
    rows of one job are built in this process: a topic of 1M segments over a week in
    one would need tens of GiB)."""
    result: list[Batch] = []
    size = 0.0
    whole = len(instants)
    for topic, (today, added) in segments_by_the_horizon(variant, instants).items():
        count = today + added / 2  # on average over instants
        cost = (count + 1) * whole * (1 + sum(topic in other.segment_sizes for other in others))
        if cost > MAX_VIRTUAL_ROWS:
            runs = min(whole, math.ceil(cost / MAX_VIRTUAL_ROWS))
            length = math.ceil(whole / runs)
            result += [Batch([topic], start, min(start + length, whole)) for start in range(0, whole, length)]
            size = cost  # over the limit: the next topic begins a batch
        elif result and size + cost <= MAX_VIRTUAL_ROWS:
            result[-1].topics.append(topic)
            size += cost
        else:
            result.append(Batch([topic], 0, whole))
            size = cost
    return result


def _merged(parts: Sequence[Forecast], request: Request, order: Sequence[str]) -> Forecast:
    """One forecast of the topics of ``parts`` (batches of one request), in
    ``order``, with the disk budget's breach over all of them."""
    instants = list(request.instants)
    place = {name: i for i, name in enumerate(order)}
    topics = sorted(_joined(parts), key=lambda topic: place[topic.topic])
    merged = Forecast(instants[0], instants, request.window_ms, topics, None, None)
    if request.disk_budget is None:
        return merged
    over = (at for at, held in zip(instants, merged.bytes_on_disk()) if held > request.disk_budget)
    breach = next((Breach("disk_budget", at, request.disk_budget) for at in over), None)
    return replace(merged, disk_budget=request.disk_budget, disk_breach=breach)


def _joined(parts: Sequence[Forecast]) -> list[TopicForecast]:
    """The topics of ``parts``, in order, each once: a topic planned over runs of its
    instants (:func:`batches`) has a part per run, in instant order, whose points are
    joined and whose first breach of each kind is the earliest run's."""
    pieces: dict[str, list[TopicForecast]] = {}
    for part in parts:
        for topic in part.topics:
            pieces.setdefault(topic.topic, []).append(topic)
    joined = []
    for first, *rest in pieces.values():
        if rest:
            breaches: dict[str, Breach] = {}
            for piece in (first, *rest):
                for breach in piece.breaches:
                    breaches.setdefault(breach.kind, breach)
            points = list(first.points)
            for piece in rest:
                # each run counts the bytes deleted by reason from its own first instant
                before = points[-1].deleted_by_reason
                points += [
                    replace(point, deleted_by_reason=_summed(before, point.deleted_by_reason)) for point in piece.points
                ]
            first = replace(first, points=points, breaches=sorted(breaches.values(), key=lambda b: b.at))
        joined.append(first)
    return joined


def _summed(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    return {key: a.get(key, 0) + b.get(key, 0) for key in sorted({*a, *b})}


def _segment_size(policy: EffectivePolicy) -> int:
    size = policy["segment_size"]
    if not isinstance(size, int):  # the policy rules make it a finite size
        raise InvalidPolicy(f"segment_size must be a finite size, got {size!r}")
    return size


def rates_for(
    snapshot: Snapshot, request: Request, catalog: Catalog, records: RecordTimes, segment_sizes: Mapping[str, int]
) -> list[Rate]:
    """The rate of each partition of ``snapshot``: observed, or ``request.rate`` (in
    records of a size that fits ``segment_sizes``, per topic, where none is observed)."""
    tables_ = snapshot.tables

    def first(topic: str, partition: int, log_start: int, theta: int) -> FirstRecord | None:
        return first_record(catalog, records, topic, partition, log_start, theta)

    observed = observed_rates(tables_["segments"], tables_["partitions"], snapshot.now, request.window_ms, first)
    if request.rate is None:
        return observed
    topics = tables_["partitions"]["topic"].to_pylist()
    of_topic: dict[str, list[Rate]] = {}
    for topic, rate in zip(topics, observed):
        of_topic.setdefault(topic, []).append(rate)
    unobserved = {topic: unobserved_record_bytes(rates, segment_sizes[topic]) for topic, rates in of_topic.items()}
    return [given_rate(request.rate, rate, unobserved[topic]) for topic, rate in zip(topics, observed)]
