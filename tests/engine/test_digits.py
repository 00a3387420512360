"""Whole numbers are read from plain ASCII digits only, wherever they come from: an
offset typed in the console, a partition key in a topic's groups.json. ``'²'`` passed
``str.isdigit()`` and then made ``int()`` raise a bare ValueError (a traceback from
``ebb verify``, a console that quit), and ``'٣'`` was read as 3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.model.topic_facts import PartitionFacts
from engine.catalog.metadata_files import FORMAT, MetadataInvalid, read_groups
from engine.digits import is_digits
from engine.errors import InvalidInput


@pytest.mark.parametrize("text", ["0", "42", "0007"])
def test_plain_digits_are_digits(text: str) -> None:
    assert is_digits(text)


@pytest.mark.parametrize("text", ["", "²", "٣", "1²", "+5", "-5", "1_000", " 5", "5 ", "5.0"])
def test_anything_else_is_not(text: str) -> None:
    assert not is_digits(text)


@pytest.mark.parametrize("typed", ["²", "٣"])
def test_an_offset_typed_in_another_script_is_refused_with_the_fields_message(typed: str) -> None:
    facts = PartitionFacts(0, 0, 10, (), ())
    with pytest.raises(InvalidInput, match="a whole number is needed"):
        facts.offset(typed, "truncate")
    with pytest.raises(InvalidInput, match="delete at least 1"):
        facts.oldest_cut(typed)


def test_a_groups_file_keyed_by_another_scripts_digit_is_damaged_not_a_crash(tmp_path: Path) -> None:
    groups = {"format": FORMAT, "groups": [{"name": "billing", "kind": "subscriber", "positions": {"²": [5, 1]}}]}
    (tmp_path / "groups.json").write_text(json.dumps(groups))
    with pytest.raises(MetadataInvalid, match="bad position entry"):
        read_groups(tmp_path)


def test_verify_reports_such_a_groups_file_in_one_line(ebb, data_dir: Path) -> None:
    for args in (("topic", "create", "orders"), ("group", "create", "orders", "billing")):
        assert ebb(*args).code == 0
    groups_file = data_dir / "topics" / "orders" / "groups.json"
    groups = json.loads(groups_file.read_text())
    groups["groups"][0]["positions"] = {"²": [0, 1]}
    groups_file.write_text(json.dumps(groups))
    found = ebb("verify")
    assert found.code == 1, found
    assert "Traceback" not in found.err and "orders/groups.json" in found.out, found
