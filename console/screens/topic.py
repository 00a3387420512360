"""Topic: one topic's partitions, segments and groups, with the latest plan's
decisions (SPEC §8).

Every cell is built in :meth:`TopicScreen.load`, in the worker, so that a topic of a
thousand segments costs the UI thread only the table's own diff in :meth:`show`.
Decisions come from the host's latest plan when it covers the topic; ``v`` asks
Spark for a fresh (dry) plan of this topic, which deletes nothing and so is allowed
in read-only mode.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Static

from console import format
from console.errors import describe_error
from console.host import ConsoleHost, EngineStatus
from console.model.history import load_history
from console.model.overview import CYCLE_HISTORY
from console.model.topic import (
    GroupState,
    PartitionState,
    SegmentState,
    TopicData,
    load_topic,
)
from console.screens.base import LiveScreen
from console.screens.group_actions import GROUP_BINDINGS, GroupActions
from console.screens.topic_actions import TOPIC_BINDINGS, TopicActions
from console.widgets.cells import Palette, age_bar, gauge, tone
from console.widgets.charts import Chart, ChartSpec
from console.widgets.history_charts import topic_chart
from console.widgets.live_table import Column, LiveRow, LiveTable
from engine.journal.journal import Journal
from engine.policy.effective import EffectivePolicy
from engine.policy.fields import FIELDS
from engine.policy.units import describe_size

PARTITION_COLUMNS = (
    Column("partition", "Part"),
    Column("log_start", "Log start"),
    Column("end", "End"),
    Column("messages", "Messages"),
    Column("bytes", "Bytes"),
    Column("cap", "Of size cap"),
    Column("segments", "Segments"),
)

SEGMENT_COLUMNS = (
    Column("partition", "Part"),
    Column("base", "Base"),
    Column("next", "Next"),
    Column("size", "Size"),
    Column("age", "Age"),
    Column("aging", "To limit"),
    Column("state", "State"),
    # The plan's columns have fixed widths: their text arrives with a later plan,
    # and a live table sizes columns on its first rows.
    Column("decision", "Decision", 8),
    Column("reason", "Reason", 22),
    Column("eligible", "Eligible", len("23h 59m before plan")),
)

GROUP_COLUMNS = (
    Column("group", "Group"),
    Column("kind", "Kind"),
    Column("positions", "Positions"),
    Column("lag", "Lag msgs"),
    Column("lag_bytes", "Backlog"),
    Column("lag_time", "Lag time"),
    Column("commit", "Last commit"),
    Column("holds", "Holds back", 10),
    Column("plan", "Plan", 26),
)

#: cells of the age bars
AGE_BAR_WIDTH = 10
#: positions shown per group before the rest is summed up as ``…+N``
POSITIONS_SHOWN = 3
#: rows the partitions and groups boxes grow to before they scroll
SMALL_TABLE_ROWS = 4
#: a box's lines around its rows: two borders, the header, and the horizontal
#: scrollbar the groups table shows when its columns are wider than 120 cells
BOX_CHROME = 4

#: the policy summary's room at 120 columns (its Static is padded a column each side)
SUMMARY_WIDTH = 118
SEPARATOR, TOPIC_MARK, UNMARKED = " · ", " (topic)", "unmarked: engine default"
#: the policy summary, two lines: the limits on data, then how it is cut and who
#: keeps it; (field, label, shown only when finite)
SUMMARY_LINES = (
    (
        ("retention_time", "retain", False),
        ("retention_size", "retain size", False),
        ("max_time", "cap time", False),
        ("max_partition_size", "cap size/partition", False),
    ),
    (
        ("granularity", "granularity", False),
        ("consumption", "consumption", False),
        ("hold", "hold", False),
        ("message_ttl", "ttl", True),
        ("backlog_size", "backlog quota", True),
        ("backlog_age", "backlog age", True),
    ),
)


# -- cells (built in the worker) -----------------------------------------------------------


def policy_value(policy: EffectivePolicy, field: str) -> str:
    """A policy value as an operator writes it: ``30m``, ``4 KiB``, ``infinite``, ``on``."""
    value = policy[field]
    kind = FIELDS[field].kind
    if kind == "duration":
        return format.duration(value)  # type: ignore[arg-type]
    if kind == "size":
        return describe_size(value)  # type: ignore[arg-type]
    return policy.entry(field).normalized


def state_line(data: TopicData, palette: Palette) -> Text:
    """``state over quota · backlog over quota (size)``: the words the Overview
    shows, then, under a finite quota, the quota's own label (which limit, since
    when). Both are live, from console.model.quota: the plan's columns below are
    the plan's, as of its instant."""
    text = Text("state ", style=palette.muted)
    for index, word in enumerate(data.states):
        if index:
            text.append(", ")
        text.append(word, style=tone(word, palette))
    if data.quota.quota.finite:
        # The label carries its own "quota" (``quota exceeded 2m``, ``over quota``).
        text.append(" · backlog ", style=palette.muted)
        text.append(data.quota.label(data.now), style=tone(data.quota.word, palette))
    return text


