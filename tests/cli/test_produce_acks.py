"""What ``ebb produce`` acknowledges is true: each ``--json`` line names records that
are durable and readable at exactly those offsets, in the order they were produced,
no record twice and none left out; the summary and an error's message count only
this producer's records, even where another producer's records sit between ours."""

from __future__ import annotations

import errno
import json
import subprocess
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO

import pytest

from engine.broker import Broker
from engine.errors import QuotaExceeded
from engine.faults import IOFault, inject
from engine.journal.state import EngineState
from engine.producing import Acked, Acknowledgements, InterruptedWaiting
from engine.store.batch import NewRecord
from engine.store.partition import AppendResult
from tests.support.cli import REPO, CliResult, ebb_command, subprocess_env

T0 = 1_700_000_000_000  # in the past: a record stamped after now draws a warning


def _index(value: bytes) -> int:
    """The production index a test record carries: ``ebb produce --count`` values
    begin with it zero-padded (``generated_value``), stdin lines are it."""
    return int(value.split(b"|", 1)[0])


def _check_acks(data_dir: Path, topic: str, acks: list[dict[str, int]], produced: int) -> None:
    """Every ack reads back as exactly its records, the acks in production order
    make up records 0..produced-1 once each."""
    indexes: list[int] = []
    seen: set[tuple[int, int]] = set()
    with Broker(data_dir) as reader:
        for ack in acks:
            assert ack["count"] == ack["next_offset"] - ack["base_offset"] > 0, ack
            records = reader.read(topic, ack["partition"], ack["base_offset"], ack["count"])
            assert [r.offset for r in records] == list(range(ack["base_offset"], ack["next_offset"])), ack
            for record in records:
                assert (ack["partition"], record.offset) not in seen, ack
                seen.add((ack["partition"], record.offset))
                indexes.append(_index(record.value))
    assert indexes == list(range(produced))


def _lines(out: str) -> list[dict[str, int]]:
    return [json.loads(line) for line in out.splitlines()]


@pytest.mark.parametrize(
    "flags",
    [
        pytest.param(["--timestamp", str(T0), "--timestamp-step", "1s"], id="keyless-a-second-apart"),
        pytest.param(["--timestamp", str(T0), "--timestamp-step", "300ms"], id="keyless-batches-of-a-second"),
        pytest.param(["--timestamp", str(T0), "--timestamp-step", "0s"], id="keyless-one-stamp"),
        pytest.param([], id="keyless-unstamped"),
        pytest.param(["--key", "k", "--timestamp", str(T0), "--timestamp-step", "1s"], id="keyed"),
        pytest.param(["--partition", "2", "--timestamp", str(T0), "--timestamp-step", "1s"], id="partition"),
    ],
)
@pytest.mark.parametrize("source", ["count", "stdin"])
def test_every_ack_line_reads_back_as_its_records_in_production_order(
    ebb, data_dir: Path, flags: list[str], source: str
) -> None:
    produced = 2600
    assert ebb("topic", "create", "t", "--partitions", "3").code == 0
    if source == "count":
        done = ebb("produce", "t", "--count", str(produced), "--size", "20", *flags, "--json")
    else:
        done = ebb("produce", "t", *flags, "--json", stdin="".join(f"{i}\n" for i in range(produced)))
    assert done.code == 0, done.err
    acks = _lines(done.out)
    assert sum(a["count"] for a in acks) == produced
    _check_acks(data_dir, "t", acks, produced)
    described = json.loads(ebb("topic", "describe", "t", "--json").out)
    assert sum(p["next_offset"] for p in described["partitions"]) == produced


