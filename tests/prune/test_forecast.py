"""The forecast on Spark agrees with its reference model (tests/reference/forecast.py)
on random catalogs, at every instant: the catalog extended record by record to the
instant and planned there by :func:`reference.model.plan`."""

from __future__ import annotations

import dataclasses
import tempfile
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from unittest import mock

import pyarrow as pa
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from engine.catalog.catalog import Catalog
from engine.forecast import forecast as forecasting
from engine.forecast.extend import extend, virtual_name
from engine.forecast.forecast import Request, forecast, rates_for
from engine.forecast.rates import Rate
from engine.forecast.reading import observed_reads, readings
from engine.forecast.result import Point
from engine.prune import tables
from engine.prune.planner import Planner
from engine.prune.session import SparkEngine
from engine.prune.snapshot import Snapshot, build_snapshot
from tests.reference import forecast as reference
from tests.reference import model
from tests.reference.catalog import FakeRecordTimes, RefCatalog, load_into_catalog
from tests.reference.strategies import catalogs

#: synthetic records over all partitions at the last instant: the model appends and
#: scans them one by one
MAX_SYNTHETIC = 300


def _as_model(point: Point) -> dict:
    return {
        "at": point.at,
        "bytes": point.bytes,
        "segments": point.segments,
        "partitions": [(p.partition, p.bytes, p.segments, p.log_start) for p in point.partitions],
        "bytes_deleted": point.bytes_deleted,
        "segments_deleted": point.segments_deleted,
        "deleted_by_reason": point.deleted_by_reason,
        "quota_exceeded": point.quota_exceeded,
        "over_quota": point.over_quota,
    }


@dataclass(frozen=True)
class _Asked:
    """What a forecast of the tests asks: ``batched``, asked by plans, each topic
    planned at each instant in a Spark job of its own, as a topic too large for one
    job is planned (forecast.batches), its instants' points and breaches joined."""

    window: int
    step: int
    count: int
    rate: int | None
    stall: bool
    batched: bool
    budget: int | None
    interval: int


