"""One command-line flag per policy field (SPEC §7): ``--retention-time`` etc.

Values are passed on as text; the policy module parses and validates them, so the
CLI refuses exactly what the engine refuses.
"""

from __future__ import annotations

import argparse

from engine.errors import InvalidInput
from engine.policy.fields import FIELDS


def flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def add_policy_flags(parser: argparse.ArgumentParser, *, allow_reset: bool = False) -> None:
    group = parser.add_argument_group(
        "policy ('infinite', 'none' or -1 for no limit; a plain number is seconds or bytes)"
    )
    for name, field in FIELDS.items():
        if field.kind == "bool":
            group.add_argument(
                flag_name(name),
                dest=f"policy_{name}",
                action=argparse.BooleanOptionalAction,
                default=None,
                help=field.help,
            )
        else:
            choices = f" ({'|'.join(field.choices)})" if field.choices else ""
            group.add_argument(
                flag_name(name),
                dest=f"policy_{name}",
                metavar="VALUE",
                default=None,
                help=f"{field.help}{choices} [default: {field.default_text}]",
            )
    if allow_reset:
        group.add_argument(
            "--reset",
            metavar="FIELD",
            action="append",
            default=[],
            choices=list(FIELDS),
            help="reset a field to the engine default (repeatable)",
        )


def policy_changes(args: argparse.Namespace) -> dict[str, str | None]:
    """The policy flags given on the command line: field -> text (None: reset)."""
    changes: dict[str, str | None] = {}
    for name, field in FIELDS.items():
        value = getattr(args, f"policy_{name}")
        if value is None:
            continue
        changes[name] = ("on" if value else "off") if field.kind == "bool" else value
    for name in getattr(args, "reset", []) or []:
        if name in changes:
            raise InvalidInput(f"--reset {name} conflicts with {flag_name(name)}: give one or the other")
        changes[name] = None
    return changes
