"""``e``: edit a topic's policy (SPEC §8 "Policy editor").

One row per policy field: the text (the topic's override or the engine default), its
normal form echoed as you type or the engine's refusal, its source (``topic``,
``default``, ``changed``, ``reset``), and the field's help under the form while it
has the focus. The form logic is :mod:`console.model.policy_form` (no Textual).

Keys: ``ctrl+s`` saves, ``ctrl+t`` shows the what-if (needs Spark), ``ctrl+r`` resets
the focused field to the default, ``ctrl+l`` reloads the saved policy (your edits
kept on top), ``enter`` goes to the next field, ``esc`` closes.

- Loading, saving and the what-if run in thread workers; they report back with
  messages to this screen.
- Saving re-reads the policy in the same write transaction as the write and refuses
  when it changed since it was loaded (:func:`~console.model.policy_form.save_policy`):
  a newer change is never overwritten unseen.
- A save toasts what changed and, when the change deletes data at the next cycle that
  the policy before it kept, warns how much: from the what-if if it showed exactly
  the saved form, else from the same two plans made by an app worker right after the
  save (the editor has closed by then; the save itself never waits for Spark).
- ``esc`` with unsaved changes asks once (a warning: ``esc`` again discards them,
  nothing is saved); without changes it closes at once.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Button, Footer, Input, Static

from console import format
from console.errors import describe_error
from console.modals.what_if_pane import WhatIfPane
from console.model.policy_form import (
    Change,
    FieldEcho,
    PolicyChangedMeanwhile,
    PolicyForm,
    SavedPolicy,
    describe_changes,
    load_saved_policy,
    save_policy,
)
from console.model.what_if import WhatIf, compare, same_store
from console.superseding import FromWorker
from console.widgets.cells import Palette
from engine.policy.fields import FIELDS

if TYPE_CHECKING:
    from console.app import EbbApp
    from console.host import ConsoleHost

#: what the bool fields accept in the form (any text `parse_bool` takes works too)
BOOL_WORDS = ("on", "off")
#: plans of the saved and the edited policy made again while a cycle slips between them
WHAT_IF_ATTEMPTS = 3


# -- messages from the workers ------------------------------------------------------------


class PolicyLoaded(Message):
    def __init__(self, saved: SavedPolicy) -> None:
        super().__init__()
        self.saved = saved


class LoadFailed(Message):
    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class PolicySaved(Message):
    def __init__(self, changes: list[Change]) -> None:
        super().__init__()
        self.changes = changes


class SaveRefused(Message):
    def __init__(self, error: str, *, changed_meanwhile: bool) -> None:
        super().__init__()
        self.error = error
        self.changed_meanwhile = changed_meanwhile


class PreviewReady(FromWorker):
    def __init__(self, what_if: WhatIf, overrides: dict[str, str], summary: str) -> None:
        super().__init__()
        self.what_if = what_if
        #: the overrides planned, and the changes they make in words
        self.overrides = overrides
        self.summary = summary


class PreviewFailed(FromWorker):
    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


# -- what a change deletes now --------------------------------------------------------------


def plan_what_if(
    host: ConsoleHost, topic: str, proposed: dict[str, str], *, tag: str, before: dict[str, str] | None = None
) -> WhatIf:
    """``topic`` planned with the ``proposed`` overrides against ``before`` (None: the
    saved policy). Both plans at one instant, as ``ebb explain`` does: a segment that
    becomes eligible between them must not count as the change's. Both of one store
    too: planned again when a cycle ran between them (a few times at most; a cycle
    takes a plan's time, so a second try almost always fits between two)."""
    for _attempt in range(WHAT_IF_ATTEMPTS):
        now = host.clock()
        saved = host.plan([topic], now=now, overrides=None if before is None else {topic: before}, tag=tag)
        changed = host.plan([topic], now=now, overrides={topic: proposed}, tag=tag)
        if same_store(topic, saved, changed):
            break
    return compare(topic, saved, changed)


def warn_if_it_deletes_now(app: EbbApp, what_if: WhatIf) -> None:
    """Toast (from any thread) what a saved change deletes at the next cycle that the
    policy before it would have kept; nothing when it deletes nothing more."""
    if what_if.segments:
        app.notify(
            f"this change deletes {what_if.segments} more segment(s), {format.size(what_if.bytes)}, at the next cycle",
            title=f"{what_if.topic}: deletes data now",
            severity="warning",
            timeout=10,
            markup=False,
        )


def check_saved_change(app: EbbApp, topic: str, before: dict[str, str], after: dict[str, str]) -> None:
    """A thread worker of the app's (the editor has closed): plan ``topic`` with the
    policy before and after a save that was not previewed, and warn as a preview would."""
    host = app.host
    status = host.engine_status()
    if status.session in ("off", "failed"):
        why = "the Spark engine is off in this console" if status.session == "off" else "the Spark engine failed"
        app.notify(f"what the change deletes now was not checked: {why}", title=f"{topic}: saved", markup=False)
        return
    try:
        what_if = plan_what_if(host, topic, after, tag=host.new_tag(), before=before)
    except Exception as error:  # noqa: BLE001 - a toast, never a crash
        app.notify(
            f"what the change deletes now was not checked: {describe_error(error)}",
            title=f"{topic}: saved",
            severity="warning",
            markup=False,
        )
        return
    warn_if_it_deletes_now(app, what_if)


# -- widgets --------------------------------------------------------------------------------


#: a field's input is ``#field-NAME``, its row ``#row-NAME``, its reset button ``#reset-NAME``
INPUT_PREFIX, RESET_PREFIX = "field-", "reset-"
#: the form's columns: header label and CSS class
COLUMNS = (("Field", "name"), ("Value", "value"), ("Meaning", "echo"), ("Source", "source"), ("", "reset"))


def _input_id(name: str) -> str:
    return f"{INPUT_PREFIX}{name}"


def _field_of(widget_id: str | None, prefix: str) -> str | None:
    """The field a widget id names (``field-retention_time``), None for other widgets."""
    if widget_id and widget_id.startswith(prefix) and widget_id[len(prefix) :] in FIELDS:
        return widget_id[len(prefix) :]
    return None


class FieldRow(Horizontal):
    """One policy field: name, input, echo, source and a reset button. The column
    header is a row of the same shape (:meth:`header`), so the columns line up."""

    DEFAULT_CSS = """
    FieldRow {
        height: 1;
    }
    FieldRow.-header {
        color: $primary;
        text-style: bold;
    }
    FieldRow > .name {
        width: 22;
    }
    FieldRow > .value {
        width: 28;  /* consumer_backlog_eviction, the longest value, whole */
        padding: 0 1;
    }
    FieldRow > Input {
        background: $panel;
    }
    FieldRow > Input:focus {
        background: $primary-muted;
    }
    FieldRow > .echo {
        width: 1fr;
        padding: 0 1;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    FieldRow > .echo.-invalid {
        color: $error;
    }
    FieldRow > .source {
        width: 9;
    }
    FieldRow > .source.-default {
        color: $text-muted;
    }
    FieldRow > .source.-changed {
        color: $warning;
        text-style: bold;
    }
    FieldRow > .reset {
        width: 7;
        min-width: 7;
    }
    """

    def __init__(self, name: str | None) -> None:
        """The row of field ``name``; None: the column header."""
        super().__init__(id=f"row-{name}" if name else None, classes="" if name else "-header")
        self.field_name = name

    @classmethod
    def header(cls) -> FieldRow:
        return cls(None)

    def compose(self) -> ComposeResult:
        if self.field_name is None:
            for label, column in COLUMNS:
                yield Static(label, classes=column)
            return
        field = FIELDS[self.field_name]
        words = field.choices or (BOOL_WORDS if field.kind == "bool" else ())
        suggester = SuggestFromList(words, case_sensitive=False) if words else None
        yield Static(self.field_name, classes="name")
        yield Input(
            id=_input_id(self.field_name),
            classes="value",
            suggester=suggester,
            disabled=True,
            select_on_focus=False,
            compact=True,
        )
        yield Static("", classes="echo")
        yield Static("", classes="source")
        reset = Button("reset", id=f"{RESET_PREFIX}{self.field_name}", classes="reset", compact=True, disabled=True)
        reset.can_focus = False  # tab goes from field to field; ctrl+r resets the focused one
        yield reset

    def show(self, echo: FieldEcho) -> None:
        invalid = echo.error is not None
        self.query_one(Input).set_class(invalid, "-invalid")
        text = self.query_one(".echo", Static)
        shown = echo.error.removeprefix(f"invalid value for {echo.name}: ") if echo.error else echo.normalized
        text.update(shown or "")
        text.set_class(invalid, "-invalid")
        source = self.query_one(".source", Static)
        source.update(echo.source)
        source.set_class(echo.source == "default", "-default")
        source.set_class(echo.source in ("changed", "reset"), "-changed")
        self.query_one(Button).disabled = echo.source == "default"


# -- the screen -----------------------------------------------------------------------------


class PolicyEditorScreen(ModalScreen[None]):
    """See the module docstring."""

    DEFAULT_CSS = """
    PolicyEditorScreen {
        align: center top;
    }
    PolicyEditorScreen > #editor {
        width: 118;
        height: 1fr;
        border: thick $primary;
        border-title-color: $primary;
        border-title-style: bold;
        background: $surface;
        padding: 0 1;
    }
    PolicyEditorScreen #help {
        height: 2;
        margin-top: 1;
        color: $text-muted;
    }
    PolicyEditorScreen #status {
        height: auto;
        max-height: 2;
        text-overflow: ellipsis;
    }
    PolicyEditorScreen #status.-error {
        color: $error;
        text-style: bold;
    }
    PolicyEditorScreen #status.-warning {
        color: $warning;
        text-style: bold;
    }
    """

    BINDINGS = [
        Binding("ctrl+s", "save", "Save"),
        Binding("ctrl+t", "preview", "What-if"),
        Binding("ctrl+r", "reset_field", "Reset field"),
        Binding("ctrl+l", "reload", "Reload"),
        Binding("escape", "close", "Close"),
    ]

    def __init__(self, topic: str) -> None:
        super().__init__()
        self.topic = topic
        #: None until the saved policy is loaded
        self.form: PolicyForm | None = None
        self._saving = False
        #: the first ``esc`` with unsaved changes warned; the next one discards them
        self._discard_armed = False
        #: the overrides the what-if pane shows (None: no comparison shown)
        self._previewed: dict[str, str] | None = None
        #: the latest what-if, of the overrides ``_previewed``
        self._what_if: WhatIf | None = None
        #: the Spark job tag of a running what-if, to cancel it when the editor closes
        self._preview_tag: str | None = None

    @property
    def ebb(self) -> EbbApp:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        with Vertical(id="editor") as editor:
            editor.border_title = f"Policy of {self.topic}"
            yield FieldRow.header()
            for name in FIELDS:
                yield FieldRow(name)
            yield Static("", id="help")
            yield Static("loading the saved policy…", id="status")
            yield WhatIfPane(id="preview")
        yield Footer()

    def on_mount(self) -> None:
        self._load()

    # -- loading ------------------------------------------------------------------------------

    @work(thread=True, exit_on_error=False, exclusive=True, group="policy-load")
    def _load(self) -> None:
        """Read the saved policy; the first time it fills the form, later (ctrl+l) the
        form's edits are kept on top of it."""
        try:
            with self.ebb.host.reading() as broker:
                saved = load_saved_policy(broker, self.topic)
        except Exception as error:  # noqa: BLE001 - shown in the editor, never a crash
            self.post_message(LoadFailed(describe_error(error)))
            return
        self.post_message(PolicyLoaded(saved))

    def on_policy_loaded(self, message: PolicyLoaded) -> None:
        reloaded = self.form is not None
        self.form = self.form.rebased(message.saved) if self.form is not None else PolicyForm.opened(message.saved)
        for name in FIELDS:
            field_input = self.query_one(f"#{_input_id(name)}", Input)
            field_input.disabled = False
            field_input.value = self.form.text(name)
        self._form_changed()
        if reloaded:
            self.notify(f"{self.topic}: reloaded the saved policy; your edits are kept on top", title="Policy")
        else:
            self.query_one(f"#{_input_id(next(iter(FIELDS)))}", Input).focus()

    def on_load_failed(self, message: LoadFailed) -> None:
        self._status(f"cannot load the policy of {self.topic}: {message.error}", "-error")
        self.notify(message.error, title="Policy editor", severity="error", markup=False)

    # -- editing --------------------------------------------------------------------------------

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        name = _field_of(event.input.id, INPUT_PREFIX)
        if self.form is not None and name is not None:
            self.form = self.form.typed(name, event.value)
            self._form_changed()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.focus_next(Input)

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        name = _field_of(event.widget.id, INPUT_PREFIX)
        if name is not None and self.form is not None:
            field = FIELDS[name]
            choices = f" ({' | '.join(field.choices)})" if field.choices else ""
            self.query_one("#help", Static).update(
                f"{name}: {field.help}{choices}. Default: {self.form.saved.defaults[name]}."
            )

    def on_button_pressed(self, event: Button.Pressed) -> None:
        name = _field_of(event.button.id, RESET_PREFIX)
        if name is not None:
            event.stop()
            self._reset(name)

    def action_reset_field(self) -> None:
        name = _field_of(self.focused.id if self.focused else None, INPUT_PREFIX)
        if name is not None:
            self._reset(name)

    def _reset(self, name: str) -> None:
        if self.form is None:
            return
        self.form = self.form.reset(name)
        self.query_one(f"#{_input_id(name)}", Input).value = self.form.text(name)
        self._form_changed()

    def _form_changed(self) -> None:
        """Redraw every row and the status line from the form (cheap: 15 rows)."""
        form = self.form
        if form is None:
            return
        self._discard_armed = False
        for echo in form.echoes():
            self.query_one(f"#row-{echo.name}", FieldRow).show(echo)
        problem = form.problem()
        changes = form.changes()
        if problem is not None:
            self._status(f"✗ {problem}", "-error")
        elif changes:
            self._status(f"{self._summary(form)} · ctrl+t what-if · ctrl+s saves", "")
        else:
            self._status("no changes · type a value, ctrl+r resets the focused field to its default", "")
        if self._previewed is not None and self._previewed != form.merged():
            self.query_one(WhatIfPane).stale()
        self.refresh_bindings()

    @staticmethod
    def _summary(form: PolicyForm) -> str:
        return ", ".join(f"{name} {'(default)' if text is None else text}" for name, text in form.changes().items())

    def _status(self, text: str, level: str) -> None:
        status = self.query_one("#status", Static)
        status.update(text)
        status.set_class(level == "-error", "-error")
        status.set_class(level == "-warning", "-warning")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "save":
            if self.ebb.host.read_only:
                return False
            # Always offered: ctrl+s on an invalid or unchanged form says why it saves nothing.
            return None if self.form is None or self._saving else True
        if action == "preview":
            return None if self.form is None or not self.form.valid else True
        return True

    # -- saving ---------------------------------------------------------------------------------

    def action_save(self) -> None:
        form = self.form
        if form is None or self._saving or not self.ebb.allowed(f"save the policy of {self.topic}"):
            return
        problem = form.problem()
        if problem is not None:
            self._status(f"✗ not saved: {problem}", "-error")
            self.notify(f"not saved: {problem}", title="Policy", severity="error", markup=False)
            return
        if not form.changes():
            self._status("nothing to save: no field differs from the saved policy", "-warning")
            self.notify("nothing to save: no field differs from the saved policy", title="Policy")
            return
        self._saving = True
        self._status("saving…", "")
        self.refresh_bindings()
        self._save(form)

    @work(thread=True, exit_on_error=False, exclusive=True, group="policy-save")
    def _save(self, form: PolicyForm) -> None:
        try:
            with self.ebb.host.acting(f"save the policy of {form.topic}") as broker:
                changes = save_policy(broker, form, actor="console")
        except PolicyChangedMeanwhile as error:
            self.post_message(SaveRefused(str(error), changed_meanwhile=True))
        except Exception as error:  # noqa: BLE001 - a refusal is shown, never a crash
            self.post_message(SaveRefused(describe_error(error), changed_meanwhile=False))
        else:
            self.post_message(PolicySaved(changes))

    def on_policy_saved(self, message: PolicySaved) -> None:
        self._saving = False
        app = self.ebb  # the toasts outlive this dialog: they are the app's
        app.notify(describe_changes(self.topic, message.changes), title="Policy saved", markup=False)
        form = self.form
        if form is not None and self._what_if is not None and self._previewed == form.merged():
            warn_if_it_deletes_now(app, self._what_if)
        elif form is not None:
            # Not previewed as saved: plan it now, after the save (as `kafka-configs
            # --alter` applies at once), and warn when the answer comes.
            app.run_worker(
                partial(check_saved_change, app, self.topic, dict(form.saved.overrides), form.merged()),
                thread=True,
                exit_on_error=False,
                group="policy-check",
            )
        self._close()  # the view underneath refreshes as it resumes

    def on_save_refused(self, message: SaveRefused) -> None:
        self._saving = False
        hint = " (ctrl+l reloads, keeping your edits)" if message.changed_meanwhile else ""
        self._status(f"✗ not saved: {message.error}{hint}", "-error")
        self.notify(message.error, title="Policy not saved", severity="error", timeout=10, markup=False)
        self.refresh_bindings()

    def action_reload(self) -> None:
        self._load()

    # -- what-if ------------------------------------------------------------------------------

    def action_preview(self) -> None:
        form = self.form
        if form is None:
            return
        problem = form.problem()
        if problem is not None:
            self.query_one(WhatIfPane).failed(f"fix the form first: {problem}")
            return
        host = self.ebb.host
        status = host.engine_status()
        pane = self.query_one(WhatIfPane)
        if status.session == "off":
            pane.failed("the Spark engine is off in this console, so nothing can be planned")
            return
        if status.session == "failed":
            pane.failed(f"the Spark engine failed: {status.error}")
            return
        waiting = "" if status.session == "ready" else f" (Spark is {status.session}: the plan runs once it is ready)"
        pane.waiting(f"planning {self.topic} with the saved policy and with the form's{waiting}…")
        self._preview_tag = host.replacing(self._preview_tag)
        self._preview(form.merged(), self._summary(form) or "the saved policy", self._preview_tag)
        pane.forecast(host, self.topic, form.merged())

    @work(thread=True, exit_on_error=False, exclusive=True, group="policy-preview")
    def _preview(self, overrides: dict[str, str], summary: str, tag: str) -> None:
        try:
            what_if = plan_what_if(self.ebb.host, self.topic, overrides, tag=tag)
        except Exception as error:  # noqa: BLE001 - shown in the pane, never a crash
            self.post_message(PreviewFailed(describe_error(error)))
            return
        self.post_message(PreviewReady(what_if, overrides, summary))

    # ctrl+t again cancels the preview running (its plan, by its tag): that it failed,
    # or what it found, is not the newer preview's to show, nor its tag to clear.

    def on_preview_ready(self, message: PreviewReady) -> None:
        if message.superseded:
            return
        self._preview_tag = None
        self._previewed = message.overrides
        self._what_if = message.what_if
        pane = self.query_one(WhatIfPane)
        pane.show(message.what_if, message.summary, Palette.of(self.app))
        if self.form is not None and self.form.merged() != message.overrides:
            pane.stale()

    def on_preview_failed(self, message: PreviewFailed) -> None:
        if message.superseded:
            return
        self._preview_tag = None
        self.query_one(WhatIfPane).failed(message.error)

    # -- closing ----------------------------------------------------------------------------------

    def action_close(self) -> None:
        form = self.form
        if form is not None and form.changes() and not self._discard_armed:
            self._discard_armed = True
            self._status("unsaved changes: esc again discards them (nothing is saved), ctrl+s saves", "-warning")
            self.notify(
                "esc again discards your changes; ctrl+s saves them", title="Unsaved changes", severity="warning"
            )
            return
        if form is not None and form.changes():
            self.notify(f"{self.topic}: edits discarded, nothing saved", title="Policy")
        self._close()

    def _close(self) -> None:
        if self._preview_tag is not None:
            self.ebb.host.cancel(self._preview_tag)
        self.dismiss(None)
