"""The Ebbtide console: a Textual app over one data directory (SPEC §8).

The app owns the plumbing every view shares and no view's content:

- *refresh*: the visible view's :meth:`~console.screens.base.LiveScreen.load` runs in a
  thread worker on an interval (``r`` now, ``p`` pauses the interval) and when
  watchfiles sees another process change the data directory or the config file; the
  result comes back as a :class:`~console.messages.ViewLoaded` message;
- *operations*: :meth:`EbbApp.perform` runs a mutating action in a thread worker
  through the host's actor broker and reports with a notification; read-only mode
  refuses it before any work starts;
- *navigation*: views are Textual modes (``1``-``6`` or the ``:`` palette), a topic is
  a screen pushed on top, ``esc`` goes back;
- *themes* from ``themes/``, switchable at run time (``t``), remembered per user.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from textual import events, work
from textual.app import App
from textual.binding import Binding
from textual.screen import Screen
from textual.worker import get_current_worker

from console.commands import EbbCommands
from console.errors import describe_error
from console.host import ConsoleHost
from console.messages import (
    EngineCycled,
    FilesChanged,
    HeaderLoaded,
    OperationDone,
    OperationFailed,
    ViewLoaded,
    ViewLoadFailed,
)
from console.modals.ask import AskScreen
from console.modals.help import HelpScreen
from console.model.header import HeaderFacts, load_header
from console.screens.base import MUTATING_ACTIONS, LiveScreen
from console.screens.engine import EngineScreen
from console.screens.groups import GroupsScreen
from console.screens.journal import JournalScreen
from console.screens.overview import OverviewScreen
from console.screens.quotas import QuotasScreen
from console.settings import ConsoleSettings
from console.views import VIEWS
from console.widgets.top_bar import TopBar
from engine.broker import Broker
from engine.prune.operations import SwitchResult, pause, resume
from themes import DEFAULT_THEME, load_themes

R = TypeVar("R")

#: how often the top bar's engine status and countdown are redrawn (no I/O)
STATUS_TICK_SECONDS = 1.0
#: demo failures remembered as shown (each is shown once while remembered)
DEMO_FAILURES_REMEMBERED = 50
#: the newest demo failures one notice shows (all the threads failing at once)
DEMO_FAILURES_SHOWN = 3
#: file changes closer together than this are one refresh
WATCH_DEBOUNCE_MS = 1000


def _forecast_screen() -> Screen[None]:
    # The Forecast and Topic views and prune now are imported when first opened: they
    # load Arrow and numpy (a third of a launch), which the first paint never needs.
    from console.screens.forecast import ForecastScreen

    return ForecastScreen()


class EbbApp(App[None]):
    """See the module docstring."""

    TITLE = "Ebbtide"
    CSS_PATH = "app.tcss"
    MODES = {
        "overview": OverviewScreen,
        "groups": GroupsScreen,
        "quotas": QuotasScreen,
        "journal": JournalScreen,
        "engine": EngineScreen,
        "forecast": _forecast_screen,
    }
    DEFAULT_MODE = "overview"
    # Every screen gets "-short" below 32 lines and "-narrow" below 100 columns: on a
    # small terminal (80x24) the charts give their lines and columns to the tables.
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall")]
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]
    # Only Ebbtide's commands: Textual's own (keys, maximize, screenshot, its theme
    # picker of foreign themes) are not the console's.
    COMMANDS = {EbbCommands}
    BINDINGS = [
        Binding("colon", "command_palette", "Command", key_display=":"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("r", "refresh", "Refresh"),
        Binding("p", "toggle_live", "Live"),
        Binding("t", "next_theme", "Theme"),
        Binding("z", "toggle_pause", "Pause deletion", show=False),
        *(Binding(key, f"view('{mode}')", title, show=False) for mode, (key, title) in VIEWS.items()),
        Binding("ctrl+q", "quit", "Quit", priority=True),
    ]

    def __init__(
        self,
        host: ConsoleHost,
        *,
        theme: str | None = None,
        config_theme: str | None = None,
        refresh_seconds: float = 2.0,
        live: bool = True,
        watch: bool = True,
        settings: ConsoleSettings | None = None,
        notices: Sequence[str] = (),
        demo_failures: Callable[[], list[str]] | None = None,
    ) -> None:
        """``theme`` is ``--theme``; ``config_theme`` the config file's ``[console]
        theme``, which a theme chosen at run time (remembered) overrides; ``notices``,
        what the start had to say (a metrics address another process serves), shown
        once the console is up; ``demo_failures``, what went wrong in ``--demo``'s
        traffic since it was last asked (:meth:`engine.demo.DemoTraffic.new_failures`),
        shown as it comes."""
        super().__init__()
        self._notices = list(notices)
        self._demo_failures = demo_failures
        #: the demo failures shown, newest last: a thread that keeps failing retries
        #: every few seconds, and its failure is shown once, not at every retry
        self._demo_failures_shown: deque[str] = deque(maxlen=DEMO_FAILURES_REMEMBERED)
        self.host = host
        self.settings = settings or ConsoleSettings()
        self._requested_theme = theme
        self._config_theme = config_theme
        self._watch = watch
        self._live = live
        self._refresh_seconds = refresh_seconds
        self._stop_watching = threading.Event()
        self._refresh_timer: Any = None
        #: the latest main-thread cost of showing a view, for bench/console.py
        self.last_show_ms: float | None = None
        self.last_load_ms: float | None = None
        #: topic names as the latest overview load saw them (for the palette)
        self.known_topics: list[str] = []
        host.on_cycle = lambda _report: self.post_message(EngineCycled())
        self._cycle_error: str | None = None
        self._preloading = False
        # Before anything mounts: the first load already colours cells from the theme.
        for loaded in load_themes():
            self.register_theme(loaded)
        self.theme = self._pick_theme()

    # -- start and stop -------------------------------------------------------------------

    def on_mount(self) -> None:
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        self._start_engine()
        self.set_interval(STATUS_TICK_SECONDS, self._tick)
        self._refresh_timer = self.set_interval(self._refresh_seconds, self.refresh_view, pause=not self._live)
        if self._watch:
            self._watch_files()
        for notice in self._notices:
            self.notify(notice, title="Metrics", severity="warning", timeout=15, markup=False)

    def _pick_theme(self) -> str:
        names = set(self.available_themes)
        for candidate in (self._requested_theme, self.settings.theme, self._config_theme, DEFAULT_THEME):
            if candidate in names:
                return candidate
        return DEFAULT_THEME

    def on_unmount(self) -> None:
        self._stop_watching.set()

    @work(thread=True, exit_on_error=False, group="engine")
    def _start_engine(self) -> None:
        try:
            self.host.start_engine()
        except Exception as error:  # noqa: BLE001 - shown, never a crash
            self.post_message(OperationFailed("Spark engine", describe_error(error)))

    @work(thread=True, exit_on_error=False, group="watch")
    def _watch_files(self) -> None:
        import watchfiles

        root = self.host.root
        paths = [root]
        if self.host.config_path is not None and root not in self.host.config_path.parents:
            paths.append(self.host.config_path)

        def interesting(_change: watchfiles.Change, path: str) -> bool:
            # Spark's log, plan scratch and journal exports are not the catalog's news.
            parts = set(path[len(str(root)) :].split("/"))
            return not ({"logs", "snapshots", "exports"} & parts) and not path.endswith(".tmp")

        try:
            for _changes in watchfiles.watch(
                *paths,
                watch_filter=interesting,
                stop_event=self._stop_watching,
                debounce=WATCH_DEBOUNCE_MS,
                raise_interrupt=False,
            ):
                if self._live:
                    self.post_message(FilesChanged())
        except Exception as error:  # noqa: BLE001 - the interval still refreshes
            self.post_message(OperationFailed("watching files", describe_error(error)))

    # -- refresh ------------------------------------------------------------------------------

    def refresh_view(self) -> None:
        """Reload the visible view off the UI thread: the one on top, or the one a
        dialog (the policy editor, a prune preview) is open over, which stays in
        sight and must not contradict the dialog."""
        screen = next((s for s in reversed(self.screen_stack) if isinstance(s, LiveScreen)), None)
        if screen is not None:
            self._load(screen)

    @work(thread=True, exit_on_error=False, exclusive=True, group="refresh")
    def _load(self, screen: LiveScreen) -> None:
        begun = time.perf_counter()
        try:
            data = screen.load(self.host)
            if get_current_worker().is_cancelled:
                return
            self.post_message(ViewLoaded(screen, data, (time.perf_counter() - begun) * 1000))
            # After the view, so that a first paint never waits for the header's facts.
            with self.host.reading() as broker:
                header = load_header(broker)
        except Exception as error:  # noqa: BLE001 - a view that cannot load says why
            self.post_message(ViewLoadFailed(screen, describe_error(error)))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(HeaderLoaded(header))

    def on_header_loaded(self, message: HeaderLoaded) -> None:
        self.header_facts = message.facts
        self.sync_top_bar(self.visible_screen)

    def on_view_loaded(self, message: ViewLoaded) -> None:
        if not message.screen.is_attached:
            return
        begun = time.perf_counter()
        message.screen.show(message.data)
        self.last_show_ms = (time.perf_counter() - begun) * 1000
        self.last_load_ms = message.load_ms
        self.sync_top_bar(message.screen)
        if not self._preloading:
            self._preloading = True
            self._preload_views()

    @work(thread=True, exit_on_error=False, group="preload")
    def _preload_views(self) -> None:
        """Import what the first paint left out (see :func:`_forecast_screen`) once the
        first view is on screen, in a thread: opening a topic, the policy editor or
        prune now then never waits on the UI thread for Arrow's import."""
        import console.modals.policy_editor
        import console.modals.prune_now
        import console.screens.forecast
        import console.screens.topic  # noqa: F401

    # Notices that carry an error's or a summary's text are not markup: a path or an
    # errno in brackets would be read as a style, lost, or fail to parse.
    def on_view_load_failed(self, message: ViewLoadFailed) -> None:
        self.notify(message.error, title="Refresh failed", severity="error", markup=False)

    def on_files_changed(self, _message: FilesChanged) -> None:
        self.refresh_view()

    def on_engine_cycled(self, _message: EngineCycled) -> None:
        report = self.host.engine_status().last_report
        error = report.error if report is not None and report.status == "failed" else None
        if error is not None and error != self._cycle_error:
            # Once per distinct failure (Spark gone, say): the schedule retries every cycle.
            self.notify(
                f"{error} (retried every cycle)", title="Prune cycle failed", severity="error", timeout=10, markup=False
            )
        self._cycle_error = error
        self.refresh_view()

    def _tick(self) -> None:
        self.sync_top_bar(self.visible_screen)
        self._show_demo_failures()

    def _show_demo_failures(self) -> None:
        if self._demo_failures is None:
            return
        new = [line for line in dict.fromkeys(self._demo_failures()) if line not in self._demo_failures_shown]
        if not new:
            return
        self._demo_failures_shown.extend(new)
        lines = new[-DEMO_FAILURES_SHOWN:]
        if len(new) > len(lines):
            lines.append(f"(and {len(new) - len(lines)} more)")
        self.notify("\n".join(lines), title="Demo traffic", severity="warning", timeout=10, markup=False)

    @property
    def visible_screen(self) -> Screen[Any] | None:
        """The screen on top; None for the moment a mode switch has none (a timer or a
        worker's message may land then)."""
        stack = self.screen_stack
        return stack[-1] if stack else None

    def sync_top_bar(self, screen: Any) -> None:
        """Put the breadcrumb, the engine status (read without I/O) and the global
        facts on ``screen``'s header."""
        if screen is None:
            return
        bars = screen.query(TopBar)
        if not bars:
            return
        bar = bars.first()
        bar.view_title = self.breadcrumb(screen)
        bar.status = self.host.engine_status()
        bar.now = self.host.clock()
        bar.read_only = self.host.read_only
        bar.live = self._live
        bar.facts = self.header_facts

    #: the data directory's global state as the latest refresh of any view saw it
    header_facts: HeaderFacts | None = None

    @property
    def deletion_paused(self) -> bool:
        return self.header_facts is not None and self.header_facts.paused

    def breadcrumb(self, screen: Any) -> str:
        """``Quotas › Topic orders``: the view (mode) and the screens pushed on it."""
        stack = self.screen_stack
        upto = stack.index(screen) + 1 if screen in stack else len(stack)
        crumbs = [s.title_text() for s in stack[1:upto] if isinstance(s, LiveScreen)]
        base = stack[0] if stack else None
        view = base.title_text() if isinstance(base, LiveScreen) else VIEWS[self.current_mode][1]
        return " › ".join([view, *crumbs])

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in MUTATING_ACTIONS and self.host.read_only:
            return False
        return True

    def on_key(self, event: events.Key) -> None:
        """Read-only mode hides the mutating keys; pressed anyway, one says why nothing
        happens instead of doing nothing silently."""
        if self.host.read_only and (binding := self._mutating_binding(event.key)) is not None:
            event.stop()
            self.allowed(binding.description)

    def _mutating_binding(self, key: str) -> Binding | None:
        """The mutating binding of ``key`` on the visible screen or the app, if any."""
        for owner in (*type(self.screen).__mro__, *type(self).__mro__):
            for binding in vars(owner).get("BINDINGS", ()):
                if (
                    isinstance(binding, Binding)
                    and binding.action in MUTATING_ACTIONS
                    and key in binding.key.split(",")
                ):
                    return binding
        return None

    # -- operations ---------------------------------------------------------------------------

    def perform(self, title: str, job: Callable[[Broker], R], describe: Callable[[R], str]) -> None:
        """Run the mutating ``job`` on the actor broker in a worker; notify its result."""
        if self.allowed(title):
            self._perform(title, job, describe)

    @work(thread=True, exit_on_error=False, group="operations")
    def _perform(self, title: str, job: Callable[[Broker], Any], describe: Callable[[Any], str]) -> None:
        try:
            with self.host.acting(title) as broker:
                result = job(broker)
            summary = describe(result)
        except Exception as error:  # noqa: BLE001 - every failure becomes a notification
            self.post_message(OperationFailed(title, describe_error(error)))
            return
        self.post_message(OperationDone(title, summary, result))

    def allowed(self, what: str) -> bool:
        """False, with a notification, when the console is read-only."""
        if self.host.read_only:
            self.notify(f"{what} refused: the console is read-only", title="Read-only", severity="error")
            return False
        return True

    async def show_journal_kind(self, kind: str | None) -> None:
        """The Journal, filtered to ``kind`` alone (the palette's ``policy changes``)."""
        await self.action_view("journal")
        if isinstance(self.screen, JournalScreen):
            self.screen.show_kind(kind)

    def open_topic(self, topic: str) -> None:
        from console.screens.topic import TopicScreen  # see _forecast_screen

        self.push_screen(TopicScreen(topic))

    def open_prune_now(self, topics: list[str] | None) -> None:
        """The prune-now dialog for ``topics`` (None: all); it starts with a dry run."""
        if self.allowed("prune now"):
            from console.modals.prune_now import PruneNowScreen  # see _forecast_screen

            self.push_screen(PruneNowScreen(topics))

    def set_deletion_paused(self, paused: bool) -> None:
        def job(broker: Broker) -> SwitchResult:
            return pause(broker, actor="console") if paused else resume(broker, actor="console")

        def describe(result: SwitchResult) -> str:
            state = "paused: cycles plan and report, nothing is deleted" if paused else "resumed"
            return f"deletion {state}" if result.changed else f"deletion already {'paused' if paused else 'running'}"

        self.perform("Pause deletion" if paused else "Resume deletion", job, describe)

    def ask(self, heading: str, body: str, then: Callable[[], object]) -> None:
        """Run ``then`` once the operator answers ``y`` to ``heading``."""

        def answered(yes: bool | None) -> None:
            if yes:
                then()

        if self.allowed(heading.rstrip("?").lower()):
            self.push_screen(AskScreen(heading, body), answered)

    def ask_deletion_paused(self, paused: bool) -> None:
        """``z`` and the palette: pause (or resume) all deletion, once confirmed."""
        if paused:
            heading, body = (
                "Pause all deletion?",
                (
                    "Cycles go on planning and journaling, and nothing is deleted (manual deletion "
                    "neither) until deletion is resumed; disks keep filling meanwhile."
                ),
            )
        else:
            heading, body = (
                "Resume deletion?",
                ("The next cycle deletes everything the policies make eligible, including what piled up while paused."),
            )
        self.ask(heading, body, lambda: self.set_deletion_paused(paused))

    def action_toggle_pause(self) -> None:
        self.ask_deletion_paused(not self.deletion_paused)

    def on_operation_done(self, message: OperationDone) -> None:
        self.notify(message.summary, title=message.title, markup=False)
        self.refresh_view()

    def on_operation_failed(self, message: OperationFailed) -> None:
        self.notify(message.error, title=message.title, severity="error", timeout=10, markup=False)

    # -- navigation and switches -------------------------------------------------------------

    async def action_view(self, mode: str) -> None:
        """Go to the view ``mode`` itself, never to a topic left open on it: the view
        left behind and the one reached are both back at their base screen."""
        await self._to_base()
        if self.current_mode != mode:
            await self.switch_mode(mode)
            await self._to_base()
            self.refresh_view()

    async def _to_base(self) -> None:
        while len(self.screen_stack) > 1:
            await self.pop_screen()

    def go_back(self) -> None:
        if len(self.screen_stack) > 1:
            self.pop_screen()
        elif self.current_mode != self.DEFAULT_MODE:
            self.switch_mode(self.DEFAULT_MODE)

    def action_refresh(self) -> None:
        self.refresh_view()

    def action_toggle_live(self) -> None:
        self._live = not self._live
        if self._refresh_timer is not None:
            self._refresh_timer.resume() if self._live else self._refresh_timer.pause()
        self.sync_top_bar(self.visible_screen)
        self.notify("live refresh on" if self._live else "live refresh paused (r refreshes)")

    @property
    def live(self) -> bool:
        return self._live

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def choose_theme(self, name: str) -> None:
        """Switch to the theme ``name`` and remember it for the next start."""
        self.theme = name
        self.settings.remember_theme(name)

    def action_next_theme(self) -> None:
        names = [t.name for t in load_themes()]
        position = names.index(self.theme) + 1 if self.theme in names else 0
        self.choose_theme(names[position % len(names)])
        self.notify(f"theme {self.theme} (t: next)", title="Theme", timeout=3)

    def _theme_changed(self, _theme: Any) -> None:
        self.refresh_view()  # cells coloured from the theme are rebuilt
