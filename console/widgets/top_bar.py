"""The header on every view, like k9s's: where we are (a breadcrumb), the badges an
operator must never miss (deletion paused, topics over quota or held, read-only,
live refresh off) and the engine (Spark's state, the schedule).

It holds no state of its own: the app owns one :class:`~console.model.header.HeaderFacts`
(loaded with every refresh) and the engine status (read every second without I/O),
and puts them on the visible screen's header, so every screen says the same thing."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from console.host import EngineStatus
from console.model.header import HeaderFacts
from console.widgets.engine_panel import cycle_phrase

#: how the Spark session's states read in the header, by urgency
SESSION_VARIABLE = {"ready": "success", "failed": "error", "off": "foreground"}


class TopBar(Widget):
    DEFAULT_CSS = """
    TopBar {
        dock: top;
        height: 1;
        background: $panel;
        color: $foreground;
    }
    """

    view_title: reactive[str] = reactive("")
    """The breadcrumb, e.g. ``Quotas › Topic orders``."""

    status: reactive[EngineStatus | None] = reactive(None)
    """The engine as last seen (no I/O to read it)."""

    now: reactive[int] = reactive(0)
    """The console clock, for the next-cycle countdown."""

    read_only: reactive[bool] = reactive(False)
    live: reactive[bool] = reactive(True)
    """Whether views refresh on their own."""
    facts: reactive[HeaderFacts | None] = reactive(None)
    """The data directory's global state, as the app last loaded it."""

    @property
    def paused(self) -> bool:
        return self.facts is not None and self.facts.paused

    def badges(self) -> list[tuple[str, str]]:
        """``(text, theme variable)`` of each badge that applies, most urgent first."""
        facts = self.facts
        found = []
        if facts is not None and facts.paused:
            found.append(("DELETION PAUSED", "warning"))
        if facts is not None and facts.over_quota:
            found.append((f"{len(facts.over_quota)} OVER QUOTA", "error"))
        if facts is not None and facts.held:
            found.append((f"{len(facts.held)} HELD", "warning"))
        if self.read_only:
            found.append(("READ-ONLY", "error"))
        if not self.live:
            found.append(("LIVE OFF", "warning"))
        return found

    def render(self) -> Text:
        """The whole header if it fits; else, until it does, without the name, then
        without the Spark master (the Engine view has it), then with the schedule in
        fewer words, then without it. The breadcrumb (and the filters it names) and the
        badges always stay."""
        width = self.size.width
        for variant in _VARIANTS:
            text = self._header(*variant)
            if not width or text.cell_len <= width:
                break
        return text

    def _header(self, name: bool, master: bool, schedule: str) -> Text:
        variables = self.app.theme_variables
        text = Text(" Ebbtide │", style=f"bold {variables.get('primary', 'cyan')}") if name else Text("")
        text.append(f" {self.view_title}")
        badges = self.badges()
        if badges:
            text.append(" │")
        for badge, variable in badges:
            text.append(" ")
            text.append(f" {badge} ", style=f"bold reverse {variables.get(variable, 'yellow')}")
        status = self.status
        if status is not None:
            colour = variables.get(SESSION_VARIABLE.get(status.session, "warning"), "")
            text.append(f" │ Spark {status.master} " if master else " │ Spark ")
            text.append(status.session, style=f"bold {colour}")
            phrase = cycle_phrase(status, self.now)
            if schedule == "short":
                phrase = _shorter(phrase)
            if schedule != "none":
                text.append(f" │ {phrase} ")
        return text


#: the header's forms, fullest first: (name, Spark master, schedule phrase)
_VARIANTS = (
    (True, True, "full"),
    (False, True, "full"),
    (False, False, "full"),
    (False, False, "short"),
    (False, False, "none"),
)

#: the schedule's phrases (console/widgets/engine_panel.py) in fewer words
_SHORTER = (
    ("no schedule in this console", "no schedule"),
    ("first cycle waits for Spark", "waits for Spark"),
    ("next cycle in ", "next in "),
)


def _shorter(phrase: str) -> str:
    for long, short in _SHORTER:
        if phrase.startswith(long):
            return short + phrase[len(long) :]
    return phrase
