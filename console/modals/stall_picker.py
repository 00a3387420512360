"""The Forecast view's group picker (``g``): the shown topic's groups, each with how
the forecast assumes it reads; choosing one assumes it stalled (``ebb forecast
--stalled``), or reading again."""

from __future__ import annotations

from textual.widgets.option_list import Option

from console.modals.option_picker import OptionPicker


class StallPicker(OptionPicker[str]):
    """Dismissed with the group chosen (its stalled mark to flip), or None when cancelled."""

    def __init__(self, groups: list[str], stalled: frozenset[str]) -> None:
        options = [
            Option(f"{group}: {'assumed stalled' if group in stalled else 'as observed'}", id=group) for group in groups
        ]
        super().__init__("Assume stalled (enter flips)", options, width=60, list_id="stall-groups")

    def chosen(self, option_id: str) -> str:
        return option_id
