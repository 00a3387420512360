"""The Spark planner agrees with the reference model (docs/RETENTION.md) on random
catalogs: every plan table, row by row.

Each example writes a random catalog into a fresh SQLite catalog, snapshots it with
record timestamps from the in-memory catalog, plans it on Spark, and compares with
:func:`reference.model.plan` on the same catalog. Some examples shuffle the
snapshot's segments first: the planner must not depend on the order the snapshot
reads them in (it reads them in offset order).

The same test runs on each way the snapshot reaches Spark (engine/prune/transport.py):
files in a local directory, files at a ``file://`` URI (as a shared scratch location is
written, through pyarrow.fs), Arrow through a local session, and Arrow through a Spark
Connect client (fewer examples: each round trip is slower).
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.catalog.catalog import Catalog
from engine.prune import tables
from engine.prune.planner import Planner
from engine.prune.session import SparkEngine
from engine.prune.snapshot import Snapshot, build_snapshot
from engine.prune.transport import Scratch
from tests.reference import model
from tests.reference.catalog import FakeRecordTimes, RefCatalog, load_into_catalog
from tests.reference.strategies import catalogs

#: key columns of each plan table: rows are compared in this order
KEYS = {
    "segments": ("topic", "partition", "base_offset"),
    "partitions": ("topic", "partition"),
    "groups": ("topic", "group", "partition"),
    "topics": ("topic",),
}


def _sorted(rows: list[dict], keys: tuple[str, ...]) -> list[dict]:
    return sorted(rows, key=lambda r: tuple(r[k] for k in keys))


def _compare(name: str, got: list[dict], want: list[dict]) -> None:
    keys = KEYS[name]
    got, want = _sorted(got, keys), _sorted(want, keys)
    got_keys = [tuple(r[k] for k in keys) for r in got]
    want_keys = [tuple(r[k] for k in keys) for r in want]
    assert got_keys == want_keys, f"{name}: planner rows {got_keys} != model rows {want_keys}"
    for g, w in zip(got, want):
        if g != w:
            differ = {c: (g[c], w[c]) for c in w if g.get(c) != w[c]}
            raise AssertionError(
                f"{name} row {tuple(w[k] for k in keys)}: (planner, model) differ in {differ}\n"
                f"planner: {g}\nmodel:   {w}"
            )


_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large]
_EXAMPLES = st.one_of(st.none(), st.randoms(use_true_random=False))


def _local(tmp: Path) -> Scratch:
    return Scratch.local(tmp / "scratch")


@settings(max_examples=60, deadline=None, suppress_health_check=_HEALTH)
@given(generated=catalogs(), shuffled=_EXAMPLES)
def test_planner_agrees_with_the_reference_model(
    spark_engine: SparkEngine, generated: RefCatalog, shuffled: random.Random | None
) -> None:
    _agrees_with_the_model(spark_engine, "files", _local, generated, shuffled)


#: the other transports of a local session: transport, and the scratch directory of
#: a temporary directory
OTHER_TRANSPORTS: dict[str, tuple[str, Callable[[Path], Scratch]]] = {
    "files at a URI": ("files", lambda tmp: Scratch.of_uri((tmp / "shared").as_uri())),
    "arrow": ("arrow", _local),
}


@pytest.mark.parametrize("transport", OTHER_TRANSPORTS)
@settings(max_examples=25, deadline=None, suppress_health_check=_HEALTH)
@given(generated=catalogs(), shuffled=_EXAMPLES)
def test_planner_agrees_with_the_reference_model_on_each_transport(
    spark_engine: SparkEngine, transport: str, generated: RefCatalog, shuffled: random.Random | None
) -> None:
    mode, scratch = OTHER_TRANSPORTS[transport]
    _agrees_with_the_model(spark_engine, mode, scratch, generated, shuffled)


@settings(max_examples=30, deadline=None, suppress_health_check=_HEALTH)
@given(generated=catalogs(), shuffled=_EXAMPLES)
def test_a_cycles_plan_holds_the_models_deletions_and_every_other_row(
    spark_engine: SparkEngine, generated: RefCatalog, shuffled: random.Random | None
) -> None:
    _agrees_with_the_model(spark_engine, "files", _local, generated, shuffled, every_segment=False)


@settings(max_examples=12, deadline=None, suppress_health_check=_HEALTH)
@given(generated=catalogs(), shuffled=_EXAMPLES)
def test_planner_through_spark_connect_agrees_with_the_reference_model(
    spark_connect_engine: SparkEngine, generated: RefCatalog, shuffled: random.Random | None
) -> None:
    _agrees_with_the_model(spark_connect_engine, "arrow", _local, generated, shuffled)


def _agrees_with_the_model(
    engine: SparkEngine,
    transport: str,
    scratch: Callable[[Path], Scratch],
    generated: RefCatalog,
    shuffled: random.Random | None,
    *,
    every_segment: bool = True,
) -> None:
    """Without ``every_segment`` (a cycle's plan), the segments table must hold
    exactly the model's deleted segments."""
    # a fresh catalog and scratch directory per example: hypothesis reuses fixtures
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        catalog = Catalog.open(tmp / "catalog.db")
        try:
            loaded = load_into_catalog(generated, catalog)
            snapshot = build_snapshot(
                catalog, FakeRecordTimes(generated), defaults=generated.defaults, now=generated.now
            )
        finally:
            catalog.close()
        assert snapshot.rejected == {}
        if shuffled is not None:
            snapshot = _with_segments_shuffled(snapshot, shuffled)
        planner = Planner(engine, scratch(tmp), transport)
        plan = planner.plan(snapshot, every_segment=every_segment)
        assert planner.chosen == transport
        assert not list(tmp.glob("*/snapshot-*")), "a plan's input files outlive it"

    assert plan.now == generated.now
    assert plan.every_segment == every_segment
    assert set(plan.tables) == set(tables.PLAN_TABLES)
    expected = model.plan(loaded, generated.now)
    for name, schema in tables.PLAN_TABLES.items():
        table = plan.tables[name]
        assert [(f.name, f.type) for f in table.schema] == [(f.name, f.type) for f in schema], name
        want = expected[name]
        if name == "segments" and not every_segment:
            want = [row for row in want if row["decision"] == "delete"]
        _compare(name, table.to_pylist(), want)


def _with_segments_shuffled(snapshot: Snapshot, rng: random.Random) -> Snapshot:
    segments = snapshot.tables["segments"]
    order = list(range(segments.num_rows))
    rng.shuffle(order)
    return replace(snapshot, tables={**snapshot.tables, "segments": segments.take(pa.array(order, pa.int64()))})