_asks = st.builds(
    _Asked,
    window=st.one_of(st.integers(0, 400), st.just(10_000)),
    step=st.integers(1, 80),
    count=st.integers(1, 4),
    rate=st.one_of(st.none(), st.integers(0, 20_000)),
    stall=st.booleans(),
    batched=st.booleans(),
    budget=st.one_of(st.none(), st.integers(0, 50_000)),
    interval=st.integers(1, 200),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(generated=catalogs(), asked=_asks)
def test_forecast_agrees_with_the_reference_model(
    spark_engine: SparkEngine, generated: RefCatalog, asked: _Asked
) -> None:
    """The forecast (engine/forecast/timeline.py, one job) agrees with the model; asked
    by plans (the planner's own query over virtual topics, in batches), it is the
    same, breaches too, which the model does not give."""
    window, step, count, rate = asked.window, asked.step, asked.count, asked.rate
    stall, batched, budget, interval = asked.stall, asked.batched, asked.budget, asked.interval
    now = generated.now
    instants = [now + i * step for i in range(count)]
    rates = reference.rates(generated, window, rate)
    assume(sum(r.arrived(instants[-1] - now) for r in rates.values()) <= MAX_SYNTHETIC)
    names = sorted({g.name for t in generated.topics for g in t.groups})
    stalled = frozenset(names[:1]) if stall else frozenset()
    with tempfile.TemporaryDirectory() as tmp:
        catalog = Catalog.open(Path(tmp) / "catalog.db")
        try:
            loaded = load_into_catalog(generated, catalog)
            progress: list[tuple[int, int]] = []
            by_plans: list[tuple[int, int]] = []
            planner, records = Planner(spark_engine, Path(tmp) / "scratch"), FakeRecordTimes(generated)
            request = Request(instants, window, rate, stalled, budget, interval)
            got = forecast(
                planner, catalog, records, request, defaults=generated.defaults,
                progress=lambda done, of: progress.append((done, of)),
            )  # fmt: skip
            with mock.patch.object(forecasting, "MAX_VIRTUAL_ROWS", 1 if batched else forecasting.MAX_VIRTUAL_ROWS):
                assert (
                    forecast(
                        planner,
                        catalog,
                        records,
                        dataclasses.replace(request, by_plans=True),
                        defaults=generated.defaults,
                        progress=lambda done, of: by_plans.append((done, of)),
                    )  # fmt: skip
                    == got
                )
        finally:
            catalog.close()
    expected = reference.forecast(loaded, instants, window, prune_interval=interval, given=rate, stalled=stalled)

    assert got.instants == instants
    assert [t.topic for t in got.topics] == sorted(expected)
    # One job for every topic; by plans, their virtual topics in one batch, or
    # (MAX_VIRTUAL_ROWS of 1) a batch per topic and instant.
    assert progress == [(1, 1)]
    jobs = len(generated.topics) * count if batched else 1
    assert by_plans == [(done, jobs) for done in range(1, jobs + 1)]
    assert {
        (topic.topic, r.group, r.partition): (
            r.source,
            Fraction(r.offsets, r.per_ms) if r.source == "observed" else None,
        )
        for topic in got.topics
        for r in topic.readings
    } == reference.reads(loaded, window, stalled)
    for topic in got.topics:
        for partition, used in topic.rates.items():
            want = rates[(topic.topic, partition)]
            assert (used.records * want.per_ms, used.record_bytes, used.batch, used.header_run, used.lead) == (
                want.records * used.per_ms,
                want.record_bytes,
                want.batch,
                want.header_run,
                want.lead,
            )
        for i, point in enumerate(topic.points):
            assert _as_model(point) == expected[topic.topic][i], f"{topic.topic} at instant {i}"
    totals = [sum(points[i]["bytes"] for points in expected.values()) for i in range(count)]
    over = [at for at, total in zip(instants, totals) if budget is not None and total > budget]
    assert (got.disk_breach and got.disk_breach.at) == (over[0] if over else None)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    generated=catalogs(),
    window=st.one_of(st.integers(0, 400), st.just(10_000)),
    step=st.integers(1, 80),
    rate=st.one_of(st.none(), st.integers(0, 20_000)),
    interval=st.integers(1, 200),
)
def test_the_extended_snapshot_is_the_models_catalog_at_each_instant(
    generated: RefCatalog, window: int, step: int, rate: int | None, interval: int
) -> None:
    """Without Spark: the virtual topics hold the model's extended partitions (their
    timestamps shifted back by the instant's distance from now), positions (read as
    fast as records arrive, or at a pace observed from random anchors) and time
    cuts, and a deletion limit for the cycles run by then."""
    now = generated.now
    instants = [now, now + step, now + 3 * step]
    rates = reference.rates(generated, window, rate)
    assume(sum(r.arrived(instants[-1] - now) for r in rates.values()) <= MAX_SYNTHETIC)
    records = FakeRecordTimes(generated)
    with tempfile.TemporaryDirectory() as tmp:
        catalog = Catalog.open(Path(tmp) / "catalog.db")
        try:
            loaded = load_into_catalog(generated, catalog)
            snapshot = build_snapshot(catalog, records, defaults=generated.defaults, now=now)
            request = Request(instants, window, rate)
            names = [t.name for t in generated.topics]
            observed, never_committed = observed_reads(catalog, names), catalog.never_committed(names)
            sizes = {t.name: t.policy.segment_size for t in generated.topics}
            extension = extend(
                snapshot, instants, rates_for(snapshot, request, catalog, records, sizes), sizes,
                readings=readings(snapshot.tables, observed, now, window, frozenset(), never_committed),
                prune_interval_ms=interval,
                records=records,
            )  # fmt: skip
        finally:
            catalog.close()
    tables_ = {name: table.to_pylist() for name, table in extension.snapshot.tables.items()}
    for i, at in enumerate(instants):
        shift = at - now
        future = reference.extended(loaded, at, rates, window, frozenset(), interval)
        for topic in future.topics:
            name = virtual_name(i, topic.name)
            (limit,) = [t["max_deletes_per_cycle"] for t in tables_["topics"] if t["topic"] == name]
            assert limit == topic.policy.max_deletes_per_cycle
            segments = [
                (s["partition"], s["base_offset"], s["next_offset"], s["size_bytes"], s["sealed"],
                 None if s["first_timestamp"] is None else s["first_timestamp"] + shift,
                 None if s["max_timestamp"] is None else s["max_timestamp"] + shift)
                for s in tables_["segments"] if s["topic"] == name
            ]  # fmt: skip
            assert segments == [
                (p.index, s.base, s.next, s.size, s.sealed, s.first_ts, s.max_ts)
                for p in topic.partitions
                for s in p.segments
            ], f"{topic.name} at instant {i}"
            ends = {r["partition"]: r["next_offset"] for r in tables_["partitions"] if r["topic"] == name}
            assert ends == {p.index: p.next_offset for p in topic.partitions}
            positions = sorted(
                (r["group"], r["partition"], r["position"], r["committed_at"] + shift)
                for r in tables_["positions"] if r["topic"] == name
            )  # fmt: skip
            assert positions == sorted(
                (g.name, p.partition, p.position, p.committed_at) for g in topic.groups for p in g.positions
            )
            limits = {"retention": topic.policy.retention_time, "max_time": topic.policy.max_time,
                      "ttl": topic.policy.message_ttl, "backlog_age": topic.policy.backlog_age}  # fmt: skip
            by_partition = {p.index: p for p in topic.partitions}
            for r in tables_["time_cuts"]:
                if r["topic"] == name:
                    theta = at - limits[r["kind"]]
                    assert r["offset"] == model.time_cut(by_partition[r["partition"]], theta), (topic.name, i, r)


