"""The reference model of docs/RETENTION.md on small hand-made catalogs, one test per
rule and per reason code, every expectation worked out by hand; and the random
catalogs of the property test, checked to load into a real catalog exactly."""

from __future__ import annotations

import tempfile
from dataclasses import fields
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

from engine.catalog.catalog import Catalog
from engine.policy.effective import resolve
from engine.prune import tables
from tests.reference import model
from tests.reference.catalog import (
    FakeRecordTimes,
    Group,
    Partition,
    Policy,
    Position,
    RefCatalog,
    Segment,
    Topic,
    load_into_catalog,
)
from tests.reference.strategies import catalogs

NOW = 1_000_000


# -- builders -------------------------------------------------------------------------


def seg(base: int, ts: list[int], size: int = 10) -> Segment:
    """A sealed segment starting at ``base`` with one record per timestamp."""
    return Segment(base, base + len(ts), size, True, tuple(ts))


def active(base: int, ts: list[int] = (), size: int | None = None) -> Segment:  # type: ignore[assignment]
    return Segment(base, base + len(ts), (10 if ts else 0) if size is None else size, False, tuple(ts))


def part(*segments: Segment, H: int | None = None, index: int = 0) -> Partition:
    return Partition(index, segments[0].base if H is None else H, tuple(segments))


def sub(name: str, *positions: int, committed: int = NOW, kind: str = "subscriber") -> Group:
    """A group with ``positions[p]`` on partition ``p``, all committed at ``committed``."""
    return Group(name, kind, tuple(Position(p, pos, committed) for p, pos in enumerate(positions)))


def reader(name: str, *positions: int, committed: int = NOW) -> Group:
    return sub(name, *positions, committed=committed, kind="reader")


def run(policy: Policy, *partitions: Partition, groups: tuple[Group, ...] = ()) -> dict[str, list[dict]]:
    return model.plan(RefCatalog((Topic("t", policy, partitions, groups),), NOW))


def reasons(rows: dict) -> list[str]:
    return [r["reason"] for r in rows["segments"]]


def decisions(rows: dict) -> list[str]:
    return [r["decision"] for r in rows["segments"]]


def new_log_start(rows: dict, partition: int = 0) -> int:
    return rows["partitions"][partition]["new_log_start_offset"]


def group_row(rows: dict, name: str, partition: int = 0) -> dict:
    (row,) = [r for r in rows["groups"] if r["group"] == name and r["partition"] == partition]
    return row


OLD = [NOW - 500, NOW - 400]  # two records, long expired


# -- time cuts --------------------------------------------------------------------------


def test_time_cut_is_the_first_unexpired_record_from_the_log_start() -> None:
    p = part(seg(0, [NOW - 300, NOW - 10, NOW - 300]), active(3, [NOW - 300, NOW]), H=0)
    assert model.time_cut(p, NOW - 100) == 1  # offset 2 is older, but offset 1 stops the scan
    assert model.time_cut(p, NOW - 10) == 1  # ts >= θ: now - ts == X is not expired
    assert model.time_cut(p, NOW - 9) == 4
    assert model.time_cut(p, NOW + 1) == 5  # none: T
    shifted = part(seg(0, [NOW - 300, NOW - 10, NOW - 300]), active(3, [NOW - 300, NOW]), H=2)
    assert model.time_cut(shifted, NOW - 100) == 4  # scanning starts at H


def test_fake_record_times_answers_inside_one_segment() -> None:
    catalog = RefCatalog((Topic("t", Policy(), (part(seg(5, [10, 30, 20, 40]), active(9)),)),), NOW)
    times = FakeRecordTimes(catalog)
    assert times.first_at_or_after("t", 0, 5, 5, 25) == (6, 30)
    assert times.first_at_or_after("t", 0, 5, 7, 25) == (8, 40)
    assert times.first_at_or_after("t", 0, 5, 0, 41) is None
    assert times.first_at_or_after("t", 0, 9, 9, 0) is None  # empty active segment


