"""The CLI contract of SPEC §7 for topics, produce, consume and groups."""

from __future__ import annotations

import importlib.metadata
import json
import os
from pathlib import Path

import pytest

from console.cli.records import generated_value
from engine.clock import parse_instant
from engine.journal.journal import Journal
from tests.support.cli import run_main, state_of

T0 = parse_instant("2026-11-01T00:00:00Z")


def test_judged_scenario_describe_reports_segments_exactly_as_written(ebb, data_dir: Path) -> None:
    assert ebb("topic", "create", "orders", "--partitions", "3", "--segment-size", "1 MiB").code == 0
    produced = ebb(
        "produce",
        "orders",
        "--count",
        "20000",
        "--size",
        "1KiB",
        "--timestamp",
        "2026-11-01T00:00:00Z",
        "--timestamp-step",
        "1s",
        "--json",
    )
    assert produced.code == 0, produced.err
    acks = [json.loads(line) for line in produced.out.splitlines()]
    assert sum(a["count"] for a in acks) == 20000

    described = ebb("topic", "describe", "orders", "--json")
    assert described.code == 0
    topic = json.loads(described.out)
    assert topic["name"] == "orders"
    assert [p["partition"] for p in topic["partitions"]] == [0, 1, 2]
    assert sum(p["next_offset"] for p in topic["partitions"]) == 20000
    assert topic["policy"]["segment_size"] == {"value": "1 MiB", "normalized": "1048576 B", "source": "topic"}
    assert topic["policy"]["retention_time"]["source"] == "default"

    # Which record (by production index) went where, from the acks.
    index_of: dict[tuple[int, int], int] = {}
    produced_so_far = 0
    for ack in acks:
        for k, offset in enumerate(range(ack["base_offset"], ack["next_offset"])):
            index_of[(ack["partition"], offset)] = produced_so_far + k
        produced_so_far += ack["count"]

    for p in topic["partitions"]:
        segments = p["segments"]
        assert p["log_start_offset"] == 0 and segments[0]["base_offset"] == 0
        assert segments[-1]["next_offset"] == p["next_offset"]
        assert [s["sealed"] for s in segments] == [True] * (len(segments) - 1) + [False]
        assert p["size_bytes"] == sum(s["size_bytes"] for s in segments)
        for before, after in zip(segments, segments[1:]):
            assert before["next_offset"] == after["base_offset"]
        for s in segments:
            assert s["size_bytes"] <= 1 << 20
            log = data_dir / "topics" / "orders" / str(p["partition"]) / f"{s['base_offset']:020d}.log"
            assert log.stat().st_size == s["size_bytes"]
            # Timestamps exactly as written: record i was stamped T0 + i seconds.
            first_index = index_of[(p["partition"], s["base_offset"])]
            last_index = index_of[(p["partition"], s["next_offset"] - 1)]
            assert s["first_timestamp"] == T0 + first_index * 1000
            assert s["max_timestamp"] == T0 + last_index * 1000

    consumed = ebb("consume", "orders", "--group", "check", "--partition", "1", "--max", "5", "--json")
    records = [json.loads(line) for line in consumed.out.splitlines()]
    assert [r["offset"] for r in records] == [0, 1, 2, 3, 4]
    for r in records:
        index = index_of[(1, r["offset"])]
        assert r["value"] == generated_value(index, 1024).decode()
        assert r["timestamp"] == T0 + index * 1000


def test_produce_from_stdin_and_consume_with_commit(ebb) -> None:
    ebb("topic", "create", "lines")
    assert ebb("produce", "lines", "--key", "k", stdin="alpha\nbeta\ngamma\n").code == 0
    first = ebb("consume", "lines", "--group", "g", "--max", "2")
    assert first.out.splitlines() == ["alpha", "beta"]
    second = ebb("consume", "lines", "--group", "g")
    assert second.out.splitlines() == ["gamma"]
    # --no-commit writes nothing: it reads from the log start, as a new group would,
    # without creating the group.
    peek = ebb("consume", "lines", "--group", "other", "--no-commit", "--json")
    assert [json.loads(line)["key"] for line in peek.out.splitlines()] == ["k", "k", "k"]
    groups = json.loads(ebb("group", "list", "lines", "--json").out)
    by_name = {g["name"]: g for g in groups}
    assert by_name["g"]["positions"] == {"0": 3} and by_name["g"]["lag"] == {"0": 0}
    assert "other" not in by_name
    # A group created by consuming is a reader: it must never hold data back.
    assert by_name["g"]["kind"] == "reader"