def test_a_caller_that_stops_never_waits_for_the_batch_being_built() -> None:
    """Ctrl-C during `ebb forecast` leaves the batch loop while the next batch's virtual
    snapshot is still being built; leaving must not wait for that build (a pool's
    worker was joined until it ended: minutes on a large catalog, Ctrl-C seemed
    ignored), and the builder must not hold the process open (a daemon thread)."""
    import threading

    release = threading.Event()

    def build(item: int) -> int:
        if item == 1:
            release.wait()  # the next batch: slow until the test ends
        return item

    batches = forecasting._one_ahead(build, [0, 1])
    assert next(batches) == 0
    closer = threading.Thread(target=batches.close)  # as a KeyboardInterrupt leaves it
    closer.start()
    closer.join(timeout=60)
    try:
        assert not closer.is_alive(), "leaving the batch loop waited for the batch being built"
        builders = [t for t in threading.enumerate() if t.name == "ebb-forecast"]
        assert builders and all(t.daemon for t in builders)
    finally:
        release.set()


def test_an_error_building_a_batch_reaches_the_caller() -> None:
    def build(item: int) -> int:
        if item == 1:
            raise ValueError("no batch")
        return item

    batches = forecasting._one_ahead(build, [0, 1, 2])
    assert next(batches) == 0
    try:
        next(batches)
    except ValueError as error:
        assert str(error) == "no batch"
    else:
        raise AssertionError("the error was lost")


def _rolled_and_filled(now: int) -> tuple[Snapshot, Rate]:
    """Topics ``rolled`` (segment_roll a minute) and ``filled`` (no roll), a partition
    each and no segments yet, and a record of 100 bytes a second for each."""
    topics = pa.Table.from_pylist(
        [{"topic": "rolled", "segment_roll": 60_000}, {"topic": "filled", "segment_roll": None}],
        schema=tables.TOPICS,
    )
    partitions = pa.Table.from_pylist(
        [{"topic": t, "partition": 0} for t in ("rolled", "filled")], schema=tables.PARTITIONS
    )
    empty = {name: schema.empty_table() for name, schema in tables.SNAPSHOT_TABLES.items()}
    return Snapshot(now, {**empty, "topics": topics, "partitions": partitions}, {}), Rate(1, 1000, 100, "given")