# -- segment-level rules ------------------------------------------------------------------


def test_delete_time_is_strict_and_eligible_at_is_when_it_would_go() -> None:
    rows = run(
        Policy(retention_time=100),
        part(seg(0, [NOW - 200, NOW - 150]), seg(2, [NOW - 120, NOW - 100]), active(4, [NOW])),
    )
    # S_1: now - max_ts == 100 is not older than 100
    assert reasons(rows) == ["DELETE_TIME", "KEEP_WITHIN_TIME", "KEEP_ACTIVE"]
    assert [r["eligible_at"] for r in rows["segments"]] == [NOW - 49, NOW + 1, None]
    assert new_log_start(rows) == 2
    assert rows["partitions"][0] == {
        "topic": "t",
        "partition": 0,
        "log_start_offset": 0,
        "new_log_start_offset": 2,
        "next_offset": 5,
        "roll": False,
        "barrier": None,
        "segments_deleted": 1,
        "bytes_deleted": 10,
    }


def test_delete_size_is_kafkas_rule_on_the_bytes_of_newer_segments() -> None:
    rows = run(
        Policy(retention_size=20),
        part(seg(0, [NOW], 10), seg(1, [NOW], 10), seg(2, [NOW], 10), active(3, [NOW], 10)),
    )
    # bytes strictly newer: S_0 30, S_1 20 (>= 20: eligible), S_2 10
    assert reasons(rows) == ["DELETE_SIZE", "DELETE_SIZE", "KEEP_SIZE_TARGET", "KEEP_ACTIVE"]
    assert new_log_start(rows) == 2
    assert rows["partitions"][0]["bytes_deleted"] == 20


def test_delete_time_wins_over_delete_size_when_both_apply() -> None:
    rows = run(Policy(retention_time=100, retention_size=10), part(seg(0, OLD), seg(2, [NOW]), active(3, [NOW])))
    assert reasons(rows) == ["DELETE_TIME", "DELETE_SIZE", "KEEP_ACTIVE"]


def test_either_target_suffices_as_a_prefix() -> None:
    # S_0 only by size, S_1 only by time, S_2 by neither, S_3 by time but after S_2
    rows = run(
        Policy(retention_time=100, retention_size=25),
        part(
            seg(0, [NOW], 10),
            seg(1, [NOW - 200], 10),
            seg(2, [NOW], 10),
            seg(3, [NOW - 200], 5),
            active(4, [NOW], 5),
        ),
    )
    assert reasons(rows) == ["DELETE_SIZE", "DELETE_TIME", "KEEP_WITHIN_TIME", "KEEP_PREFIX", "KEEP_ACTIVE"]
    assert new_log_start(rows) == 2


def test_delete_max_size_brings_the_partition_under_the_cap_counting_the_active_segment() -> None:
    rows = run(
        Policy(max_partition_size=25, consumption="protect"),
        part(seg(0, [NOW], 10), seg(1, [NOW], 10), seg(2, [NOW], 10), active(3, [NOW], 10)),
        groups=(sub("g", 0),),
    )
    # totals from S_k on: 40 > 25, 30 > 25, 20: the cap wins over the barrier at 0
    assert reasons(rows) == ["DELETE_MAX_SIZE", "DELETE_MAX_SIZE", "KEEP_NO_LIMIT", "KEEP_ACTIVE"]
    assert rows["partitions"][0]["barrier"] == 0
    assert new_log_start(rows) == 2
    # the subscriber the cap overran is moved up to the new log start
    assert group_row(rows, "g") == {
        "topic": "t",
        "group": "g",
        "kind": "subscriber",
        "partition": 0,
        "position": 0,
        "new_position": 2,
        "expired": False,
        "ttl_skipped": 0,
        "evicted_skipped": 0,
        "moved_skipped": 2,
        "over_quota": False,
        "over_backlog_size": False,
        "over_backlog_age": False,
    }


