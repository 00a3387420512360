"""``ebb forecast`` judged from the shell alone, in the shapes the earlier judged tests
(test_forecast_judged.py, test_forecast_cli_judged.py) leave out: topics of several
partitions written by ``ebb produce`` where some partitions have no records, and
``--rate`` checked against arithmetic a judge does by hand."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from engine.prune.session import SparkEngine

NOW = 1_800_000_000_000
MINUTE = 60_000
#: a record of 100 value bytes alone in its batch: 40 bytes of batch header, 16 of record framing
RECORD = 100 + 16 + 40
RATE = 100  # --rate, bytes per second per partition
SEGMENT = 1000


def _ok(result) -> str:
    assert result.code == 0, result.err
    return result.out


def test_a_given_rate_brings_records_the_topic_writes_and_its_segments_can_hold(
    data_dir: Path, shared_spark: SparkEngine, ebb
) -> None:
    """``--rate`` on a topic of four partitions of which only partition 0 has records
    (a record a minute, as a producer that always picks it writes them), and on a
    topic with no records yet, both with 1000-byte segments. The partitions without
    records were given 1 KiB records: on the first topic other records than the ones
    its producers write (0.0977 records/s beside partition 0's 0.641), and on both
    a record a segment of 1000 bytes cannot hold, each forecast as a segment of its
    own of 1024 bytes, larger than any segment the store holds."""
    data_dir.mkdir(parents=True)
    (data_dir / "ebb.toml").write_text('[engine]\nfsync = "never"\n')
    policy = ["--partitions", "4", "--segment-size", str(SEGMENT), "--retention-time", "1d"]
    _ok(ebb("topic", "create", "written", *policy))
    _ok(ebb("topic", "create", "fresh", *policy))
    for n in range(30):
        stamp = NOW - (29 - n) * MINUTE
        _ok(ebb("produce", "written", "--partition", "0", "--timestamp", str(stamp), "--count", "1"))
    args = ["--now", str(NOW), "--horizon", "2h", "--step", "30m", "--rate", str(RATE), "--json"]
    out = json.loads(_ok(ebb("forecast", "written", "fresh", *args)))
    forecasts = {t["topic"]: t for t in out["topics"]}

    # written: every partition gets the records partition 0 holds, at 100 B/s
    rates = forecasts["written"]["rates"]
    assert [(r["source"], r["record_bytes"]) for r in rates] == [("given", RECORD)] * 4
    assert [r["bytes_per_second"] for r in rates] == pytest.approx([RATE] * 4)
    assert len({r["records_per_second"] for r in rates}) == 1
    per_segment = SEGMENT // RECORD  # whole records a segment holds
    for point in forecasts["written"]["points"]:
        arrived = (point["at"] - NOW) * RATE // (1000 * RECORD)  # records stamped by then
        for p in point["partitions"][1:]:
            assert (p["bytes"], p["segments"]) == (arrived * RECORD, max(1, math.ceil(arrived / per_segment))), point

    # fresh: no record anywhere; the records fit a segment
    assert {r["record_bytes"] for r in forecasts["fresh"]["rates"]} == {SEGMENT}
    last = forecasts["fresh"]["points"][-1]
    assert all(p["bytes"] <= p["segments"] * SEGMENT for p in last["partitions"]), last
    assert last["bytes"] == 4 * (2 * 3600 * RATE // SEGMENT) * SEGMENT


def test_a_keyless_backfill_over_four_partitions_reads_a_quarter_each_and_breaches_on_time(
    data_dir: Path, shared_spark: SparkEngine, ebb
) -> None:
    """A record a second for two hours, without a key, over four partitions, in one
    ``ebb produce``: the steady ingest a judge writes. Each partition's rate is a
    quarter of it (1000 records at a time, the partitions were written in bursts and
    pauses and read 1.77 records/s together), and the cap's first breach is the first
    instant past the one worked out by hand from the bytes on disk."""
    data_dir.mkdir(parents=True)
    (data_dir / "ebb.toml").write_text('[engine]\nfsync = "never"\n')
    cap = 512 * 1024  # about 3 h away
    policy = ["--partitions", "4", "--segment-size", "4KiB", "--max-partition-size", str(cap)]
    _ok(ebb("topic", "create", "steady", *policy))
    hours = 2
    _ok(ebb("produce", "steady", "--count", str(hours * 3600), "--size", "100",
            "--timestamp", str(NOW - hours * 3600_000 + 1000), "--timestamp-step", "1s"))  # fmt: skip
    args = ["--now", str(NOW), "--horizon", "12h", "--step", "10m", "--json"]
    forecast = json.loads(_ok(ebb("forecast", "steady", *args)))["topics"][0]
    assert [r["records_per_second"] for r in forecast["rates"]] == pytest.approx([0.25] * 4, rel=1e-9)

    described = json.loads(_ok(ebb("topic", "describe", "steady", "--json")))
    step = 10 * MINUTE
    by_hand = []
    for partition in described["partitions"]:
        per_second = 0.25 * partition["size_bytes"] / partition["next_offset"]
        reached = (cap - partition["size_bytes"]) / per_second * 1000  # ms after now
        by_hand.append(NOW + math.ceil(reached / step) * step)
    breaches = [(b["kind"], b["at"]) for b in forecast["breaches"]]
    assert breaches and breaches[0][0] == "max_partition_size"
    assert 0 <= breaches[0][1] - min(by_hand) <= step, (breaches, by_hand)


def _in(ebb, data_dir: Path):
    """``ebb`` on another data directory (a later ``--data-dir`` wins)."""
    return lambda *args: _ok(ebb("--data-dir", str(data_dir), *map(str, args)))


def _kept(run, topic: str, deleted: set[tuple[int, int]]) -> dict[int, tuple[int, int, int]]:
    """Each partition's (bytes, segments, log start) once the segments ``deleted``
    ((partition, base offset)) are gone."""
    described = json.loads(run("topic", "describe", topic, "--json"))
    kept = {}
    for partition in described["partitions"]:
        left = [s for s in partition["segments"] if (partition["partition"], s["base_offset"]) not in deleted]
        kept[partition["partition"]] = (sum(s["size_bytes"] for s in left), len(left), left[0]["base_offset"])
    return kept


def test_a_keyless_backfill_in_one_call_is_forecast_as_a_copy_fed_in_one_call_holds_it(
    data_dir: Path, tmp_path: Path, shared_spark: SparkEngine, ebb
) -> None:
    """A record every 7 s for an hour over three partitions, without a key, in one
    ``ebb produce``, under a time and a size policy; the judge's copy is fed the
    records until each instant in one ``ebb produce`` too. The store appends a
    partition's records many to a batch, so a 4 KiB segment holds 34 records of 116
    bytes and one 40-byte header; the forecast read 117.4 bytes a record and laid 35
    of 117 in a segment, so its segments ended a record later each time and the
    size target kept a segment more or less than the copy (at 63 minutes, under the
    what-if: 12285 bytes from offset 239 against 8356 from 272)."""
    data_dir.mkdir(parents=True)
    (data_dir / "ebb.toml").write_text('[engine]\nfsync = "never"\n')
    run = _in(ebb, data_dir)
    policy = ["--segment-size", "4KiB", "--retention-time", "3h", "--retention-size", "20KiB"]
    run("topic", "create", "backfilled", "--partitions", "3", *policy, "--max-partition-size", "48KiB")
    gap, history = 7000, 514  # an hour of records
    run("produce", "backfilled", "--count", history, "--timestamp", NOW - (history - 1) * gap, "--timestamp-step", "7s")
    what_if = ["--retention-time", "1h", "--retention-size", "8KiB"]
    args = ["--now", NOW, "--horizon", "168m", "--step", "21m", "--json", *what_if]
    out = json.loads(run("forecast", "backfilled", *args))
    assert [r["records_per_second"] * 21 for r in out["topics"][0]["rates"]] == pytest.approx([1.0] * 3, rel=1e-9)

    def curve(forecast: dict) -> list[dict[int, tuple[int, int, int]]]:
        return [
            {p["partition"]: (p["bytes"], p["segments"], p["log_start"]) for p in point["partitions"]}
            for point in forecast["points"]
        ]

    with_what_if, saved = [], []
    for at in out["instants"]:
        fed = tmp_path / f"fed-{at}"
        shutil.copytree(data_dir, fed)
        run_fed = _in(ebb, fed)
        if (future := (at - NOW) // gap) > 0:
            run_fed("produce", "backfilled", "--count", future, "--timestamp", NOW + gap, "--timestamp-step", "7s")
        segments = json.loads(run_fed("explain", "backfilled", "--now", at, "--json", *what_if))["segments"]
        with_what_if.append(
            _kept(
                run_fed,
                "backfilled",
                {(s["partition"], s["base_offset"]) for s in segments if s["decision"] == "delete"},
            )
        )
        actions = json.loads(run_fed("prune", "--dry-run", "--now", at, "--json"))["actions"]
        saved.append(
            _kept(
                run_fed,
                "backfilled",
                {(a["partition"], a["base_offset"]) for a in actions if a["action"] == "delete_segment"},
            )
        )
    assert curve(out["topics"][0]) == with_what_if
    assert curve(out["saved"][0]) == saved


def test_each_partition_of_a_keyless_backfill_keeps_its_cadence(
    data_dir: Path, tmp_path: Path, shared_spark: SparkEngine, ebb
) -> None:
    """A record a second for three hours over three partitions, without a key, in one
    ``ebb produce``, under two hours' retention: each partition gets a record every
    3 s, its last one 2, 1 and 0 s before now, and the copy fed the next six hours in
    one ``ebb produce`` goes on so (partition 0 at now + 1 s). The forecast began
    every partition's records a whole gap after now, 2 and 1 s late on partitions 0
    and 1: at six hours a segment whose newest record is stamped exactly two hours
    before was kept where on the copy it is 2 s older and goes (19 segments and
    295520 bytes from offset 8260 against 18 and 279240 from 8400)."""
    data_dir.mkdir(parents=True)
    (data_dir / "ebb.toml").write_text('[engine]\nfsync = "never"\n')
    run = _in(ebb, data_dir)
    policy = ["--segment-size", "16KiB", "--retention-time", "2h", "--retention-size", "1MiB"]
    run("topic", "create", "cadence", "--partitions", "3", *policy, "--max-partition-size", "2MiB")
    history, horizon = 3 * 3600, 6 * 3600  # records, a second apart
    run("produce", "cadence", "--count", history, "--timestamp", NOW - (history - 1) * 1000, "--timestamp-step", "1s")
    out = json.loads(run("forecast", "cadence", "--now", NOW, "--horizon", "6h", "--step", "30m", "--json"))
    last = out["topics"][0]["points"][-1]
    assert last["at"] == NOW + horizon * 1000

    fed = tmp_path / "fed"
    shutil.copytree(data_dir, fed)
    run_fed = _in(ebb, fed)
    run_fed("produce", "cadence", "--count", horizon, "--timestamp", NOW + 1000, "--timestamp-step", "1s")
    actions = json.loads(run_fed("prune", "--dry-run", "--now", last["at"], "--json"))["actions"]
    deleted = {(a["partition"], a["base_offset"]) for a in actions if a["action"] == "delete_segment"}
    assert {p["partition"]: (p["bytes"], p["segments"], p["log_start"]) for p in last["partitions"]} == _kept(
        run_fed, "cadence", deleted
    )


def test_a_backfill_under_a_roll_is_rolled_by_the_cycles_as_its_records_arrive(
    data_dir: Path, shared_spark: SparkEngine, ebb
) -> None:
    """A record of 100 bytes every 30 s for an hour in one ``ebb produce`` (one append
    of 120), under ``segment_roll 10m`` and 30 minutes' retention, a cycle every
    minute from now (00:59:45), the last record at 00:59:30. By hand:

    - the cycle at now rolls the history's segment (its first record an hour old),
      which time deletes at +30m (its newest record 00:59:30);
    - the records go on from 01:00:00, and each segment is rolled by the first cycle
      that finds its first record 10 minutes old: 01:00:00 to 01:10:30 (22 records,
      rolled at 01:10:45), 01:11:00 to 01:21:30, 01:22:00 to 01:32:30, and so on;
    - a segment goes once its newest record is 30 minutes old. At +60m (01:59:45)
      the records from 01:22:00 on are left, 76 in 4 segments: 76 * 116 + 4 * 40 =
      8976 bytes, and the log start is offset 120 + 44.

    The forecast appended the backfill's 1000-record appends whole, stamped 8 hours
    apart and never rolled by a cycle between, so one segment took every future
    record and time retention deleted none of them: 41800 bytes at +3h, growing."""
    data_dir.mkdir(parents=True)
    (data_dir / "ebb.toml").write_text('[engine]\nfsync = "never"\nprune_interval = "1m"\n')
    run = _in(ebb, data_dir)
    run("topic", "create", "rolled", "--partitions", "1", "--retention-time", "30m", "--segment-roll", "10m")
    start = NOW - NOW % (60 * MINUTE)
    records = ["--size", 100, "--timestamp", start, "--timestamp-step", "30s"]
    run("produce", "rolled", "--partition", 0, "--count", 120, *records)
    now = start + 59 * MINUTE + 45_000
    out = json.loads(run("forecast", "rolled", "--now", now, "--horizon", "3h", "--step", "30m", "--json"))
    by_hand = [(13960, 0), (7080, 120), (8976, 164), (8280, 230), (7544, 296), (9440, 340), (8744, 406)]
    (topic,) = out["topics"]
    assert [(p["bytes"], p["log_start"]) for point in topic["points"] for p in point["partitions"]] == by_hand
