"""Topic and group names become paths: nothing may leave the data directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.broker import Broker
from engine.errors import InvalidName
from engine.names import check_group_name, check_topic_name

ESCAPES = [
    "..",
    "../x",
    "../../etc/passwd",
    "a/b",
    "a\\b",
    "/abs",
    ".hidden",
    "-flag",
    "x\n",
    "\nx",
    "a\x00b",
    "a..b",
    "~",
    "~root",
    "",
    " ",
    "has space",
    "tab\tname",
    "é",
    "x" * 250,
    "C:",
    "a:b",
    "a*b",
    "$HOME",
]


@pytest.mark.parametrize("name", ESCAPES)
def test_hostile_topic_names_are_refused_and_create_nothing(tmp_path: Path, name: str) -> None:
    data = tmp_path / "data"
    with Broker(data) as broker:
        with pytest.raises(InvalidName):
            broker.create_topic(name)
        assert broker.catalog.topics() == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]
    assert list((data / "topics").iterdir()) == []


@pytest.mark.parametrize("name", ["a", "A9", "orders.v2", "my_topic-1", "0", "x" * 249, "a.b.c"])
def test_valid_names(name: str) -> None:
    assert check_topic_name(name) == name
    assert check_group_name(name) == name


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=300))
def test_any_accepted_name_stays_a_single_plain_path_component(name: str) -> None:
    try:
        check_topic_name(name)
    except InvalidName as error:
        assert "\n" not in str(error)
        return
    root = Path("/data/topics")
    path = (root / name).resolve()
    assert path.parent == root and path.name == name
    assert not name.startswith((".", "-")) and ".." not in name and len(name) <= 249


def test_hostile_group_names_are_refused(broker: Broker) -> None:
    broker.create_topic("t")
    for name in ESCAPES:
        with pytest.raises(InvalidName):
            broker.create_group("t", name)
    assert broker.catalog.groups("t") == []
