"""A DataTable for live views: rows replaced wholesale on every refresh, but only the
cells that changed are touched, so a refresh of a large table costs the UI thread
little; sortable by any column (header click, ``s`` / ``S``) on raw values, and
filtered by a text (the screen's ``/`` filter)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.reactive import reactive
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowDoesNotExist, RowKey

Cell = str | Text


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int | None = None


@dataclass(frozen=True)
class LiveRow:
    """One row: a stable key, what the cells show, and what sorting and filtering use."""

    key: str
    cells: tuple[Cell, ...]
    #: one raw value per column (bytes as int, times as ms); None sorts first
    sort_values: tuple[Any, ...]
    #: the text ``/`` searches; the plain cells when not given
    search: str = field(default="")

    def matches(self, needle: str) -> bool:
        haystack = self.search or " ".join(str(c) for c in self.cells)
        return needle in haystack.lower()


def _sortable(value: Any) -> tuple[int, Any]:
    # None before any value, and never compared with one.
    return (0, 0) if value is None else (1, value)


def _same(a: Cell, b: Cell) -> bool:
    """Equal text and look: Rich's ``Text.__eq__`` ignores the base style, so a cell
    that only changed colour (a theme switch, a state turning red) would be skipped."""
    if isinstance(a, Text) and isinstance(b, Text):
        return a.plain == b.plain and a.style == b.style and a.spans == b.spans
    return type(a) is type(b) and a == b


def _plain(cell: Cell) -> Text:
    # A str cell would be parsed as markup; names and journal details are data.
    return Text(cell) if isinstance(cell, str) else cell


class LiveTable(DataTable[Cell]):
    """See the module docstring. Call :meth:`show` with every row on each refresh."""

    DEFAULT_CSS = """
    LiveTable {
        height: 1fr;
        background: $surface;
    }
    LiveTable > .datatable--header {
        background: $panel;
        color: $primary;
        text-style: bold;
    }
    /* DataTable tints a focused table's heading; on the dark theme's panel that put
       the primary heading under 4.5:1 (3.07:1 in 256 colours). The cursor row and
       the border say which table has focus. */
    LiveTable:focus > .datatable--header {
        background-tint: $foreground 0%;
    }
    """

    BINDINGS = [
        Binding("s", "sort_next", "Sort", show=False),  # in the help: the footer is full
        Binding("S", "sort_reverse", "Reverse", show=False),
        # To the first (newest) and last row, as in a pager; DataTable scrolls sideways.
        Binding("home", "scroll_top", "First row", show=False),
        Binding("end", "scroll_bottom", "Last row", show=False),
    ]

    filter_text: reactive[str] = reactive("", init=False)
    """Rows whose search text does not contain this (case-insensitive) are hidden."""

    sort_column: reactive[str | None] = reactive(None, init=False)
    """The key of the column rows are sorted by; None keeps the order given."""

    sort_reverse: reactive[bool] = reactive(False, init=False)
    """Sort descending."""

    def __init__(
        self, columns: Sequence[Column], *, id: str | None = None, classes: str | None = None, follow: bool = False
    ) -> None:
        """``follow``: rows come newest first; while the cursor is on the first row it
        stays there as new rows arrive, otherwise it stays on its row and
        :attr:`new_above` counts the rows that arrived above it."""
        super().__init__(id=id, classes=classes, cursor_type="row", zebra_stripes=True)
        self.live_columns = tuple(columns)
        self.follow = follow
        #: rows that arrived above the cursor since it left the first row
        self.new_above = 0
        self._rows_given: list[LiveRow] = []
        self._shown: list[LiveRow] = []

    def on_mount(self) -> None:
        for column in self.live_columns:
            self.add_column(column.label, key=column.key, width=column.width)

    def use_columns(self, columns: Sequence[Column]) -> None:
        """Show ``columns`` instead (the Journal's policy changes have fields of their
        own); the rows given next must have their cells. A sort by a column gone ends."""
        if tuple(columns) == self.live_columns:
            return
        self.live_columns = tuple(columns)
        self.clear(columns=True)
        self._shown = []
        if self.sort_column not in {c.key for c in columns}:
            self.set_reactive(LiveTable.sort_column, None)
        self.on_mount()

    # -- data ------------------------------------------------------------------------------

    def show(self, rows: Sequence[LiveRow]) -> None:
        """Replace the rows (UI thread)."""
        self._rows_given = list(rows)
        self._render_rows()

    @property
    def shown_rows(self) -> list[LiveRow]:
        """The rows on screen, filtered and sorted, in order."""
        return list(self._shown)

    @property
    def selected_key(self) -> str | None:
        """The key of the row under the cursor."""
        if not self._shown or not 0 <= self.cursor_row < len(self._shown):
            return None
        return self._shown[self.cursor_row].key

    def _visible(self) -> list[LiveRow]:
        needle = self.filter_text.lower()
        rows = [r for r in self._rows_given if r.matches(needle)] if needle else list(self._rows_given)
        if self.sort_column is not None:
            index = [c.key for c in self.live_columns].index(self.sort_column)
            rows.sort(key=lambda r: _sortable(r.sort_values[index]), reverse=self.sort_reverse)
        return rows

    def _render_rows(self) -> None:
        rows = self._visible()
        if [r.key for r in rows] == [r.key for r in self._shown]:
            self._update_changed_cells(self._shown, rows)
            self._shown = rows
            return
        selected = self.selected_key
        following = self.follow and self.cursor_row == 0
        seen = {r.key for r in self._shown}
        self.clear()
        cells = [tuple(map(_plain, row.cells)) for row in rows]
        self._fit_columns(cells)
        for row, plain in zip(rows, cells):
            self.add_row(*plain, key=row.key)
        self._shown = rows
        if following:
            self.new_above = 0
            self.move_cursor(row=0, animate=False)
        elif selected is not None:
            try:
                index = self.get_row_index(selected)
            except RowDoesNotExist:
                return
            self.move_cursor(row=index, animate=False)
            if self.follow:
                self.new_above += sum(1 for r in rows[:index] if r.key not in seen)

    def _fit_columns(self, rows: list[tuple[Text, ...]]) -> None:
        """Size each auto-width column to its label and the rows about to be shown.

        DataTable's ``clear`` keeps every column's width and only ever widens it, so
        one long cell (a policy change's reason) would push the columns after it off
        screen for good, and widths measured later, when idle, may come after the first
        paint; measured here, they are right at once."""
        keys = [ColumnKey(c.key) for c in self.live_columns]
        widths = [max((row[i].cell_len for row in rows), default=0) for i in range(len(keys))]
        for key, width in zip(keys, widths):
            column = self.columns[key]
            if column.auto_width:
                column.content_width = max(column.label.cell_len, width)

    def _update_changed_cells(self, old_rows: list[LiveRow], new_rows: list[LiveRow]) -> None:
        """Write the cells that changed, then repaint once.

        DataTable's own ``update_cell`` repaints per call and, asked to fit widths,
        re-measures a whole column each time a cell gets narrower: quadratic in the
        rows, seconds on a 1,000-row refresh where every age changes. Here a column
        only grows (to the widest new cell), which costs one measure per changed cell.
        The table's private ``_data`` is written directly; Textual is pinned exactly,
        and the tests cover this path."""
        keys = [ColumnKey(c.key) for c in self.live_columns]
        widest: dict[ColumnKey, int] = {}
        for old, new in zip(old_rows, new_rows):
            row = self._data[RowKey(new.key)]
            for key, before, after in zip(keys, old.cells, new.cells):
                if not _same(before, after):
                    cell = _plain(after)
                    row[key] = cell
                    widest[key] = max(widest.get(key, 0), cell.cell_len)
        if not widest:
            return
        for key, width in widest.items():
            column = self.columns[key]
            if column.auto_width and width > column.content_width:
                column.content_width = width
                self._require_update_dimensions = True
        self._update_count += 1  # invalidates the rendered-row caches
        self.refresh()

    # -- sorting and filtering -------------------------------------------------------------

    def watch_filter_text(self) -> None:
        self._render_rows()

    def watch_sort_column(self) -> None:
        self._render_rows()

    def watch_sort_reverse(self) -> None:
        self._render_rows()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        key = str(event.column_key.value)
        if self.sort_column == key:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_column = key
            self.sort_reverse = False

    def action_sort_next(self) -> None:
        keys = [c.key for c in self.live_columns]
        position = keys.index(self.sort_column) + 1 if self.sort_column in keys else 0
        self.sort_column = keys[position % len(keys)]

    def action_sort_reverse(self) -> None:
        self.sort_reverse = not self.sort_reverse
