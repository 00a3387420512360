"""Policy fields, combination rules and effective policies with sources (SPEC §3)."""

from __future__ import annotations

import pytest

from engine.errors import InvalidPolicy
from engine.policy.effective import PolicyValue, merge_overrides, resolve
from engine.policy.fields import FIELDS, parse_field, validate

GiB = 2**30


def test_fields_follow_the_spec_table() -> None:
    assert {name: field.default_text for name, field in FIELDS.items()} == {
        "segment_size": "1 GiB",
        "segment_roll": "none",
        "retention_time": "7d",
        "retention_size": "infinite",
        "max_time": "infinite",
        "max_partition_size": "100 GiB",
        "granularity": "segment",
        "consumption": "ignore",
        "subscription_expiry": "infinite",
        "message_ttl": "infinite",
        "backlog_size": "infinite",
        "backlog_age": "infinite",
        "backlog_policy": "producer_request_hold",
        "max_deletes_per_cycle": "unlimited",
        "hold": "off",
    }
    assert FIELDS["backlog_policy"].choices == (
        "producer_request_hold",
        "producer_exception",
        "consumer_backlog_eviction",
    )


# Pulsar's retention table (seed 003), time limit and size limit.
@pytest.mark.parametrize(
    ("time", "size", "valid"),
    [
        ("-1", "-1", True),
        ("-1", "10G", True),
        ("3h", "-1", True),
        ("0", "0", True),
        ("0", "10G", False),
        ("3h", "0", False),
        ("3h", "10G", True),
    ],
)
def test_pulsar_retention_table(time: str, size: str, valid: bool) -> None:
    overrides = {"retention_time": time, "retention_size": size}
    if valid:
        policy = resolve(overrides)
        assert policy["retention_time"] == FIELDS["retention_time"].parse(time)
        assert policy["retention_size"] == FIELDS["retention_size"].parse(size)
    else:
        with pytest.raises(InvalidPolicy, match="retention_time .* retention_size .*a lone 0 is invalid"):
            resolve(overrides)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"max_partition_size": "10 MiB"},
            "invalid policy: max_partition_size (10 MiB) must be >= segment_size (1 GiB)",
        ),
        (
            {"retention_size": "200 GiB"},
            "invalid policy: retention_size (200 GiB) must be <= max_partition_size (100 GiB)",
        ),
        (
            {"max_time": "1d"},
            "invalid policy: retention_time (7d) must be <= max_time (1d)",
        ),
        ({"segment_size": "0"}, "invalid policy: segment_size must be > 0"),
        ({"segment_size": "infinite"}, "invalid policy: segment_size must be finite"),
    ],
)
def test_combination_rules_are_refused_by_name(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidPolicy) as caught:
        resolve(overrides)
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize(
    "overrides",
    [
        {"max_partition_size": "1 GiB"},  # equal to segment_size
        {"max_partition_size": "infinite", "retention_size": "1 TiB"},
        {"retention_size": "100 GiB"},
        {"max_time": "7d"},
        {"retention_time": "infinite", "max_time": "1d"},
        {"retention_time": "0", "retention_size": "infinite"},
        {"retention_time": "0", "retention_size": "0"},
    ],
)
def test_combinations_at_the_edge_are_accepted(overrides: dict[str, str]) -> None:
    assert resolve(overrides).overrides() == overrides


def test_validate_checks_only_rules_whose_fields_are_present() -> None:
    validate({"max_partition_size": 1})
    validate({"retention_time": 0})
    with pytest.raises(InvalidPolicy, match="must be >= segment_size"):
        validate({"max_partition_size": 1, "segment_size": 2})


