"""A topic's effective policy: its overrides on top of the engine defaults (SPEC §3).

Every effective value keeps the text it was configured with, its normalized form and
its source (``default`` or ``topic``), because operators must see where a value comes
from before they trust what the engine deletes with it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

from engine.policy.fields import FIELDS, Value, as_limit, field_named, validate

Source = Literal["default", "topic"]

_POSITION = {name: index for index, name in enumerate(FIELDS)}


@dataclass(frozen=True)
class PolicyValue:
    """One effective field: configured text, parsed value, normal form and source."""

    field: str
    text: str
    value: Value
    normalized: str
    source: Source


@dataclass(frozen=True)
class EffectivePolicy(Mapping[str, Value]):
    """A complete, valid policy: field name -> parsed value, in :data:`FIELDS` order.

    Build it with :func:`resolve`, which guarantees that every field is present and
    that the combination rules hold.
    """

    _entries: tuple[PolicyValue, ...]

    def __getitem__(self, field: str) -> Value:
        return self.entry(field).value

    def __iter__(self) -> Iterator[str]:
        return iter(FIELDS)

    def __len__(self) -> int:
        return len(self._entries)

    def limit(self, field: str) -> int | None:
        """A duration (ms), size (bytes) or count field's value; ``None`` is no limit."""
        return as_limit(self[field])

    def choice(self, field: str) -> str:
        """An enum field's value."""
        value = self[field]
        if not isinstance(value, str):
            raise TypeError(f"{field} is not a choice: {value!r}")
        return value

    @property
    def segment_size(self) -> int:
        """Bytes: always finite and positive (:func:`validate` refuses anything else)."""
        size = self.limit("segment_size")
        if size is None:
            raise TypeError("segment_size is infinite")
        return size

    def entry(self, field: str) -> PolicyValue:
        """The full record of ``field``; ``KeyError`` if there is no such field."""
        return self._entries[_POSITION[field]]

    def entries(self) -> list[PolicyValue]:
        """Every field's record, in :data:`FIELDS` order."""
        return list(self._entries)

    def overrides(self) -> dict[str, str]:
        """The topic's own texts, the fields whose source is ``topic``."""
        return {e.field: e.text for e in self._entries if e.source == "topic"}

    def to_json(self) -> dict[str, dict[str, str]]:
        """The ``policy`` object of ``topic describe --json`` (SPEC §7)."""
        return {e.field: {"value": e.text, "normalized": e.normalized, "source": e.source} for e in self._entries}


def resolve(overrides: Mapping[str, str], defaults: Mapping[str, str] | None = None) -> EffectivePolicy:
    """The effective policy of ``overrides`` on top of ``defaults``.

    ``defaults`` are the engine defaults of the config file; a field it leaves out
    takes the default of SPEC §3. Every text is parsed and the combination is
    validated: an unknown field, a bad value or a broken rule raises
    :class:`~engine.errors.InvalidPolicy`.
    """
    engine_defaults = defaults or {}
    for name in (*overrides, *engine_defaults):
        field_named(name)
    entries = []
    for name, field in FIELDS.items():
        source: Source
        if name in overrides:
            text, source = overrides[name], "topic"
        else:
            text, source = engine_defaults.get(name, field.default_text), "default"
        value = field.parse(text)
        entries.append(PolicyValue(name, text, value, field.normalize(value), source))
    validate({entry.field: entry.value for entry in entries})
    return EffectivePolicy(tuple(entries))


def merge_overrides(current: Mapping[str, str], changes: Mapping[str, str | None]) -> dict[str, str]:
    """``current`` overrides with ``changes`` applied; ``None`` resets a field to default.

    Field names are checked here so that a typo is refused before anything is saved;
    values are checked by :func:`resolve` on the result.
    """
    merged = dict(current)
    for name, text in changes.items():
        field_named(name)
        if text is None:
            merged.pop(name, None)
        else:
            merged[name] = text
    return merged
