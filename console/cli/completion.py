"""Shell completion for ``ebb`` (argcomplete): commands, flags, the topic and group
names of the data directory being completed for, and the values of flags that take
one of a known few (``log --action``, ``--status``, the policy's choice fields), which
are not argparse choices: the engine refuses a wrong one with its own message.

``ebb completion bash|zsh|fish`` prints the script to source; or register it once
with ``eval "$(register-python-argcomplete ebb)"``. The shell runs ``ebb`` with
``_ARGCOMPLETE`` set: :func:`autocomplete` then answers and exits before anything
else is opened. Name completers read the catalog only if it exists, never create
one, and answer nothing rather than fail.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from engine.digits import is_digits

if TYPE_CHECKING:
    from engine.catalog.catalog import Catalog

#: argument destinations that name an existing topic, an existing group
_TOPIC_DESTS = {"topic", "topics"}
_GROUP_DESTS = {"group", "stalled"}
#: "command sub-command" -> the argument that names something new (nothing to
#: complete); the others name what exists: ``group create``'s topic does
_NEW_NAMES = {"topic create": "name", "group create": "group"}
SHELLS = ("bash", "zsh", "fish")


def register(commands: argparse._SubParsersAction) -> None:
    completion = commands.add_parser("completion", help="print the shell completion script (bash, zsh or fish)")
    completion.add_argument("shell", choices=SHELLS)
    # No data directory is opened or created for it (console/cli/main.py).
    completion.set_defaults(standalone=run_completion, mutates=False, command_name=completion.prog)


def run_completion(args: argparse.Namespace) -> int:
    import argcomplete

    print(argcomplete.shellcode(["ebb"], shell=args.shell), end="")
    return 0


def autocomplete(parser: argparse.ArgumentParser) -> None:
    """When the shell is asking, print the completions of its command line and exit."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    import argcomplete

    values = _known_values()
    for parent, action in _actions(parser):
        if action.dest in values:
            # a mapping of value -> description (none here)
            completer = argcomplete.completers.ChoicesCompleter(dict.fromkeys(values[action.dest], ""))
            action.completer = completer  # type: ignore[attr-defined]
        if action.dest == "status":
            action.completer = _statuses  # type: ignore[attr-defined]
        if action.dest == "theme":
            action.completer = _themes  # type: ignore[attr-defined]
        if action.dest not in _TOPIC_DESTS | _GROUP_DESTS | {"name"}:
            continue
        if _NEW_NAMES.get(" ".join(parent.prog.split()[-2:])) == action.dest:
            # A new name: no file names, no existing names.
            action.completer = argcomplete.completers.SuppressCompleter()  # type: ignore[attr-defined]
        else:
            action.completer = _names(_groups if action.dest in _GROUP_DESTS else _topics)  # type: ignore[attr-defined]
    if "COMP_LINE" in os.environ and is_digits(os.environ.get("COMP_POINT", "")):
        line, point = _hashes_escaped(os.environ["COMP_LINE"], int(os.environ["COMP_POINT"]))
        os.environ["COMP_LINE"], os.environ["COMP_POINT"] = line, str(point)
    argcomplete.autocomplete(parser)


def _hashes_escaped(line: str, point: int) -> tuple[str, int]:
    """``line`` with each ``#`` inside an unquoted word escaped, and ``point`` (the
    cursor) moved with it. Bash takes ``#`` for a comment only where
    a word begins (``--data-dir /srv/a#b`` is one word); argcomplete's lexer anywhere
    outside quotes, so it completed commands in place of the topics of such a data
    directory."""
    out: list[str] = []
    moved = point
    quote: str | None = None
    escaped = False
    for index, char in enumerate(line):
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote is not None:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and index > 0 and not line[index - 1].isspace():
            out.append("\\")
            if index < point:
                moved += 1
        out.append(char)
    return "".join(out), moved


def _known_values() -> dict[str, list[str]]:
    """Argument destination -> the values it takes, where they are a known few."""
    from engine.journal.journal import ACTION_KINDS
    from engine.policy.fields import FIELDS

    return {
        "action": sorted(ACTION_KINDS),
        **{f"policy_{name}": list(field.choices) for name, field in FIELDS.items() if field.choices},
    }


def _statuses(prefix: str, parsed_args: argparse.Namespace, **_: object) -> list[str]:
    """``log --status``: of cycles with ``--cycles``, else of actions (each listing
    refuses the other's)."""
    from typing import get_args

    from engine.journal.rows import ActionStatus, CycleStatus

    statuses = get_args(CycleStatus if getattr(parsed_args, "cycles", False) else ActionStatus)
    return [status for status in statuses if status.startswith(prefix)]


def _themes(prefix: str, **_: object) -> list[str]:
    """The console's ``--theme``: imported only when it is completed (Textual's theme
    type comes with them), so that other tab presses do not pay for it."""
    from themes import theme_names

    return [name for name in theme_names() if name.startswith(prefix)]


def _actions(parser: argparse.ArgumentParser) -> Iterator[tuple[argparse.ArgumentParser, argparse.Action]]:
    """Every action of ``parser`` and its sub-commands, with the parser it is in."""
    for action in parser._actions:
        yield parser, action
        if isinstance(action, argparse._SubParsersAction):
            for sub in set(action.choices.values()):
                yield from _actions(sub)


def _names(read: Callable[[argparse.Namespace, Catalog], list[str]]) -> Callable[..., list[str]]:
    def complete(prefix: str, parsed_args: argparse.Namespace, **_: object) -> list[str]:
        try:
            path = _catalog_path(getattr(parsed_args, "data_dir", None))
            if not path.exists():
                return []
            from engine.catalog.catalog import Catalog

            # a tab press writes nothing, and waits a second at most: the shell waits on it
            catalog = Catalog.open_read_only(path, timeout=1)
            try:
                return [name for name in read(parsed_args, catalog) if name.startswith(prefix)]
            finally:
                catalog.close()
        except Exception:  # noqa: BLE001 - a completer answers nothing rather than print a traceback
            return []

    return complete


def _catalog_path(data_dir: Path | None) -> Path:
    """The catalog of ``--data-dir`` as the command will see it: the shell hands the
    completer the line as typed (``COMP_LINE``), and expands ``~`` and ``$VAR`` only
    when the command runs."""
    from engine.datadir import DataDir, default_data_dir

    written = None if data_dir is None else Path(os.path.expandvars(os.path.expanduser(str(data_dir))))
    return DataDir(written or default_data_dir()).catalog_path


def _topics(_args: argparse.Namespace, catalog: Catalog) -> list[str]:
    return [t.name for t in catalog.topics()]


def _groups(args: argparse.Namespace, catalog: Catalog) -> list[str]:
    """The groups of the topic(s) on the command line, else of every topic."""
    named = getattr(args, "topic", None) or getattr(args, "topics", None) or []
    topics = [named] if isinstance(named, str) else list(named) or _topics(args, catalog)
    return sorted({g.name for t in topics for g in catalog.groups(t)})