def test_producers_of_one_keyless_record_each_spread_over_the_partitions(ebb, data_dir: Path) -> None:
    """Each ``ebb produce`` is a producer of its own: begun at partition 0 every
    time, a record per call would all land there."""
    ebb("topic", "create", "spread", "--partitions", "3")
    for n in range(7):
        assert ebb("produce", "spread", stdin=f"r{n}\n").code == 0
    described = json.loads(ebb("topic", "describe", "spread", "--json").out)
    ends = sorted((p["partition"], p["next_offset"]) for p in described["partitions"])
    assert ends == [(0, 3), (1, 2), (2, 2)]
    # A run of batches goes on from the partition written least.
    assert ebb("produce", "spread", "--count", "2500", stdin="x\n").code == 0
    described = json.loads(ebb("topic", "describe", "spread", "--json").out)
    ends = sorted((p["partition"], p["next_offset"]) for p in described["partitions"])
    assert ends == [(0, 503), (1, 1002), (2, 1002)]


def test_a_keyless_backfill_reaches_the_partitions_as_its_records_would_have_arrived(ebb) -> None:
    """Records stamped a second apart go to the partitions a record at a time in
    turn, as a producer's short batches would have taken them: each partition is
    written a record every 4 s, not 1000 records in a row and then nothing for 3000 s
    (which ``ebb forecast`` read as a wrong rate). Each acknowledgement is a run of
    records produced one after another, in production order."""
    ebb("topic", "create", "spread", "--partitions", "4")
    args = ["--count", "2002", "--size", "10", "--timestamp", "2026-11-01T00:00:00Z", "--timestamp-step", "1s"]
    produced = ebb("produce", "spread", *args, "--json")
    assert produced.code == 0, produced.err
    acks = [json.loads(line) for line in produced.out.splitlines()]
    assert [a["count"] for a in acks] == [1] * 2002
    assert [a["partition"] for a in acks] == [i % 4 for i in range(2002)]
    for partition in range(4):
        assert [a["base_offset"] for a in acks if a["partition"] == partition] == list(
            range(501 if partition < 2 else 500)
        )
    first = parse_instant("2026-11-01T00:00:00Z")
    for partition in range(4):
        read = ebb("consume", "spread", "--partition", str(partition), "--max", "1000", "--json")
        stamps = [json.loads(line)["timestamp"] for line in read.out.splitlines()]
        assert stamps == [first + (partition + 4 * k) * 1000 for k in range(len(stamps))]
    # Stamped closer than the batch's span, records still go a batch at a time.
    assert ebb("produce", "spread", "--count", "10", "--timestamp", "2026-11-02T00:00:00Z",
               "--timestamp-step", "100ms").code == 0  # fmt: skip
    described = json.loads(ebb("topic", "describe", "spread", "--json").out)
    assert [p["next_offset"] for p in described["partitions"]] == [501, 501, 510, 500]


def test_group_create_commit_and_delete(ebb) -> None:
    ebb("topic", "create", "t", "--partitions", "2")
    ebb("produce", "t", "--partition", "1", "--count", "10")
    assert ebb("group", "create", "t", "sub", "--kind", "subscriber", "--from", "latest").code == 0
    listed = {g["name"]: g for g in json.loads(ebb("group", "list", "t", "--json").out)}
    assert listed["sub"]["positions"] == {"0": 0, "1": 10} and listed["sub"]["kind"] == "subscriber"
    assert (
        ebb("group", "commit", "t", "sub", "--partition", "1", "--offset", "4", "--at", "2026-01-01T00:00:00Z").code
        == 0
    )
    listed = {g["name"]: g for g in json.loads(ebb("group", "list", "t", "--json").out)}
    assert listed["sub"]["positions"]["1"] == 4
    assert listed["sub"]["committed_at"]["1"] == parse_instant("2026-01-01T00:00:00Z")
    assert ebb("group", "delete", "t", "sub").code == 0
    assert json.loads(ebb("group", "list", "t", "--json").out) == []


