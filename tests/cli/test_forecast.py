"""``ebb forecast`` against an independent hand computation: topics with a steady,
known ingest (one record a minute, each its own batch of the same size) and a time
and size policy; the first breach and the bytes on disk must be within one step of
what arithmetic on the ingest says. Also: the what-if over time equals plans run
at those instants with the policy changed, and bad input is one error line."""

from __future__ import annotations

import io
import json
import shutil
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from unittest import mock

import pytest

from console.cli.forecast import render
from console.cli.main import main
from engine.broker import Broker
from engine.forecast import forecast as forecasting
from engine.forecast.forecast import Request, forecast, instants
from engine.forecast.result import Forecast
from engine.policy.units import parse_duration, parse_size
from engine.prune.pruner import Pruner
from engine.prune.record_times import StoreRecordTimes
from engine.prune.session import SparkEngine
from engine.store.batch import NewRecord

NOW = 1_800_000_000_000
MINUTE = 60_000
RECORDS = 120  # one a minute for the last two hours
SEGMENT = 2000
CAP = 20_000


def _new_data_dir(data_dir: Path, engine: str = "") -> None:
    """An empty data directory whose writes are not fsynced, with more ``[engine]``
    settings if given."""
    data_dir.mkdir(parents=True)
    (data_dir / "ebb.toml").write_text('[engine]\nfsync = "never"\n' + engine)


@pytest.fixture
def steady(data_dir: Path) -> int:
    """Topics ``capped`` (retention_time 4h, max_partition_size CAP) and ``timed``
    (retention_time 1h, backlog_size 6000 and a subscriber that keeps up), each with
    a record a minute until NOW; returns a record's bytes on disk."""
    _new_data_dir(data_dir)
    with Broker(data_dir, clock=lambda: NOW) as broker:
        broker.create_topic(
            "capped", 1, {"segment_size": str(SEGMENT), "retention_time": "4h", "max_partition_size": str(CAP)}
        )
        broker.create_topic("timed", 1, {"segment_size": str(SEGMENT), "retention_time": "1h", "backlog_size": "6000"})
        for topic in ("capped", "timed"):
            for k in range(RECORDS):
                broker.produce(topic, [NewRecord(b"v" * 100, timestamp=NOW - (RECORDS - k) * MINUTE)], partition=0)
        broker.create_group("timed", "reader")
        broker.commit("timed", "reader", 0, RECORDS - 2, at_ms=NOW - MINUTE)
        sizes = [p.size_bytes for p in broker.describe("capped").partitions]
    assert sizes[0] % RECORDS == 0, "every record is a batch of the same size"
    return sizes[0] // RECORDS


def _forecast(ebb, *args: str) -> dict:
    result = ebb("forecast", "--now", str(NOW), "--json", *args)
    assert result.code == 0, result.err
    return json.loads(result.out)


