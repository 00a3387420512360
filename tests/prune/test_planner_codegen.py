"""The planner's compiled code is reused from one cycle to the next.

Spark compiles the generated code of a query stage once per distinct source text.
Anything in that text that changes from cycle to cycle (the planning instant, while
it was a literal) makes every cycle compile every stage again: a warm plan of 1M
segments then took 4.5-5 s instead of 2.5-3 s (docs/SPARK_NOTES.md).
"""

from __future__ import annotations

import pytest

from engine.broker import Broker
from engine.prune.pruner import Pruner
from engine.prune.session import SparkEngine
from tests.support.seed_scenarios import HOUR, MIN, T0, decisions, write


def compilations(engine: SparkEngine) -> int:
    """Classes Spark's code generator has compiled in this JVM so far."""
    metrics = engine.session()._jvm.org.apache.spark.metrics.source.CodegenMetrics
    return metrics.METRIC_COMPILATION_TIME().getCount()


@pytest.mark.parametrize("every_segment", [True, False], ids=["whole plan", "a cycle's plan"])
def test_planning_a_later_instant_compiles_nothing_new(
    broker: Broker, spark_engine: SparkEngine, every_segment: bool
) -> None:
    broker.create_topic("t", 1, {"segment_size": "1000", "retention_time": "1h", "consumption": "protect"})
    write(broker, "t", [T0 + i * MIN for i in range(45)])
    broker.create_group("t", "sub", "subscriber", "earliest")
    broker.commit("t", "sub", 0, 25, at_ms=T0 + 70 * MIN)
    pruner = Pruner(broker, spark_engine)

    first = pruner.plan(now=T0 + 80 * MIN, every_segment=every_segment)
    before = compilations(spark_engine)
    later = pruner.plan(now=T0 + 2 * HOUR, every_segment=every_segment)

    assert compilations(spark_engine) == before
    assert (first.now, later.now) == (T0 + 80 * MIN, T0 + 2 * HOUR)
    if every_segment:
        # ...and the later plan is a plan of its own instant, not the first one again
        # (its kept segments' reasons differ; the group holds back the same deletions).
        assert decisions(first, "t") != decisions(later, "t")
