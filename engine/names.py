"""Names of topics and groups.

Topic and group names become directory and file names, so this module is a security
boundary: a name that passes :func:`check_topic_name` can never leave the data
directory (no separator, no ``..``, no leading dot or dash, nothing but a small
portable alphabet).
"""

from __future__ import annotations

import re

from engine.errors import InvalidName

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,248}")
_RULE = "1-249 characters from A-Z a-z 0-9 . _ -, starting with a letter or digit"


def _check(kind: str, name: str) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidName(f"invalid {kind} name: the name is empty ({_RULE})")
    # fullmatch, not match: a trailing newline must not slip past ``$``.
    if _NAME.fullmatch(name) is None:
        shown = name if len(name) <= 60 else name[:57] + "..."
        raise InvalidName(f"invalid {kind} name {shown!r}: use {_RULE}")
    if ".." in name:
        raise InvalidName(f"invalid {kind} name {name!r}: '..' is not allowed")
    return name


def check_topic_name(name: str) -> str:
    """Return ``name`` if it is a valid topic name, else raise :class:`InvalidName`."""
    return _check("topic", name)


def check_group_name(name: str) -> str:
    """Return ``name`` if it is a valid group name, else raise :class:`InvalidName`."""
    return _check("group", name)
