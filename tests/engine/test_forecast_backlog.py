"""The timeline's backlog quotas (engine/forecast/backlog.py). Where the size quota
ends: the smallest base of a segment there whose bytes and the later ones' fit the
quota, else the log end (docs/RETENTION.md, ``size_evict_cut``); the segments are
those a partition holds by the horizon, and at an earlier instant the later ones have
not begun. Who is over a quota: a subscriber not expired, below where it ends, read
from where the cycle before left it.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from engine.forecast.backlog import QuotaCuts, SizedSegments, Subscribers, quota_cuts, verdicts
from engine.forecast.vectorised import NULL, Nullable, Value, values
from engine.prune.plan.layout import GROUP_ROW
from engine.prune.plan.rules import SIZE_EVICT_CUT

#: two partitions: 0 holds a sealed segment [0, 10) of 1000 bytes, then [10, 30) of
#: 2000 bytes (still taking records), then [30, 40) by the horizon; 1 holds none
SEGMENTS = SizedSegments.of(
    row=np.array([0, 0, 0]), base_offset=np.array([0, 10, 30]), before=np.array([0, 1000, 3000])
)


def _size_cuts(quota: int, bytes_at: list[list[int]], log_end: list[list[int]]) -> list[list[int]]:
    topics = pa.table(
        {
            "topic": ["t"],
            "backlog_size": pa.array([quota], pa.int64()),
            "backlog_age": pa.array([None], pa.int64()),
            "backlog_policy": ["producer_request_hold"],
        }
    )
    cuts = quota_cuts(
        topics, np.array([0, 0]), SEGMENTS, np.array(bytes_at), np.array(log_end), np.full((len(bytes_at), 2), -1)
    )
    # where the size quota ends, as the planner reads it of the timeline's columns
    return values(SIZE_EVICT_CUT, cuts.columns, null=-1).tolist()


def test_a_segment_that_fits_the_quota_with_the_later_ones_is_where_the_quota_ends() -> None:
    # 2500 bytes at the first instant: [10, 25) holds 1500, which fits 2000; at the
    # second, the partition's third segment has begun
    assert _size_cuts(2000, [[2500, 0], [3500, 0]], [[25, 0], [35, 0]]) == [[10, 0], [30, 0]]


def test_an_active_segment_alone_over_the_quota_leaves_the_log_end() -> None:
    """A subscriber at the log end has no backlog, however large the active segment:
    the segment after it, begun later, is no end of this instant's quota."""
    assert _size_cuts(500, [[2500, 0]], [[25, 0]]) == [[25, 0]]


def test_a_quota_every_segment_fits_ends_at_the_first_segment() -> None:
    assert _size_cuts(10_000, [[2500, 0]], [[25, 0]]) == [[0, 0]]


def _verdicts(position: int, live: bool, floor: int) -> tuple[bool, bool]:
    """One subscriber on partition 0, whose size quota ends at 20 and age quota at 15;
    not ``live``: its last commit is older than its expiry."""
    columns: dict[str, Value] = {
        "row": GROUP_ROW, "kind": "subscriber", "now": 1000, "group_last_commit": np.array([[1000 if live else 0]]),
        "subscription_expiry": Nullable.of(np.array([500])), "position": np.array([[position]]),
        "H": np.array([0]), "tc_ttl": NULL, "message_ttl": NULL, "protect": np.array([True]),
    }  # fmt: skip
    subs = Subscribers(
        rows=np.array([0]), partition=np.array([0]), columns=columns, position=np.array([[position]]),
        holding=np.array([[live]]),
    )  # fmt: skip
    quota = Nullable.of(np.array([1]))
    cuts = QuotaCuts(
        {
            "fits_quota": Nullable.of(np.array([[20]])), "T": Nullable.of(np.array([[40]])),
            "tc_backlog_age": Nullable.of(np.array([[15]])), "backlog_size": quota, "backlog_age": quota,
            "evicting": Nullable.of(np.array([False])),
        }
    )  # fmt: skip
    found = verdicts(subs, cuts, np.array([[floor]]))
    return bool(found.size[0, 0]), bool(found.age[0, 0])


def test_a_subscriber_below_a_quotas_end_is_over_it() -> None:
    assert _verdicts(10, live=True, floor=0) == (True, True)
    assert _verdicts(17, live=True, floor=0) == (True, False)
    assert _verdicts(20, live=True, floor=0) == (False, False)


def test_an_expired_subscriber_is_over_no_quota() -> None:
    assert _verdicts(10, live=False, floor=0) == (False, False)


def test_a_subscriber_is_read_from_where_the_cycle_before_left_it() -> None:
    """The log start the cycle before the instant left (the floor) moved it up."""
    assert _verdicts(10, live=True, floor=17) == (True, False)
    assert _verdicts(10, live=True, floor=20) == (False, False)
