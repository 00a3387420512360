"""The Journal's kind picker (``a``): every action kind in one list to choose from,
instead of stepping through them one key press at a time."""

from __future__ import annotations

from textual.widgets.option_list import Option

from console.modals.option_picker import OptionPicker

#: the option that clears the kind filter
EVERY_KIND = "every kind"


class KindPicker(OptionPicker[tuple[str | None]]):
    """Dismissed with ``(kind,)`` (``(None,)``: every kind), or None when cancelled."""

    def __init__(self, kinds: tuple[str | None, ...], current: str | None) -> None:
        options = [Option(kind or EVERY_KIND, id=kind or EVERY_KIND) for kind in kinds]
        highlighted = kinds.index(current) if current in kinds else 0
        super().__init__("Show actions of kind", options, width=40, highlighted=highlighted, list_id="kinds")

    def chosen(self, option_id: str) -> tuple[str | None]:
        return (None if option_id == EVERY_KIND else option_id,)