def test_alter_journals_changes_and_reset_returns_to_default(ebb, broker) -> None:
    ebb("topic", "create", "t", "--retention-time", "2d")
    assert ebb("topic", "alter", "t", "--retention-time", "3h", "--hold").code == 0
    policy = json.loads(ebb("topic", "describe", "t", "--json").out)["policy"]
    assert policy["retention_time"] == {"value": "3h", "normalized": "10800 s", "source": "topic"}
    assert policy["hold"]["normalized"] == "on"
    assert ebb("topic", "alter", "t", "--reset", "retention_time", "--no-hold").code == 0
    policy = json.loads(ebb("topic", "describe", "t", "--json").out)["policy"]
    assert policy["retention_time"]["source"] == "default" and policy["hold"]["normalized"] == "off"
    newest_first = Journal(broker.catalog).policy_changes(topic="t", limit=None)
    changes = [(c["field"], c["old"], c["new"]) for c in reversed(newest_first)]
    assert changes == [
        ("retention_time", None, "2d"),
        ("hold", None, "on"),
        ("retention_time", "2d", "3h"),
        ("hold", "on", "off"),
        ("retention_time", "3h", None),
    ]


def test_every_path_that_switches_a_hold_journals_a_hold_or_release(ebb) -> None:
    """`ebb log --action hold` lists every hold, whichever command set it; an alter
    that leaves the hold as it was journals none."""
    ebb("topic", "create", "born", "--hold")
    ebb("topic", "create", "plain")
    ebb("topic", "alter", "plain", "--hold")
    ebb("topic", "alter", "plain", "--retention-time", "1h")
    ebb("topic", "alter", "plain", "--reset", "hold")
    ebb("topic", "alter", "born", "--no-hold")
    ebb("hold", "born")
    ebb("hold", "born")
    rows = reversed(json.loads(ebb("log", "--json", "--limit", "0").out))
    switches = [(r["action"], r["topic"], r["details"]["old"], r["details"]["new"]) for r in rows]
    assert switches == [
        ("hold", "born", "off", "on"),
        ("hold", "plain", "off", "on"),
        ("release", "plain", "on", "off"),
        ("release", "born", "on", "off"),
        ("hold", "born", "off", "on"),
    ]


def test_a_release_returns_the_hold_to_the_default(ebb) -> None:
    """An audit: `ebb release` stored hold=off as the topic's own, so the editor showed
    "hold off (topic)" for a topic nobody had set."""
    ebb("topic", "create", "t")
    assert ebb("hold", "t").code == 0 and ebb("release", "t").code == 0
    hold = json.loads(ebb("topic", "describe", "t", "--json").out)["policy"]["hold"]
    assert (hold["normalized"], hold["source"]) == ("off", "default")


def test_a_topic_with_an_invalid_effective_policy_does_not_hide_the_others(ebb, data_dir: Path) -> None:
    """A config default changed under a topic's overrides (retention_time above its
    max_time) made ``topic list`` one error for the whole data directory."""
    assert ebb("topic", "create", "capped", "--max-time", "30d").code == 0
    ebb("topic", "create", "plain")
    ebb("produce", "plain", "--count", "3")
    (data_dir / "ebb.toml").write_text('[policy]\nretention_time = "60d"\n')
    listed = {t["name"]: t for t in json.loads(ebb("topic", "list", "--json").out)}
    assert listed["plain"]["retention_time"] == "60d" and listed["plain"]["size_bytes"] > 0
    assert listed["capped"]["retention_time"] is None
    assert listed["capped"]["policy_error"] == "invalid policy: retention_time (60d) must be <= max_time (30d)"
    text = ebb("topic", "list")
    assert text.code == 0 and "(invalid policy: retention_time (60d) must be <= max_time (30d))" in text.out


def test_topic_list_and_delete(ebb, data_dir: Path) -> None:
    ebb("topic", "create", "a")
    ebb("topic", "create", "b", "--partitions", "2")
    ebb("produce", "b", "--count", "5")
    listed = json.loads(ebb("topic", "list", "--json").out)
    assert [(t["name"], t["partitions"]) for t in listed] == [("a", 1), ("b", 2)]
    described = json.loads(ebb("topic", "describe", "b", "--json").out)
    assert ebb("topic", "delete", "b").code == 0
    assert [t["name"] for t in json.loads(ebb("topic", "list", "--json").out)] == ["a"]
    # journaled, with what the topic held
    (deleted,) = json.loads(ebb("log", "--action", "topic_deleted", "--json").out)
    held = described["partitions"]
    assert (deleted["topic"], deleted["trigger"], deleted["actor"], deleted["status"]) == (
        "b",
        "manual",
        "cli",
        "applied",
    )
    assert deleted["messages"] == 5 == sum(p["next_offset"] - p["log_start_offset"] for p in held)
    assert deleted["bytes"] == sum(s["size_bytes"] for p in held for s in p["segments"])
    assert deleted["details"] == {"partitions": 2, "segments": sum(len(p["segments"]) for p in held)}
    assert not (data_dir / "topics" / "b").exists()
    # The name is free again, and the new topic starts empty.
    assert ebb("topic", "create", "b").code == 0
    assert json.loads(ebb("topic", "describe", "b", "--json").out)["partitions"][0]["next_offset"] == 0