def policy_summary(data: TopicData, palette: Palette) -> Text:
    """The limits in force; values set on the topic are marked ``(topic)``."""
    text = state_line(data, palette)
    if data.policy is None:
        text.append(f"\npolicy invalid: {data.policy_error}", style=palette.error)
        return text
    policy = data.policy
    text.append("\n")
    width = 0

    def breaking(item_width: int) -> bool:
        """A new line when the item after a separator would pass the summary's room:
        a long line (a hold, a ttl and both quotas set) breaks between items."""
        nonlocal width
        if width and width + len(SEPARATOR) + item_width > SUMMARY_WIDTH:
            text.append("\n")
            width = 0
        return width > 0

    for number, line in enumerate(SUMMARY_LINES):
        if number:
            text.append("\n")
            width = 0
        items = [(f, label) for f, label, if_finite in line if not (if_finite and policy[f] is None)]
        for field, label in items:
            value = policy_value(policy, field)
            topic = policy.entry(field).source == "topic"
            item_width = len(f"{label} {value}{TOPIC_MARK if topic else ''}")
            if breaking(item_width):
                text.append(SEPARATOR, style=palette.muted)
                width += len(SEPARATOR)
            text.append(f"{label} ", style=palette.muted)
            text.append(value, style="bold")
            if topic:
                text.append(TOPIC_MARK, style=palette.accent)
            width += item_width
    text.append(f"{SEPARATOR}{UNMARKED}" if breaking(len(UNMARKED)) else UNMARKED, style=palette.muted)
    return text


def partition_row(p: PartitionState, cap: int | None, palette: Palette) -> LiveRow:
    return LiveRow(
        key=str(p.partition),
        cells=(
            str(p.partition),
            format.count(p.log_start_offset),
            format.count(p.next_offset),
            format.count(p.messages),
            format.size(p.size_bytes),
            gauge(p.size_bytes, cap, palette),
            format.count(p.segments),
        ),
        sort_values=(
            p.partition,
            p.log_start_offset,
            p.next_offset,
            p.messages,
            p.size_bytes,
            p.size_bytes / cap if cap else None,
            p.segments,
        ),
    )


def policy_limit(policy: EffectivePolicy | None, field: str) -> int | None:
    """A numeric limit of the policy; None when infinite (or the policy is invalid)."""
    value = policy[field] if policy is not None else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def time_limit(policy: EffectivePolicy | None) -> int | None:
    """What the age bars age toward: the retention time, else the hard time cap."""
    retention = policy_limit(policy, "retention_time")
    return retention if retention is not None else policy_limit(policy, "max_time")


def eligible_text(eligible_at: int | None, plan_now: int) -> str:
    """When the time rules alone make the segment eligible, counted from the plan's
    instant and saying so (never from the clock: a plan must not look fresher than
    it is): ``12m after plan``, ``5m before plan``; ``-`` when time alone never
    makes it eligible."""
    if eligible_at is None:
        return "-"
    if eligible_at > plan_now:
        return f"{format.age(eligible_at - plan_now)} after plan"
    return f"{format.age(plan_now - eligible_at)} before plan"


