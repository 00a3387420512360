"""What every live view shares: the top bar, the ``/`` filter over its main table,
``esc`` to go back, and the split between :meth:`LiveScreen.load` (a worker thread:
SQLite, disk) and :meth:`LiveScreen.show` (the UI thread: widgets only)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer

from console.widgets.filter_bar import FilterBar
from console.widgets.live_table import LiveTable
from console.widgets.top_bar import TopBar

if TYPE_CHECKING:
    from console.app import EbbApp
    from console.host import ConsoleHost

T = TypeVar("T")

#: actions that change data: hidden from the footer and refused in read-only mode
MUTATING_ACTIONS = frozenset(
    {
        "edit_policy",
        "prune_now",
        "toggle_hold",
        "truncate",
        "purge",
        "toggle_pause",
        "expire_group",
        "move_group",
    }
)


class LiveScreen(Screen[None], Generic[T]):
    """A view of data that changes under it; see the module docstring."""

    BINDINGS = [
        Binding("slash", "filter", "Filter"),
        Binding("escape", "back", "Back", show=False),  # in the help: the footer is full
    ]

    #: what the top bar says this view is
    VIEW_TITLE = ""

    @property
    def ebb(self) -> EbbApp:
        return self.app  # type: ignore[return-value]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._search_table: LiveTable | None = None

    def compose(self) -> ComposeResult:
        yield TopBar()
        yield from self.compose_view()
        yield FilterBar()
        yield Footer()

    def compose_view(self) -> ComposeResult:
        """The view's own widgets."""
        yield from ()

    def load(self, host: ConsoleHost) -> T:
        """Read what the view shows. Runs in a worker thread: no widget access here."""
        raise NotImplementedError

    def show(self, data: T) -> None:
        """Put freshly loaded data on screen (UI thread)."""
        raise NotImplementedError

    def title_text(self) -> str:
        return self.VIEW_TITLE

    # -- lifecycle ---------------------------------------------------------------------------

    def on_mount(self) -> None:
        self.ebb.sync_top_bar(self)

    def on_screen_resume(self) -> None:
        self.ebb.sync_top_bar(self)
        self.ebb.refresh_view()

    # -- filter and back ---------------------------------------------------------------------

    @property
    def filtered_table(self) -> LiveTable | None:
        """The table ``/`` searches: the one focused when ``/`` was pressed, else
        :meth:`default_search_table`."""
        return self._search_table or self.default_search_table()

    def default_search_table(self) -> LiveTable | None:
        """The table ``/`` searches before any has been focused: the view's first."""
        tables = self.query(LiveTable)
        return tables.first() if tables else None

    def action_filter(self) -> None:
        bar = self.query_one(FilterBar)
        focused = self.focused
        if isinstance(focused, LiveTable) and focused is not self.filtered_table:
            self._search_table = focused
            bar.value = focused.filter_text  # the bar edits the search of the table it serves
        table = self.filtered_table
        if table is not None:
            bar.border_title = f"search {table.border_title or 'rows'}"
            bar.open()

    def on_descendant_blur(self, event: events.DescendantBlur) -> None:
        # Leaving the filter (enter, esc) returns to the table it searches.
        if isinstance(event.widget, FilterBar) and self.filtered_table is not None:
            self.filtered_table.focus()

    def on_filter_bar_applied(self, event: FilterBar.Applied) -> None:
        table = self.filtered_table
        if table is not None:
            table.filter_text = event.text

    def action_back(self) -> None:
        bar = self.query_one(FilterBar)
        if bar.value or bar.is_open:
            bar.action_clear()
        else:
            self.ebb.go_back()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in MUTATING_ACTIONS and self.ebb.host.read_only:
            return False
        return True