def test_mixed_stamps_stepping_back_alike_and_none_are_acknowledged_truly(broker: Broker, data_dir: Path) -> None:
    broker.create_topic("t", 4, {})
    stamps: list[int | None] = []
    for i in range(3000):
        stamps.append([T0 + i * 700, T0 - i * 900, T0, None][(i // 7) % 4])
    acks: list[Acked] = []
    broker.produce("t", [NewRecord(b"%d|" % i, None, s) for i, s in enumerate(stamps)], on_ack=acks.append)
    lines = [{"partition": a.partition, "base_offset": a.base_offset, "next_offset": a.next_offset,
              "count": a.count} for a in acks]  # fmt: skip
    _check_acks(data_dir, "t", lines, len(stamps))


@pytest.fixture
def another_producer_after_first_append(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Right after a topic's first append by the producer under test, another
    producer (a broker of its own) appends three records to the same partition:
    offsets 1000..1002 of a partition the producer under test began at 0."""
    original = Broker.append
    appended: set[str] = set()

    def append(self: Broker, topic: str, partition: int, records):  # type: ignore[no-untyped-def]
        result = original(self, topic, partition, records)
        if topic not in appended:
            appended.add(topic)
            with Broker(data_dir) as other:
                original(other, topic, partition, [NewRecord(b"other|")] * 3)
        return result

    monkeypatch.setattr(Broker, "append", append)


@pytest.mark.usefixtures("another_producer_after_first_append")
def test_a_run_split_by_another_producer_is_acknowledged_in_true_pieces_and_counted_as_ours(
    ebb, data_dir: Path
) -> None:
    assert ebb("topic", "create", "t", "--partitions", "1").code == 0
    done = ebb("produce", "t", "--count", "1500", "--size", "20", "--json")
    assert done.code == 0, done.err
    acks = _lines(done.out)
    assert [(a["base_offset"], a["next_offset"]) for a in acks] == [(0, 1000), (1003, 1503)]
    _check_acks(data_dir, "t", acks, 1500)

    # The summary counts our 1500, not the 1503 offsets they span.
    assert ebb("topic", "create", "u", "--partitions", "1").code == 0
    done = ebb("produce", "u", "--count", "1500")
    assert done.code == 0, done.err
    assert done.out.strip() == (
        "produced 1500 record(s) to u: partition 0 offsets 0..1502 (1500 of them, between other producers' records)"
    )


def test_the_error_counts_only_what_this_producer_had_acknowledged(broker: Broker, data_dir: Path) -> None:
    broker.create_topic("q", 1, {"backlog_size": "1 KiB", "backlog_policy": "producer_exception"})

    def records() -> Iterator[NewRecord]:
        yield from (NewRecord(b"%d|" % i) for i in range(1000))  # appended before the next is asked for
        with Broker(data_dir) as other:
            other.append("q", 0, [NewRecord(b"other|")] * 3)  # offsets 1000..1002
        yield from (NewRecord(b"%d|" % i) for i in range(1000, 2000))  # offsets 1003..2002
        with broker.catalog.write():
            EngineState(broker.catalog).set_quota_state("q", True, broker.clock())
        yield from (NewRecord(b"%d|" % i) for i in range(2000, 2010))  # refused

    acks: list[Acked] = []
    with pytest.raises(QuotaExceeded) as raised:
        broker.produce("q", records(), on_ack=acks.append)
    assert str(raised.value).endswith(
        "; 2000 record(s) before it were acknowledged (partition 0 offsets 0..2002 (2000 of them, between other"
        " producers' records)), the rest were not written"
    ), raised.value
    assert acks == [Acked(0, 0, 1000), Acked(0, 1003, 2003)]


class _FedProducer:
    """An ``ebb produce`` process fed lines on its stdin by the test, its output read
    as it comes (a ``--json`` producer's acks would fill a pipe nobody reads, and it
    would stop appending)."""

    def __init__(self, data_dir: Path, *args: str) -> None:
        self.process = subprocess.Popen(
            ebb_command(data_dir, *args),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=REPO,
            env=subprocess_env(),
        )
        self.output: dict[str, bytes] = {}
        self.readers = [
            threading.Thread(target=self._read, args=(name, stream), daemon=True)
            for name, stream in (("out", self.process.stdout), ("err", self.process.stderr))
        ]
        for reader in self.readers:
            reader.start()

    def _read(self, name: str, stream: IO[bytes]) -> None:
        self.output[name] = stream.read()

    def feed(self, indexes: range) -> None:
        """Records ``indexes``, one line each (``_index`` reads them back)."""
        assert self.process.stdin is not None
        self.process.stdin.write(b"".join(b"%d|\n" % i for i in indexes))
        self.process.stdin.flush()

    def finish(self) -> str:
        """Its stdout, once its stdin is closed and it has exited 0."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=300)
        for reader in self.readers:
            reader.join(timeout=60)
        assert self.process.returncode == 0, self.output.get("err", b"").decode()
        return self.output["out"].decode()


def test_producers_at_once_on_a_keyless_topic_each_acknowledge_their_own_records(ebb, data_dir: Path) -> None:
    """Three ``ebb produce`` processes spreading over the same partitions: runs split
    by the others' records are acknowledged in pieces, each true; each summary
    counts its own records.

    The three are fed their stdin in turns, each turn written before the next begins:
    started at once with ``--count``, one could finish before another began and
    nothing would be split."""
    assert ebb("topic", "create", "t", "--partitions", "3").code == 0
    (data_dir / "ebb.toml").write_text('[engine]\nfsync = "never"\n')
    produced, turn = 6_000, 1_000
    flags = ["--timestamp", str(T0), "--timestamp-step", "1s"]
    with_json = [_FedProducer(data_dir, "produce", "t", *flags, "--json") for _ in range(2)]
    summarised = _FedProducer(data_dir, "produce", "t", *flags)
    try:
        for start in range(0, produced, turn):
            for number, producer in enumerate([*with_json, summarised]):
                producer.feed(range(start, start + turn))
                _wait_for_offsets(data_dir, "t", start * 3 + (number + 1) * turn)
        outputs = [p.finish() for p in with_json]
        summary = summarised.finish()
    finally:
        for producer in [*with_json, summarised]:
            producer.process.kill()  # a test that failed midway leaves none running
            producer.process.wait()
    for out in outputs:
        acks = _lines(out)
        assert sum(a["count"] for a in acks) == produced
        _check_acks(data_dir, "t", acks, produced)
        assert _split_by_others(acks), "no run of this producer's had another's records before it"
    assert summary.startswith(f"produced {produced} record(s) to t: partition 0 offsets "), summary
    assert "between other producers' records" in summary, summary
    described = json.loads(ebb("topic", "describe", "t", "--json").out)
    assert sum(p["next_offset"] for p in described["partitions"]) == 3 * produced


def _wait_for_offsets(data_dir: Path, topic: str, total: int) -> None:
    """Until ``topic``'s partitions hold ``total`` records (a producer's turn is in)."""
    deadline = time.monotonic() + 120
    while True:
        with Broker(data_dir) as reader:
            held = sum(row.next_offset for row in reader.catalog.partitions(topic))
        if held >= total:
            assert held == total, (held, total)
            return
        assert time.monotonic() < deadline, f"{held} of {total} records after 120 s"
        time.sleep(0.05)


def _split_by_others(acks: list[dict[str, int]]) -> bool:
    """Whether an ack begins past where this producer's previous one on its
    partition ended: another producer's records lie between."""
    ended: dict[int, int] = {}
    split = False
    for ack in acks:
        split |= ack["partition"] in ended and ack["base_offset"] > ended[ack["partition"]]
        ended[ack["partition"]] = ack["next_offset"]
    return split


def _fsync_never(data_dir: Path) -> None:
    """These tests count appends and bytes, not fsyncs: the disk need not wait."""
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "ebb.toml").write_text('[engine]\nfsync = "never"\n')


def _counted_appends(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The records of each append any broker makes, in order."""
    sizes: list[int] = []
    original = Broker.append

    def append(self: Broker, topic: str, partition: int, records):  # type: ignore[no-untyped-def]
        sizes.append(len(records))
        return original(self, topic, partition, records)

    monkeypatch.setattr(Broker, "append", append)
    return sizes


def test_a_backfill_spread_over_200_partitions_takes_about_the_appends_of_one(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spread a record at a time, each partition's batch fills slowly: held back
    8000 records at a time, 200 partitions were appended 40 records at a time, 14
    times the appends (and fsyncs) of the same backfill to one partition."""
    _fsync_never(data_dir)
    appends = _counted_appends(monkeypatch)
    produced = 200_000
    with Broker(data_dir) as broker:
        broker.create_topic("wide", 200, {})
        broker.produce("wide", (NewRecord(b"v" * 100, None, T0 + i * 1000) for i in range(produced)))
        assert [row.next_offset for row in broker.catalog.partitions("wide")] == [1000] * 200
    assert sum(appends) == produced
    assert len(appends) <= 1.5 * produced / 1000, (len(appends), sum(appends) / len(appends))


def _peak_traced(run: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_what_a_producer_holds_does_not_grow_with_what_it_produces(data_dir: Path, no_spark_starting: None) -> None:
    """A keyless backfill a second apart is a run a record long per record: what a
    producer keeps of its acknowledgements must not be a list of them. (Measured
    with no Spark starting: its thread's imports were 23 MB of the peak.)"""
    _fsync_never(data_dir)
    with Broker(data_dir) as broker:
        broker.create_topic("t", 20, {})

        def backfill(count: int, start: int) -> Callable[[], object]:
            records = (NewRecord(b"v" * 20, None, start + i * 1000) for i in range(count))
            return lambda: broker.produce("t", records, on_ack=lambda _: None)

        shorter = _peak_traced(backfill(40_000, T0))
        longer = _peak_traced(backfill(160_000, T0 + 10**9))
    assert longer < 1.25 * shorter, (shorter, longer)


def test_large_values_are_appended_before_they_fill_the_memory(data_dir: Path) -> None:
    """Fewer than 1000 records of 1 MiB each were all held until the end: a producer
    of such values held them all at once (160 of them: a peak of 320 MiB)."""
    _fsync_never(data_dir)
    mib = 1 << 20
    with Broker(data_dir) as broker:
        broker.create_topic("big", 1, {})
        records = (NewRecord(bytes([i % 256]) * mib) for i in range(160))
        peak = _peak_traced(lambda: broker.produce("big", records, 0))
        assert broker.catalog.partition("big", 0).next_offset == 160
    # at most MAX_PENDING_BYTES held, and as much again encoded for their append
    assert peak < 160 * mib, peak / mib


# -- failures in the middle of a spread --------------------------------------------------


def _check_failed(data_dir: Path, topic: str, result: CliResult) -> list[dict[str, int]]:
    """A produce that stopped: one ``ebb: error:`` line; what it says was
    acknowledged is exactly what the ``--json`` lines acknowledged, and reads back."""
    assert result.code == 2
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ebb: error: "), result.err
    acks = _lines(result.out)
    spans: dict[int, list[int]] = {}
    for ack in acks:
        first, last = spans.setdefault(ack["partition"], [ack["base_offset"], ack["next_offset"]])
        spans[ack["partition"]] = [min(first, ack["base_offset"]), max(last, ack["next_offset"])]
    where = ", ".join(f"partition {p} offsets {a}..{b - 1}" for p, (a, b) in sorted(spans.items()))
    claimed = f"{sum(a['count'] for a in acks)} record(s) before it were acknowledged ({where})"
    assert claimed in lines[0], (claimed, lines[0])
    indexes: list[int] = []
    with Broker(data_dir) as reader:
        for ack in acks:
            records = reader.read(topic, ack["partition"], ack["base_offset"], ack["count"])
            assert [r.offset for r in records] == list(range(ack["base_offset"], ack["next_offset"])), ack
            indexes += [_index(r.value) for r in records]
    assert len(set(indexes)) == len(indexes)
    return acks


def test_a_full_disk_in_the_middle_of_a_spread_acknowledges_what_is_durable(ebb, data_dir: Path) -> None:
    assert ebb("topic", "create", "t", "--partitions", "4").code == 0
    # Spread a record at a time, each partition's batch fills at the 4000th record:
    # the third append finds the disk full.
    with inject(IOFault("pwrite", errno.ENOSPC, "log", skip=2)):
        result = ebb("produce", "t", "--count", "6000", "--size", "20", "--timestamp", str(T0),
                     "--timestamp-step", "1s", "--json")  # fmt: skip
    assert "No space left on device (ENOSPC)" in result.err and "the rest were not acknowledged" in result.err
    acks = _check_failed(data_dir, "t", result)
    assert sum(a["count"] for a in acks) == 2000 and {a["partition"] for a in acks} == {0, 1}
    assert ebb("verify").code == 0


def test_a_quota_tripping_in_the_middle_of_a_spread_acknowledges_what_is_durable(
    ebb, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert ebb("topic", "create", "q", "--partitions", "4", "--backlog-size", "1KiB",
               "--backlog-policy", "producer_exception").code == 0  # fmt: skip
    original = Broker.append
    appends = 0

    def append(self: Broker, topic: str, partition: int, records):  # type: ignore[no-untyped-def]
        nonlocal appends
        appends += 1
        if appends == 3:  # a prune cycle found the topic over its quota
            with self.catalog.write():
                EngineState(self.catalog).set_quota_state(topic, True, self.clock())
        return original(self, topic, partition, records)

    monkeypatch.setattr(Broker, "append", append)
    result = ebb("produce", "q", "--count", "6000", "--size", "20", "--timestamp", str(T0),
                 "--timestamp-step", "1s", "--json")  # fmt: skip
    assert "over its backlog quota" in result.err and "the rest were not written" in result.err
    acks = _check_failed(data_dir, "q", result)
    assert sum(a["count"] for a in acks) == 2000
    described = json.loads(ebb("topic", "describe", "q", "--json").out)
    assert sum(p["next_offset"] for p in described["partitions"]) == 2000  # nothing more was written


def test_a_record_too_large_in_a_stdin_stream_acknowledges_what_is_durable(ebb, data_dir: Path) -> None:
    assert ebb("topic", "create", "s", "--partitions", "4", "--segment-size", "4KiB").code == 0
    lines = [str(i) for i in range(5000)] + ["x" * 5000] + [str(i) for i in range(5001, 6000)]
    result = ebb("produce", "s", "--timestamp", str(T0), "--timestamp-step", "1s", "--json",
                 stdin="".join(line + "\n" for line in lines))  # fmt: skip
    assert "record 5000 is 5016 bytes" in result.err and "the rest were not written" in result.err
    acks = _check_failed(data_dir, "s", result)
    assert sum(a["count"] for a in acks) == 4000
    described = json.loads(ebb("topic", "describe", "s", "--json").out)
    assert sum(p["next_offset"] for p in described["partitions"]) == 4000


def _spread_then_interrupted(interrupt: KeyboardInterrupt | None = None) -> Iterator[NewRecord]:
    """3998 keyless records a second apart over 4 partitions, a batch each (1000 to
    partitions 0 and 1, 999 to 2 and 3), then Ctrl-C while waiting for the next
    (``interrupt``: where the source says how it came)."""
    for i in range(3998):
        yield NewRecord(b"%d|" % i, None, T0 + i * 1000)
    raise interrupt or InterruptedWaiting()


def _acknowledged_indexes(data_dir: Path, acks: list[Acked]) -> list[int]:
    """The production indexes of the records ``acks`` name, read back."""
    indexes: list[int] = []
    with Broker(data_dir) as reader:
        for a in acks:
            indexes += [_index(r.value) for r in reader.read("t", a.partition, a.base_offset, a.count)]
    return sorted(indexes)


@pytest.mark.parametrize(
    "interrupt, said",
    [
        (InterruptedWaiting(), r"^all 3998 record\(s\) read were acknowledged \(partition 0 "),
        # where the source was not waiting (it held a line it was splitting), no "all"
        (KeyboardInterrupt(), r"^3998 record\(s\) before it were .*, the rest were not acknowledged$"),
    ],
)
def test_a_producer_interrupted_waiting_for_input_writes_what_it_was_given(
    broker: Broker, data_dir: Path, interrupt: KeyboardInterrupt, said: str
) -> None:
    """Ctrl-C while the producer waits for its next record (the usual place: reading
    standard input): what it was handed is written and acknowledged before it stops,
    as a Kafka producer's close() flushes, and the interrupt still stops it, saying
    what was acknowledged. Partitions 2 and 3 had nothing appended yet."""
    broker.create_topic("t", 4, {})
    acks: list[Acked] = []
    with pytest.raises(KeyboardInterrupt, match=said):
        broker.produce("t", _spread_then_interrupted(interrupt), on_ack=acks.append)
    assert _acknowledged_indexes(data_dir, acks) == list(range(3998))
    assert [a.partition for a in acks[:4]] == [0, 1, 2, 3]  # in production order


def test_an_interrupted_producer_acknowledges_what_is_durable(
    broker: Broker, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second Ctrl-C, landing in the write of what the first left: partitions 0 and
    1 are durable (their batches filled), but their runs after the first wait behind
    partition 2's, which the interrupt kept from being appended. As on an error, they
    are acknowledged before it stops: a producer that does not learn its records were
    written sends them again."""
    broker.create_topic("t", 4, {})
    append = broker.append

    def append_interrupted_at_partition_2(topic: str, partition: int, records: Sequence[NewRecord]) -> AppendResult:
        if partition == 2:
            raise KeyboardInterrupt
        return append(topic, partition, records)

    monkeypatch.setattr(broker, "append", append_interrupted_at_partition_2)
    acks: list[Acked] = []
    with pytest.raises(
        KeyboardInterrupt, match=r"^2000 record\(s\) before it were .*, the rest were not acknowledged$"
    ):
        broker.produce("t", _spread_then_interrupted(), on_ack=acks.append)
    assert sum(a.count for a in acks) == 2000 and {a.partition for a in acks} == {0, 1}
    assert _acknowledged_indexes(data_dir, acks) == [i for i in range(3998) if i % 4 in (0, 1)]


def test_an_acknowledgement_interrupted_in_its_callback_is_never_given_twice() -> None:
    """Ctrl-C while ``on_ack`` prints a piece: the piece was given; what is
    acknowledged after must not give its offsets again."""
    seen: list[Acked] = []

    def on_ack(acked: Acked) -> None:
        seen.append(acked)
        if len(seen) == 1:
            raise KeyboardInterrupt

    acks = Acknowledgements(on_ack)
    for partition in (0, 1, 0):
        acks.produced(partition)
    with pytest.raises(KeyboardInterrupt):
        acks.appended(0, 0, 2)  # acknowledges partition 0's first run: interrupted there
    acks.appended(1, 5, 6)
    acks.acknowledge_durable()
    assert seen == [Acked(0, 0, 1), Acked(1, 5, 6), Acked(0, 1, 2)]


def test_an_append_interrupted_before_its_catalog_row_leaves_the_catalog_up_to_the_files(
    broker: Broker, data_dir: Path, monkeypatch: pytest.MonkeyPatch, ebb
) -> None:
    """Ctrl-C (or SIGTERM) after an append's batches were written, before its catalog
    row: the files were ahead of the catalog when the process exited, and ``ebb
    verify`` found "an append not yet cataloged" (errsweep, 4 runs of 4). The
    catalog is now brought up to the files before the interrupt goes on."""
    broker.create_topic("t", 1, {})
    update = broker.catalog.update_segments
    calls = 0

    def interrupted_once(*args: object, **kwargs: object) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise KeyboardInterrupt
        update(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(broker.catalog, "update_segments", interrupted_once)
    with pytest.raises(KeyboardInterrupt):
        broker.produce("t", [NewRecord(b"v", None, T0 + i) for i in range(3)], partition=0)
    checked = ebb("verify")
    assert checked.code == 0, checked
    assert json.loads(ebb("topic", "describe", "t", "--json").out)["partitions"][0]["next_offset"] == 3