BAD_INPUTS = [
    (("topic", "create", "t2", "--retention-time", "5 parsecs"), "retention_time"),
    (("topic", "create", "t2", "--segment-size", "10 XB"), "segment_size"),
    (("topic", "create", "t2", "--max-partition-size", "1 MiB", "--segment-size", "2 MiB"), "max_partition_size"),
    (("topic", "create", "t2", "--retention-time", "0", "--retention-size", "1 GiB"), "retention_time"),
    (("topic", "create", "t2", "--retention-time", "-2"), "retention_time"),
    (("topic", "create", "t2", "--retention-time", "-5m"), "retention_time"),
    # any flag's negative value is refused for its value, not as a missing one
    (("forecast", "--horizon", "-1h"), "invalid --horizon '-1h': must be a finite duration"),
    (("forecast", "--disk-budget", "-1GiB"), "invalid --disk-budget '-1GiB': must be a finite size"),
    (("produce", "t", "--count", "1", "--timestamp", "0", "--timestamp-step", "-1s"), "invalid --timestamp-step"),
    (("engine", "--prune-interval", "-5s"), "invalid --prune-interval '-5s'"),
    (("log", "--since", "-1h"), "invalid --since '-1h': a duration back from now"),
    (("topic", "alter", "t", "--backlog-size", "-1 KiB"), "backlog_size"),
    (("topic", "create", "t2", "--granularity", "record"), "granularity"),
    (("topic", "create", "t2", "--partitions", "0"), "partitions"),
    (("topic", "create", "../escape"), "topic name"),
    (("topic", "create", "a/b"), "topic name"),
    (("topic", "create", ".."), "topic name"),
    (("topic", "create", "has space"), "topic name"),
    (("topic", "create", ""), "empty"),
    (("topic", "create", "t"), "already exists"),
    (("topic", "alter", "t", "--retention-time", "soon"), "retention_time"),
    (("topic", "alter", "t", "--retention-time", "9d"), "max_time"),
    (("topic", "alter", "nope", "--hold"), "does not exist"),
    (("topic", "describe", "nope"), "does not exist"),
    (("topic", "delete", "nope"), "does not exist"),
    (("produce", "nope", "--count", "1"), "does not exist"),
    (("produce", "t", "--partition", "7", "--count", "1"), "no partition 7"),
    (("produce", "t", "--count", "1", "--timestamp", "yesterday"), "invalid time"),
    (("produce", "t", "--count", "1", "--size", "2 GiB"), "--size"),
    (("produce", "t", "--count", "1", "--size", "2 KiB"), "does not fit a segment"),
    (("produce", "t", "--count", "-5"), "must not be negative"),
    (("produce", "t", "--count", "0"), "--count: must be at least 1"),
    (("consume", "t", "--group", "../../x"), "group name"),
    (("group", "create", "t", "g/../../x"), "group name"),
    (("group", "create", "t", "g", "--kind", "boss"), "invalid choice"),
    (("group", "commit", "t", "g0", "--partition", "0", "--offset", "999"), "invalid offset"),
    (("group", "commit", "t", "ghost", "--partition", "0", "--offset", "0"), "does not exist"),
    (("topic", "frobnicate"), "invalid choice"),
    (("--config", "/nonexistent/ebb.toml", "topic", "list"), "does not exist"),
]


@pytest.mark.parametrize(("args", "mentions"), BAD_INPUTS, ids=[" ".join(a) for a, _ in BAD_INPUTS])
def test_bad_input_one_line_nonzero_nothing_written(ebb, data_dir: Path, args: tuple[str, ...], mentions: str) -> None:
    ebb("topic", "create", "t", "--segment-size", "1 KiB", "--max-time", "8d")
    ebb("produce", "t", "--count", "3", "--size", "10")
    ebb("group", "create", "t", "g0")
    before = state_of(data_dir)
    result = ebb(*args)
    assert result.code != 0
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("ebb: error: ") and mentions in lines[0]
    assert "Traceback" not in result.err and result.out == ""
    assert state_of(data_dir) == before