def test_delete_max_time_wins_over_the_barrier_and_keep_barrier_names_the_group() -> None:
    rows = run(
        Policy(retention_time=50, max_time=100, consumption="protect"),
        part(seg(0, [NOW - 150]), seg(1, [NOW - 70]), seg(2, [NOW]), active(3)),
        groups=(sub("g", 0),),
    )
    assert reasons(rows) == ["DELETE_MAX_TIME", "KEEP_BARRIER", "KEEP_WITHIN_TIME", "KEEP_ACTIVE"]
    assert rows["segments"][1]["detail"] == "group g at 0"
    assert [r["detail"] for r in rows["segments"]] == [None, "group g at 0", None, None]
    assert new_log_start(rows) == 1
    assert group_row(rows, "g")["moved_skipped"] == 1


def test_keep_barrier_ignores_readers_and_expired_groups_and_ties_name_the_first() -> None:
    rows = run(
        Policy(retention_time=10, consumption="protect", subscription_expiry=50),
        part(seg(0, OLD), seg(2, OLD), seg(4, OLD), active(6, [NOW])),
        groups=(
            sub("zed", 3, committed=NOW - 50),  # now - commit == 50: not expired
            sub("amy", 3),
            sub("old", 0, committed=NOW - 51),  # expired: no barrier
            reader("rd", 0),  # readers never hold data back
        ),
    )
    assert reasons(rows) == ["DELETE_TIME", "KEEP_BARRIER", "KEEP_BARRIER", "KEEP_ACTIVE"]
    assert rows["segments"][1]["detail"] == "group amy at 3"
    assert rows["segments"][2]["detail"] == "group amy at 3"
    assert rows["partitions"][0]["barrier"] == 3
    assert new_log_start(rows) == 2
    assert group_row(rows, "rd")["new_position"] == 2
    assert group_row(rows, "rd")["moved_skipped"] == 2
    assert group_row(rows, "old")["expired"] is True
    assert group_row(rows, "old")["new_position"] == 0
    assert group_row(rows, "zed")["expired"] is False
    assert group_row(rows, "zed")["new_position"] == 3


def test_consumption_ignore_has_no_barrier() -> None:
    rows = run(Policy(retention_time=10), part(seg(0, OLD), seg(2, OLD), active(4)), groups=(sub("g", 0),))
    assert reasons(rows) == ["DELETE_TIME", "DELETE_TIME", "KEEP_ACTIVE"]
    assert rows["partitions"][0]["barrier"] is None
    assert group_row(rows, "g")["new_position"] == 4
    assert group_row(rows, "g")["moved_skipped"] == 4


def test_protect_without_subscribers_has_no_barrier() -> None:
    rows = run(Policy(retention_time=10, consumption="protect"), part(seg(0, OLD), active(2)), groups=(reader("r", 0),))
    assert reasons(rows) == ["DELETE_TIME", "KEEP_ACTIVE"]
    assert rows["partitions"][0]["barrier"] is None


def test_keep_budget_counts_from_s0_including_segments_below_the_log_start() -> None:
    p = part(seg(0, OLD), seg(2, OLD), seg(4, OLD), seg(6, OLD), active(8, [NOW]), H=3)
    rows = run(Policy(retention_time=10, max_deletes_per_cycle=2), p)
    assert reasons(rows) == ["DELETE_BELOW_LOG_START", "DELETE_TIME", "KEEP_BUDGET", "KEEP_BUDGET", "KEEP_ACTIVE"]
    assert new_log_start(rows) == 4  # next of the last deleted segment
    assert rows["partitions"][0]["segments_deleted"] == 2
    message = run(Policy(retention_time=10, max_deletes_per_cycle=2, granularity="message"), p)
    assert reasons(message) == reasons(rows)
    assert new_log_start(message) == 4  # min(cut = 8, base of S_2)