def test_first_breach_and_bytes_on_disk_match_a_hand_computation(steady: int, shared_spark: SparkEngine, ebb) -> None:
    record, step = steady, 10 * MINUTE
    out = _forecast(ebb, "--horizon", "4h", "--step", "10m", "--disk-budget", "30000")
    topics = {t["topic"]: t for t in out["topics"]}
    assert out["instants"][0] == NOW and len(out["instants"]) == 25
    for topic in topics.values():
        (rate,) = topic["rates"]
        assert rate["source"] == "observed" and rate["record_bytes"] == record
        assert rate["records_per_second"] == pytest.approx(1 / 60)

    def written(at: int) -> int:  # bytes ever written by ``at``
        return (RECORDS + (at - NOW) // MINUTE) * record

    # capped: nothing is older than 4h within the horizon, so the cap decides: it is
    # first exceeded when more than CAP bytes have been written.
    capped = topics["capped"]
    breach = next(b for b in capped["breaches"] if b["kind"] == "max_partition_size")
    by_hand = NOW + ((CAP // record + 1) - RECORDS) * MINUTE
    assert breach["limit"] == CAP and abs(breach["at"] - by_hand) <= step
    for point in capped["points"]:
        expected = min(written(point["at"]), CAP)
        assert abs(point["bytes"] - expected) <= SEGMENT + step // MINUTE * record, point
    # timed: an hour of records stays (the subscriber keeps up: no backlog)
    timed = topics["timed"]
    assert timed["breaches"] == []
    assert [r["source"] for r in timed["readings"]] == ["keeps_up"]  # one commit: no pace observed yet
    for point in timed["points"]:
        assert abs(point["bytes"] - 60 * record) <= SEGMENT + step // MINUTE * record, point
        assert set(point["deleted_by_reason"]) <= {"DELETE_TIME"}
    # the two together: the first instant above 30000 bytes
    together = [sum(topics[t]["points"][i]["bytes"] for t in topics) for i in range(len(out["instants"]))]
    first = next(i for i, total in enumerate(together) if total > 30000)
    assert out["disk_breach"]["at"] == out["instants"][first]


def test_a_stalled_subscriber_breaches_its_backlog_quota(steady: int, shared_spark: SparkEngine, ebb) -> None:
    out = _forecast(ebb, "timed", "--horizon", "2h", "--step", "10m", "--stalled", "reader")
    (breach,) = out["topics"][0]["breaches"]
    assert out["topics"][0]["readings"] == [
        {"group": "reader", "partition": 0, "source": "stalled", "records_per_second": None, "never_committed": False}
    ]
    # 6000 bytes of backlog behind position RECORDS - 2: about 6000 / record records later
    by_hand = NOW + (6000 // steady - 2) * MINUTE
    assert breach["kind"] == "backlog_quota" and breach["group"] == "reader"
    assert (breach["quota"], breach["limit"]) == ("backlog_size", 6000)
    assert abs(breach["at"] - by_hand) <= 10 * MINUTE + SEGMENT // steady * MINUTE


def test_a_backlog_breach_names_the_quota_exceeded(steady: int, shared_spark: SparkEngine, ebb) -> None:
    """Under an age quota alone, the stalled reader's oldest unread record (two minutes
    old now) is older than 30 minutes from 28 minutes on: the first step after is the
    breach, and it names backlog_age and its limit, where it said null."""
    args = ("timed", "--horizon", "1h", "--step", "10m", "--stalled", "reader")
    out = _forecast(ebb, *args, "--backlog-size", "none", "--backlog-age", "30m")
    (breach,) = out["topics"][0]["breaches"]
    assert (breach["kind"], breach["quota"], breach["limit"]) == ("backlog_quota", "backlog_age", 30 * MINUTE)
    assert breach["at"] == NOW + 30 * MINUTE
    text = ebb("forecast", "--now", str(NOW), *args, "--backlog-size", "none", "--backlog-age", "30m").out
    assert "first breach: backlog_quota backlog_age (30m) at" in text


#: where the slow subscriber is now: 10 records behind the end
BEHIND = 10


@pytest.fixture
def slow(data_dir: Path) -> int:
    """Topics ``sized`` (backlog_size 40 records, segment_size 200: a segment a record) and ``aged``
    (backlog_age 40m), each with a record a minute until NOW and a subscriber that
    has read one every two minutes over the last 20 minutes, committing each time:
    half the ingest. Returns a record's bytes on disk."""
    _new_data_dir(data_dir)
    with Broker(data_dir, clock=lambda: NOW) as broker:
        broker.create_topic("sized", 1, {"segment_size": "200", "retention_time": "1d"})
        broker.create_topic("aged", 1, {"segment_size": str(SEGMENT), "backlog_age": "40m", "retention_time": "1d"})
        for topic in ("sized", "aged"):
            for k in range(RECORDS):
                broker.produce(topic, [NewRecord(b"v" * 100, timestamp=NOW - (RECORDS - k) * MINUTE)], partition=0)
            broker.create_group(topic, "sub")
            for k in range(10, -1, -1):
                broker.commit(topic, "sub", 0, RECORDS - BEHIND - k, at_ms=NOW - 2 * k * MINUTE)
        record = broker.describe("sized").partitions[0].size_bytes // RECORDS
        broker.alter_topic("sized", {"backlog_size": str(40 * record)})
    return record


@pytest.mark.parametrize(
    ("topic", "behind"),
    [
        # A segment a record: the backlog is the records from the position to the
        # end, over 40 records once the subscriber is 41 behind.
        ("sized", 41),
        # The oldest unread record is as many minutes old as records behind (a
        # record a minute): over 40m once it is past 40 behind.
        ("aged", 40),
    ],
)
def test_a_subscriber_reading_at_half_the_ingest_breaches_its_backlog_quota(
    slow: int, shared_spark: SparkEngine, ebb, topic: str, behind: int
) -> None:
    step = 10 * MINUTE
    out = _forecast(ebb, topic, "--horizon", "3h", "--step", "10m")
    (forecast,) = out["topics"]
    (reading,) = forecast["readings"]
    assert reading["source"] == "observed" and reading["records_per_second"] == pytest.approx(1 / 120)
    # By t, t/1min records arrived and the subscriber read t/2min of them: it falls
    # behind by a record every two minutes.
    by_hand = NOW + 2 * (behind - BEHIND) * MINUTE
    (breach,) = forecast["breaches"]
    assert breach["kind"] == "backlog_quota" and breach["group"] == "sub"
    assert abs(breach["at"] - by_hand) <= step
    text = _text(ebb, topic)
    assert "group sub on partition 0: reads 0.00833 records/s (observed from its commits)" in text


def _text(ebb, *args: str) -> str:
    result = ebb("forecast", "--now", str(NOW), "--horizon", "1h", *args)
    assert result.code == 0, result.err
    return result.out


def test_a_given_rate_is_said_as_given_not_as_observed(steady: int, shared_spark: SparkEngine, ebb) -> None:
    observed = _text(ebb).splitlines()[1]
    given = _text(ebb, "--rate", "1KiB").splitlines()[1]
    assert observed == "ingest rates observed over the last 1h (--rate overrides them)"
    assert given == "ingest given with --rate; record sizes and groups' reading observed over the last 1h"


def test_a_topic_whose_policy_became_invalid_is_said_left_out(data_dir: Path, shared_spark: SparkEngine, ebb) -> None:
    """Its effective policy cannot be planned, so it is not forecast: it was left out
    without a word, while a disk budget over every topic silently did not count it."""
    assert ebb("topic", "create", "pe", "--retention-time", "1h").code == 0
    assert ebb("topic", "create", "ok").code == 0
    (data_dir / "ebb.toml").write_text('[policy]\nretention_time = "30m"\nmax_time = "45m"\n')
    out = json.loads(ebb("forecast", "--horizon", "1h", "--json").out)
    assert [t["topic"] for t in out["topics"]] == ["ok"]
    (why,) = out["rejected"].values()
    assert list(out["rejected"]) == ["pe"] and "retention_time (1h) must be <= max_time (45m)" in why
    assert f"not forecast: pe: {why}" in ebb("forecast", "--horizon", "1h").out.splitlines()


def test_the_what_if_over_time_equals_plans_at_those_instants(
    steady: int, shared_spark: SparkEngine, data_dir: Path, ebb
) -> None:
    """With no ingest (--rate 0), a forecast is the plan at each instant of today's
    catalog: with a policy flag, the what-if plan (``explain --now T --retention-time``)."""
    out = _forecast(ebb, "capped", "--horizon", "3h", "--step", "1h", "--rate", "0", "--retention-time", "90m")
    assert out["what_if"] == {"retention_time": "90m"}
    # planned in the same job: the topic under its saved policy, as a plain forecast says
    plain = _forecast(ebb, "capped", "--horizon", "3h", "--step", "1h", "--rate", "0")
    assert plain["saved"] is None and out["saved"] == plain["topics"]
    assert out["topics"][0]["points"] != plain["topics"][0]["points"]
    with Broker(data_dir) as broker:
        pruner = Pruner(broker, shared_spark)
        overrides = {"capped": {**broker.catalog.overrides("capped"), "retention_time": "90m"}}
        for point in out["topics"][0]["points"]:
            plan = pruner.plan(now=point["at"], topics=["capped"], overrides=overrides)
            segments = plan.tables["segments"].to_pylist()
            kept = [s for s in segments if s["decision"] == "keep"]
            assert point["bytes"] == sum(s["size_bytes"] for s in kept)
            assert point["segments"] == len(kept)
            assert point["bytes_deleted"] == sum(s["size_bytes"] for s in segments if s["decision"] == "delete")
            assert point["partitions"][0]["log_start"] == plan.tables["partitions"]["new_log_start_offset"][0].as_py()


def test_a_what_if_of_one_topic_among_all_plans_only_that_one_twice(
    steady: int, shared_spark: SparkEngine, data_dir: Path
) -> None:
    """The console's what-if with a disk budget forecasts every topic, one of them
    edited: the others are the same under both policies, so only the edited one is
    planned under its saved policy too. Each topic's forecast is the one asked alone,
    and the budget's breach is over them all, edited."""
    with Broker(data_dir, clock=lambda: NOW) as broker:
        pruner = Pruner(broker, shared_spark)
        edited = {"capped": {**broker.catalog.overrides("capped"), "retention_time": "90m"}}

        def run(
            topics: list[str] | None, budget: int | None = None, by_plans: bool = False, **overrides: dict
        ) -> Forecast:
            at = instants(NOW, 3 * 3_600_000, 3_600_000)
            request = Request(at, 3_600_000, disk_budget=budget, by_plans=by_plans)
            return forecast(
                pruner.planner, broker.catalog, StoreRecordTimes(broker.data), request,
                defaults=broker.config.policy_defaults, topics=topics, overrides=overrides or None,
            )  # fmt: skip

        both = run(None, **edited)
        budget = max(both.bytes_on_disk()) - 1  # broken at the first instant the topics hold the most
        with_budget = run(None, budget, **edited)
        alone = run(["capped"], **edited)
        plain = run(["timed"])
        with mock.patch.object(forecasting, "MAX_VIRTUAL_ROWS", 1):  # a batch a topic: timed's has no saved one
            split = run(None, by_plans=True, **edited)
    assert split == both
    assert [t.topic for t in both.topics] == ["capped", "timed"]
    assert both.saved is not None and [t.topic for t in both.saved] == ["capped"]
    assert alone.saved is not None and both.saved == alone.saved and both.of("capped") == alone.of("capped")
    assert both.of("timed") == plain.of("timed")
    over = [at for at, held in zip(both.instants, both.bytes_on_disk()) if held > budget]
    assert with_budget.disk_breach is not None and with_budget.disk_breach.at == over[0]


@pytest.mark.parametrize(
    "args, message",
    [
        (["nope"], "nope"),
        (["--step", "0"], "--step"),
        (["--horizon", "soon"], "--horizon"),
        (["--rate", "fast"], "--rate"),
        # not the policy parser's "use -1 or infinite for no limit": the flag refuses both
        (["--rate=-5"], "--rate '-5': must be a finite size, 0 or more"),
        (["--window=-5m"], "--window '-5m': must be a finite duration, above 0"),
        (["--stalled", "ghost"], "ghost"),
        (["--step", "1ms", "--horizon", "7d"], "instants"),
        # refused before its segments are built: they took 21 GB, and the kernel killed it
        (["--rate", "1GiB", "--horizon", "1h"], "segments by the horizon, more than the 4,000,000"),
        (["--retention-time", "-5"], "retention_time"),
    ],
)
def test_bad_input_is_one_error_line(
    steady: int, shared_spark: SparkEngine, ebb, args: list[str], message: str
) -> None:
    """One line, exit 2. A forecast too large for one instant is refused once its
    rates are read, with Spark up (shared_spark)."""
    result = ebb("forecast", *args)
    assert result.code == 2 and result.out == ""
    (line,) = result.err.splitlines()
    assert line.startswith("ebb: error: ") and message in line


def test_no_topics_is_one_error_line(ebb, data_dir: Path) -> None:
    data_dir.mkdir(parents=True)  # a data directory without topics (a missing one is also warned of)
    result = ebb("forecast", "--json")
    assert result.code == 2 and result.out == ""
    assert result.err.splitlines() == ["ebb: error: no topics to forecast; create one with `ebb topic create NAME`"]


def test_a_step_longer_than_the_horizon_is_said_shortened(steady: int, shared_spark: SparkEngine, ebb) -> None:
    """The one step ends at the horizon: the header says "every 1h", which was all
    an operator who asked for --step 2h got to see."""
    result = ebb("forecast", "--now", str(NOW), "--horizon", "1h", "--step", "2h")
    assert result.code == 0 and "every 1h (2 instants)" in result.out.splitlines()[0]
    assert result.err.splitlines() == ["ebb: warning: --step 2h is longer than --horizon 1h: one step, to the horizon"]


def test_a_horizon_of_zero_is_said_as_one_instant() -> None:
    now = 1_700_000_000_000
    header = render(Forecast(now, [now], 3_600_000, [], None, None), {}).splitlines()[0]
    assert header == "forecast at 2023-11-14T22:13:20.000Z only (a horizon of 0)"


@pytest.mark.parametrize(
    "horizon, step, offsets",
    [
        (150, 60, [0, 60, 120, 150]),  # the horizon after a shorter last step
        (120, 60, [0, 60, 120]),
        (30, 60, [0, 30]),  # shorter than the step: now and the horizon
        (0, 60, [0]),
    ],
)
def test_the_instants_end_at_the_horizon(horizon: int, step: int, offsets: list[int]) -> None:
    """Ending at the last whole step left a breach between it and the horizon unsaid."""
    assert instants(NOW, horizon * MINUTE, step * MINUTE) == [NOW + o * MINUTE for o in offsets]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_at_a_terminal_progress_is_one_line_rewritten_then_cleared(
    steady: int, shared_spark: SparkEngine, data_dir: Path
) -> None:
    # Spark ready first: a session still starting is shown too ("starting Spark… 3 s",
    # console/cli/spark_cmd.py), which is another test's.
    shared_spark.session()
    out, err = io.StringIO(), _Terminal()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["--data-dir", str(data_dir), "forecast", "--now", str(NOW), "--horizon", "1h"])
    assert code == 0
    # every topic in one job (engine/forecast/timeline.py)
    assert err.getvalue() == "\rforecast: 1 of 1 Spark jobs done\r\033[K"
    assert out.getvalue().startswith("forecast from ") and "\r" not in out.getvalue()


def test_progress_stays_off_the_output_of_a_pipe(steady: int, shared_spark: SparkEngine, ebb) -> None:
    result = ebb("forecast", "--now", str(NOW), "--horizon", "1h")
    assert result.code == 0 and result.err == ""


def test_a_cap_breach_names_the_first_partition_that_breaches(data_dir: Path, shared_spark: SparkEngine, ebb) -> None:
    """Partitions alike, so all breach at once: the breach names partition 0, every run
    (the deleted segments' totals come from a group-by, in any order)."""
    _new_data_dir(data_dir)
    partitions = 6
    with Broker(data_dir, clock=lambda: NOW) as broker:
        broker.create_topic("twins", partitions, {"segment_size": str(SEGMENT), "max_partition_size": str(CAP)})
        for k in range(RECORDS):
            for partition in reversed(range(partitions)):
                record = NewRecord(b"v" * 100, timestamp=NOW - (RECORDS - k) * MINUTE)
                broker.produce("twins", [record], partition=partition)
    for _ in range(3):
        (breach,) = _forecast(ebb, "--horizon", "4h", "--step", "1h")["topics"][0]["breaches"]
        assert (breach["kind"], breach["partition"]) == ("max_partition_size", 0)


@pytest.mark.parametrize("runs", [False, True], ids=["one job", "by plans, a job per instant"])
def test_bytes_deleted_count_each_segment_for_the_reason_it_went(
    data_dir: Path, shared_spark: SparkEngine, ebb, runs: bool
) -> None:
    """retention_size deletes all but two segments' worth from now on, long before any
    record is 3h old: every segment goes for its size, as its cycle journals. A plan
    at 3h would call the oldest of them DELETE_TIME: they are gone by then, and do
    not change reason. ``runs``: asked ``--by-plans``, the topic planned over runs of
    its instants (a job each, as a topic too large for one is), which must count the
    same."""
    _new_data_dir(data_dir)
    with Broker(data_dir, clock=lambda: NOW) as broker:
        broker.create_topic(
            "sized", 1, {"segment_size": str(SEGMENT), "retention_size": str(2 * SEGMENT), "retention_time": "3h"}
        )
        for k in range(RECORDS):
            broker.produce("sized", [NewRecord(b"v" * 100, timestamp=NOW - (RECORDS - k) * MINUTE)], partition=0)
    with mock.patch.object(forecasting, "MAX_VIRTUAL_ROWS", 1):
        (topic,) = _forecast(ebb, "--horizon", "4h", "--step", "30m", *(["--by-plans"] if runs else []))["topics"]
    deleted = [point["bytes_deleted"] for point in topic["points"]]
    assert deleted[0] > 0 and deleted == sorted(deleted) and deleted[-1] > deleted[0]
    for point in topic["points"]:
        assert point["deleted_by_reason"] == {"DELETE_SIZE": point["bytes_deleted"]}, point["at"]


def test_a_steady_ingest_whose_last_record_is_now_is_forecast_at_its_rate(
    data_dir: Path, shared_spark: SparkEngine, ebb
) -> None:
    """A record a minute, the last one at NOW: N records span N - 1 minutes, so records
    over the time since the first one overstated the rate by 1/(N - 1) (1.4% here) and
    a cap five days out was breached two hours early."""
    _new_data_dir(data_dir)
    days = 5 * 24 * 60
    with Broker(data_dir, clock=lambda: NOW) as broker:
        broker.create_topic("steady", 1, {"segment_size": str(SEGMENT), "max_partition_size": "1 GiB"})
        for k in range(RECORDS):
            broker.produce("steady", [NewRecord(b"v" * 100, timestamp=NOW - (RECORDS - 1 - k) * MINUTE)], partition=0)
        record = broker.describe("steady").partitions[0].size_bytes // RECORDS
        broker.alter_topic("steady", {"max_partition_size": str((RECORDS + days) * record)})
    out = _forecast(ebb, "--horizon", "7d", "--step", "1h")
    (rate,) = out["topics"][0]["rates"]
    assert rate["records_per_second"] == pytest.approx(1 / 60)
    (breach,) = out["topics"][0]["breaches"]
    assert abs(breach["at"] - (NOW + (days + 1) * MINUTE)) <= 60 * MINUTE


@pytest.mark.parametrize("last_ago", [30 * MINUTE, 0], ids=["last 30 minutes ago", "last stamped now"])
def test_a_partition_written_less_often_than_the_window_is_forecast_at_its_rate(
    data_dir: Path, shared_spark: SparkEngine, ebb, last_ago: int
) -> None:
    """A batch of two records every 90 minutes: the 1h window holds one batch, which
    read as two records over the 30 minutes since it (three times fast), or as no
    ingest when stamped now; the count now begins at the batch before."""
    _new_data_dir(data_dir)
    with Broker(data_dir, clock=lambda: NOW) as broker:
        broker.create_topic("sparse", 1, {"segment_size": "1 MiB"})
        for b in range(8):
            at = NOW - last_ago - (7 - b) * 90 * MINUTE
            broker.produce("sparse", [NewRecord(b"v" * 100, timestamp=at) for _ in range(2)], partition=0)
    (rate,) = _forecast(ebb, "--horizon", "1h", "--step", "1h")["topics"][0]["rates"]
    assert rate["source"] == "observed"
    assert rate["since"] == NOW - last_ago - 90 * MINUTE
    assert rate["records_per_second"] == pytest.approx(2 / (90 * 60))
    assert rate["batch"] == 2


def test_gaps_that_repeat_within_the_window_are_counted_whole(data_dir: Path, shared_spark: SparkEngine, ebb) -> None:
    """A key's partition: records 1 and 5 minutes apart in turn (20 an hour), the last
    one 0 to 5 minutes ago. Counted from the first record in the window to the last,
    a window spans one gap fewer than it holds, a short or a long one, and read up to
    3.6% fast or slow: a cap five days out breached 4 hours early."""
    _new_data_dir(data_dir)
    phases = range(6)
    with Broker(data_dir, clock=lambda: NOW) as broker:
        broker.create_topic("keyed", len(phases), {"segment_size": "1 MiB"})
        for partition in phases:
            at, times = NOW - partition * MINUTE, []
            for k in range(40):  # back from the last record, 5 and 1 minute gaps in turn
                times.append(at)
                at -= (5 if (k + partition) % 2 == 0 else 1) * MINUTE
            for at in reversed(times):
                broker.produce("keyed", [NewRecord(b"v" * 100, timestamp=at)], partition=partition)
    rates = _forecast(ebb, "--horizon", "1h", "--step", "1h")["topics"][0]["rates"]
    assert [rate["records_per_second"] * 3600 for rate in rates] == [pytest.approx(20, rel=1e-9)] * len(phases)


def test_an_ingest_that_began_in_the_window_is_not_measured_from_the_burst_before(
    data_dir: Path, shared_spark: SparkEngine, ebb
) -> None:
    """A burst five hours ago, then a record a minute for the last 40 minutes: the gap
    back to the burst is a start, not one of the ingest's gaps, so the rate is the 40
    gaps' since the first record, not 41 records over five hours."""
    _new_data_dir(data_dir)
    with Broker(data_dir, clock=lambda: NOW) as broker:
        broker.create_topic("started", 1, {"segment_size": "1 MiB"})
        broker.produce("started", [NewRecord(b"v" * 100, timestamp=NOW - 300 * MINUTE) for _ in range(50)], 0)
        for k in range(41):
            broker.produce("started", [NewRecord(b"v" * 100, timestamp=NOW - (40 - k) * MINUTE)], partition=0)
    (rate,) = _forecast(ebb, "--horizon", "1h", "--step", "1h")["topics"][0]["rates"]
    assert rate["since"] == NOW - 40 * MINUTE
    assert rate["records_per_second"] == pytest.approx(1 / 60)


def test_a_burst_before_the_window_does_not_count_in_the_rate(data_dir: Path, shared_spark: SparkEngine, ebb) -> None:
    """A burst five hours ago, then a record a minute, all in one segment: the rate is
    the window's (the last hour's), not the segment's since its first record, which
    read the burst as ingest and breached the cap days early."""
    _new_data_dir(data_dir)
    with Broker(data_dir, clock=lambda: NOW) as broker:
        broker.create_topic("bursty", 1, {"segment_size": "1 MiB"})
        burst = [NewRecord(b"v" * 100, timestamp=NOW - 300 * MINUTE) for _ in range(2000)]
        broker.produce("bursty", burst, partition=0)
        for k in range(RECORDS):
            broker.produce("bursty", [NewRecord(b"v" * 100, timestamp=NOW - (RECORDS - 1 - k) * MINUTE)], partition=0)
        assert len(broker.describe("bursty").partitions[0].segments) == 1
    (rate,) = _forecast(ebb, "--horizon", "1h", "--step", "1h")["topics"][0]["rates"]
    assert rate["since"] == NOW - 60 * MINUTE
    assert rate["records_per_second"] == pytest.approx(1 / 60)


def test_a_partition_quiet_for_longer_than_the_window_says_how_to_see_its_rate(
    steady: int, shared_spark: SparkEngine, ebb
) -> None:
    """Three hours after the last record a 1h window sees no ingest: the output says
    so and what to do, where it said only "none"."""
    quiet = ebb("forecast", "capped", "--now", str(NOW + 180 * MINUTE), "--horizon", "1h")
    assert quiet.code == 0, quiet.err
    assert "(none: no record in the window, a longer --window may see one)" in quiet.out
    seen = _forecast(ebb, "capped", "--now", str(NOW + 180 * MINUTE), "--horizon", "1h", "--window", "4h")
    assert seen["topics"][0]["rates"][0]["source"] == "observed"


def test_records_sharing_batch_headers_are_forecast_at_their_bytes_per_second(
    data_dir: Path, shared_spark: SparkEngine, ebb
) -> None:
    """Batches of three small records: a record's bytes are a fraction (the batch
    header is shared), and rounding it down made the bytes per second low, the
    forecast's bytes hours behind within a week."""
    _new_data_dir(data_dir)
    batches = 120
    with Broker(data_dir, clock=lambda: NOW) as broker:
        broker.create_topic("batched", 1, {"segment_size": "1 MiB", "max_partition_size": "1 GiB"})
        for b in range(batches):  # a batch every 36 s, a record every 12 s, the last one now
            at = NOW - (batches - 1 - b) * 36_000
            broker.produce("batched", [NewRecord(b"v" * 4, timestamp=at - 24_000 + 12_000 * i) for i in range(3)], 0)
        held = broker.describe("batched").partitions[0].size_bytes
    assert held % batches == 0 and (held // batches) % 3 != 0, "three records share a batch header"
    bytes_per_second = held / batches / 36
    (topic,) = _forecast(ebb, "--horizon", "7d", "--step", "1d")["topics"]
    (rate,) = topic["rates"]
    assert rate["bytes_per_second"] == pytest.approx(bytes_per_second, rel=1e-4)
    week = topic["points"][-1]
    assert abs(week["bytes"] - (held + 7 * 86_400 * bytes_per_second)) <= held // batches


def test_batches_whose_records_share_a_timestamp_are_forecast_at_their_rate(
    data_dir: Path, shared_spark: SparkEngine, ebb
) -> None:
    """A batch of 50 records every five minutes, each batch's records stamped alike,
    the last one now: the 13 batches of the window span 12 gaps, and counting the
    records less one over them read the rate 8% fast."""
    _new_data_dir(data_dir)
    with Broker(data_dir, clock=lambda: NOW) as broker:
        broker.create_topic("batches", 1, {"segment_size": "1 MiB"})
        for b in range(24):
            at = NOW - (23 - b) * 5 * MINUTE
            broker.produce("batches", [NewRecord(b"v" * 100, timestamp=at) for _ in range(50)], partition=0)
    (rate,) = _forecast(ebb, "--horizon", "1h", "--step", "1h")["topics"][0]["rates"]
    assert rate["records_per_second"] == pytest.approx(50 / 300)


def test_a_held_topic_breaches_its_cap_when_its_bytes_pass_it(data_dir: Path, shared_spark: SparkEngine, ebb) -> None:
    """Under a hold the cap deletes nothing, so a breach read from the cap's deletions
    never came, while the partition grew past the cap."""
    _new_data_dir(data_dir)
    with Broker(data_dir, clock=lambda: NOW) as broker:
        broker.create_topic("held", 1, {"segment_size": str(SEGMENT), "max_partition_size": str(CAP), "hold": "on"})
        for k in range(RECORDS):
            broker.produce("held", [NewRecord(b"v" * 100, timestamp=NOW - (RECORDS - k) * MINUTE)], partition=0)
        record = broker.describe("held").partitions[0].size_bytes // RECORDS
    out = _forecast(ebb, "--horizon", "4h", "--step", "10m")
    (topic,) = out["topics"]
    assert all(point["bytes_deleted"] == 0 for point in topic["points"])
    (breach,) = topic["breaches"]
    by_hand = NOW + ((CAP // record + 1) - RECORDS) * MINUTE
    assert (breach["kind"], breach["limit"]) == ("max_partition_size", CAP)
    assert abs(breach["at"] - by_hand) <= 10 * MINUTE


@pytest.mark.parametrize("granularity", ["segment", "message"])
def test_a_held_topic_breaches_max_time_when_its_oldest_data_passes_it(
    data_dir: Path, shared_spark: SparkEngine, ebb, granularity: str
) -> None:
    """Under a hold max_time deletes nothing, so a breach read from its deletions never
    came, while the data on disk grew older than max_time."""
    _new_data_dir(data_dir)
    policy = {"segment_size": str(SEGMENT), "retention_time": "1h", "max_time": "3h", "hold": "on"}
    policy["granularity"] = granularity
    with Broker(data_dir, clock=lambda: NOW) as broker:
        broker.create_topic("held", 1, policy)
        for k in range(RECORDS):
            broker.produce("held", [NewRecord(b"v" * 100, timestamp=NOW - (RECORDS - k) * MINUTE)], partition=0)
        oldest = broker.describe("held").partitions[0].segments[0]
    (topic,) = _forecast(ebb, "--horizon", "4h", "--step", "10m")["topics"]
    assert all(point["bytes_deleted"] == 0 for point in topic["points"])
    (breach,) = topic["breaches"]
    # a sealed segment is past max_time once its newest record is; a record, at once
    newest = oldest.max_timestamp if granularity == "segment" else oldest.first_timestamp
    assert (breach["kind"], breach["limit"], breach["partition"]) == ("max_time", 3 * 60 * MINUTE, 0)
    assert 0 < breach["at"] - (newest + 3 * 60 * MINUTE) <= 10 * MINUTE


def test_a_stalled_subscriber_holds_until_its_subscription_expires(
    data_dir: Path, shared_spark: SparkEngine, ebb
) -> None:
    """A protecting subscriber that last committed 2h ago, at the first offset, holds
    every segment until ``subscription_expiry`` (3h) has passed since that commit:
    the log start stays put until the first instant after now + 1h, then time
    retention (1h) deletes what it has been keeping."""
    _new_data_dir(data_dir)
    policy = {"segment_size": str(SEGMENT), "retention_time": "1h", "consumption": "protect"}
    with Broker(data_dir, clock=lambda: NOW) as broker:
        broker.create_topic("kept", 1, {**policy, "subscription_expiry": "3h"})
        for k in range(RECORDS):
            broker.produce("kept", [NewRecord(b"v" * 100, timestamp=NOW - (RECORDS - k) * MINUTE)], partition=0)
        broker.create_group("kept", "stuck")
        broker.commit("kept", "stuck", 0, 0, at_ms=NOW - RECORDS * MINUTE)
        record = broker.describe("kept").partitions[0].size_bytes // RECORDS
    (topic,) = _forecast(ebb, "--horizon", "3h", "--step", "30m")["topics"]
    starts = [point["partitions"][0]["log_start"] for point in topic["points"]]
    expired_at = NOW - RECORDS * MINUTE + 3 * 60 * MINUTE  # expired once strictly past it
    for point, start in zip(topic["points"], starts):
        assert (start > 0) == (point["at"] > expired_at), (point["at"] - NOW, starts)
    # then time retention: at the horizon the records of its last hour stay, from
    # offset RECORDS + 180 - 60, less what shares a segment with them
    hour_old = RECORDS + 180 - 60
    assert hour_old - SEGMENT // record <= starts[-1] <= hour_old


def test_a_deletion_limit_is_a_cycles_and_cycles_run_every_prune_interval(
    data_dir: Path, shared_spark: SparkEngine, ebb
) -> None:
    """``max_deletes_per_cycle 1`` and a cycle a minute (the default prune_interval):
    an hour's cycles keep up with a record a minute, so an hour of records stays, as
    with no limit; applied once per instant, the limit let the topic grow without end."""
    _new_data_dir(data_dir, 'prune_interval = "1m"\n')
    with Broker(data_dir, clock=lambda: NOW) as broker:
        policy = {"segment_size": str(SEGMENT), "retention_time": "1h", "max_deletes_per_cycle": "1"}
        broker.create_topic("limited", 1, policy)
        for k in range(RECORDS):
            broker.produce("limited", [NewRecord(b"v" * 100, timestamp=NOW - (RECORDS - k - 1) * MINUTE)], partition=0)
        record = broker.describe("limited").partitions[0].size_bytes // RECORDS
    (topic,) = _forecast(ebb, "--horizon", "6h", "--step", "1h")["topics"]
    for point in topic["points"][1:]:  # from the first instant after now: an hour of cycles
        assert abs(point["bytes"] - 60 * record) <= SEGMENT + 60 * record // 10, point


def test_segments_roll_after_segment_roll_as_the_store_rolls_them(
    data_dir: Path, shared_spark: SparkEngine, ebb
) -> None:
    """A record a minute and ``segment_roll 10m`` under a large ``segment_size``: the
    store holds segments of ten records, which an hour's retention deletes as they age.
    Filled up to ``segment_size``, the forecast's one segment was never sealed, so
    retention kept it until it passed the cap: a breach that never comes."""
    _new_data_dir(data_dir)
    roll = {"segment_size": str(CAP), "segment_roll": "10m", "retention_time": "1h", "max_partition_size": str(CAP)}
    with Broker(data_dir, clock=lambda: NOW) as broker:
        broker.create_topic("rolled", 1, roll)
        broker.create_topic("unrolled", 1, {**roll, "segment_roll": "none"})
        for topic in ("rolled", "unrolled"):
            for k in range(RECORDS):
                broker.produce(topic, [NewRecord(b"v" * 100, timestamp=NOW - (RECORDS - k) * MINUTE)], partition=0)
        stored = broker.describe("rolled").partitions[0]
        record = stored.size_bytes // RECORDS
    assert {s.next_offset - s.base_offset for s in stored.segments} == {10}, "the store rolls every ten records"
    topics = {t["topic"]: t for t in _forecast(ebb, "--horizon", "6h", "--step", "30m")["topics"]}
    rolled = topics["rolled"]
    assert rolled["breaches"] == []
    for point in rolled["points"]:
        # the sealed segments of the last hour and the active one: 60 to 70 records
        assert 60 * record <= point["bytes"] <= 70 * record, point
        assert 6 <= point["segments"] <= 7, point
        assert set(point["deleted_by_reason"]) <= {"DELETE_TIME"}
    # the same topic without the roll fills one segment up to the cap, which decides
    (breach,) = topics["unrolled"]["breaches"]
    assert breach["kind"] == "max_partition_size"
    # A what-if of the roll: the next record rolls today's one segment (its first record
    # is two hours old), so the partition passes the cap once it and the new records
    # exceed it (the cap deletes it then, as a cycle would); from 90 minutes, when no
    # record of today's is left, the unrolled topic is forecast as the rolled one.
    what_if = _forecast(ebb, "unrolled", "--horizon", "6h", "--step", "30m", "--segment-roll", "10m")
    (breach,) = what_if["topics"][0]["breaches"]
    past_cap = NOW + (CAP - RECORDS * record) // record * MINUTE + MINUTE
    assert breach["kind"] == "max_partition_size" and 0 <= breach["at"] - past_cap < 30 * MINUTE
    assert [(p["bytes"], p["segments"]) for p in what_if["topics"][0]["points"][3:]] == [
        (p["bytes"], p["segments"]) for p in rolled["points"][3:]
    ]


#: policies whose segments roll by time: with message granularity, under a size
#: target, longer than a segment takes to fill by size, equal to the gap between records
ROLLING = {
    "message": {"segment_roll": "10m", "granularity": "message", "retention_time": "1h", "segment_size": str(CAP)},
    "sized": {"segment_roll": "10m", "retention_size": "5000", "segment_size": str(CAP)},
    "long": {"segment_roll": "30m", "retention_time": "1h", "segment_size": str(SEGMENT)},
    "gap": {"segment_roll": "1m", "retention_time": "1h", "segment_size": str(CAP)},
}


def _kept_by_hand(segments: list, at: int, policy: dict[str, str]) -> tuple[int, int]:
    """docs/RETENTION.md for these policies: the sealed segments are deleted as a
    prefix while past retention_time or while the newer ones hold retention_size; for
    records in time order a message-granularity cut deletes the same whole segments.
    The cycle at ``at`` rolls an active segment whose first record is ``segment_roll``
    old, beginning an empty one (the store rolls it only when the next record comes).
    Returns the bytes and segments kept."""
    retention = parse_duration(policy.get("retention_time", "none"))
    target = parse_size(policy.get("retention_size", "none"))
    roll = parse_duration(policy.get("segment_roll", "none"))
    k = 0
    while k < len(segments) - 1 and (
        (retention is not None and segments[k].max_timestamp < at - retention)
        or (target is not None and sum(s.size_bytes for s in segments[k + 1 :]) >= target)
    ):
        k += 1
    active = segments[-1]
    rolled = roll is not None and not active.sealed and active.size_bytes > 0 and active.first_timestamp + roll <= at
    return sum(s.size_bytes for s in segments[k:]), len(segments) - k + rolled


def _forecast_equals_the_fed_store(
    data_dir: Path, tmp_path: Path, ebb, policies: dict[str, dict[str, str]], batch: int, every: int
) -> None:
    """Each topic is fed ``batch`` records stamped alike every ``every`` minutes (the
    forecast's own assumption: a steady producer, the last batch now); a copy of the
    data directory is fed on to each instant and retention is applied to its segments
    by hand: at every instant the forecast holds the same bytes and segments."""
    _new_data_dir(data_dir)

    def stamp(offset: int) -> int:
        return NOW - (RECORDS // batch - 1 - offset // batch) * every * MINUTE

    def feed(broker: Broker, topic: str, until: int) -> None:
        end = broker.describe(topic).partitions[0].row.next_offset
        while stamp(end) <= until:
            broker.produce(topic, [NewRecord(b"v" * 100, timestamp=stamp(end))] * batch, partition=0)
            end += batch

    with Broker(data_dir, clock=lambda: NOW) as broker:
        for topic, policy in policies.items():
            broker.create_topic(topic, 1, policy)
            feed(broker, topic, NOW)
    out = _forecast(ebb, "--horizon", "3h", "--step", "7m")
    assert out["instants"][-1] == NOW + 180 * MINUTE  # not a whole number of steps away
    assert {r["batch"] for t in out["topics"] for r in t["rates"]} == {batch}
    fed = tmp_path / "fed"
    shutil.copytree(data_dir, fed)
    with Broker(fed, clock=lambda: NOW) as broker:
        for forecast in out["topics"]:
            topic = forecast["topic"]
            for point in forecast["points"]:
                feed(broker, topic, point["at"])
                segments = broker.describe(topic).partitions[0].segments
                assert (point["bytes"], point["segments"]) == _kept_by_hand(segments, point["at"], policies[topic]), (
                    topic,
                    point["at"],
                )


def test_rolling_segments_are_forecast_as_the_store_rolls_the_records(
    data_dir: Path, tmp_path: Path, shared_spark: SparkEngine, ebb
) -> None:
    """A record a minute under every kind of roll."""
    _forecast_equals_the_fed_store(data_dir, tmp_path, ebb, ROLLING, batch=1, every=1)


def test_a_producers_batches_are_forecast_as_the_store_appends_them(
    data_dir: Path, tmp_path: Path, shared_spark: SparkEngine, ebb
) -> None:
    """Four records stamped alike every three minutes (``ebb produce --count 4``): the
    records arrive a batch at a time, and a segment holds what the store puts in it,
    a batch split over two segments paying its header twice. Spread evenly a record at
    a time, the forecast rolled and aged segments up to eleven minutes off the store's."""
    policies = dict(ROLLING)
    policies["timed"] = {"retention_time": "1h", "retention_size": "5000", "segment_size": str(SEGMENT)}
    _forecast_equals_the_fed_store(data_dir, tmp_path, ebb, policies, batch=4, every=3)


def test_an_idle_partition_is_rolled_by_the_cycles_and_ages_out(data_dir: Path, shared_spark: SparkEngine, ebb) -> None:
    """No record for 90 minutes under ``segment_roll 10m`` and an hour's retention: the
    cycle now rolls the active segment, the next one deletes it. The forecast kept it
    at every instant (a plan never deletes an active segment; the roll is the cycle's)."""
    _new_data_dir(data_dir)
    with Broker(data_dir, clock=lambda: NOW) as broker:
        broker.create_topic("quiet", 1, {"segment_size": str(CAP), "segment_roll": "10m", "retention_time": "1h"})
        for k in range(30):
            broker.produce("quiet", [NewRecord(b"v" * 100, timestamp=NOW - (120 - k) * MINUTE)], partition=0)
    points = _forecast(ebb, "--horizon", "3m", "--step", "1m")["topics"][0]["points"]
    # the cycles themselves, at now and a minute later (one a minute: prune_interval)
    on_disk = []
    for at in (NOW, NOW + MINUTE):
        assert ebb("prune", "--now", str(at)).code == 0
        with Broker(data_dir) as broker:
            (partition,) = broker.describe("quiet").partitions
            on_disk.append((partition.size_bytes, len(partition.segments)))
    assert on_disk[1] == (0, 1), "the second cycle leaves the empty segment the first one began"
    assert [(p["bytes"], p["segments"]) for p in points] == [on_disk[0]] + [on_disk[1]] * 3