def segment_row(
    s: SegmentState,
    now: int,
    limit_ms: int | None,
    palette: Palette,
    *,
    plan_now: int | None = None,
    stale: bool = False,
) -> LiveRow:
    """``stale``: the plan is out of date, so its cells are muted (the subtitle says why)."""
    age = s.age_ms(now)
    decision = s.decision
    if decision is None or plan_now is None:
        plan_cells: tuple[Text | str, ...] = ("-", "-", "-")
        plan_sorts: tuple[object, ...] = (None, None, None)
        search = ""
    else:
        reason, deletes = decision.reason, decision.decision == "delete"
        if reason == "KEEP_ACTIVE" and s.sealed:
            reason = "KEEP_ACTIVE (then)"  # sealed since the plan: no longer its decision
        plan_cells = (
            Text(decision.decision, style=palette.muted if stale else palette.error if deletes else ""),
            Text(reason, style=palette.muted if stale else palette.warning if decision.detail else ""),
            Text(eligible_text(decision.eligible_at, plan_now), style=palette.muted if stale else ""),
        )
        plan_sorts = (decision.decision, decision.reason, decision.eligible_at)
        search = " ".join(
            (decision.decision, decision.reason, decision.detail or "", format.instant(decision.eligible_at))
        )
    state = "sealed" if s.sealed else "active"
    cells = (
        str(s.partition),
        format.count(s.base_offset),
        format.count(s.next_offset),
        format.size(s.size_bytes),
        format.age(age),
        age_bar(age, limit_ms, palette, width=AGE_BAR_WIDTH),
        state,
        *plan_cells,
    )
    return LiveRow(
        key=f"{s.partition}:{s.base_offset}",
        cells=cells,
        sort_values=(s.partition, s.base_offset, s.next_offset, s.size_bytes, age, age, s.sealed, *plan_sorts),
        search=f"p{s.partition} {s.base_offset} {s.next_offset} {state} {search}".lower(),
    )


def positions_text(group: GroupState) -> str:
    """``0:30 1:90``; past a few partitions, ``0:30 1:90 2:7 …+5``."""
    pairs = [f"{p.partition}:{p.position}" for p in group.lag.partitions]
    shown = " ".join(pairs[:POSITIONS_SHOWN])
    return shown if len(pairs) <= POSITIONS_SHOWN else f"{shown} …+{len(pairs) - POSITIONS_SHOWN}"


def group_row(g: GroupState, now: int, palette: Palette, *, stale: bool = False) -> LiveRow:
    """``stale``: as :func:`segment_row`, the plan's cell is muted."""
    lag = g.lag
    holds = g.holds_back_bytes
    outcome = g.outcome.describe() if g.outcome is not None else "-"
    acts = outcome not in ("-", "unchanged")
    return LiveRow(
        key=g.name,
        cells=(
            g.name,
            lag.kind,
            positions_text(g),
            format.count(lag.lag_messages),
            format.size(lag.lag_bytes),
            format.age(lag.lag_ms(now)),
            format.ago(now, lag.last_commit),
            Text(format.size(holds), style=palette.warning if holds else ""),
            Text(outcome, style=palette.muted if stale else palette.warning if acts else ""),
        ),
        sort_values=(
            g.name,
            lag.kind,
            tuple(p.position for p in lag.partitions),
            lag.lag_messages,
            lag.lag_bytes,
            lag.lag_ms(now),
            lag.last_commit,
            holds,
            outcome,
        ),
        search=f"{g.name} {lag.kind} {' '.join(f'{p.partition}:{p.position}' for p in lag.partitions)} {outcome}",
    )


def plan_note(data: TopicData, status: EngineStatus) -> str:
    """The segments box's subtitle: where the decisions come from, or why there are none."""
    if data.plan_rejected is not None:
        return f"the plan of {format.since(data.now, data.plan_now)} ago left this topic out: {data.plan_rejected}"
    if (age := plan_age(data)) is not None:
        if data.plan_stale is not None:
            return f"{age} ({data.plan_stale}) · v plans again"
        deleting = [s for s in data.segments if s.decision is not None and s.decision.decision == "delete"]
        freed = sum(s.size_bytes for s in deleting)
        return f"{age}: {len(deleting)} to delete ({format.size(freed)}) · v plans again"
    if status.session == "ready":
        return "no plan yet · v plans now"
    if status.session == "off":
        return "no plan: Spark is off in this console"
    if status.session == "failed":
        return "no plan: Spark failed (see the Engine view)"
    return "plan pending (Spark warming)"


