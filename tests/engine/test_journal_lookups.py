"""The journal's named lookups that the scheduler and ``ebb log`` use instead of SQL
of their own (tests/codebase/test_catalog_sql.py keeps it so)."""

from __future__ import annotations

from engine.broker import Broker
from engine.journal.journal import Entry, Journal

T = 1_762_000_000_000


def start(journal: Journal, actor: str = "engine", trigger: str = "schedule") -> int:
    return journal.start_cycle(trigger=trigger, actor=actor, scope="all", now=T, started=T, spark_master=None)


def test_latest_cycle_id_is_zero_before_the_first_cycle(broker: Broker) -> None:
    journal = Journal(broker.catalog)
    assert journal.latest_cycle_id() == 0
    start(journal)
    second = start(journal)
    assert journal.latest_cycle_id() == second


def test_unfinished_cycle_after_is_the_newest_failed_or_running_one_of_that_trigger_and_actor(broker: Broker) -> None:
    journal = Journal(broker.catalog)
    before = start(journal)
    assert journal.unfinished_cycle_after(before, trigger="schedule", actor="engine") is None
    running = start(journal)
    assert journal.unfinished_cycle_after(before, trigger="schedule", actor="engine") == running
    failed = start(journal)
    journal.finish_cycle(failed, status="failed", finished=T, planned=0, applied=0, bytes_freed=0, error="x")
    done = start(journal)
    journal.finish_cycle(done, status="done", finished=T, planned=0, applied=0, bytes_freed=0)
    start(journal, actor="console")
    start(journal, trigger="manual")
    assert journal.unfinished_cycle_after(before, trigger="schedule", actor="engine") == failed
    assert journal.unfinished_cycle_after(failed, trigger="schedule", actor="engine") is None
    assert journal.unfinished_cycle_after(before - 1, trigger="schedule", actor="engine") == failed


def test_mentions_topic_sees_actions_and_policy_changes_of_deleted_topics(broker: Broker) -> None:
    journal = Journal(broker.catalog)
    assert not journal.mentions_topic("orders")
    broker.create_topic("orders", 1, {"retention_time": "1d"})
    broker.delete_topic("orders")
    assert journal.mentions_topic("orders")  # its policy change stays
    journal.append([Entry("hold", topic="audit")], time=T, trigger="manual", actor="cli", status="applied")
    assert journal.mentions_topic("audit")
    assert not journal.mentions_topic("audi")
