"""Messages thread workers send back to the UI thread: the only way work done off the
UI reaches the screen."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.message import Message
from textual.screen import Screen

from console.model.header import HeaderFacts

if TYPE_CHECKING:
    from console.screens.base import LiveScreen


class ViewLoaded(Message):
    """A view's data, loaded off the UI thread."""

    def __init__(self, screen: LiveScreen[Any], data: Any, load_ms: float) -> None:
        super().__init__()
        self.screen = screen
        self.data = data
        self.load_ms = load_ms


class HeaderLoaded(Message):
    """The header's facts, loaded after each view's data (off the UI thread)."""

    def __init__(self, facts: HeaderFacts) -> None:
        super().__init__()
        self.facts = facts


class ViewLoadFailed(Message):
    def __init__(self, screen: Screen, error: str) -> None:
        super().__init__()
        self.screen = screen
        self.error = error


class OperationDone(Message):
    """A mutating action finished; ``summary`` is one line for a notification."""

    def __init__(self, title: str, summary: str, result: Any = None) -> None:
        super().__init__()
        self.title = title
        self.summary = summary
        self.result = result


class OperationFailed(Message):
    def __init__(self, title: str, error: str) -> None:
        super().__init__()
        self.title = title
        self.error = error


class FilesChanged(Message):
    """Another process changed the data directory or the config file."""


class EngineCycled(Message):
    """The console's own schedule finished a prune cycle."""