def plan_age(data: TopicData) -> str | None:
    """``plan of 4s ago``, ``STALE plan of 2m ago``: the instant the plan's columns
    speak of; None without a plan (or when it left this topic out)."""
    if data.plan_now is None or data.plan_rejected is not None:
        return None
    stale = "STALE " if data.plan_stale is not None else ""
    return f"{stale}plan of {format.since(data.now, data.plan_now)} ago"


def groups_note(data: TopicData) -> str:
    if not data.groups:
        return "no groups"
    if data.policy is not None and data.policy["consumption"] == "protect":
        consumption = "consumption protect: subscribers keep what they have not read"
    else:
        consumption = "consumption ignore: groups never stop deletion"
    age = plan_age(data)
    return consumption if age is None else f"Plan column: {age} · {consumption}"


@dataclass(frozen=True)
class TopicRows:
    """Everything :meth:`TopicScreen.show` puts on screen, ready made."""

    summary: Text
    partitions_note: str
    partitions: list[LiveRow]
    segments_note: str
    segments: list[LiveRow]
    groups_note: str
    groups: list[LiveRow]
    #: bytes on disk and freed per cycle over the span of the recent cycles
    history: ChartSpec


def topic_rows(data: TopicData, status: EngineStatus, palette: Palette, history: ChartSpec) -> TopicRows:
    cap = policy_limit(data.policy, "max_partition_size")
    aging_limit = time_limit(data.policy)
    total = sum(p.size_bytes for p in data.partitions)
    stale = data.plan_stale is not None
    return TopicRows(
        summary=policy_summary(data, palette),
        partitions_note=f"{len(data.partitions)} partition(s) · {format.size(total)}",
        partitions=[partition_row(p, cap, palette) for p in data.partitions],
        segments_note=plan_note(data, status),
        segments=[
            segment_row(s, data.now, aging_limit, palette, plan_now=data.plan_now, stale=stale) for s in data.segments
        ],
        groups_note=groups_note(data),
        groups=[group_row(g, data.now, palette, stale=stale) for g in data.groups],
        history=history,
    )


# -- the screen ----------------------------------------------------------------------------