#: a week hourly; the virtual segments of rolled and filled over it: today's none, and
#: the ingest's (segments of 1 MiB: a week fills 58 of them; rolled every minute, 10,080)
WEEK, ROLLED, FILLED = 169, 169 * (5_040 + 1), 169 * (58 // 2 + 1)


def _topics(batches: list[forecasting.Batch]) -> list[list[str]]:
    """The topics of each of ``batches``, which hold every instant."""
    assert all((batch.start, batch.stop) == (0, WEEK) for batch in batches)
    return [batch.topics for batch in batches]


def test_a_rolling_topic_is_batched_by_the_segments_its_roll_makes() -> None:
    """A record of 100 bytes a second into segments of 1 MiB: a week fills 58 of them;
    rolled every minute it makes 10,080 (5,040 on average over the instants).
    Counted by segment_size alone, a batch held about 170 times the virtual segments
    MAX_VIRTUAL_ROWS allows it."""
    now, hour = 1_700_000_000_000, 3_600_000
    snapshot, rate = _rolled_and_filled(now)
    variant = forecasting.Variant("", snapshot, [rate, rate], dict.fromkeys(["rolled", "filled"], 1 << 20))
    instants = [now + i * hour for i in range(WEEK)]
    with mock.patch.object(forecasting, "MAX_VIRTUAL_ROWS", ROLLED + FILLED - WEEK):
        assert _topics(forecasting.batches(variant, instants)) == [["rolled"], ["filled"]]
    with mock.patch.object(forecasting, "MAX_VIRTUAL_ROWS", ROLLED + FILLED + WEEK):
        assert _topics(forecasting.batches(variant, instants)) == [["rolled", "filled"]]


def test_a_topic_a_what_if_changes_costs_its_batch_twice() -> None:
    """A what-if plans the topics it changes under the saved policy too, in the same
    job: their virtual segments count twice toward a batch, the others' once."""
    now, hour = 1_700_000_000_000, 3_600_000
    snapshot, rate = _rolled_and_filled(now)
    variant = forecasting.Variant("", snapshot, [rate, rate], dict.fromkeys(["rolled", "filled"], 1 << 20))
    saved = forecasting.Variant("saved:", snapshot, [rate], {"rolled": 1 << 20})  # only rolled is changed
    instants = [now + i * hour for i in range(WEEK)]
    with mock.patch.object(forecasting, "MAX_VIRTUAL_ROWS", 2 * ROLLED + FILLED - WEEK):
        assert _topics(forecasting.batches(variant, instants, [saved])) == [["rolled"], ["filled"]]
    with mock.patch.object(forecasting, "MAX_VIRTUAL_ROWS", 2 * ROLLED + FILLED + WEEK):
        assert _topics(forecasting.batches(variant, instants, [saved])) == [["rolled", "filled"]]


def test_a_topic_larger_than_a_batch_is_planned_over_runs_of_its_instants() -> None:
    """A topic whose virtual segments over the week exceed MAX_VIRTUAL_ROWS is planned
    over runs of its instants, in order, each within the limit (about: the segments
    per instant are an average); the topic after it begins a batch of its own."""
    now, hour = 1_700_000_000_000, 3_600_000
    snapshot, rate = _rolled_and_filled(now)
    variant = forecasting.Variant("", snapshot, [rate, rate], dict.fromkeys(["rolled", "filled"], 1 << 20))
    instants = [now + i * hour for i in range(WEEK)]
    with mock.patch.object(forecasting, "MAX_VIRTUAL_ROWS", ROLLED // 3):
        got = forecasting.batches(variant, instants)
    runs = [(b.start, b.stop) for b in got if b.topics == ["rolled"]]
    assert runs[0][0] == 0 and runs[-1][1] == WEEK and len(runs) in (3, 4)
    assert all(stop == start for (_, stop), (start, _) in zip(runs, runs[1:]))
    assert all((stop - start) * (ROLLED // WEEK) <= ROLLED // 3 for start, stop in runs)
    assert got[len(runs) :] == [forecasting.Batch(["filled"], 0, WEEK)]
