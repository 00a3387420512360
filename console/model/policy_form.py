"""The policy editor's form, without Textual: what the operator typed, what it means,
where each value comes from, and what saving it would change (SPEC §8).

Every text goes through the engine's own parsers and rules (:func:`parse_field`,
:func:`merge_overrides`, :func:`resolve`), so the editor refuses exactly what
``ebb topic alter`` refuses, with the same messages.

Reading and saving take a :class:`~engine.broker.Broker` and run in worker threads;
the form itself is immutable and cheap, so the UI rebuilds it on every keystroke.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Literal

from console import format
from engine.broker import Broker
from engine.errors import EbbError, InvalidPolicy
from engine.journal.journal import Journal
from engine.policy.effective import merge_overrides, resolve
from engine.policy.fields import FIELDS, as_limit, parse_field
from engine.policy.units import describe_duration, describe_size

#: where a field's value comes from in the form:
#: ``topic`` the saved override, ``default`` the engine default, ``changed`` a new
#: text not saved yet, ``reset`` a saved override the form removes (back to default)
Source = Literal["topic", "default", "changed", "reset"]

Change = tuple[str, str | None, str | None]
"""(field, old override, new override) as the catalog journals it; None = default."""


class PolicyChangedMeanwhile(EbbError):
    """The topic's policy changed after the editor read it: saving would overwrite a
    change the operator has not seen."""


@dataclass(frozen=True)
class SavedPolicy:
    """A topic's policy as stored when it was read."""

    topic: str
    #: the topic's override texts
    overrides: Mapping[str, str]
    #: every field's engine default text (the config file's, else SPEC §3's)
    defaults: Mapping[str, str]
    #: id of the topic's latest policy change (0: none), as ``Journal.policy_version``
    version: int


@dataclass(frozen=True)
class FieldEcho:
    """One row of the form as shown: the text, what it means, or why it is refused."""

    name: str
    text: str
    source: Source
    #: the value in normal form (``30m = 1800 s``); None when the text is invalid
    normalized: str | None
    #: the engine's refusal of the text, one line; None when valid
    error: str | None


def _defaults(config_defaults: Mapping[str, str]) -> dict[str, str]:
    return {name: config_defaults.get(name, f.default_text) for name, f in FIELDS.items()}


def _read(broker: Broker, topic: str) -> SavedPolicy:
    """The saved policy, read in the caller's transaction."""
    name = broker.catalog.topic(topic).name
    return SavedPolicy(
        topic=name,
        overrides=MappingProxyType(broker.catalog.overrides(name)),
        defaults=MappingProxyType(_defaults(broker.config.policy_defaults)),
        version=Journal(broker.catalog).policy_version(name),
    )


def load_saved_policy(broker: Broker, topic: str) -> SavedPolicy:
    """The topic's saved policy, overrides and version from one consistent read."""
    with broker.catalog.read():
        return _read(broker, topic)


def normal_form(name: str, text: str) -> str:
    """The echo of a valid ``text``: ``30m = 1800 s``, ``2 KiB = 2048 B``, ``protect``.
    Raises :class:`InvalidPolicy` (the engine's message) for an invalid one."""
    policy_field = FIELDS[name]
    value = parse_field(name, text)
    normalized = policy_field.normalize(value)
    limit = as_limit(value) if policy_field.kind in ("duration", "size") else None
    if limit is None:
        return normalized
    described = describe_duration(limit) if policy_field.kind == "duration" else describe_size(limit)
    return normalized if described.replace(" ", "") == normalized.replace(" ", "") else f"{described} = {normalized}"