def test_budget_zero_deletes_nothing_and_keeps_the_log_start() -> None:
    p = part(seg(0, OLD), seg(2, OLD), active(4, [NOW - 500, NOW]), H=3)
    for granularity in ("segment", "message"):
        rows = run(Policy(retention_time=10, max_deletes_per_cycle=0, granularity=granularity), p)
        assert reasons(rows) == ["KEEP_BUDGET", "KEEP_BUDGET", "KEEP_ACTIVE"]
        # message: max(H, min(cut = 5, base of S_0 = 0)) = H
        assert new_log_start(rows) == 3


def test_keep_hold_keeps_everything_and_the_log_start() -> None:
    p = part(seg(0, OLD), seg(2, OLD), active(4, [NOW - 500]), H=3)
    rows = run(Policy(retention_time=0, retention_size=0, max_partition_size=1, hold=True, granularity="message"), p)
    assert reasons(rows) == ["KEEP_HOLD", "KEEP_HOLD", "KEEP_HOLD"]
    assert decisions(rows) == ["keep", "keep", "keep"]
    assert new_log_start(rows) == 3
    assert rows["partitions"][0]["segments_deleted"] == 0


def test_keep_future_timestamp_blocks_time_retention_and_keep_prefix_follows() -> None:
    rows = run(
        Policy(retention_time=100),
        part(seg(0, [NOW - 500, NOW + 5]), seg(2, [NOW - 500]), seg(3, [NOW]), active(4)),
    )
    assert reasons(rows) == ["KEEP_FUTURE_TIMESTAMP", "KEEP_PREFIX", "KEEP_WITHIN_TIME", "KEEP_ACTIVE"]
    assert rows["segments"][0]["eligible_at"] == NOW + 5 + 101
    assert new_log_start(rows) == 0


def test_keep_prefix_for_a_hard_cap_behind_a_kept_segment() -> None:
    # max_time 100, retention_time infinite: S_1 is over the cap but S_0 is not
    rows = run(Policy(max_time=100), part(seg(0, [NOW]), seg(1, [NOW - 200]), active(2)))
    assert reasons(rows) == ["KEEP_NO_LIMIT", "KEEP_PREFIX", "KEEP_ACTIVE"]
    assert [r["eligible_at"] for r in rows["segments"]] == [NOW + 101, NOW - 99, None]


def test_delete_below_log_start_first_even_without_any_limit() -> None:
    rows = run(Policy(), part(seg(0, [NOW]), seg(3, [NOW, NOW]), seg(5, [NOW]), active(6), H=5))
    assert reasons(rows) == ["DELETE_BELOW_LOG_START", "DELETE_BELOW_LOG_START", "KEEP_NO_LIMIT", "KEEP_ACTIVE"]
    assert new_log_start(rows) == 5
    assert rows["partitions"][0]["bytes_deleted"] == 20


def test_target_starts_at_a_log_start_inside_a_segment() -> None:
    # H inside S_1: first_not looks at segments with next > H only
    rows = run(Policy(retention_time=10), part(seg(0, OLD), seg(2, OLD), seg(4, [NOW]), active(5), H=3))
    assert reasons(rows) == ["DELETE_BELOW_LOG_START", "DELETE_TIME", "KEEP_WITHIN_TIME", "KEEP_ACTIVE"]
    assert new_log_start(rows) == 4


def test_zero_retention_expires_everything_strictly_older_than_now() -> None:
    rows = run(Policy(retention_time=0, retention_size=0), part(seg(0, [NOW - 1]), seg(1, [NOW]), active(2, [NOW])))
    # S_0 by time; S_1 by size (bytes after it: 10 >= 0), though not older than 0
    assert reasons(rows) == ["DELETE_TIME", "DELETE_SIZE", "KEEP_ACTIVE"]
    assert new_log_start(rows) == 2


