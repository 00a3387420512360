"""The order the workers get the tests in: the known-long ones first.

pytest-xdist's ``worksteal`` (pyproject.toml) hands each of the two workers one
contiguous half of the collected tests, and a worker that runs out steals the *tail*
of the other's queue. A long test near the end of a half then runs while the other
worker has nothing left to steal: collected in file order, a two-minute test could
end the run alone. So each half begins with its share of the long tests (shared out
longest first, each to the half with less of them so far) and the short tests fill
the rest in their collected order: whatever is stolen at the end is short.

The durations are a full run's (``--durations``, call and setup, on the two-core CI
machine; rounded). A test missing from :data:`LONG_SECONDS` (new) is only run in its
collected place; update the table from a run's ``--durations=80`` (tests of 10 s or more). A key that names
no test (renamed, removed) fails tests/codebase/test_scheduling.py.

A module whose tests share a module-scoped fixture, or depend on running in their
order, is moved as a whole (:data:`WHOLE_MODULES`), its tests in their order. The
tests of the run's Spark Connect server go to one worker together, with what moves
with them: a worker starts that server (a JVM, then its JIT's ramp) when its share
first needs it, and split between the two, the server started twice. The order
changes only under xdist: ``-n 0`` runs files as collected.
"""

from __future__ import annotations

import pytest

#: nodeid (without parameters: all of its cases) -> seconds
LONG_SECONDS: dict[str, float] = {
    "tests/cli/test_forecast_judged.py::test_a_what_if_over_time_is_the_plan_of_a_copy_with_the_policy_changed": 172,
    "tests/prune/test_spark_service.py": 139,
    "tests/prune/test_planner_property.py::test_planner_agrees_with_the_reference_model": 102,
    "tests/faults/test_kill_verify.py::test_producers_killed_at_random_points_always_leave_a_repairable_directory": 97,
    "tests/prune/test_prune_elsewhere.py::test_a_standalone_cluster_makes_the_local_plan": 83,
    "tests/faults/test_hostile_input.py": 73,
    "tests/prune/test_planner_property.py::test_planner_agrees_with_the_reference_model_on_each_transport": 63,
    "tests/engine/test_metrics.py::test_a_scrape_agrees_with_describe_and_the_journal": 62,
    "tests/engine/test_snapshot_since.py::test_a_snapshot_since_an_earlier_one_equals_a_full_one": 52,
    "tests/prune/test_forecast.py::test_forecast_agrees_with_the_reference_model": 49,
    "tests/prune/test_planner_property.py::test_a_cycles_plan_holds_the_models_deletions_and_every_other_row": 44,
    "tests/cli/test_prune.py::test_engine_process_prunes_each_interval_and_stops_cleanly_on_sigterm": 42,
    "tests/cli/test_forecast_judged.py::test_the_forecast_is_what_the_cycles_leave_on_a_copy_fed_the_ingest": 39,
    "tests/faults/test_crash_campaign.py::test_a_crash_campaign_finds_every_invariant_holding": 39,
    "tests/engine/test_metrics_process.py::test_a_running_engine_is_scraped_as_the_cli_reads_it_and_stops_clean": 38,
    "tests/prune/test_prune_elsewhere.py::"
    "test_a_connect_server_that_cannot_see_the_data_directory_makes_the_local_plan": 38,
    "tests/cli/test_forecast_judged.py::test_the_forecast_is_the_plan_of_a_copy_fed_the_ingest": 35,
    "tests/cli/test_forecast_judged.py::test_backlog_quotas_are_read_as_the_cycles_read_them": 35,
    "tests/prune/test_spark_session.py": 35,
    "tests/cli/test_forecast_judged.py::test_a_what_if_of_a_cycles_limit_or_roll_is_what_the_cycles_leave": 29,
    "tests/engine/test_metrics_process.py::test_a_stop_signalled_to_the_whole_group_prints_no_traceback": 29,
    "tests/cli/test_forecast_judged_more.py::"
    "test_a_keyless_backfill_in_one_call_is_forecast_as_a_copy_fed_in_one_call_holds_it": 28,
    "tests/prune/test_planner_property.py::test_planner_through_spark_connect_agrees_with_the_reference_model": 27,
    "tests/faults/test_load.py::test_producers_consumer_and_prune_cycles_under_load": 24,
    "tests/console/test_charts.py::test_the_what_if_holds_the_disk_budget_to_every_topic": 21,
    "tests/cli/test_produce_acks.py::test_producers_at_once_on_a_keyless_topic_each_acknowledge_their_own_records": 16,
    "tests/cli/test_forecast_judged.py::test_groups_read_in_the_forecast_as_they_read_on_the_copy": 15,
    "tests/cli/test_produce_acks.py::test_what_a_producer_holds_does_not_grow_with_what_it_produces": 15,
    "tests/console/test_forecast_truth.py::test_the_disk_budget_is_held_to_every_topic_as_ebb_forecast_holds_it": 15,
    "tests/cli/test_produce_acks.py::test_a_producer_interrupted_waiting_for_input_writes_what_it_was_given": 15,
    "tests/console/test_charts.py::test_the_what_if_charts_the_week_with_both_policies": 14,
    "tests/cli/test_forecast.py::test_a_what_if_of_one_topic_among_all_plans_only_that_one_twice": 14,
    "tests/cli/test_forecast_cli_judged.py::"
    "test_hourly_big_records_breach_where_arithmetic_says_with_a_step_that_does_not_divide_the_horizon": 13,
    "tests/console/test_policy.py::test_the_what_if_shows_what_would_go_and_who_would_skip": 13,
    "tests/prune/test_plan_desk.py::test_the_desk_plans_what_the_command_would_plan_itself": 13,
    "tests/console/test_charts.py::test_what_if_chart_snapshot": 12,
    "tests/console/test_steering.py::test_read_only_refuses_every_mutating_action": 12,
    "tests/cli/test_completion_more.py::test_every_command_completes_every_flag_of_its_own": 11,
    "tests/console/test_policy.py::test_an_invalid_policy_is_refused_and_nothing_is_saved": 10,
}