def test_defaults_and_sources() -> None:
    policy = resolve({"retention_time": "6h"})
    assert policy.entry("retention_time") == PolicyValue("retention_time", "6h", 6 * 3_600_000, "21600 s", "topic")
    assert policy.entry("segment_size") == PolicyValue("segment_size", "1 GiB", GiB, "1073741824 B", "default")
    assert [entry.field for entry in policy.entries()] == list(FIELDS)
    assert {entry.source for entry in policy.entries()} == {"default", "topic"}
    assert policy.overrides() == {"retention_time": "6h"}
    assert dict(policy)["hold"] is False


def test_engine_defaults_come_before_spec_defaults() -> None:
    policy = resolve({"hold": "on"}, {"retention_time": "2 weeks"})
    assert policy.entry("retention_time") == PolicyValue(
        "retention_time", "2 weeks", 14 * 86_400_000, "1209600 s", "default"
    )
    assert policy["hold"] is True
    assert policy.entry("hold").source == "topic"


@pytest.mark.parametrize(
    ("field", "text", "normalized"),
    [
        ("retention_time", "7d", "604800 s"),
        ("retention_time", "300ms", "0.3 s"),
        ("segment_size", "1 GiB", "1073741824 B"),
        ("max_partition_size", "infinite", "infinite"),
        ("max_deletes_per_cycle", "5", "5"),
        ("max_deletes_per_cycle", "-1", "unlimited"),
        ("granularity", "MESSAGE", "message"),
        ("hold", "yes", "on"),
        ("hold", "0", "off"),
    ],
)
def test_normalized_form(field: str, text: str, normalized: str) -> None:
    policy = resolve({field: text})
    assert policy.entry(field).normalized == normalized
    assert policy.to_json()[field] == {"value": text, "normalized": normalized, "source": "topic"}


def test_to_json_lists_every_field_with_its_source() -> None:
    document = resolve({}).to_json()
    assert list(document) == list(FIELDS)
    assert document["retention_time"] == {"value": "7d", "normalized": "604800 s", "source": "default"}


@pytest.mark.parametrize(
    ("field", "text", "message"),
    [
        ("retention_time", "5 parsecs", "invalid value for retention_time: '5 parsecs' (unknown unit 'parsecs'"),
        ("segment_size", "-5", "invalid value for segment_size: '-5' (negative values are invalid"),
        ("granularity", "record", "invalid value for granularity: 'record' (use one of: segment, message)"),
        ("hold", "perhaps", "invalid value for hold: 'perhaps' (use on or off"),
        ("max_deletes_per_cycle", "2.5", "invalid value for max_deletes_per_cycle: '2.5' (not a whole number"),
    ],
)
def test_bad_values_name_the_field(field: str, text: str, message: str) -> None:
    with pytest.raises(InvalidPolicy) as caught:
        parse_field(field, text)
    assert str(caught.value).startswith(message)
    with pytest.raises(InvalidPolicy) as caught:
        resolve({field: text})
    assert str(caught.value).startswith(message)


def test_unknown_field_is_refused_with_the_valid_names() -> None:
    for attempt in (
        lambda: parse_field("retention_tme", "1d"),
        lambda: resolve({"retention_tme": "1d"}),
        lambda: resolve({}, {"retention_tme": "1d"}),
        lambda: merge_overrides({}, {"retention_tme": "1d"}),
    ):
        with pytest.raises(InvalidPolicy) as caught:
            attempt()
        message = str(caught.value)
        assert message.startswith("unknown policy field 'retention_tme'")
        assert "retention_time" in message and "hold" in message


def test_merge_overrides_sets_and_resets() -> None:
    current = {"retention_time": "1d", "hold": "on"}
    merged = merge_overrides(current, {"retention_time": None, "segment_size": "10 MiB", "max_time": None})
    assert merged == {"hold": "on", "segment_size": "10 MiB"}
    assert current == {"retention_time": "1d", "hold": "on"}
    assert resolve(merged, {"retention_time": "3d"}).entry("retention_time").source == "default"


def test_effective_policy_is_immutable() -> None:
    policy = resolve({})
    with pytest.raises(AttributeError):
        policy._entries = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        policy["hold"] = True  # type: ignore[index]
