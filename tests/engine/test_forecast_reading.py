"""Which groups no consumer has committed for since they were created
(``Catalog.never_committed``): the forecast reads them as reading nothing."""

from __future__ import annotations

from pathlib import Path

from engine.broker import Broker
from tests.support.seed_scenarios import MIN, T0, write


def _topic(data_dir: Path) -> Broker:
    """A topic ``t`` of 2 partitions, 10 records each, a minute apart until T0."""
    broker = Broker(data_dir, clock=lambda: T0)
    broker.create_topic("t", 2, {"segment_size": "1000"})
    for partition in (0, 1):
        write(broker, "t", [T0 - (10 - k) * MIN for k in range(10)], partition)
    return broker


def test_never_committed_names_only_the_topics_asked(data_dir: Path) -> None:
    with _topic(data_dir) as broker:
        broker.create_topic("u", 1, {})
        broker.create_group("t", "g", "subscriber", "earliest")
        broker.create_group("u", "g", "subscriber", "earliest")
        assert broker.catalog.never_committed(["t"]) == {("t", "g")}
        assert broker.catalog.never_committed(["t", "u"]) == {("t", "g"), ("u", "g")}