# -- message granularity ------------------------------------------------------------------


def test_message_granularity_cuts_inside_the_active_segment() -> None:
    p = part(seg(0, OLD), active(2, [NOW - 300, NOW - 200, NOW - 100, NOW - 50]))
    rows = run(Policy(retention_time=100, granularity="message"), p)
    assert reasons(rows) == ["DELETE_TIME", "KEEP_ACTIVE"]
    assert new_log_start(rows) == 4  # ts NOW - 100 is not older than 100
    segment = run(Policy(retention_time=100), p)
    assert reasons(segment) == ["DELETE_TIME", "KEEP_ACTIVE"]
    assert new_log_start(segment) == 2  # whole segments only


def test_message_granularity_keeps_a_partly_expired_sealed_segment() -> None:
    rows = run(
        Policy(retention_time=100, granularity="message"),
        part(seg(0, OLD), seg(2, [NOW - 300, NOW - 300, NOW, NOW - 300]), active(6, [NOW])),
    )
    assert reasons(rows) == ["DELETE_TIME", "KEEP_WITHIN_TIME", "KEEP_ACTIVE"]
    assert new_log_start(rows) == 4  # the first unexpired record; offset 5 is older but after it


def test_message_granularity_size_rule_works_on_whole_segments() -> None:
    rows = run(
        Policy(retention_size=10, granularity="message"),
        part(seg(0, [NOW, NOW], 10), seg(2, [NOW, NOW], 10), active(4, [NOW], 10)),
    )
    # S_0: 20 bytes after it >= 10; S_1: 10 >= 10; the active one never
    assert reasons(rows) == ["DELETE_SIZE", "DELETE_SIZE", "KEEP_ACTIVE"]
    assert new_log_start(rows) == 4


def test_message_granularity_max_time_cuts_at_the_record() -> None:
    rows = run(
        Policy(max_time=100, granularity="message", consumption="protect"),
        part(seg(0, OLD), active(2, [NOW - 200, NOW - 101, NOW - 100])),
        groups=(sub("g", 0),),
    )
    assert reasons(rows) == ["DELETE_MAX_TIME", "KEEP_ACTIVE"]
    assert new_log_start(rows) == 4
    assert group_row(rows, "g")["moved_skipped"] == 4


def test_message_granularity_barrier_cuts_at_the_exact_position() -> None:
    p = part(seg(0, OLD), seg(2, OLD), active(4, [NOW - 500, NOW - 500, NOW]))
    rows = run(Policy(retention_time=10, granularity="message", consumption="protect"), p, groups=(sub("g", 3),))
    assert reasons(rows) == ["DELETE_TIME", "KEEP_BARRIER", "KEEP_ACTIVE"]
    assert new_log_start(rows) == 3
    segment = run(Policy(retention_time=10, consumption="protect"), p, groups=(sub("g", 3),))
    assert reasons(segment) == ["DELETE_TIME", "KEEP_BARRIER", "KEEP_ACTIVE"]
    assert new_log_start(segment) == 2


# -- before the cut: expiry, TTL, backlog, roll -------------------------------------------


def test_expiry_uses_the_latest_commit_over_all_partitions() -> None:
    p0 = part(seg(0, OLD), active(2), index=0)
    p1 = part(seg(0, OLD), active(2), index=1)
    keep = Group("keep", "subscriber", (Position(0, 0, NOW - 150), Position(1, 0, NOW - 100)))
    gone = Group("gone", "reader", (Position(0, 0, NOW - 150), Position(1, 0, NOW - 101)))
    rows = run(Policy(subscription_expiry=100, consumption="protect", retention_time=10), p0, p1, groups=(keep, gone))
    assert [r["expired"] for r in rows["groups"] if r["group"] == "keep"] == [False, False]
    assert [r["expired"] for r in rows["groups"] if r["group"] == "gone"] == [True, True]
    # the expired reader is reported as it was, not moved
    assert group_row(rows, "gone", 1)["new_position"] == 0
    assert group_row(rows, "gone", 1)["moved_skipped"] == 0
    assert rows["partitions"][1]["barrier"] == 0


