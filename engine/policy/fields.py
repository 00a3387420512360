"""The policy fields of SPEC §3, their parsing, normal forms and combination rules.

This module is the single list of fields: the CLI flags, the config file's
``[policy]`` table, the catalog and the console's policy editor all derive from
:data:`FIELDS`, so a field added here appears everywhere with the same rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from engine.errors import InvalidPolicy
from engine.policy.units import (
    InvalidValue,
    describe_duration,
    describe_size,
    format_duration,
    format_size,
    parse_bool,
    parse_count,
    parse_duration,
    parse_size,
    shown,
)

Kind = Literal["duration", "size", "count", "enum", "bool"]
Value = int | str | bool | None
"""A parsed policy value: ms, bytes, a count, a choice or a switch; None = no limit."""

_PARSERS: dict[str, Callable[[str], Value]] = {
    "duration": parse_duration,
    "size": parse_size,
    "count": parse_count,
    "bool": parse_bool,
}


@dataclass(frozen=True)
class PolicyField:
    """One field of a policy: how its text is read and shown."""

    name: str
    kind: Kind
    default_text: str
    help: str
    choices: tuple[str, ...] = ()

    def parse(self, text: str) -> Value:
        """The value of ``text`` for this field; refusals name the field."""
        if self.kind == "enum":
            choice = text.strip().lower()
            if choice in self.choices:
                return choice
            raise InvalidPolicy(f"invalid value for {self.name}: {shown(text)} (use one of: {', '.join(self.choices)})")
        try:
            return _PARSERS[self.kind](text)
        except InvalidValue as error:
            raise InvalidPolicy(f"invalid value for {self.name}: {shown(error.text)} ({error.reason})") from None

    def normalize(self, value: Value) -> str:
        """The normalized form shown next to every effective value (SPEC §3)."""
        if self.kind == "duration":
            return format_duration(as_limit(value))
        if self.kind == "size":
            return format_size(as_limit(value))
        if self.kind == "count":
            return "unlimited" if value is None else str(value)
        if self.kind == "bool":
            return "on" if value else "off"
        return str(value)


def as_limit(value: Value) -> int | None:
    """``value`` as a duration or size; a bool or str here is a caller's bug."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise TypeError(f"expected an int or None, got {value!r}")


def _fields(*fields: PolicyField) -> dict[str, PolicyField]:
    return {field.name: field for field in fields}


FIELDS: dict[str, PolicyField] = _fields(
    PolicyField(
        "segment_size",
        "size",
        "1 GiB",
        "roll the active segment before it would exceed this",
    ),
    PolicyField(
        "segment_roll",
        "duration",
        "none",
        "roll a non-empty active segment once its first record is this old, so idle topics can age out",
    ),
    PolicyField(
        "retention_time",
        "duration",
        "7d",
        "retain target: data older than this is eligible to go",
    ),
    PolicyField(
        "retention_size",
        "size",
        "infinite",
        "retain target: keep at least this many bytes per partition; older data beyond it is eligible",
    ),
    PolicyField(
        "max_time",
        "duration",
        "infinite",
        "hard cap: data older than this goes even if unconsumed",
    ),
    PolicyField(
        "max_partition_size",
        "size",
        "100 GiB",
        "hard cap: a partition's bytes, active segment included, are brought back "
        "under this, oldest first, even if unconsumed",
    ),
    PolicyField(
        "granularity",
        "enum",
        "segment",
        "segment: only whole sealed segments go; message: the log start moves message by message",
        ("segment", "message"),
    ),
    PolicyField(
        "consumption",
        "enum",
        "ignore",
        "ignore: positions never hold data back; protect: eligible data is kept "
        "until every subscriber group has consumed it",
        ("ignore", "protect"),
    ),
    PolicyField(
        "subscription_expiry",
        "duration",
        "infinite",
        "a group whose last commit on the topic is older than this is removed",
    ),
    PolicyField(
        "message_ttl",
        "duration",
        "infinite",
        "subscriber positions skip past messages older than this (auto-acknowledge)",
    ),
    PolicyField(
        "backlog_size",
        "size",
        "infinite",
        "backlog quota per subscriber group: bytes not yet consumed",
    ),
    PolicyField(
        "backlog_age",
        "duration",
        "infinite",
        "backlog quota per subscriber group: age of the oldest unconsumed message",
    ),
    PolicyField(
        "backlog_policy",
        "enum",
        "producer_request_hold",
        "what happens when a group is over its backlog quota",
        ("producer_request_hold", "producer_exception", "consumer_backlog_eviction"),
    ),
    PolicyField(
        "max_deletes_per_cycle",
        "count",
        "unlimited",
        "at most this many segments per partition per cycle; the rest wait",
    ),
    PolicyField(
        "hold",
        "bool",
        "off",
        "retention hold: nothing of this topic is deleted, by any path, while set",
    ),
)