#: modules run as a unit: module-scoped fixtures, or tests that rely on their order
WHOLE_MODULES = frozenset({"tests/faults/test_hostile_input.py", "tests/prune/test_spark_service.py",
                           "tests/prune/test_spark_session.py"})  # fmt: skip


#: the fixture of the run's Connect server (tests/support/spark_fixtures.py)
_CONNECT_SERVER = "connect_server_of_the_run"
#: the unit of every test of that server, and of the units those tests move with
_ON_THE_CONNECT_SERVER = "(the tests of the run's Connect server)"
#: what a test not in :data:`LONG_SECONDS` is counted as, in that unit
_SHORT_SECONDS = 2.0


def _unit(item: pytest.Item) -> str:
    """What ``item`` moves with: its module, or itself (all its parameter cases)."""
    module = item.nodeid.split("::", 1)[0]
    return module if module in WHOLE_MODULES else item.nodeid.split("[", 1)[0]


def long_first_halves(items: list[pytest.Item], workers: int = 2) -> list[pytest.Item]:
    """``items`` reordered for ``workers`` contiguous shares (see the module's docstring)."""
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        units.setdefault(_unit(item), []).append(item)
    seconds_of = {unit: LONG_SECONDS[unit] for unit in units if unit in LONG_SECONDS}
    on_server = [
        unit
        for unit, members in units.items()
        if any(_CONNECT_SERVER in getattr(i, "fixturenames", ()) for i in members)
    ]
    if on_server:
        units[_ON_THE_CONNECT_SERVER] = [item for unit in on_server for item in units.pop(unit)]
        seconds_of[_ON_THE_CONNECT_SERVER] = sum(seconds_of.pop(unit, _SHORT_SECONDS) for unit in on_server)
    long = sorted(seconds_of, key=lambda u: -seconds_of[u])
    shares: list[list[pytest.Item]] = [[] for _ in range(workers)]
    seconds = [0.0] * workers
    for unit in long:
        i = min(range(workers), key=lambda w: seconds[w])
        shares[i].extend(units[unit])
        seconds[i] += seconds_of[unit]
    rest = [item for unit, members in units.items() if unit not in seconds_of for item in members]
    # xdist's first share is len // workers of the items, the next of what is left, ...
    out: list[pytest.Item] = []
    for i, share in enumerate(shares):
        size = (len(items) - len(out)) // (workers - i)
        fill = max(0, size - len(share))
        out += share + rest[:fill]
        rest = rest[fill:]
    return out + rest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:  # not an xdist worker
        return
    items[:] = long_first_halves(items, int(workerinput["workercount"]))