@dataclass(frozen=True)
class PolicyForm:
    """The editor's state: the saved policy and the overrides the form would save."""

    saved: SavedPolicy
    #: field -> text: the overrides as they would be saved (a field absent: default)
    overrides: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def opened(cls, saved: SavedPolicy) -> PolicyForm:
        """The form as the editor opens: every field as saved."""
        return cls(saved, MappingProxyType(dict(saved.overrides)))

    @property
    def topic(self) -> str:
        return self.saved.topic

    # -- editing ------------------------------------------------------------------------

    def text(self, name: str) -> str:
        """What the field's input shows: its override, else its default."""
        return self.overrides.get(name, self.saved.defaults[name])

    def typed(self, name: str, text: str) -> PolicyForm:
        """The form with ``text`` typed into field ``name``.

        The input also reports the texts the editor puts in it (when it opens, on a
        reset), so a field at its default that shows its default text stays at its
        default; and typing the default text back into a field that had no override
        removes the override again, rather than pinning the default.
        """
        at_default = text == self.saved.defaults[name]
        if at_default and (name not in self.overrides or name not in self.saved.overrides):
            return self._with(name, None)
        return self._with(name, text)

    def reset(self, name: str) -> PolicyForm:
        """The form with field ``name`` back to the engine default (its override removed)."""
        return self._with(name, None)

    def rebased(self, newer: SavedPolicy) -> PolicyForm:
        """This form's changes on top of a newer saved policy (after another change)."""
        return PolicyForm(newer, MappingProxyType(merge_overrides(newer.overrides, self.changes())))

    def _with(self, name: str, text: str | None) -> PolicyForm:
        overrides = dict(self.overrides)
        if text is None:
            overrides.pop(name, None)
        else:
            overrides[name] = text
        return replace(self, overrides=MappingProxyType(overrides))

    # -- reading --------------------------------------------------------------------------

    def source(self, name: str) -> Source:
        saved = self.saved.overrides.get(name)
        now = self.overrides.get(name)
        if now is None:
            return "default" if saved is None else "reset"
        return "topic" if now == saved else "changed"

    def echo(self, name: str) -> FieldEcho:
        text = self.text(name)
        try:
            normalized, error = normal_form(name, text), None
        except InvalidPolicy as refusal:
            normalized, error = None, str(refusal)
        return FieldEcho(name, text, self.source(name), normalized, error)

    def echoes(self) -> list[FieldEcho]:
        """Every field, in :data:`FIELDS` order."""
        return [self.echo(name) for name in FIELDS]

    def changes(self) -> dict[str, str | None]:
        """What saving would change, as ``Broker.alter_topic`` takes it: field -> new
        text, None to reset the field to its default. In :data:`FIELDS` order."""
        return {
            name: self.overrides.get(name)
            for name in FIELDS
            if self.overrides.get(name) != self.saved.overrides.get(name)
        }

    def merged(self) -> dict[str, str]:
        """The overrides saving would store (the what-if preview plans with them)."""
        return merge_overrides(self.saved.overrides, self.changes())

    def field_errors(self) -> list[str]:
        return [e.error for e in self.echoes() if e.error is not None]

    def combination_error(self) -> str | None:
        """The broken rule of SPEC §3 (``retention_time <= max_time``...), checked as
        ``ebb topic alter`` checks it; None when it holds or a field is invalid (the
        field's own error comes first)."""
        if self.field_errors():
            return None
        try:
            resolve(self.merged(), self.saved.defaults)
        except InvalidPolicy as refusal:
            return str(refusal)
        return None

    def problem(self) -> str | None:
        """The first reason the form cannot be saved, one line; None when it can."""
        errors = self.field_errors()
        if errors:
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            return f"{errors[0]}{more}"
        return self.combination_error()

    @property
    def valid(self) -> bool:
        return self.problem() is None


def _changed_by(broker: Broker, topic: str) -> str:
    """Who changed the topic's policy last and when, for the refusal."""
    latest = Journal(broker.catalog).policy_changes(topic=topic, limit=1)
    if not latest:
        return f"the policy of {topic} changed since you opened the editor; reload, nothing was saved"
    row = latest[0]
    return (
        f"the policy of {topic} was changed by {row['actor']} at {format.instant(row['time'])} UTC "
        "since you opened the editor; reload, nothing was saved"
    )


def save_policy(broker: Broker, form: PolicyForm, *, actor: str = "console") -> list[Change]:
    """Save the form's changes unless the saved policy changed since the form read it.

    The re-read, the check and the write share one ``BEGIN IMMEDIATE`` transaction:
    it takes SQLite's write lock before the re-read, so no other process (CLI, engine,
    another console) can change the policy between the check and the write. This is
    why it does not call :meth:`Broker.alter_topic`, whose own write transaction
    cannot nest inside this one; it runs the same steps with the same engine functions
    (merge the changes, :func:`resolve` them against the defaults, replace the
    overrides, which journals each changed field with ``actor``).

    Raises :class:`PolicyChangedMeanwhile` (nothing written) when the version or the
    overrides differ from what the form read, :class:`InvalidPolicy` when the result
    breaks a rule. Returns the (field, old, new) changes journaled.
    """
    topic = form.topic
    with broker.catalog.write():
        current = _read(broker, topic)
        if current.version != form.saved.version or dict(current.overrides) != dict(form.saved.overrides):
            raise PolicyChangedMeanwhile(_changed_by(broker, topic))
        merged = merge_overrides(current.overrides, form.changes())
        broker.policy(topic, merged)  # resolve(): refuses what `ebb topic alter` refuses
        return broker.catalog.replace_overrides(topic, merged, actor=actor, now_ms=broker.clock())


def describe_changes(topic: str, changes: list[Change]) -> str:
    """One line for the notification after a save."""
    if not changes:
        return f"{topic}: nothing changed"
    shown = ", ".join(f"{f} {old or '(default)'} → {new or '(default)'}" for f, old, new in changes)
    return f"{topic}: {shown}"