def test_message_ttl_advances_subscribers_only() -> None:
    p = part(seg(0, [NOW - 300, NOW - 200]), active(2, [NOW - 100, NOW - 50]))
    rows = run(Policy(message_ttl=100, consumption="protect"), p, groups=(sub("s", 0), reader("r", 0)))
    assert group_row(rows, "s")["new_position"] == 2  # the record at NOW - 100 is not older than 100
    assert group_row(rows, "s")["ttl_skipped"] == 2
    assert group_row(rows, "r")["new_position"] == 0
    assert group_row(rows, "r")["ttl_skipped"] == 0
    assert rows["partitions"][0]["barrier"] == 2


def test_ttl_counts_from_the_effective_position() -> None:
    p = part(seg(0, [NOW - 300, NOW - 200, NOW - 200]), active(3, [NOW]), H=1)
    rows = run(Policy(message_ttl=100), p, groups=(sub("s", 0),))
    assert group_row(rows, "s")["new_position"] == 3
    assert group_row(rows, "s")["ttl_skipped"] == 2  # from pos_eff = H = 1


def test_backlog_eviction_by_size_moves_to_whole_segments() -> None:
    p = part(seg(0, [NOW, NOW]), seg(2, [NOW, NOW]), seg(4, [NOW, NOW]), active(6, [NOW]))  # 10 bytes each
    rows = run(
        Policy(backlog_size=20, backlog_policy="consumer_backlog_eviction", consumption="protect"),
        p,
        groups=(sub("far", 1), sub("near", 4), reader("r", 0)),
    )
    # the smallest base with 20 bytes or less from it on: S_2 at 4
    assert group_row(rows, "far") == {
        "topic": "t",
        "group": "far",
        "kind": "subscriber",
        "partition": 0,
        "position": 1,
        "new_position": 4,
        "expired": False,
        "ttl_skipped": 0,
        "evicted_skipped": 3,
        "moved_skipped": 0,
        "over_quota": True,
        "over_backlog_size": True,
        "over_backlog_age": False,
    }
    assert group_row(rows, "near")["over_quota"] is False
    assert group_row(rows, "near")["new_position"] == 4
    assert group_row(rows, "r")["over_quota"] is False
    assert group_row(rows, "r")["new_position"] == 0
    assert rows["topics"] == [{"topic": "t", "quota_exceeded": False, "policy_version": 0}]
    assert rows["partitions"][0]["barrier"] == 4


def test_backlog_eviction_by_age_moves_to_the_record() -> None:
    p = part(seg(0, [NOW - 300, NOW - 250]), active(2, [NOW - 200, NOW - 150, NOW - 100]))
    rows = run(Policy(backlog_age=150, backlog_policy="consumer_backlog_eviction"), p, groups=(sub("g", 0),))
    assert group_row(rows, "g")["new_position"] == 3  # NOW - 150 is not older than 150
    assert group_row(rows, "g")["evicted_skipped"] == 3
    assert group_row(rows, "g")["over_quota"] is True
    assert (group_row(rows, "g")["over_backlog_size"], group_row(rows, "g")["over_backlog_age"]) == (False, True)


def test_eviction_applies_after_ttl() -> None:
    p = part(seg(0, [NOW - 300, NOW - 250]), seg(2, [NOW - 200, NOW - 150]), active(4, [NOW]))
    rows = run(
        Policy(message_ttl=260, backlog_size=20, backlog_policy="consumer_backlog_eviction"),
        p,
        groups=(sub("g", 0),),
    )
    row = group_row(rows, "g")
    assert (row["ttl_skipped"], row["evicted_skipped"], row["new_position"]) == (1, 1, 2)


