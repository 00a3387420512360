"""The ``:`` command palette: views, topics, themes and engine switches by name, as
k9s's ``:`` goes to a resource."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider

from console.model.journal import POLICY_CHANGE
from console.views import VIEWS
from themes import theme_names

if TYPE_CHECKING:
    from console.app import EbbApp

Command = tuple[str, str, Callable[[], object]]


class EbbCommands(Provider):
    @property
    def ebb(self) -> EbbApp:
        return self.app  # type: ignore[return-value]

    def _commands(self) -> Iterator[Command]:
        app = self.ebb
        for mode, (key, title) in VIEWS.items():
            yield f"{title.lower()}", f"go to the {title} view (key {key})", partial(app.action_view, mode)
        yield (
            "policy changes",
            "the Journal's policy changes: who changed which field, when",
            partial(app.show_journal_kind, POLICY_CHANGE),
        )
        for topic in app.known_topics:
            yield f"topic {topic}", f"open topic {topic}", partial(app.open_topic, topic)
        for name in theme_names():
            yield f"theme {name}", f"switch to the {name} theme", partial(app.choose_theme, name)
        yield "refresh", "reload the view now (r)", app.refresh_view
        yield "live", "pause or resume the automatic refresh (p)", app.action_toggle_live
        yield "help", "keys and views (?)", app.action_help
        if not app.host.read_only:
            yield "prune", "prune now: all topics, dry-run preview first", partial(app.open_prune_now, None)
            yield "pause", "pause all deletion (cycles still plan and report)", partial(app.ask_deletion_paused, True)
            yield "resume", "resume deletion", partial(app.ask_deletion_paused, False)
        yield "quit", "leave the console (ctrl+q)", app.exit

    async def discover(self) -> Hits:
        for name, help_text, callback in self._commands():
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_text, callback in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)
