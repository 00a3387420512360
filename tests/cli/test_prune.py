"""The CLI of the prune engine (SPEC §7): ``prune`` and ``explain`` JSON contracts,
the manual operations, ``group expire|move``, ``log``, ``engine``; bad input is one
line on stderr, exit 2, nothing written.

One test runs ``ebb engine`` as a real process with its own Spark session (what the
terminal sees, SIGTERM); the others hand the commands the test run's shared Spark
engine, so that each does not start a JVM of its own."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from console.model.journal import cycle_took, reason_text
from engine.broker import Broker
from engine.journal.journal import Journal
from engine.journal.rows import ACTION_FIELDS, CYCLE_FIELDS
from engine.journal.state import EngineState
from tests.support.cli import REPO, ebb_command, state_of, subprocess_env
from tests.support.prune_driver import NOW, make_topic, sealed_bases

TOPIC = "events"


@pytest.fixture
def events(data_dir: Path) -> dict[int, list[tuple[int, int]]]:
    """Topic ``events``: 2 partitions of 300 records, all older than NOW - 1h
    (retention_time 1h), so that at NOW every sealed segment goes. Returns the
    sealed segments per partition."""
    with Broker(data_dir) as broker:
        make_topic(broker, TOPIC)
        broker.create_group(TOPIC, "sub", "subscriber", "earliest")
        Journal(broker.catalog)  # its tables, as any data directory that has run a cycle
        return {p: sealed_bases(broker, TOPIC, p) for p in (0, 1)}


def one_error_line(result) -> str:
    assert result.code == 2 and result.out == ""
    lines = result.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ebb: error: ") and "Traceback" not in result.err
    return lines[0]


# -- prune and explain (on the shared engine) -------------------------------------------------------


def test_prune_dry_run_then_prune_json_contracts(ebb, data_dir: Path, events, shared_spark) -> None:
    files_before = state_of(data_dir)[0]
    dry = ebb("prune", "--dry-run", "--json", "--now", str(NOW))
    assert dry.code == 0, dry.err
    plan = json.loads(dry.out)
    assert {"cycle_id", "dry_run", "now", "actions", "segments_deleted", "bytes_freed"} <= set(plan)
    assert plan["dry_run"] is True and plan["now"] == NOW
    deletions = [a for a in plan["actions"] if a["action"] == "delete_segment"]
    assert {"action", "topic", "partition", "base_offset", "next_offset", "bytes", "reason"} <= set(deletions[0])
    assert sorted((a["partition"], a["base_offset"], a["next_offset"]) for a in deletions) == sorted(
        (p, b, n) for p, segments in events.items() for b, n in segments
    )
    assert {a["reason"] for a in deletions} == {"DELETE_TIME"}
    assert plan["segments_deleted"] == len(deletions) and plan["bytes_freed"] == sum(a["bytes"] for a in deletions)
    assert state_of(data_dir)[0] == files_before  # a dry run deletes nothing

    done = ebb("prune", "--json", "--now", str(NOW), "--topic", TOPIC)
    assert done.code == 0, done.err
    applied = json.loads(done.out)
    assert applied["dry_run"] is False and applied["cycle_id"] == plan["cycle_id"] + 1
    assert (applied["segments_deleted"], applied["bytes_freed"]) == (plan["segments_deleted"], plan["bytes_freed"])
    with Broker(data_dir) as broker:
        for p, segments in events.items():
            assert broker.catalog.partition(TOPIC, p).log_start_offset == segments[-1][1]

    cycles = json.loads(ebb("log", "--cycles", "--json").out)
    assert [(c["id"], c["status"], c["trigger"], c["actor"]) for c in cycles] == [
        (applied["cycle_id"], "done", "manual", "cli"),
        (plan["cycle_id"], "dry_run", "manual", "cli"),
    ]


def test_explain_json_contract_and_what_if(ebb, events, shared_spark) -> None:
    shown = ebb("explain", TOPIC, "--json", "--now", str(NOW), "--partition", "1")
    assert shown.code == 0, shown.err
    explained = json.loads(shown.out)
    assert explained["topic"] == TOPIC and explained["now"] == NOW
    rows = explained["segments"]
    assert {"partition", "base_offset", "next_offset", "decision", "reason", "eligible_at"} <= set(rows[0])
    assert {r["partition"] for r in rows} == {1} and len(rows) == len(events[1]) + 1
    assert [r["decision"] for r in rows] == ["delete"] * len(events[1]) + ["keep"]
    assert rows[-1]["reason"] == "KEEP_ACTIVE" and rows[-1]["eligible_at"] is None
    assert all(isinstance(r["eligible_at"], int) for r in rows[:-1])

    what_if = json.loads(ebb("explain", TOPIC, "--json", "--now", str(NOW), "--retention-time", "infinite").out)
    assert {r["decision"] for r in what_if["segments"]} == {"keep"}
    assert what_if["what_if"] is True and what_if["segments"][0]["saved_decision"] == "delete"


def test_engine_runs_n_cycles_with_one_json_line_each(ebb, data_dir: Path, events, shared_spark) -> None:
    ran = ebb("engine", "--cycles", "2", "--prune-interval", "10ms", "--json")
    assert ran.code == 0, ran.err
    lines = [json.loads(line) for line in ran.out.splitlines()]
    assert [line["number"] for line in lines] == [1, 2]
    assert [line["status"] for line in lines] == ["done", "done"]
    first = lines[0]
    assert {
        "cycle_id",
        "status",
        "started",
        "finished",
        "duration_ms",
        "planned",
        "applied",
        "bytes_freed",
        "failed",
        "error",
    } <= set(first)
    # Real time now is far past the records (all older than an hour): the first
    # cycle deletes every sealed segment, the second finds nothing.
    assert first["applied"] == sum(len(s) for s in events.values()) and lines[1]["applied"] == 0
    assert ran.err == ""
    # the journal times each cycle's planning (Spark) and applying; its duration is both
    with Broker(data_dir) as broker:
        journaled = Journal(broker.catalog).cycles()
    assert [c.id for c in journaled] == [line["cycle_id"] for line in reversed(lines)]
    assert all(c.plan_ms and c.apply_ms is not None for c in journaled)
    assert all(c.duration_ms == c.plan_ms + c.apply_ms for c in journaled if c.plan_ms is not None)
    # and each line says the journal's times, as `ebb log --cycles` and the console do
    times = [(line["duration_ms"], line["plan_ms"], line["apply_ms"]) for line in reversed(lines)]
    assert times == [(c.duration_ms, c.plan_ms, c.apply_ms) for c in journaled]


def test_engine_line_gives_the_journals_times(ebb, data_dir: Path, events, shared_spark) -> None:
    """One figure per cycle everywhere: the line says what the journal (and so the
    console's Took and `ebb log --cycles`) says, not the scheduler's own clock."""
    ran = ebb("engine", "--cycles", "2", "--prune-interval", "10ms")
    assert ran.code == 0 and ran.err == "", ran.err
    banner, *lines = ran.out.splitlines()
    with Broker(data_dir) as broker:
        journaled = list(reversed(Journal(broker.catalog).cycles()))
    assert len(lines) == len(journaled) == 2
    for line, cycle in zip(lines, journaled):
        assert f" cycle {cycle.id} done in {cycle_took(cycle)}: deleted " in line, line


def test_engine_refuses_a_bad_interval_before_starting_spark(
    ebb, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("engine.prune.session.spark_engine_for", lambda *a, **k: pytest.fail("Spark started"))
    for bad in ("0", "soon", "infinite"):
        assert "invalid --prune-interval" in one_error_line(ebb("engine", "--prune-interval", bad))


# -- manual operations ---------------------------------------------------------------------------------


def test_truncate_purge_hold_release_pause_resume_one_line_each(ebb, data_dir: Path, events) -> None:
    cut = events[0][2][0]
    out = ebb("truncate", TOPIC, "--partition", "0", "--before-offset", str(cut))
    assert out.code == 0 and out.err == ""
    assert out.out.startswith(f"truncated {TOPIC}/0: log start 0 -> {cut} ({cut} record(s)), deleted 2 segment(s)")
    assert out.out.count("\n") == 1 and "moved 1 group(s) (sub)" in out.out

    oldest = json.loads(ebb("truncate", TOPIC, "--partition", "0", "--oldest-segments", "1", "--json").out)
    assert oldest["operation"] == "delete_oldest" and oldest["partitions"][0]["new_log_start_offset"] == events[0][3][0]

    by_time = ebb("truncate", TOPIC, "--partition", "1", "--before-time", "1970-01-01T00:00:00Z")
    assert by_time.out == f"truncate {TOPIC}/1: nothing to delete (log start 0)\n"

    assert ebb("hold", TOPIC).out.startswith(f"topic {TOPIC} is now on hold")
    assert ebb("hold", TOPIC).out == f"topic {TOPIC} was already on hold\n"
    assert "is on hold: release it first" in one_error_line(ebb("purge", TOPIC, "--yes"))
    assert json.loads(ebb("release", TOPIC, "--json").out) == {
        "operation": "release",
        "changed": True,
        "topic": TOPIC,
        "hold": False,
    }

    assert ebb("pause").out.startswith("engine paused")
    assert "paused" in one_error_line(ebb("truncate", TOPIC, "--partition", "1", "--before-offset", "5"))
    assert json.loads(ebb("resume", "--json").out) == {"operation": "resume", "changed": True, "paused": False}

    purged = json.loads(ebb("purge", TOPIC, "--yes", "--json").out)
    assert purged["operation"] == "purge" and purged["changed"] and purged["cycle_id"] >= 1
    assert [p["new_log_start_offset"] for p in purged["partitions"]] == [300, 300]
    assert {"partition", "log_start_offset", "new_log_start_offset", "segments_deleted", "bytes_freed"} <= set(
        purged["partitions"][0]
    )

    actions = [a["action"] for a in json.loads(ebb("log", "--json", "--limit", "0").out)]
    for kind in (
        "truncate",
        "purge",
        "hold",
        "release",
        "pause",
        "resume",
        "subscriber_overrun",
        "delete_segment",
        "roll",
    ):
        assert kind in actions


def test_purge_needs_yes_when_not_at_a_terminal(ebb, data_dir: Path, events) -> None:
    before = state_of(data_dir)
    line = one_error_line(ebb("purge", TOPIC))
    assert line == f"ebb: error: purge deletes every record of topic {TOPIC}: confirm with --yes"
    assert state_of(data_dir) == before


@pytest.mark.parametrize(
    "args, message",
    [
        (("truncate", TOPIC, "--before-offset", "5"), "--partition"),
        (("truncate", TOPIC, "--partition", "0"), "one of the arguments"),
        (("truncate", TOPIC, "--partition", "0", "--before-offset", "5", "--before-time", "0"), "not allowed with"),
        (("truncate", TOPIC, "--partition", "0", "--before-offset", "301"), "invalid offset 301 for events/0"),
        (("truncate", TOPIC, "--partition", "0", "--before-time", "yesterday"), "invalid time 'yesterday'"),
        (("truncate", TOPIC, "--partition", "0", "--oldest-segments", "0"), "must be at least 1"),
        (("truncate", TOPIC, "--partition", "0", "--oldest-segments", "500"), "fewer than 500"),
        (("truncate", TOPIC, "--partition", "9", "--before-offset", "1"), "no partition 9"),
        (("truncate", "ghost", "--partition", "0", "--before-offset", "1"), "topic 'ghost' does not exist"),
        (("purge", "ghost", "--yes"), "topic 'ghost' does not exist"),
        (("hold", "../etc"), "does not exist"),
        (("group", "move", TOPIC, "sub", "--partition", "0"), "one of the arguments"),
        (("group", "move", TOPIC, "sub", "--partition", "0", "--to-offset", "999"), "invalid offset 999"),
        (("group", "move", TOPIC, "nobody", "--partition", "0", "--to-latest"), "group 'nobody' does not exist"),
        (("group", "expire", TOPIC, "nobody"), "group 'nobody' does not exist"),
        (("log", "--action", "explode"), "unknown action 'explode'"),
        (("log", "--since", "a while"), "invalid --since"),
        (("log", "--cycles", "--topic", TOPIC), "filter actions, not cycles"),
        (("log", "--csv", "--json"), "not allowed with"),
        (("log", "--cycle", "77"), "cycle 77 is not in the journal"),
        (("log", "--status", "weird"), "unknown action status"),
        (("log", "--topic", "ghost"), "topic 'ghost' does not exist"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_changes_nothing(ebb, data_dir: Path, events, args, message) -> None:
    before = state_of(data_dir)
    assert message in one_error_line(ebb(*args))
    assert state_of(data_dir) == before


def test_group_move_and_expire(ebb, data_dir: Path, events) -> None:
    assert ebb("group", "commit", TOPIC, "sub", "--partition", "0", "--offset", "120").code == 0
    back = ebb("group", "move", TOPIC, "sub", "--partition", "0", "--to-offset", "20")
    assert back.out == f"moved group sub on {TOPIC}/0 from 120 to 20 (back, 100 record(s))\n"
    latest = json.loads(ebb("group", "move", TOPIC, "sub", "--partition", "0", "--to-latest", "--json").out)
    assert (latest["old_position"], latest["new_position"], latest["messages"]) == (20, 300, 280)
    assert ebb("group", "move", TOPIC, "sub", "--partition", "1", "--to-time", "1970-01-01").out.endswith(
        "from 0 to 0 (nowhere, 0 record(s))\n"
    )
    moves = json.loads(ebb("log", "--action", "manual_move", "--json").out)
    assert [(m["start_offset"], m["end_offset"], m["messages"]) for m in moves] == [
        (0, 0, 0),
        (20, 300, 280),
        (120, 20, -100),
    ]

    assert ebb("group", "expire", TOPIC, "sub").out == f"expired subscriber group sub of {TOPIC}\n"
    assert ebb("group", "list", TOPIC).out == f"topic {TOPIC} has no groups\n"
    (expired,) = json.loads(ebb("log", "--action", "group_expired", "--json").out)
    assert (expired["trigger"], expired["actor"], expired["details"]["group"]) == ("manual", "cli", "sub")


def test_log_filters_and_exports(ebb, data_dir: Path, events) -> None:
    ebb("truncate", TOPIC, "--partition", "0", "--before-offset", "100")
    ebb("pause")
    csv_out = ebb("log", "--csv", "--limit", "0").out.splitlines()
    assert csv_out[0].split(",") == list(ACTION_FIELDS)
    assert len(csv_out) > 5
    rows = json.loads(ebb("log", "--json", "--topic", TOPIC, "--action", "truncate").out)
    assert [list(r) for r in rows] == [list(ACTION_FIELDS)] and rows[0]["end_offset"] == 100
    (cycle,) = json.loads(ebb("log", "--cycles", "--json").out)
    assert list(cycle) == list(CYCLE_FIELDS) and cycle["scope"] == [TOPIC]
    in_cycle = json.loads(ebb("log", "--cycle", str(cycle["id"]), "--json", "--limit", "0").out)
    assert {r["cycle"] for r in in_cycle} == {cycle["id"]} and "pause" not in {r["action"] for r in in_cycle}
    assert len(json.loads(ebb("log", "--json", "--limit", "2").out)) == 2
    assert json.loads(ebb("log", "--json", "--action", "pause", "--since", "1h").out)[0]["action"] == "pause"
    text = ebb("log", "--limit", "3").out.splitlines()
    assert text[0].split()[:5] == ["TIME", "CYCLE", "TRIGGER", "ACTOR", "ACTION"] and len(text) == 4
    changes = json.loads(ebb("log", "--policy-changes", "--json", "--topic", TOPIC).out)
    assert {c["field"] for c in changes} == {"segment_size", "retention_time"}


def test_log_gives_each_reason_as_the_journal_view_does(ebb, data_dir: Path, events) -> None:
    """One formatter (console/model/journal.py reason_text): a moved log start says
    where it went and what moved it, a group's move names the group."""
    ebb("truncate", TOPIC, "--partition", "0", "--before-offset", "100")
    ebb("group", "move", TOPIC, "sub", "--partition", "1", "--to-offset", "40")
    header, moved = ebb("log", "--action", "move_log_start").out.splitlines()
    assert "  cycle's cut to 100  " in moved
    lines = ebb("log", "--limit", "0").out.splitlines()[1:]
    with Broker(data_dir) as broker:
        actions = Journal(broker.catalog).actions(limit=None)
    assert len(lines) == len(actions)
    for line, action in zip(lines, actions, strict=True):
        assert f"  {reason_text(action) or '-'}  " in line, line
    assert any("  group sub  " in line for line in lines)


def test_log_of_a_new_data_directory_is_empty(ebb) -> None:
    assert ebb("log").out == "no journal rows match\n"
    assert ebb("log", "--cycles", "--json").out == "[]\n"
    assert ebb("log", "--csv").out.splitlines() == [",".join(ACTION_FIELDS)]


def test_produce_over_quota_is_one_error_line(ebb, data_dir: Path) -> None:
    assert ebb("topic", "create", "q", "--backlog-size", "1KiB", "--backlog-policy", "producer_exception").code == 0
    with Broker(data_dir) as broker, broker.catalog.write():
        EngineState(broker.catalog).set_quota_state("q", True, 0)
    before = state_of(data_dir)
    line = one_error_line(ebb("produce", "q", "--count", "3"))
    assert "topic q is over its backlog quota (backlog_policy=producer_exception)" in line
    assert line.endswith("no record was written")
    assert state_of(data_dir) == before


# -- the real process ---------------------------------------------------------------------------------


def _read_lines(stream, lines: queue.Queue) -> None:
    for line in iter(stream.readline, b""):
        lines.put(line.decode())
    lines.put(None)


def test_engine_process_prunes_each_interval_and_stops_cleanly_on_sigterm(data_dir: Path, events) -> None:
    """A real ``ebb engine``: its own Spark session (local[1]), nothing but its own
    lines on the terminal, a clean exit 0 on SIGTERM."""
    proc = subprocess.Popen(
        ebb_command(data_dir, "engine", "--prune-interval", "1s", "--spark-master", "local[1]"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
        env=subprocess_env(),
    )  # fmt: skip
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_read_lines, args=(proc.stdout, lines), daemon=True).start()
    try:
        seen: list[str] = []
        deadline = time.monotonic() + 240
        while len(seen) < 3 and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                continue
            assert line is not None, f"engine exited early: {proc.wait()} {proc.stderr.read().decode()}"
            seen.append(line)
        assert len(seen) == 3, seen
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = proc.stderr.read().decode()
    assert code == 0 and err == "", err
    banner, first, second = seen
    assert banner.startswith(f"ebb engine on {data_dir}: Spark local[1], a cycle every 1s;")
    deleted = sum(len(s) for s in events.values())
    assert "cycle 1 done in " in first and f"deleted {deleted} of {deleted} segment(s)" in first
    assert "cycle 2 done in " in second and "deleted 0 of 0 segment(s)" in second
    with Broker(data_dir) as broker:
        assert broker.catalog.partition(TOPIC, 0).log_start_offset == events[0][-1][1]
        cycles = list(broker.catalog.db.query("SELECT trigger, status FROM cycles"))
        assert len(cycles) >= 2 and {(c["trigger"], c["status"]) for c in cycles} == {("schedule", "done")}


def test_a_cycle_run_in_the_future_warns_that_it_deletes_what_retention_keeps(ebb, shared_spark) -> None:
    """SPEC: --now simulates time, so such a cycle runs, and deletes as of then: a
    record written a second ago under 7 days' retention goes. It did so without a
    word, where its help called it a forecast."""
    assert ebb("topic", "create", "pn", "--segment-size", "1KiB").code == 0
    assert ebb("produce", "pn", "--count", "50", "--size", "100").code == 0
    future = ebb("prune", "--topic", "pn", "--now", "2100-01-01T00:00:00Z")
    assert future.code == 0
    assert future.err.splitlines() == [
        "ebb: warning: --now 2100-01-01T00:00:00.000Z is in the future: this cycle deletes what retention keeps "
        "until then (--dry-run plans it without deleting)"
    ]
    for quiet in (["--now", "2000-01-01T00:00:00Z"], ["--dry-run", "--now", "2100-01-01T00:00:00Z"]):
        assert ebb("prune", "--topic", "pn", *quiet).err == ""


def test_a_topic_whose_policy_became_invalid_is_said_failed_not_left_out(ebb, data_dir: Path, shared_spark) -> None:
    """A default changed under a topic's override makes its effective policy invalid:
    the cycle cannot plan it. It was left out of the output as if it had nothing to
    delete (the journal alone had its topic_failed row)."""
    assert ebb("topic", "create", "pe", "--retention-time", "1h").code == 0
    assert ebb("topic", "create", "ok").code == 0
    (data_dir / "ebb.toml").write_text('[policy]\nretention_time = "30m"\nmax_time = "45m"\n')
    done = json.loads(ebb("prune", "--json").out)
    assert list(done["failed"]) == ["pe"] and "retention_time (1h) must be <= max_time (45m)" in done["failed"]["pe"]
    text = ebb("prune").out.splitlines()
    assert [line for line in text if line.startswith("not applied to ")] == [
        f"not applied to pe: {done['failed']['pe']}"
    ]


def test_a_paused_cycle_shows_what_it_planned_and_applies_none_of_it(ebb, data_dir: Path, shared_spark) -> None:
    """`ebb pause` says cycles still plan and report: a paused `ebb prune` said it
    deleted nothing and showed nothing of its plan, where --dry-run showed 6."""
    assert ebb("topic", "create", "pp", "--segment-size", "1KiB", "--retention-time", "1h").code == 0
    assert ebb("produce", "pp", "--count", "50", "--size", "100", "--timestamp", "2000-01-01T00:00:00Z").code == 0
    planned = json.loads(ebb("prune", "--dry-run", "--json").out)["actions"]
    assert any(a["action"] == "delete_segment" for a in planned)
    assert ebb("pause").code == 0
    paused = json.loads(ebb("prune", "--json").out)
    assert paused["status"] == "paused" and paused["segments_deleted"] == 0 and paused["actions"] == planned
    text = ebb("prune").out.splitlines()
    assert text[1] == "deletion is paused: the plan below is not applied (`ebb resume`)"
    assert len(text) == 3 + len(planned)  # the cycle, the pause, the table's header and rows
    assert json.loads(ebb("topic", "describe", "pp", "--json").out)["partitions"][0]["log_start_offset"] == 0
