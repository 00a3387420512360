"""How an error reads in a notification: a leaf module every layer of the console
may import (the app, screens and modals all report failures the same way)."""

from __future__ import annotations

from engine.errors import EbbError


def describe_error(error: BaseException) -> str:
    """One line for a notification: the operator's error as is, a bug with its type."""
    if isinstance(error, EbbError):
        return str(error)
    return f"{type(error).__name__}: {error}"
