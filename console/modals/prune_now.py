"""Prune now (SPEC §8): scope, dry-run plan preview, confirmation, progress while Spark
runs, cancel, result. Opened by ``x`` on a topic and by the palette's ``prune`` (all
topics), through :meth:`~console.app.EbbApp.open_prune_now`.

1. *Preview.* On opening, a thread worker plans the scope with
   :meth:`ConsoleHost.plan <console.host.ConsoleHost.plan>`: a pure preview. A dry-run
   cycle (``host.prune(dry_run=True)``) would also journal the plan, but a preview
   the operator may well abandon is not an event of the engine; the confirmed cycle
   journals what it did. The dialog shows, per partition, the segments and bytes that
   would go and why (reason codes), what is kept back that is wanted (a subscriber's
   barrier, the per-cycle budget), and every group the plan moves or expires.
2. *Progress.* While a worker runs: an indeterminate bar, the seconds elapsed and the
   Spark session's state; "waiting for Spark" while it starts.
3. *Cancel.* ``esc`` (or Cancel) cancels the running plan with ``host.cancel(tag)``,
   repeated until the worker ends, because Spark cancels only a plan already
   submitted; the worker ends with :class:`~engine.errors.PlanCancelled` and the
   dialog says "cancelled". Once a cycle's plan is done its deletions are applied: a
   cancel that comes later does not stop them (the result says so). A second ``esc``
   closes the dialog without waiting; the worker ends on its own.
4. *Confirm* (``c``): :meth:`ConsoleHost.prune_as_previewed` holds this console's
   schedule off and takes the data directory's prune lock (which every cycle of every
   process takes), plans again at the preview's instant and, when that plan still does
   all the preview showed, applies the preview itself as one manual cycle (trigger
   ``manual``, actor ``console``) before letting the lock go; so no cycle, scheduled
   here or run by ``ebb engine`` or ``ebb prune``, can slip in between and leave the
   confirmed cycle nothing to do. What producers appended since only makes the new
   plan reach further (a size cap, a backlog eviction): the preview is applied, no
   more, and the next cycle takes the rest; otherwise a confirm on a live topic would
   never apply. While another process's cycle holds the lock the dialog says so,
   with its pid, and ``esc`` stops waiting. If the new plan no longer does all of the
   preview (another process pruned, a hold was set, a group moved back), nothing is
   applied: the dialog shows the new plan and the difference, and asks again, with
   this console's schedule held off until the operator
   answers (``c`` or ``esc``): on a schedule shorter than a plan (the demo's 10 s) a
   scheduled cycle would otherwise change the store before every answer. Refused in
   read-only mode. With deletion paused the cycle deletes nothing: said before and after.
5. *Result*: the cycle's id and status, segments deleted and bytes freed, and the
   topics or partitions skipped or failed, as ``ebb prune`` reports them; it replaces
   the preview's tables. Closing the dialog brings back the view below, which reloads
   (``LiveScreen.on_screen_resume``).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widgets import Button, ProgressBar, Static
from textual.worker import Worker, WorkerState

from console import format
from console.errors import describe_error
from console.model.plan_preview import (
    GroupEffect,
    PartitionPreview,
    PlanPreview,
    preview,
)
from console.widgets.live_table import Column, LiveRow, LiveTable
from engine.errors import PlanCancelled
from engine.journal.state import EngineState
from engine.prune.cycle_result import CycleResult
from engine.prune.planner import Plan
from engine.store.lock import LockTimeout

if TYPE_CHECKING:
    from console.app import EbbApp
    from console.host import ConsoleHost

Phase = Literal["previewing", "preview", "applying", "done", "cancelled", "failed"]
RUNNING: frozenset[Phase] = frozenset({"previewing", "applying"})

PREVIEW_WORKER, CYCLE_WORKER = "prune-preview", "prune-cycle"
#: how often the elapsed time is redrawn and a pending cancel repeated
TICK_SECONDS = 0.2
#: how often a worker looks whether Spark has finished starting
SPARK_POLL_SECONDS = 0.2

# Names take the width they need (a cut name hides what is about to be deleted); the
# other widths are fixed so that, with the demo's names, every column fits the dialog
# at 120 columns (their sum plus 2 per column of cell padding); longer names scroll.
DELETION_COLUMNS = (
    Column("topic", "Topic"),
    Column("partition", "Part", 4),
    Column("segments", "Segments", 8),
    Column("bytes", "Bytes", 9),
    Column("log_start", "Log start", 13),
    Column("reasons", "Reasons", 20),
    Column("kept", "Wanted, kept back", 26),
)
GROUP_COLUMNS = (
    Column("topic", "Topic"),
    Column("group", "Group"),
    Column("kind", "Kind", 10),
    Column("partition", "Part", 4),
    Column("position", "Position", 13),
    Column("skipped", "Skips", 7),
    Column("why", "Why", 32),
)
#: lines of a changed plan's difference shown before the tables
MAX_DIFFERENCES = 6
#: how the held-back reasons read in the table
HELD_BACK_WORDS = {"KEEP_BARRIER": "barrier", "KEEP_BUDGET": "budget"}


@dataclass(frozen=True)
class Stopped:
    """How a worker ended without a result. Workers return it rather than raise: a
    worker that ends in an error is re-raised to whoever waits on it."""

    cancelled: bool
    #: one line, when not cancelled
    error: str = ""


@dataclass(frozen=True)
class Preview:
    plan: PlanPreview
    #: deletion was paused when the preview was made
    paused: bool
    #: the plan itself, which a confirm applies if nothing changed since
    source: Plan


@dataclass(frozen=True)
class Changed:
    """The store changed between the preview and the confirm: nothing was applied."""

    preview: Preview
    #: one line per partition or group the new plan treats otherwise
    differences: list[str]


def _counted(counts: dict[str, int]) -> str:
    return ", ".join(f"{reason} ×{n}" for reason, n in counts.items())


def kept_back(p: PartitionPreview) -> str:
    """``4 · group billing at 30``, ``2 · budget``: wanted segments the plan keeps."""
    return ", ".join(
        f"{n} · {p.barrier if reason == 'KEEP_BARRIER' and p.barrier else HELD_BACK_WORDS[reason]}"
        for reason, n in p.held_back.items()
    )


def deletion_row(p: PartitionPreview) -> LiveRow:
    kept = kept_back(p)
    moved = f"{p.log_start_offset:,} → {p.new_log_start_offset:,}" if p.messages else f"{p.log_start_offset:,}"
    return LiveRow(
        key=f"{p.topic}/{p.partition}",
        cells=(
            p.topic,
            str(p.partition),
            format.count(p.segments),
            format.size(p.bytes),
            moved,
            _counted(p.reasons),
            kept,
        ),
        sort_values=(p.topic, p.partition, p.segments, p.bytes, p.messages, _counted(p.reasons), kept),
    )


def group_row(g: GroupEffect) -> LiveRow:
    return LiveRow(
        key=f"{g.topic}/{g.group}/{g.partition}",
        cells=(
            g.topic,
            g.group,
            g.kind,
            str(g.partition),
            f"{g.position:,} → {g.new_position:,}",
            format.count(g.skipped),
            g.why,
        ),
        sort_values=(g.topic, g.group, g.kind, g.partition, g.new_position - g.position, g.skipped, g.why),
    )


def preview_summary(p: PlanPreview) -> str:
    at = f"Dry-run plan at {format.instant(p.now)} UTC: "
    if not p.segments and not p.topics:
        return at + "nothing to delete now."
    text = at + f"would delete {p.segments} segment(s), {format.size(p.bytes)}, from {len(p.topics)} topic(s)"
    skipping = {(g.topic, g.group) for g in p.skipping_groups}
    if skipping:
        text += f"; {len(skipping)} group(s) would skip unconsumed data"
    return text + "."


def preview_notes(preview_: Preview) -> str:
    """What the operator must know before confirming."""
    notes = []
    if preview_.paused:
        notes.append("Deletion is paused: a cycle now plans and journals, and deletes nothing (z resumes).")
    if preview_.plan.held_topics:
        notes.append(f"On hold, nothing of them is deleted: {', '.join(preview_.plan.held_topics)}.")
    for topic, reason in preview_.plan.rejected.items():
        notes.append(f"Left out, its policy is invalid: {topic}: {reason}")
    return "\n".join(notes)


def cycle_summary(result: CycleResult, previewed: int | None) -> str:
    """The result of the confirmed cycle, as ``ebb prune`` reports it."""
    if result.status == "paused":
        return (
            f"Cycle {result.cycle_id} (paused): deletion is paused, nothing was deleted "
            f"({result.planned} deletion(s) planned). Resume with z."
        )
    text = (
        f"Cycle {result.cycle_id} ({result.status}): deleted {result.applied} segment(s), "
        f"{format.size(result.bytes_freed)}"
    )
    if previewed is not None and previewed != result.applied:
        text += f" (the preview showed {previewed}: the store or the clock moved since)"
    lines = [text + "."]
    lines += [f"Skipped {where}: {why}" for where, why in result.skipped.items()]
    lines += [f"Failed {where}: {why}" for where, why in result.failed.items()]
    return "\n".join(lines)


class PruneNowScreen(ModalScreen[None]):
    """See the module docstring."""

    DEFAULT_CSS = """
    PruneNowScreen {
        align: center middle;
    }
    PruneNowScreen > #prune-dialog {
        width: 116;
        height: 36;
        border: thick $primary;
        background: $surface;
        padding: 0 1;
    }
    PruneNowScreen #prune-scope {
        text-style: bold;
    }
    PruneNowScreen #prune-status, PruneNowScreen #prune-note {
        height: auto;
    }
    PruneNowScreen #prune-note {
        color: $warning;
    }
    PruneNowScreen #prune-status.-failed {
        color: $error;
    }
    PruneNowScreen #prune-progress {
        margin: 0 0 1 0;
    }
    PruneNowScreen #prune-deletions-box {
        height: 1fr;
    }
    PruneNowScreen #prune-groups-box {
        height: 8;
    }
    PruneNowScreen #prune-buttons {
        height: auto;
        dock: bottom;
    }
    PruneNowScreen #prune-buttons Button {
        margin-right: 2;
    }
    """
    BINDINGS = [
        Binding("escape", "stop", "Cancel / close"),
        Binding("c", "confirm", "Prune now"),
    ]

    def __init__(self, topics: list[str] | None) -> None:
        """``topics``: the scope; None for all topics."""
        super().__init__()
        self.topics = topics
        self.phase: Phase = "previewing"
        self.preview: Preview | None = None
        self.outcome: CycleResult | None = None
        self._tag = ""
        self._cancel = threading.Event()
        self._started = 0.0
        self._ticker: Timer | None = None
        #: the prune lock's holder while the confirmed cycle waits for it
        self._lock_held_by: LockTimeout | None = None
        #: this console's schedule is held off while a changed plan waits for an answer
        #: (ConsoleHost.prune_as_previewed); ``_closed``: the dialog is gone, so a hold
        #: that comes back now is let go at once
        self._schedule_held = False
        self._closed = False
        self._hold_lock = threading.Lock()

    @property
    def ebb(self) -> EbbApp:
        return self.app  # type: ignore[return-value]

    @property
    def scope(self) -> str:
        return ", ".join(self.topics) if self.topics else "all topics"

    def compose(self) -> ComposeResult:
        with Vertical(id="prune-dialog") as dialog:
            dialog.border_title = "Prune now"
            yield Static(Text.assemble("Scope: ", (self.scope, "bold")), id="prune-scope")
            yield Static("", id="prune-status")
            yield ProgressBar(total=None, show_eta=False, show_percentage=False, id="prune-progress")
            yield Static("", id="prune-note")
            # Each table under its title in a box that sets the height; the table fills it.
            with Vertical(id="prune-deletions-box"):
                yield Static("Would delete", classes="section-title")
                yield LiveTable(DELETION_COLUMNS, id="prune-deletions")
            with Vertical(id="prune-groups-box"):
                yield Static("Groups affected", classes="section-title")
                yield LiveTable(GROUP_COLUMNS, id="prune-groups")
            with Horizontal(id="prune-buttons"):
                yield Button("Prune now (c)", variant="error", id="prune-confirm", disabled=True)
                yield Button("Cancel (esc)", id="prune-stop")

    def on_mount(self) -> None:
        self._ticker = self.set_interval(TICK_SECONDS, self._tick, pause=True)
        self._start("previewing")

    # -- running ----------------------------------------------------------------------------

    def _start(self, phase: Phase) -> None:
        host = self.ebb.host
        self._tag = host.new_tag()
        self._cancel.clear()
        self._started = time.monotonic()
        self._set_phase(phase)
        if phase == "previewing":
            self._run_preview(host, self.topics, self._tag)
        else:
            assert self.preview is not None  # confirm is offered only on a preview
            self._run_cycle(host, self.topics, self._tag, self.preview)
        assert self._ticker is not None
        self._ticker.resume()
        self._tick()

    def _wait_for_spark(self, host: ConsoleHost) -> None:
        """Wait while the session starts, so that a cancel meanwhile is not lost
        (a Spark cancel reaches only a plan already submitted)."""
        while host.engine_status().session == "starting":
            if self._cancel.is_set():
                raise PlanCancelled("cancelled while waiting for Spark")
            time.sleep(SPARK_POLL_SECONDS)
        if self._cancel.is_set():
            raise PlanCancelled("cancelled before planning")

    @work(thread=True, exit_on_error=False, name=PREVIEW_WORKER, group="prune-now")
    def _run_preview(self, host: ConsoleHost, topics: list[str] | None, tag: str) -> Preview | Stopped:
        try:
            self._wait_for_spark(host)
            with host.reading() as broker:
                paused = EngineState(broker.catalog).is_paused()
            plan = host.plan(topics, tag=tag)
        except PlanCancelled:
            return Stopped(cancelled=True)
        except Exception as error:  # noqa: BLE001 - shown in the dialog, never a crash
            return Stopped(cancelled=False, error=describe_error(error))
        if self._cancel.is_set():
            # Finished before the cancel reached Spark: the operator asked not to see it.
            return Stopped(cancelled=True)
        return Preview(preview(plan), paused, plan)

    @work(thread=True, exit_on_error=False, name=CYCLE_WORKER, group="prune-now")
    def _run_cycle(
        self, host: ConsoleHost, topics: list[str] | None, tag: str, previewed: Preview
    ) -> CycleResult | Changed | Stopped:
        try:
            self._wait_for_spark(host)
            with self._hold_lock:
                held, self._schedule_held = self._schedule_held, False
            result = host.prune_as_previewed(
                topics,
                previewed.source,
                lambda plan: not previewed.plan.dropped(preview(plan)),
                tag=tag,
                waiting=self._waiting_for_lock,
                schedule_held=held,
            )
            if isinstance(result, CycleResult):
                return result
            with self._hold_lock:
                if self._closed:
                    host.release_schedule()
                else:
                    self._schedule_held = True
            again = Preview(preview(result), previewed.paused, result)
            return Changed(again, previewed.plan.differences(again.plan))
        except PlanCancelled:
            return Stopped(cancelled=True)
        except Exception as error:  # noqa: BLE001 - shown in the dialog, never a crash
            return Stopped(cancelled=False, error=describe_error(error))

    def on_unmount(self) -> None:
        with self._hold_lock:
            self._closed = True
            held, self._schedule_held = self._schedule_held, False
        if held:
            self.ebb.host.release_schedule()

    def _waiting_for_lock(self, held: LockTimeout | None) -> None:
        """Worker thread: note who holds the prune lock (None: taken now); stop waiting
        on a cancel."""
        self._lock_held_by = held
        if held is not None and self._cancel.is_set():
            raise PlanCancelled("cancelled while waiting for the prune lock")

    def _tick(self) -> None:
        if self.phase not in RUNNING:
            return
        host = self.ebb.host
        if self._cancel.is_set():
            host.cancel(self._tag)  # no I/O: marks the run and returns
        status = host.engine_status()
        elapsed = f"{time.monotonic() - self._started:.0f} s"
        if self._cancel.is_set():
            doing = "Cancelling"
        elif (held := self._lock_held_by) is not None:
            by = "another process" if held.holder is None else f"another process (pid {held.holder})"
            doing = f"Waiting for the prune lock: a cycle of {by} holds it; nothing applied yet"
        elif status.session == "starting":
            doing = f"Waiting for Spark ({status.master}) to start"
        elif self.phase == "previewing":
            doing = f"Planning a dry run on Spark ({status.master}, session {status.session})"
        else:
            doing = f"Pruning: planning on Spark ({status.master}), then deleting"
        self._status(f"{doing} · {elapsed}")

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if worker.name not in (PREVIEW_WORKER, CYCLE_WORKER) or event.state != WorkerState.SUCCESS:
            return
        result = worker.result
        if isinstance(result, Preview):
            self._show_preview(result)
        elif isinstance(result, Changed):
            self._show_preview(result.preview, changed=result.differences)
        elif isinstance(result, CycleResult):
            self._show_outcome(result)
        elif not isinstance(result, Stopped):
            return
        elif result.cancelled:
            self._set_phase("cancelled")
            self._status("Cancelled: nothing was deleted." if worker.name == CYCLE_WORKER else "Cancelled.")
        else:
            self._set_phase("failed")
            self._status(result.error)

    # -- showing ---------------------------------------------------------------------------

    def _show_preview(self, result: Preview, *, changed: list[str] | None = None) -> None:
        self.preview = result
        self._set_phase("preview")
        summary = preview_summary(result.plan) + ("" if self.ebb.host.read_only else " Press c to prune now.")
        notes = preview_notes(result)
        if changed is not None:
            summary = (
                "Nothing was deleted: the store changed since the preview. "
                f"{summary} This console's scheduled cycles wait until you answer."
            )
            notes = "\n".join(["Changed since the preview:", *changed[:MAX_DIFFERENCES]] + ([notes] if notes else []))
        self._status(summary)
        self.query_one("#prune-note", Static).update(notes)
        self.query_one("#prune-deletions", LiveTable).show([deletion_row(p) for p in result.plan.partitions])
        self.query_one("#prune-groups", LiveTable).show([group_row(g) for g in result.plan.groups])

    def _show_outcome(self, outcome: CycleResult) -> None:
        self.outcome = outcome
        self._set_phase("done")
        previewed = self.preview.plan.segments if self.preview is not None else None
        summary = cycle_summary(outcome, previewed)
        if self._cancel.is_set():
            summary = "Too late to cancel: the plan was done and applied.\n" + summary
        self._status(summary)

    def _status(self, text: str) -> None:
        self.query_one("#prune-status", Static).update(text)

    def _set_phase(self, phase: Phase) -> None:
        self.phase = phase
        running = phase in RUNNING
        if not running and self._ticker is not None:
            self._ticker.pause()
        self.query_one("#prune-progress").display = running
        self.query_one("#prune-status").set_class(phase == "failed", "-failed")
        confirm = self.query_one("#prune-confirm", Button)
        confirm.disabled = phase != "preview" or self.ebb.host.read_only
        confirm.display = phase in ("previewing", "preview")
        # The result replaces the preview: its tables said what would go, not what went.
        for box in ("#prune-deletions-box", "#prune-groups-box"):
            self.query_one(box).display = phase not in ("done", "applying")
        self.query_one("#prune-stop", Button).label = "Cancel (esc)" if running else "Close (esc)"

    # -- keys and buttons ----------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (action == "confirm" and self.ebb.host.read_only)

    def action_confirm(self) -> None:
        if self.phase != "preview":
            return
        if self.ebb.allowed("prune now"):  # checked again: the dialog may outlive a mode change
            self._start("applying")

    def action_stop(self) -> None:
        """Cancel a running plan; close when nothing runs, or when asked again while
        the cancel has not landed yet (a stuck Spark must not hold the dialog open)."""
        if self.phase in RUNNING and not self._cancel.is_set():
            self._cancel.set()
            self.ebb.host.cancel(self._tag)
            self._tick()
            return
        if self.phase == "applying":
            self.ebb.notify("prune now goes on in the background: its cycle will be in the Journal", title="Prune now")
        self.dismiss()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "prune-confirm":
            self.action_confirm()
        else:
            self.action_stop()
