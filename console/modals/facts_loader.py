"""The part every manual-operation dialog shares: read the topic's facts
(:mod:`console.model.topic_facts`) in a thread worker when the dialog opens, and hand
them, or the one-line reason they could not be read, to the dialog on the UI thread."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import work
from textual.message_pump import MessagePump
from textual.worker import Worker, WorkerState

from console.errors import describe_error
from console.model.topic_facts import TopicFacts, load_topic_facts

if TYPE_CHECKING:
    from textual import getters

    from console.app import EbbApp
    from console.host import ConsoleHost

#: the name of the worker, to tell its state changes from a dialog's other workers
LOAD_WORKER = "topic-facts"


class FactsLoader(MessagePump):
    """Mixin for a ModalScreen with a ``topic``: call :meth:`load_facts` on mount and
    implement :meth:`show_facts` and :meth:`show_load_error`."""

    topic: str
    if TYPE_CHECKING:  # as a Screen's app, which the checker knows only as a plain App
        app = getters.app(EbbApp)

    def load_facts(self) -> None:
        # The host is taken here, on the UI thread: a worker thread has no active app.
        self._load_facts(self.app.host, self.topic)

    @work(thread=True, exit_on_error=False, name=LOAD_WORKER)
    def _load_facts(self, host: ConsoleHost, topic: str) -> TopicFacts | str:
        """The facts, or the one line saying why they could not be read (a worker that
        ends in an error would be re-raised to whoever waits on it)."""
        try:
            with host.reading() as broker:
                return load_topic_facts(broker, topic)
        except Exception as error:  # noqa: BLE001 - shown in the dialog, never a crash
            return describe_error(error)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.name != LOAD_WORKER or event.state != WorkerState.SUCCESS:
            return
        result = event.worker.result
        if isinstance(result, TopicFacts):
            self.show_facts(result)
        elif isinstance(result, str):
            self.show_load_error(result)

    def show_facts(self, facts: TopicFacts) -> None:
        raise NotImplementedError

    def show_load_error(self, error: str) -> None:
        raise NotImplementedError