def test_bad_input_in_a_real_process_prints_no_traceback(ebb_process) -> None:
    result = ebb_process("topic", "create", "../../etc", "--retention-time", "7 days")
    assert result.code == 2
    assert result.err.count("\n") == 1 and "Traceback" not in result.err
    assert "invalid topic name" in result.err


def test_version_is_the_installed_distributions_and_touches_no_data_directory(ebb_process, data_dir: Path) -> None:
    result = ebb_process("--version")
    assert result.code == 0, result.err
    assert result.out == f"ebb {importlib.metadata.version('ebbtide')}\n"
    assert not (data_dir / "catalog.db").exists()


def test_data_directory_and_catalog_are_owner_only(ebb, data_dir: Path) -> None:
    ebb("topic", "create", "t")
    assert os.stat(data_dir).st_mode & 0o077 == 0
    assert os.stat(data_dir / "catalog.db").st_mode & 0o077 == 0
    assert os.stat(data_dir / "topics" / "t" / "0").st_mode & 0o077 == 0


@pytest.mark.parametrize("reading", [("topic", "list"), ("log",), ("verify",)])
def test_a_reading_command_on_a_missing_data_directory_says_it_created_it(ebb, data_dir: Path, reading) -> None:
    """A mistyped --data-dir must not read as an empty data directory (or, to
    `ebb verify`, a clean one) without a word."""
    result = ebb(*reading)
    assert result.code == 0 and data_dir.is_dir()
    assert result.err.startswith(f"ebb: warning: data directory {data_dir} did not exist; created it empty")
    assert result.err.count("\n") == 1, result.err
    again = ebb(*reading)
    assert again.code == 0 and again.err == "", again.err


def test_a_writing_command_creates_a_missing_data_directory_silently(ebb, data_dir: Path) -> None:
    result = ebb("topic", "create", "t")
    assert result.code == 0 and result.err == "", result.err
    assert data_dir.is_dir()


def test_a_future_timestamp_is_written_with_one_warning(ebb) -> None:
    """A record stamped after now holds time retention on its partition until then:
    it is written (a producer's clock may run ahead), and the operator is told."""
    ebb("topic", "create", "t")
    past = ebb("produce", "t", "--count", "2", "--timestamp", "2026-11-01T00:00:00Z", "--timestamp-step", "1h")
    assert (past.code, past.err) == (0, "")
    # the last record of a backfill is the one that counts
    ahead = ebb("produce", "t", "--count", "2", "--timestamp", "2026-11-01T00:00:00Z", "--timestamp-step", "100d")
    assert ahead.code == 0
    (line,) = ahead.err.splitlines()
    assert line.startswith("ebb: warning: --timestamp 2027-02-09") and "KEEP_FUTURE_TIMESTAMP" in line
    # from stdin, the first record's stamp (said once, for two records); none for no record
    piped = ebb("produce", "t", "--timestamp", "2099-01-01T00:00:00Z", stdin="a\nb\n")
    assert piped.code == 0 and len(piped.err.splitlines()) == 1 and "2099-01-01" in piped.err
    empty = ebb("produce", "t", "--timestamp", "2099-01-01T00:00:00Z", stdin="")
    assert empty.code != 0 and empty.err.splitlines() == [
        "ebb: error: no records to produce (empty stdin and no --count)"
    ]
    assert json.loads(ebb("topic", "describe", "t", "--json").out)["partitions"][0]["next_offset"] == 6


def test_global_options_may_follow_the_command(tmp_path: Path) -> None:
    """``--data-dir``, ``--config`` and ``--read-only`` after the command, as Kafka's
    tools take them; a ``--data-dir`` after ``--`` is a record's, not the option."""
    data, other = tmp_path / "data", tmp_path / "other"
    assert run_main(["topic", "create", "t", "--data-dir", str(data)]).code == 0
    (data / "ebb.toml").write_text("[engine]\n")
    listed = run_main(["topic", "list", "--json", f"--data-dir={data}", "--config", str(data / "ebb.toml")])
    assert [t["name"] for t in json.loads(listed.out)] == ["t"]
    refused = run_main(["topic", "delete", "t", "--read-only", "--data-dir", str(data)])
    assert refused.code == 2 and "--read-only: `ebb topic delete` writes" in refused.err
    assert not other.exists()
    assert run_main(["--data-dir", str(data), "topic", "describe", "t", "--", "--data-dir", str(other)]).code == 2
    assert not other.exists()
