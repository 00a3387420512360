"""Work superseded by newer work of its kind. Asking for a forecast or a preview
again cancels the thread worker running the last one (an ``exclusive`` group), on
the UI thread, but its thread runs on: what it finds must not land over what the
newer one shows. Whether it was superseded is therefore asked on the UI thread, as
its result is shown, where the cancellation happens; a check on the worker's own
thread before handing the result over leaves a gap in which the newer work starts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.app import App
from textual.message import Message
from textual.worker import Worker, get_current_worker


class Superseded(Exception):
    """Raised inside superseded work to stop it early (a forecast between its Spark
    jobs): the rest is the newer work's time, and the engine's."""


class FromWorker(Message):
    """A message a thread worker posts with what it found; its handler shows it
    unless :attr:`superseded`."""

    def __init__(self) -> None:
        super().__init__()
        self._worker: Worker[Any] = get_current_worker()

    @property
    def superseded(self) -> bool:
        return self._worker.is_cancelled


def on_ui_if_current(app: App[Any], worker: Worker[Any], show: Callable[..., None], *args: Any) -> None:
    """``show(*args)`` on the UI thread, unless ``worker`` was superseded by then."""

    def current() -> None:
        if not worker.is_cancelled:
            show(*args)

    app.call_from_thread(current)


def forecast_progress(
    app: App[Any], worker: Worker[Any], show: Callable[[int, int], None]
) -> Callable[[int, int], None]:
    """A forecast's ``progress(done, jobs)`` for ``worker``: ``show(done, jobs)`` on the
    UI thread while it is current (not after the last job: its result follows at
    once); once superseded, :class:`Superseded`, which stops the forecast before its
    next job (those would hold the engine from the newer one)."""

    def progress(done: int, jobs: int) -> None:
        if worker.is_cancelled:
            raise Superseded
        if done < jobs:
            on_ui_if_current(app, worker, show, done, jobs)

    return progress