@pytest.mark.parametrize("backlog_policy", ["producer_request_hold", "producer_exception"])
def test_producer_policies_mark_the_topic_quota_exceeded_without_moving(backlog_policy: str) -> None:
    p = part(seg(0, [NOW, NOW]), seg(2, [NOW, NOW]), active(4, [NOW]))  # 30 bytes
    rows = run(Policy(backlog_size=20, backlog_policy=backlog_policy), p, groups=(sub("g", 1),))
    assert group_row(rows, "g")["over_quota"] is True
    assert group_row(rows, "g")["new_position"] == 1
    assert group_row(rows, "g")["evicted_skipped"] == 0
    assert rows["topics"][0]["quota_exceeded"] is True
    # at 2 the backlog is 20 bytes: within the quota
    rows = run(Policy(backlog_size=20, backlog_policy=backlog_policy), p, groups=(sub("g", 2),))
    assert rows["topics"][0]["quota_exceeded"] is False


def test_quota_ignores_readers_and_expired_subscribers() -> None:
    p = part(seg(0, [NOW - 500]), active(1, [NOW]))
    rows = run(
        Policy(backlog_age=100, subscription_expiry=100),
        p,
        groups=(reader("r", 0), sub("old", 0, committed=NOW - 101)),
    )
    assert rows["topics"][0]["quota_exceeded"] is False
    assert [r["over_quota"] for r in rows["groups"]] == [False, False]
    rows = run(Policy(backlog_age=100), p, groups=(sub("s", 0),))
    assert rows["topics"][0]["quota_exceeded"] is True


def test_over_age_quota_with_a_producer_policy() -> None:
    p = part(seg(0, [NOW - 100]), active(1, [NOW - 101]))
    rows = run(Policy(backlog_age=100, backlog_policy="producer_exception"), p, groups=(sub("s", 0),))
    # the oldest unconsumed record in the prefix sense is at NOW - 100: not older than 100
    assert group_row(rows, "s")["over_quota"] is False
    assert rows["topics"][0]["quota_exceeded"] is False


def test_idle_roll() -> None:
    def roll(policy: Policy, last: Segment) -> bool:
        return run(policy, part(seg(0, [NOW - 500]), last))["partitions"][0]["roll"]

    assert roll(Policy(segment_roll=100), active(1, [NOW - 100, NOW])) is True  # >=
    assert roll(Policy(segment_roll=100), active(1, [NOW - 99, NOW - 200])) is False  # first_ts, not max
    assert roll(Policy(segment_roll=0), active(1)) is False  # empty
    assert roll(Policy(), active(1, [NOW - 10_000])) is False  # infinite


def test_reader_moved_up_by_a_message_cut_skips_messages() -> None:
    p = part(seg(0, OLD), seg(2, OLD), active(4, [NOW - 500, NOW]), H=1)
    rows = run(Policy(retention_time=100, granularity="message"), p, groups=(reader("r", 0), reader("ok", 5)))
    assert new_log_start(rows) == 5
    assert group_row(rows, "r") == {
        "topic": "t",
        "group": "r",
        "kind": "reader",
        "partition": 0,
        "position": 0,
        "new_position": 5,
        "expired": False,
        "ttl_skipped": 0,
        "evicted_skipped": 0,
        "moved_skipped": 4,
        "over_quota": False,
        "over_backlog_size": False,
        "over_backlog_age": False,
    }  # skipped from pos_eff = H = 1
    assert group_row(rows, "ok")["moved_skipped"] == 0


def test_eligible_at_takes_the_earliest_finite_time_rule() -> None:
    p = part(seg(0, [NOW - 10, NOW - 20]), active(2, [NOW]))
    assert run(Policy(retention_time=100, max_time=150), p)["segments"][0]["eligible_at"] == NOW - 10 + 101
    assert run(Policy(max_time=150), p)["segments"][0]["eligible_at"] == NOW - 10 + 151
    assert run(Policy(retention_size=5), p)["segments"][0]["eligible_at"] is None
    assert run(Policy(retention_time=100), p)["segments"][1]["eligible_at"] is None  # active


