"""Whole numbers written in plain ASCII digits, as operators and our own files write them.

``str.isdigit()`` also takes ``'²'`` and ``'٣'``: ``int()`` refuses the first (a
``ValueError`` where a clear message was meant, a traceback where the caller catches
only its own errors) and silently reads the second as 3.
"""

from __future__ import annotations

import re

_DIGITS = re.compile(r"[0-9]+", re.ASCII)


def is_digits(text: str) -> bool:
    """Whether ``text`` is one or more of the digits 0-9 and nothing else."""
    return _DIGITS.fullmatch(text) is not None