class TopicScreen(GroupActions, TopicActions, LiveScreen[TopicRows]):
    DEFAULT_CSS = """
    TopicScreen #policy {
        height: auto;
        padding: 0 1;
        background: $surface;
    }
    TopicScreen .small {
        height: 5;
    }
    TopicScreen #segments-box {
        height: 1fr;
    }
    TopicScreen #topic-top {
        height: 11;
    }
    TopicScreen #partitions-box {
        width: 76;
    }
    TopicScreen #history-box {
        width: 1fr;
    }
    /* A small terminal: the segments keep rows of their own, the chart goes. */
    TopicScreen.-short #topic-top {
        height: 6;
    }
    TopicScreen.-short #segments-box {
        min-height: 6;
    }
    TopicScreen.-narrow #history-box {
        display: none;
    }
    TopicScreen.-narrow #partitions-box {
        width: 1fr;
    }
    """

    BINDINGS = [
        *TOPIC_BINDINGS,
        *GROUP_BINDINGS,
        Binding("v", "plan_now", "Plan"),
    ]
    AUTO_FOCUS = "#segments"

    class PlanFinished(Message):
        """``v``'s plan is done: ``error`` is None, or one line saying why it failed."""

        def __init__(self, error: str | None) -> None:
            super().__init__()
            self.error = error

    def __init__(self, topic: str) -> None:
        super().__init__()
        self.topic = topic
        #: a ``v`` plan is running (UI thread state)
        self._planning = False
        self._segments_note = ""

    def title_text(self) -> str:
        return f"Topic {self.topic}"

    def compose_view(self) -> ComposeResult:
        yield Static(id="policy")
        with Horizontal(id="topic-top"):
            with Vertical(id="partitions-box", classes="box") as box:
                box.border_title = "Partitions"
                yield LiveTable(PARTITION_COLUMNS, id="partitions")
            with Vertical(id="history-box", classes="box") as box:
                box.border_title = "History"
                box.border_subtitle = "line: on disk · bars: freed per cycle"
                yield Chart(id="topic-history")
        with Vertical(id="segments-box", classes="box") as box:
            box.border_title = "Segments"
            yield LiveTable(SEGMENT_COLUMNS, id="segments")
        with Vertical(id="groups-box", classes="box small") as box:
            box.border_title = "Groups"
            yield LiveTable(GROUP_COLUMNS, id="groups")

    def default_search_table(self) -> LiveTable:
        """``/`` first searches the segments, the table that can be long."""
        return self.query_one("#segments", LiveTable)

    # -- load and show ----------------------------------------------------------------------

    def load(self, host: ConsoleHost) -> TopicRows:
        latest = host.latest_plan
        plan = latest.plan if latest is not None and latest.covers(self.topic) else None
        with host.reading() as broker:
            data = load_topic(broker, self.topic, plan)
            with broker.catalog.read():
                cycles = Journal(broker.catalog).cycles(limit=CYCLE_HISTORY)
                history = load_history(broker.catalog, cycles, data.now, topic=self.topic)
        # The theme's variables are a dict the UI thread replaces, never mutates.
        return topic_rows(data, host.engine_status(), Palette.of(self.app), topic_chart(history))

    def show(self, data: TopicRows) -> None:
        self.query_one("#policy", Static).update(data.summary)
        self._fill("partitions", data.partitions, data.partitions_note)
        self._fill("groups", data.groups, data.groups_note)
        self._fill("segments", data.segments, None)
        self.query_one("#topic-history", Chart).show(data.history)
        self._segments_note = data.segments_note
        self._show_segments_note()

    def _fill(self, name: str, rows: list[LiveRow], note: str | None) -> None:
        """Hand ``rows`` to the table ``name``; its box gets ``note`` as subtitle."""
        box = self.query_one(f"#{name}-box", Vertical)
        box.query_one(LiveTable).show(rows)
        if note is not None:
            box.border_subtitle = note
        if box.has_class("small"):
            # Small boxes fit their rows (up to a few), leaving the rest to the segments.
            box.styles.height = BOX_CHROME + max(1, min(len(rows), SMALL_TABLE_ROWS))

    def _show_segments_note(self) -> None:
        note = "planning… (waits for Spark)" if self._planning else self._segments_note
        self.query_one("#segments-box", Vertical).border_subtitle = note

    # -- focus ------------------------------------------------------------------------------

    def focused_topic(self) -> str | None:
        return self.topic

    def focused_group(self) -> tuple[str, str] | None:
        """The group under the groups table's cursor (the group dialogs name it, so a
        key pressed while the focus is elsewhere still acts on what is shown)."""
        group = self.query_one("#groups", LiveTable).selected_key
        return None if group is None else (self.topic, group)

    # -- plan now ---------------------------------------------------------------------------

    def action_plan_now(self) -> None:
        if self._planning:
            self.notify("a plan of this topic is already running", severity="warning")
            return
        self._planning = True
        self._show_segments_note()
        self._plan_now()

    @work(thread=True, exit_on_error=False, group="topic-plan")
    def _plan_now(self) -> None:
        try:
            self.ebb.host.plan([self.topic])
        except Exception as error:  # noqa: BLE001 - a failed plan is a notification
            self.post_message(self.PlanFinished(describe_error(error)))
            return
        self.post_message(self.PlanFinished(None))

    def on_topic_screen_plan_finished(self, message: PlanFinished) -> None:
        self._planning = False
        self._show_segments_note()
        if message.error is not None:
            self.notify(message.error, title=f"Plan {self.topic}", severity="error", timeout=10, markup=False)
        self.ebb.refresh_view()