def test_empty_partition_with_an_empty_active_segment() -> None:
    rows = run(Policy(retention_time=0, retention_size=0, granularity="message"), part(active(7), H=7))
    assert reasons(rows) == ["KEEP_ACTIVE"]
    assert new_log_start(rows) == 7


def test_plan_tables_have_the_plan_schemas() -> None:
    catalog = RefCatalog((Topic("t", Policy(retention_time=10), (part(seg(0, OLD), active(2)),), (sub("g", 0),)),), NOW)
    result = model.plan_tables(catalog)
    assert set(result) == set(tables.PLAN_TABLES)
    for name, table in result.items():
        assert isinstance(table, pa.Table)
        assert table.schema.equals(tables.PLAN_TABLES[name])


# -- the random catalogs of the property test --------------------------------------------


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(generated=catalogs())
def test_random_catalogs_load_into_a_real_catalog_exactly(generated: RefCatalog) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        catalog = Catalog.open(Path(tmp) / "catalog.db")
        try:
            loaded = load_into_catalog(generated, catalog)
            for topic in loaded.topics:
                effective = resolve(catalog.overrides(topic.name), generated.defaults)
                assert {f.name: effective[f.name] for f in fields(Policy)} == {
                    f.name: getattr(topic.policy, f.name) for f in fields(Policy)
                }
                assert topic.policy_version > 0
                for p in topic.partitions:
                    row = catalog.partition(topic.name, p.index)
                    assert (row.log_start_offset, row.next_offset) == (p.log_start, p.next_offset)
                    assert [
                        (s.base_offset, s.next_offset, s.size_bytes, s.first_timestamp, s.max_timestamp, s.sealed)
                        for s in catalog.segments(topic.name, p.index)
                    ] == [(s.base, s.next, s.size, s.first_ts, s.max_ts, s.sealed) for s in p.segments]
                stored = {g.name: g for g in catalog.groups(topic.name)}
                assert {name: g.kind for name, g in stored.items()} == {g.name: g.kind for g in topic.groups}
                for g in topic.groups:
                    assert stored[g.name].positions == {p.partition: (p.position, p.committed_at) for p in g.positions}
        finally:
            catalog.close()


@settings(max_examples=200, deadline=None)
@given(generated=catalogs())
def test_model_invariants_on_random_catalogs(generated: RefCatalog) -> None:
    rows = model.plan(generated)
    for name, schema in tables.PLAN_TABLES.items():
        assert all(list(r) == schema.names for r in rows[name])
    by_partition: dict[tuple[str, int], list[dict]] = {}
    for r in rows["segments"]:
        by_partition.setdefault((r["topic"], r["partition"]), []).append(r)
    for p in rows["partitions"]:
        segments = by_partition[(p["topic"], p["partition"])]
        deleted = [r["decision"] == "delete" for r in segments]
        assert deleted == sorted(deleted, reverse=True)  # a prefix
        assert not segments[-1]["sealed"] and segments[-1]["decision"] == "keep"
        assert p["log_start_offset"] <= p["new_log_start_offset"] <= p["next_offset"]
        assert p["segments_deleted"] == sum(deleted)
        if any(deleted):
            last = [r for r in segments if r["decision"] == "delete"][-1]
            assert last["next_offset"] <= p["new_log_start_offset"]
    new_starts = {(p["topic"], p["partition"]): p["new_log_start_offset"] for p in rows["partitions"]}
    for g in rows["groups"]:
        if not g["expired"]:
            assert g["new_position"] >= new_starts[(g["topic"], g["partition"])]
        assert min(g["ttl_skipped"], g["evicted_skipped"], g["moved_skipped"]) >= 0
