"""Policy value parsers and formatters: every spelling of SPEC §3, and every refusal."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.errors import InvalidPolicy
from engine.policy.units import (
    MAX_DURATION_MS,
    describe_duration,
    describe_size,
    format_duration,
    format_size,
    parse_bool,
    parse_count,
    parse_duration,
    parse_size,
)

SECOND = 1000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR
KiB, MiB, GiB, TiB = 2**10, 2**20, 2**30, 2**40


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        # Go
        ("72h3m0.5s", 72 * HOUR + 3 * MINUTE + 500),
        ("300ms", 300),
        ("1h30m", HOUR + 30 * MINUTE),
        ("1.5h", 90 * MINUTE),
        (".5s", 500),
        ("1500us", 2),  # 1.5 ms, halves round up
        ("1499µs", 1),
        ("2000000ns", 2),
        ("1ns", 0),  # below half a millisecond rounds to 0
        # humantime
        ("1d 2h 3m 4s", DAY + 2 * HOUR + 3 * MINUTE + 4 * SECOND),
        ("7 days", 7 * DAY),
        ("2 weeks", 14 * DAY),
        ("1day", DAY),
        ("6h", 6 * HOUR),
        ("12 hours", 12 * HOUR),
        ("12 hrs", 12 * HOUR),
        ("30min", 30 * MINUTE),
        ("5 mins", 5 * MINUTE),
        ("1 week", 7 * DAY),
        ("10 sec", 10 * SECOND),
        ("32 msec", 32),
        ("1 month", 2_630_016_000),  # 30.44 days
        ("1 year", 31_557_600_000),  # 365.25 days
        ("2h 37min", 9420 * SECOND),
        # Pulsar
        ("3h", 3 * HOUR),
        ("10m", 10 * MINUTE),
        ("2d", 2 * DAY),
        ("1w", 7 * DAY),
        # plain seconds
        ("3600", HOUR),
        ("0", 0),
        ("000", 0),
        # case, blanks
        ("7D", 7 * DAY),
        ("10M", 10 * MINUTE),  # M is minutes: units are case-insensitive
        ("  1 H  30 M ", 90 * MINUTE),
        ("100 years", MAX_DURATION_MS),
        # no limit
        ("infinite", None),
        ("none", None),
        ("None", None),
        ("-1", None),
        (" INFINITE ", None),
        ("unlimited", None),
    ],
)
def test_parse_duration(text: str, ms: int | None) -> None:
    assert parse_duration(text) == ms


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("-2", "negative"),
        ("--1", "negative"),
        ("-1s", "negative"),
        ("5 parsecs", "unknown unit 'parsecs'"),
        ("", "empty"),
        ("   ", "empty"),
        ("1.2.3", "malformed number '1.2.3'"),
        ("h", "expected a number before 'h'"),
        ("1h 30", "missing unit after 30"),
        ("1e9s", "unknown unit 'e'"),
        ("1h,30m", "expected a number before ',30m'"),
        ("101 years", "more than 100 years"),
        ("9" * 30, "more than 100 years"),
        ("9" * 100_000 + "s", "more than 100 years"),
        ("0." + "1" * 100_000, "too many digits"),
        ("1s" * 10_000 + "1 century", "unknown unit 'century'"),
    ],
)
def test_parse_duration_refuses(text: str, problem: str) -> None:
    with pytest.raises(InvalidPolicy) as caught:
        parse_duration(text)
    message = str(caught.value)
    assert problem in message
    assert "\n" not in message and len(message) < 200


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("2048", 2048),
        ("25000000", 25_000_000),
        ("0", 0),
        # SI, any case
        ("1 GB", 10**9),
        ("36 GB", 36 * 10**9),
        ("25 MB", 25 * 10**6),
        ("1 kB", 1000),
        ("1KB", 1000),
        ("1 gb", 10**9),
        ("0.5 GB", 500_000_000),
        # IEC, any case
        ("2 Ki", 2048),
        ("2 KiB", 2048),
        ("10 MiB", 10 * MiB),
        ("1 GiB", GiB),
        ("1 gib", GiB),
        ("3 Mi", 3 * MiB),
        ("1 Gi", GiB),
        ("2 Ti", 2 * TiB),
        ("1.5 GiB", GiB + GiB // 2),
        # Pulsar single letters, binary
        ("10G", 10 * GiB),
        ("1T", TiB),
        ("500M", 500 * MiB),
        ("4K", 4 * KiB),
        ("10g", 10 * GiB),
        # bytes
        ("512 B", 512),
        ("512 bytes", 512),
        ("1073741824 B", GiB),
        ("1.5", 2),  # rounded to the nearest byte, halves up
        # no limit
        ("infinite", None),
        ("none", None),
        ("-1", None),
    ],
)
def test_parse_size(text: str, size: int | None) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("-2", "negative"),
        ("--1", "negative"),
        ("-1 GiB", "negative"),
        ("10 XB", "unknown unit 'XB'"),
        ("5 parsecs", "unknown unit 'parsecs'"),
        ("", "empty"),
        ("1.2.3", "malformed number '1.2.3'"),
        ("GiB", "expected one number and an optional unit"),
        ("1 GiB 2 MiB", "expected one number and an optional unit"),
        ("8 EiB", "more than 2^63-1 bytes"),
        ("9" * 100_000, "more than 2^63-1 bytes"),
        ("0." + "1" * 100_000 + " GiB", "too many digits"),
    ],
)
def test_parse_size_refuses(text: str, problem: str) -> None:
    with pytest.raises(InvalidPolicy) as caught:
        parse_size(text)
    message = str(caught.value)
    assert problem in message
    assert "\n" not in message and len(message) < 200


def test_largest_size_is_accepted() -> None:
    assert parse_size(str(2**63 - 1)) == 2**63 - 1
    with pytest.raises(InvalidPolicy, match="more than 2"):
        parse_size(str(2**63))


@pytest.mark.parametrize(
    ("text", "count"),
    [("0", 0), ("10", 10), (" 7 ", 7), ("unlimited", None), ("infinite", None), ("none", None), ("-1", None)],
)
def test_parse_count(text: str, count: int | None) -> None:
    assert parse_count(text) == count


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("-2", "negative"),
        ("1.5", "not a whole number"),
        ("ten", "not a whole number"),
        ("", "empty"),
        ("9" * 10_000, "too large"),
    ],
)
def test_parse_count_refuses(text: str, problem: str) -> None:
    with pytest.raises(InvalidPolicy, match=problem):
        parse_count(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("true", True),
        ("on", True),
        ("YES", True),
        ("1", True),
        ("false", False),
        ("off", False),
        ("No", False),
        ("0", False),
    ],
)
def test_parse_bool(text: str, value: bool) -> None:
    assert parse_bool(text) is value


def test_parse_bool_refuses() -> None:
    with pytest.raises(InvalidPolicy, match="use on or off"):
        parse_bool("maybe")


@pytest.mark.parametrize(
    ("ms", "text"),
    [(7 * DAY, "604800 s"), (300, "0.3 s"), (0, "0 s"), (1, "0.001 s"), (1500, "1.5 s"), (None, "infinite")],
)
def test_format_duration(ms: int | None, text: str) -> None:
    assert format_duration(ms) == text
    assert parse_duration(text) == ms


@pytest.mark.parametrize(("size", "text"), [(GiB, "1073741824 B"), (0, "0 B"), (None, "infinite")])
def test_format_size(size: int | None, text: str) -> None:
    assert format_size(size) == text
    assert parse_size(text) == size


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (7 * DAY, "7d"),
        (HOUR + 30 * MINUTE, "1h 30m"),
        (DAY + 2 * HOUR + 3 * MINUTE + 4 * SECOND, "1d 2h 3m 4s"),
        (300, "300ms"),
        (61_001, "1m 1s 1ms"),
        (0, "0s"),
        (None, "infinite"),
    ],
)
def test_describe_duration(ms: int | None, text: str) -> None:
    assert describe_duration(ms) == text


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (GiB, "1 GiB"),
        (10 * MiB, "10 MiB"),
        (100 * GiB, "100 GiB"),
        (36 * 10**9, "33.5 GiB"),
        (int(34.3 * GiB), "34.3 GiB"),
        (GiB - 1, "1.0 GiB"),  # one decimal: rounded, not exact
        (MiB - 1, "1.0 MiB"),
        (1023, "1023 B"),
        (0, "0 B"),
        (2**63 - 1, "8.0 EiB"),
        (None, "infinite"),
    ],
)
def test_describe_size(size: int | None, text: str) -> None:
    assert describe_size(size) == text


@given(st.text())
def test_parse_duration_fails_only_with_invalid_policy(text: str) -> None:
    try:
        result = parse_duration(text)
    except InvalidPolicy as error:
        assert "\n" not in str(error)
    else:
        assert result is None or 0 <= result <= MAX_DURATION_MS


@given(st.text())
def test_parse_size_fails_only_with_invalid_policy(text: str) -> None:
    try:
        result = parse_size(text)
    except InvalidPolicy as error:
        assert "\n" not in str(error)
    else:
        assert result is None or 0 <= result <= 2**63 - 1


_UNIT_WORDS = st.sampled_from(["ns", "us", "ms", "s", "m", "h", "d", "w", "GiB", "GB", "G", "B", "x"])


@given(st.lists(st.tuples(st.from_regex(r"[0-9.]{1,6}", fullmatch=True), _UNIT_WORDS), max_size=4))
def test_parsers_fail_only_with_invalid_policy_on_near_misses(terms: list[tuple[str, str]]) -> None:
    text = " ".join(number + unit for number, unit in terms)
    for parse in (parse_duration, parse_size):
        try:
            parse(text)
        except InvalidPolicy:
            pass


@given(st.integers(min_value=0, max_value=MAX_DURATION_MS))
def test_duration_forms_round_trip(ms: int) -> None:
    assert parse_duration(format_duration(ms)) == ms
    assert parse_duration(describe_duration(ms)) == ms


@given(st.integers(min_value=0, max_value=2**63 - 1))
def test_size_form_round_trips(size: int) -> None:
    assert parse_size(format_size(size)) == size
