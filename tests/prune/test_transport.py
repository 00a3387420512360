"""How the snapshot reaches Spark (engine/prune/transport.py): chosen per session, the
same plan whichever way, and configured by ``[spark] transport`` and ``scratch``.

Spark that cannot read the scratch directory is made here with a ``mock://`` scratch
location: pyarrow writes it (in memory), the local session has no filesystem of that
name. A real server that cannot see the data directory is in test_prune_elsewhere.py.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from engine.broker import Broker
from engine.config import load_config
from engine.errors import InvalidInput
from engine.prune import planner as planner_module
from engine.prune.planner import Planner
from engine.prune.record_times import StoreRecordTimes
from engine.prune.session import SparkEngine
from engine.prune.snapshot import Snapshot, build_snapshot
from engine.prune.transport import Scratch
from tests.support.seed_scenarios import MIN, T0, write

NOW = T0 + 2 * 60 * MIN


@pytest.fixture
def snapshot(broker: Broker) -> Snapshot:
    broker.create_topic("t", 2, {"segment_size": "1000", "retention_time": "1h", "consumption": "protect"})
    for partition in range(2):
        write(broker, "t", [T0 + i * MIN for i in range(30 + 10 * partition)], partition=partition)
    broker.create_group("t", "g", "subscriber", "earliest")
    broker.commit("t", "g", 1, 15, at_ms=T0)
    return build_snapshot(broker.catalog, StoreRecordTimes(broker.data), defaults={}, now=NOW)


def _sorted_tables(planner: Planner, snapshot: Snapshot) -> dict[str, list[dict]]:
    plan = planner.plan(snapshot)
    return {name: sorted(table.to_pylist(), key=repr) for name, table in plan.tables.items()}


def test_a_local_master_reads_the_local_scratch_directory_without_asking(
    spark_engine: SparkEngine, snapshot: Snapshot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def never(*_: object) -> str:
        raise AssertionError("a local master sharing a local directory is not probed")

    monkeypatch.setattr(planner_module, "unreadable_by", never)
    planner = Planner(spark_engine, tmp_path / "scratch")
    assert planner.chosen is None
    planner.plan(snapshot)
    assert planner.chosen == "files"
    assert list((tmp_path / "scratch").iterdir()) == [], "the plan's files outlive it"


def test_spark_that_cannot_read_the_scratch_location_gets_arrow_and_the_same_plan(
    spark_engine: SparkEngine, snapshot: Snapshot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probes: list[str | None] = []
    probe = planner_module.unreadable_by

    def counted(spark: object, scratch: Scratch) -> str | None:
        probes.append(probe(spark, scratch))
        return probes[-1]

    monkeypatch.setattr(planner_module, "unreadable_by", counted)
    unreadable = Planner(spark_engine, Scratch.of_uri("mock:///ebb-scratch"))
    expected = _sorted_tables(Planner(spark_engine, tmp_path / "scratch", "files"), snapshot)

    assert _sorted_tables(unreadable, snapshot) == expected
    assert unreadable.chosen == "arrow"
    assert _sorted_tables(unreadable, snapshot) == expected
    assert len(probes) == 1 and probes[0], "asked once per session, with the reason Spark gave"
    assert (
        "snapshot transport for local[2]: arrow (Spark cannot read mock:///ebb-scratch"
        in spark_engine.log_file.read_text()
    )


def test_a_shared_location_spark_reads_gets_files(
    spark_engine: SparkEngine, snapshot: Snapshot, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    planner = Planner(spark_engine, Scratch.of_uri(shared.as_uri()))
    expected = _sorted_tables(Planner(spark_engine, tmp_path / "scratch", "arrow"), snapshot)

    assert _sorted_tables(planner, snapshot) == expected
    assert planner.chosen == "files"
    assert list(shared.iterdir()) == [], "the probe's and the plan's files outlive them"


def test_the_config_names_the_transport_and_the_scratch_location(tmp_path: Path) -> None:
    config = tmp_path / "ebb.toml"
    config.write_text('[spark]\ntransport = "arrow"\nscratch = "file:///srv/ebb-scratch"\n')
    loaded = load_config(config)
    assert (loaded.spark_transport, loaded.spark_scratch) == ("arrow", "file:///srv/ebb-scratch")
    assert (load_config(tmp_path / "none.toml").spark_transport, load_config(tmp_path / "none.toml").spark_scratch) == (
        "auto",
        None,
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('transport = "parquet"', 'transport must be "auto", "files" or "arrow"'),
        ('scratch = "/srv/ebb"', "scratch must be a URI"),
        ("scratch = 3", "scratch must be a URI"),
    ],
)
def test_a_bad_transport_or_scratch_location_is_refused(tmp_path: Path, line: str, message: str) -> None:
    config = tmp_path / "ebb.toml"
    config.write_text(f"[spark]\n{line}\n")
    with pytest.raises(InvalidInput, match=message):
        load_config(config)


def test_a_scratch_uri_pyarrow_cannot_open_is_one_error_line() -> None:
    with pytest.raises(InvalidInput, match=r"^\[spark\] scratch 'nope://x': .*nope"):
        Scratch.of_uri("nope://x")


@pytest.mark.parametrize("transport", ["files", "arrow"])
def test_a_query_over_a_partitions_rows_reads_them_in_offset_order(
    spark_engine: SparkEngine, tmp_path: Path, transport: str
) -> None:
    """Planner.query_partitions (the forecast's timeline): a running maximum per
    partition in offset order, the rows sent either way."""
    rows = pa.table({"pid": [0, 0, 0, 1, 1, 2], "base_offset": [0, 5, 9, 0, 3, 0], "value": [3, 1, 4, 1, 5, 9]})
    text = """SELECT pid, base_offset, max(value) OVER (PARTITION BY pid ORDER BY base_offset
      ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS running FROM {rows}"""
    got = Planner(spark_engine, tmp_path / "scratch", transport).query_partitions(text, rows).to_pylist()
    assert sorted((r["pid"], r["base_offset"], r["running"]) for r in got) == [
        (0, 0, 3), (0, 5, 3), (0, 9, 4), (1, 0, 1), (1, 3, 5), (2, 0, 9),
    ]  # fmt: skip
    assert list((tmp_path / "scratch").glob("*")) == [], "no files outlive the query"
