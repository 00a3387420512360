"""argparse with the CLI contract's error style: one line on stderr, exit 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Collection, Sequence
from typing import Any, NoReturn

from engine.broker import Broker
from engine.digits import is_digits
from engine.errors import InvalidInput
from engine.policy.units import InvalidValue

Run = Callable[[Broker, argparse.Namespace], int]
Mutates = bool | Callable[[argparse.Namespace], bool]
"""Whether a command writes to the data directory: always, never, or by its arguments."""

#: The largest whole number an argument may hold: SQLite's INTEGER is a signed 64-bit
#: column, and a bigger Python int reaching a query raises OverflowError instead of a
#: clear message.
MAX_INTEGER = 2**63 - 1


def one_line(message: str) -> str:
    """``message`` safe to print as one line: control and other unprintable characters
    (newlines, terminal escapes, lone surrogates) escaped as in ``repr``.

    argparse quotes some values with ``repr`` but not all (``unrecognized arguments:``
    joins them raw), and an argument must not be able to forge a second line."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in message)


def warn(message: str) -> None:
    """One ``ebb: warning:`` line on stderr: what a command goes on without."""
    print(f"ebb: warning: {one_line(message)}", file=sys.stderr, flush=True)


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        print(f"ebb: error: {one_line(message)} (see `{self.prog} --help`)", file=sys.stderr)
        raise SystemExit(2)


def command(parser: argparse.ArgumentParser, run: Run, *, mutates: Mutates, **defaults: Any) -> None:
    """Make ``run`` what ``parser``'s command does.

    ``mutates`` says whether it writes to the data directory (the catalog, the journal
    or segment files); ``ebb --read-only`` refuses those before opening anything
    (console/cli/main.py). Every command declares it, and a command that does not is
    treated as writing."""
    parser.set_defaults(run=run, mutates=mutates, command_name=parser.prog, **defaults)


def options_taking_values(parser: argparse.ArgumentParser) -> frozenset[str]:
    """Every long option of ``parser`` and of its commands that takes a value."""
    found: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command_parser in action.choices.values():
                found |= options_taking_values(command_parser)
        elif action.nargs != 0:
            found |= {option for option in action.option_strings if option.startswith("--")}
    return frozenset(found)


def dash_values_joined(argv: Sequence[str], valued: Collection[str]) -> list[str]:
    """``argv`` with each value of an option of ``valued`` that begins with one dash
    given as ``--option=VALUE``: argparse takes ``-1h`` for an option, so ``--horizon
    -1h`` or ``--retention-time -5m`` was refused as "expected one argument" instead
    of for its value. Nothing after ``--`` is touched."""
    out: list[str] = []
    rest = list(argv)
    while rest:
        argument = rest.pop(0)
        if argument == "--":
            return [*out, argument, *rest]
        if argument in valued and rest and rest[0].startswith("-") and not rest[0].startswith("--"):
            argument = f"{argument}={rest.pop(0)}"
        out.append(argument)
    return out


def mutates(args: argparse.Namespace) -> bool:
    """Whether the command parsed into ``args`` writes to the data directory."""
    declared: Mutates = getattr(args, "mutates", True)
    return declared(args) if callable(declared) else declared


def non_negative_int(text: str) -> int:
    """A whole number of plain ASCII digits, 0 to :data:`MAX_INTEGER`.

    Stricter than ``int()``, which also takes ``+5``, ``1_000`` and other scripts'
    digits (``٣`` is 3): what the operator sees must be what the engine uses."""
    digits = text.strip()
    if digits.startswith("-") and is_digits(digits[1:]):
        raise argparse.ArgumentTypeError(f"{text!r} must not be negative")
    if not is_digits(digits):
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (digits 0-9)")
    if len(digits.lstrip("0")) > len(str(MAX_INTEGER)) or int(digits) > MAX_INTEGER:
        raise argparse.ArgumentTypeError(f"{text!r} is too large (at most {MAX_INTEGER})")
    return int(digits)


def positive_int(text: str) -> int:
    value = non_negative_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def finite(flag: str, text: str, parse: Callable[[str], int | None], what: str, *, above_zero: bool = False) -> int:
    """``text`` given to ``flag``, read by ``parse`` (a duration or size parser of
    engine/policy/units.py) as a finite ``what``: 0 or more, or above 0.

    Such a flag refuses the parser's "no limit" (``infinite``, ``-1``), and its
    reasons leave out the parser's hint to write one (a number too large to hold). A
    negative value is told what the flag takes rather than that it is negative."""
    refused = f"invalid {flag} {text!r}: must be a finite {what}, {'above 0' if above_zero else '0 or more'}"
    if text.strip().startswith("-"):
        raise InvalidInput(refused)
    try:
        value = parse(text)
    except InvalidValue as error:
        raise InvalidInput(f"invalid {flag} {text!r}: {error.finite_reason}") from None
    if value is None or (above_zero and value == 0):
        raise InvalidInput(refused)
    return value