def field_named(name: str) -> PolicyField:
    """The field called ``name``; an unknown name is refused with the valid ones."""
    field = FIELDS.get(name)
    if field is None:
        raise InvalidPolicy(f"unknown policy field {shown(name)} (valid fields: {', '.join(FIELDS)})")
    return field


def exact_text(name: str, value: Value) -> str:
    """A parsed value of field ``name`` as a text that parses back to exactly it:
    ``1234ms``, ``5678`` (bytes or a count), ``infinite``, ``on``/``off``, a choice."""
    kind = field_named(name).kind
    if kind == "enum":
        return str(value)
    if kind == "bool":
        return "on" if value else "off"
    if value is None:
        return "infinite"
    if kind == "duration":
        return f"{value}ms"
    return str(value)


def parse_field(name: str, text: str) -> Value:
    """The value of ``text`` for the field ``name``."""
    return field_named(name).parse(text)


def validate(values: Mapping[str, Value]) -> None:
    """Refuse a combination of parsed values that breaks a rule of SPEC §3.

    Only the rules whose fields are all present in ``values`` are checked, so a
    partial set (a config file's defaults) can be checked on its own; comparisons
    apply only where both sides are finite. The first broken rule is reported.
    """
    if "segment_size" in values:
        segment_size = values["segment_size"]
        if segment_size is None:
            raise InvalidPolicy(
                "invalid policy: segment_size must be finite "
                "(segments are the unit of deletion; an endless one could never go)"
            )
        if segment_size == 0:
            raise InvalidPolicy("invalid policy: segment_size must be > 0 (a 0-byte segment can hold nothing)")
    _check_order(values, "max_partition_size", ">=", "segment_size", describe_size)
    _check_order(values, "retention_size", "<=", "max_partition_size", describe_size)
    _check_order(values, "retention_time", "<=", "max_time", describe_duration)
    _check_lone_zero(values)


def _check_order(
    values: Mapping[str, Value],
    left: str,
    operator: Literal["<=", ">="],
    right: str,
    describe: Callable[[int | None], str],
) -> None:
    """Refuse ``left operator right`` when both are present, finite and out of order."""
    if left not in values or right not in values:
        return
    left_value, right_value = as_limit(values[left]), as_limit(values[right])
    if left_value is None or right_value is None:
        return
    holds = left_value >= right_value if operator == ">=" else left_value <= right_value
    if not holds:
        raise InvalidPolicy(
            f"invalid policy: {left} ({describe(left_value)}) must be {operator} {right} ({describe(right_value)})"
        )


def _check_lone_zero(values: Mapping[str, Value]) -> None:
    """Pulsar's rule: a 0 retention_time or retention_size needs a 0 or infinite partner."""
    if "retention_time" not in values or "retention_size" not in values:
        return
    time, size = as_limit(values["retention_time"]), as_limit(values["retention_size"])
    if (time == 0 and size) or (size == 0 and time):
        raise InvalidPolicy(
            f"invalid policy: retention_time ({describe_duration(time)}) and retention_size "
            f"({describe_size(size)}): a lone 0 is invalid; set both to 0 (retain nothing, "
            "as Pulsar's 0/0) or the other one to infinite"
        )
