"""Console responsiveness: time to first paint, and main-thread time of a refresh, per view.

Two catalogs, one after the other, each in one headless app
(``EbbApp(...).run_test(size=(120, 40))`` on ``ConsoleHost(root, engine=False,
clock=fixed)``, no live refresh, no file watching):

- *demo*: ``engine/demo.py`` started on a fresh data directory, its traffic run for
  ``--traffic`` seconds (seeding, backfill, sends and reads), then stopped;
- *synthetic*: ``bench/synthetic_catalog.py`` (default 1,000 topics, 10,000
  partitions of 100 segments = 1M segments), bulk-written once into ``--catalog DIR``
  (default under /tmp) and reused by later runs while the directory holds a complete
  catalog of the same size and seed. A catalog this run built under the default
  directory is removed at the end unless ``--keep``; a ``--catalog`` named on purpose
  is always kept.

What is measured (every view is one entry of :data:`VIEWS`):

- *first paint*: wall time from launch (the host and the app created, then
  ``run_test``) until the Overview's topics table has rows, with the first ``show``
  (UI thread) and ``load`` (worker) the app records (``app.last_show_ms``,
  ``app.last_load_ms``); and until every row's backlog and state are filled in (the
  rows come first, console/model/overview.py): the time a first paint waiting for
  the whole load would take, measured in the same run; and what a fresh process
  spends importing the console before that (launch -> first frame is their sum);
  ``--first-paint-only`` stops there;
- per view, *open*: wall time from ``switch_mode`` (what its key does) or
  ``open_topic`` until its first ``show`` is done, with that show and load (a first
  show builds the table);
- per view, ``--refreshes`` refreshes (``app.refresh_view()``, one at a time): the
  median and max main-thread ``show`` ms, and the median worker ``load`` ms; twice:
  with the data unchanged (the table's diff finds nothing to update), and with the
  fixed clock stepped by one hour and a second before each refresh, so that every
  age cell changes (what a live console's refresh does to a catalog of young data);
- with each show, ``cpu``: the main thread's CPU time (``time.thread_time``) from the
  show's start until the app is idle again. ``show`` alone misses what Textual does
  after it on the same thread (a DataTable measures new rows' and updated cells'
  widths in its Idle handler, then renders); ``cpu`` includes it, and the bench's
  own waiting (its floor, measured with nothing to do, is printed). Being CPU time,
  it is less skewed by other processes than wall time.

Ratios: each view's median refresh ``show`` and ``cpu`` against the 100 ms target of
issue 4, and the synthetic catalog against the demo catalog (the baseline, same
process). A view whose median refresh ``show`` or ``cpu`` is above the target is
profiled (cProfile of the main thread over one more refresh, from its show until
idle, in the busier variant; ``--profile``: every view). The machine's load average
is printed before and after: other processes skew every number. The script only
reports; it never fails on a slow result.

Run from the repository root: ``python -m bench.console --keep`` (the first run builds
the 1M catalog, 6 s to a minute; ``--keep`` caches it; a full run took 16 minutes on
the 2-core machine, most of it the tables' Idle handlers that ``cpu`` shows), or
``python -m bench.console --partitions 1000 --segments 10 --topics 100`` (a quick
check).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import inspect
import io
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

import textual
from textual.css.query import NoMatches
from textual.pilot import Pilot
from textual.worker import WorkerCancelled

from bench.synthetic_catalog import generate
from console.app import EbbApp
from console.host import ConsoleHost
from console.messages import ViewLoaded
from console.settings import ConsoleSettings
from console.widgets.live_table import LiveTable
from engine.catalog.catalog import Catalog
from engine.clock import now_ms
from engine.demo import DemoTraffic

TARGET_MS = 100.0
TERMINAL = (120, 40)
#: the clock step of the "ages change" refreshes
STEP_MS = 3_600_000 + 1_000
#: how long a wait for a view's show may take before the run is abandoned
WAIT_SECONDS = 600.0
#: the marker of a complete synthetic catalog (written last)
MARKER = "bench-console.json"


# -- views -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class View:
    """A view to measure: its name and how to open it (given the biggest topic's
    name); None for the view the console opens on, whose opening is the first paint."""

    name: str
    open: Callable[[Pilot, str], Awaitable[None]] | None


def _mode(mode: str) -> Callable[[Pilot, str], Awaitable[None]]:
    """What the view's key (1-5) does, without the Pilot's own waits around a key press."""

    async def switch(pilot: Pilot, _topic: str) -> None:
        await pilot.app.switch_mode(mode)

    return switch


async def _open_topic(pilot: Pilot, topic: str) -> None:
    pilot.app.open_topic(topic)  # type: ignore[attr-defined]


#: the views, in the order they are opened
VIEWS: tuple[View, ...] = (
    View("overview", None),
    View("topic", _open_topic),
    View("groups", _mode("groups")),
    View("quotas", _mode("quotas")),
    View("journal", _mode("journal")),
    View("engine", _mode("engine")),
)


# -- catalogs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CatalogUnderTest:
    name: str
    root: Path
    #: the console's fixed clock
    now: int
    #: what the catalog holds, in words
    description: str


def demo_catalog(parent: Path, traffic_seconds: float) -> CatalogUnderTest:
    root = parent / "demo"
    demo = DemoTraffic(root)
    started = time.perf_counter()
    demo.start()
    start_ms = (time.perf_counter() - started) * 1000
    time.sleep(traffic_seconds)
    stopped = demo.stop()
    counters = demo.counters.values()
    produced, consumed = sum(c.produced for c in counters), sum(c.consumed for c in counters)
    errors = sum(len(c.errors) for c in counters)
    shape = catalog_shape(root)
    return CatalogUnderTest(
        "demo",
        root,
        now_ms(),
        f"{shape}; DemoTraffic.start() returned in {start_ms:.1f} ms, {traffic_seconds:g} s of traffic: "
        f"{produced:,} records sent, {consumed:,} read, {errors} errors, stopped {'cleanly' if stopped else 'LATE'}",
    )


def synthetic_catalog(args: argparse.Namespace) -> tuple[CatalogUnderTest, bool]:
    """The synthetic catalog, reused when complete; returns it and whether it was built now."""
    root = args.catalog
    wanted = {"partitions": args.partitions, "segments": args.segments, "topics": args.topics, "seed": args.seed}
    marker = root / MARKER
    try:
        meta = json.loads(marker.read_text())
    except (OSError, ValueError):
        meta = None
    if meta is not None and {k: meta.get(k) for k in wanted} == wanted:
        return CatalogUnderTest("synthetic", root, meta["now"], f"{catalog_shape(root)}; reused {root}"), False
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    print(f"building the synthetic catalog in {root} ...", flush=True)
    started = time.perf_counter()
    data = generate(args.partitions, args.segments, args.topics, seed=args.seed)
    catalog = Catalog.open(root / "catalog.db")
    try:
        data.write(catalog)
    finally:
        catalog.close()
    built_s = time.perf_counter() - started
    marker.write_text(json.dumps({**wanted, "now": data.now}))
    return CatalogUnderTest(
        "synthetic", root, data.now, f"{catalog_shape(root)}; built in {built_s:.0f} s in {root}"
    ), True


def catalog_shape(root: Path) -> str:
    catalog = Catalog.open(root / "catalog.db")
    try:
        topics, partitions, segments, groups = catalog.db.execute(
            "SELECT (SELECT COUNT(*) FROM topics), (SELECT COUNT(*) FROM partitions),"
            " (SELECT COUNT(*) FROM segments), (SELECT COUNT(*) FROM groups)"
        ).fetchone()
    finally:
        catalog.close()
    return f"{topics:,} topics, {partitions:,} partitions, {segments:,} segments, {groups:,} groups"


def biggest_topic(root: Path) -> str:
    """The topic with the most segments (the Topic view's worst case)."""
    catalog = Catalog.open(root / "catalog.db")
    try:
        return catalog.db.execute(
            "SELECT topic FROM segments GROUP BY topic ORDER BY COUNT(*) DESC, topic LIMIT 1"
        ).fetchone()[0]
    finally:
        catalog.close()


# -- measuring ----------------------------------------------------------------------------------


class Clock:
    """The console's clock: fixed, stepped on purpose between refreshes."""

    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class ProbedApp(EbbApp):
    """The console, noting when each view's ``show`` ended (wall clock) and the main
    thread's CPU time when it began; with :attr:`profiler` set, profiling starts with
    the next show (and goes on until the bench stops it)."""

    # A relative CSS_PATH is read next to the subclass's module: point at EbbApp's.
    CSS_PATH = str(Path(inspect.getfile(EbbApp)).parent / str(EbbApp.CSS_PATH))
    show_ended: float = 0.0
    show_began_cpu: float = 0.0
    profiler: cProfile.Profile | None = None

    def on_view_loaded(self, message: ViewLoaded) -> None:
        message.prevent_default()  # EbbApp's handler runs once: here, inside the probe
        if self.profiler is not None:
            self.profiler.enable()
        began_cpu = time.thread_time()
        super().on_view_loaded(message)
        self.show_began_cpu, self.show_ended = began_cpu, time.perf_counter()


async def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.perf_counter() + WAIT_SECONDS
    while not condition():
        if time.perf_counter() > deadline:
            raise TimeoutError(f"timed out after {WAIT_SECONDS:g} s waiting for {what}")
        await asyncio.sleep(0.001)


def has_rows(app: EbbApp) -> bool:
    try:
        return app.screen.query_one("#topics", LiveTable).row_count > 0
    except NoMatches:
        return False


def table_rows(app: EbbApp) -> int | None:
    tables = app.screen.query(LiveTable)
    return sum(t.row_count for t in tables) if tables else None


async def settle(pilot: Pilot) -> None:
    """Until no load is on its way (the worker, then its message) and the app is idle.
    Event-driven (no polling), so that it adds little to the main thread's CPU time."""
    for _ in range(2):
        with suppress(WorkerCancelled):  # a load replaced by a newer one (exclusive workers)
            await pilot.app.workers.wait_for_complete()
        await pilot.pause()


async def shown(pilot: Pilot, action: Callable[[], Awaitable[None] | None], what: str) -> dict[str, float]:
    """Run ``action`` (which leads to a view's load and show), wait for the show and
    then for the app to be idle. Returns ms: ``wall`` from the action to the show's
    end, ``show`` (UI thread) and ``load`` (worker) as the app records them, and
    ``cpu``: the main thread's CPU time from the show's start until idle, i.e. the
    show and what Textual does after it (layout, column widths of new rows, a render),
    with the waiting's own small cost."""
    app: ProbedApp = pilot.app  # type: ignore[assignment]
    await settle(pilot)
    app.last_show_ms = None
    begun = time.perf_counter()
    result = action()
    if result is not None:
        await result
    deadline = begun + WAIT_SECONDS
    while app.last_show_ms is None:
        if time.perf_counter() > deadline:
            raise TimeoutError(f"timed out after {WAIT_SECONDS:g} s waiting for {what}")
        await settle(pilot)
    for _ in range(2):  # the widgets' Idle handlers (a DataTable measures columns there)
        await pilot.pause()
    assert app.last_load_ms is not None
    return {
        "wall_ms": (app.show_ended - begun) * 1000,
        "show_ms": app.last_show_ms,
        "load_ms": app.last_load_ms,
        "cpu_ms": (time.thread_time() - app.show_began_cpu) * 1000,
    }


async def refreshes(pilot: Pilot, clock: Clock, count: int, step_ms: int) -> dict[str, float]:
    runs = []
    for _ in range(count):
        clock.now += step_ms
        runs.append(await shown(pilot, pilot.app.refresh_view, "a refresh"))  # type: ignore[attr-defined]
    shows = [r["show_ms"] for r in runs]
    return {
        "show_median": statistics.median(shows),
        "show_max": max(shows),
        "cpu_median": statistics.median(r["cpu_ms"] for r in runs),
        "load_median": statistics.median(r["load_ms"] for r in runs),
    }


async def idle_cpu(pilot: Pilot) -> float:
    """The main thread's CPU ms of the waiting alone (the floor under every ``cpu``)."""
    await settle(pilot)
    began = time.thread_time()
    await settle(pilot)
    await pilot.pause()
    return (time.thread_time() - began) * 1000


async def profile_refresh(pilot: Pilot, clock: Clock, step_ms: int, lines: int) -> str:
    """cProfile of the main thread over one more refresh of the visible view, from its
    ``show`` until idle (the show and Textual's work after it)."""
    app: ProbedApp = pilot.app  # type: ignore[assignment]
    profiler = app.profiler = cProfile.Profile()
    try:
        clock.now += step_ms
        await shown(pilot, app.refresh_view, "a profiled refresh")
    finally:
        profiler.disable()
        app.profiler = None
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).strip_dirs()
    stats.sort_stats("cumulative").print_stats(lines)
    stats.sort_stats("tottime").print_stats(lines)
    return out.getvalue()


async def measure(subject: CatalogUnderTest, args: argparse.Namespace, settings: Path) -> dict[str, Any]:
    clock = Clock(subject.now)
    topic = biggest_topic(subject.root)
    result: dict[str, Any] = {"catalog": subject.name, "description": subject.description, "topic": topic, "views": {}}
    begun = time.perf_counter()
    host = ConsoleHost(subject.root, engine=False, clock=clock)
    app = ProbedApp(host, live=False, watch=False, settings=ConsoleSettings(settings))
    try:
        async with app.run_test(size=TERMINAL) as pilot:
            await until(lambda: has_rows(app), "the first paint")
            # The rows came with a show, which noted its times (and later shows only replace them).
            assert app.last_show_ms is not None and app.last_load_ms is not None
            first = {
                "wall_ms": (time.perf_counter() - begun) * 1000,
                "show_ms": app.last_show_ms,
                "load_ms": app.last_load_ms,
            }
            await pilot.pause()
            first["cpu_ms"] = (time.thread_time() - app.show_began_cpu) * 1000
            await until(lambda: app.screen.filled, "the Overview's backlog")  # type: ignore[attr-defined]
            first["filled_ms"] = (time.perf_counter() - begun) * 1000
            first["fill_show_ms"], first["fill_load_ms"] = app.last_show_ms, app.last_load_ms
            result["first_paint"] = first
            result["idle_cpu_ms"] = await idle_cpu(pilot)
            for view in VIEWS if not args.first_paint_only else ():
                if view.open is None:
                    opened = first
                else:
                    opened = await shown(pilot, functools.partial(view.open, pilot, topic), f"the {view.name} view")
                times: dict[str, Any] = {
                    "open": opened,
                    "rows": table_rows(app),
                    "same": await refreshes(pilot, clock, args.refreshes, 0),
                    "ages": await refreshes(pilot, clock, args.refreshes, STEP_MS),
                }
                busier = max(("same", "ages"), key=lambda k: times[k]["cpu_median"])
                if args.profile or max(times[busier]["show_median"], times[busier]["cpu_median"]) > TARGET_MS:
                    step = 0 if busier == "same" else STEP_MS
                    times["profile"] = {
                        "variant": busier,
                        "text": await profile_refresh(pilot, clock, step, args.profile_lines),
                    }
                result["views"][view.name] = times
                print(f"  {subject.name:<9} {view.name:<9} measured", flush=True)
    finally:
        host.close()
    return result


# -- report ------------------------------------------------------------------------------------------


def fmt_load(values: tuple[float, float, float]) -> str:
    return " ".join(f"{v:.2f}" for v in values)


def ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def ratio(part: float, whole: float) -> str:
    return f"{part / whole:.2f}" if whole else "-"


def report(results: list[dict[str, Any]]) -> None:
    for r in results:
        first = r["first_paint"]
        print()
        print(f"{r['catalog']} catalog: {r['description']}")
        print(
            f"  first paint (launch: host and app created -> Overview rows): {first['wall_ms']:.0f} ms wall; "
            f"first show {first['show_ms']:.1f} ms, main-thread CPU {first['cpu_ms']:.1f} ms, load "
            f"{first['load_ms']:.1f} ms; backlog and state filled at {first['filled_ms']:.0f} ms "
            f"(show {first['fill_show_ms']:.1f} ms, whole load {first['fill_load_ms']:.1f} ms; rows first: "
            f"{ratio(first['wall_ms'], first['filled_ms'])} of the time to a filled table)"
        )
        print(
            f"  Topic view on {r['topic']}. ms; show = UI thread in show(); cpu = main-thread CPU from show() "
            f"until idle (floor {r['idle_cpu_ms']:.1f}: the waiting alone); load = worker thread"
        )
        print(
            f"  {'':<16} | {'open (first show)':^32} | {'refresh, same data (median)':^32} | "
            f"{'refresh, ages change (median)':^32}"
        )
        columns = f"{'show':>8}{'max':>8}{'cpu':>8}{'load':>8}"
        print(f"  {'view':<9}{'rows':>7} | {'wall':>8}{'show':>8}{'cpu':>8}{'load':>8} | {columns} | {columns}")
        for name, v in r["views"].items():
            o = v["open"]
            rows = "-" if v["rows"] is None else f"{v['rows']:,}"
            cells = [f"{o['wall_ms']:8.1f}{o['show_ms']:8.1f}{o['cpu_ms']:8.1f}{o['load_ms']:8.1f}"]
            for k in ("same", "ages"):
                x = v[k]
                cells.append(
                    f"{x['show_median']:8.1f}{x['show_max']:8.1f}{x['cpu_median']:8.1f}{x['load_median']:8.1f}"
                )
            print(f"  {name:<9}{rows:>7} | " + " | ".join(cells))
    baseline, others = results[0], results[1:]
    for other in others:
        b_name, o_name = baseline["catalog"], other["catalog"]
        print()
        print(
            f"ratios: {o_name} against the {b_name} catalog (baseline, same process) and against the "
            f"{TARGET_MS:.0f} ms target; main-thread ms"
        )
        headers = ("refresh show, ages change", "refresh cpu, ages change", "first show")
        print(f"  {'':<9} " + " | ".join(f"{h:^38}" for h in headers))
        columns = f"{b_name:>9}{o_name:>11}{'ratio':>8}{'/target':>10}"
        print(f"  {'view':<9} " + " | ".join([columns] * len(headers)))
        for name, v in other["views"].items():
            base = baseline["views"].get(name)
            pairs = (
                (v["ages"]["show_median"], base and base["ages"]["show_median"]),
                (v["ages"]["cpu_median"], base and base["ages"]["cpu_median"]),
                (v["open"]["show_ms"], base and base["open"]["show_ms"]),
            )
            cells = [f"{ms(b):>9}{o:11.1f}{ratio(o, b) if b else '-':>8}{ratio(o, TARGET_MS):>10}" for o, b in pairs]
            print(f"  {name:<9} " + " | ".join(cells))
        b_first, o_first = baseline["first_paint"], other["first_paint"]
        print(
            f"  time to first paint (wall): {b_first['wall_ms']:.0f} ms {b_name}, {o_first['wall_ms']:.0f} ms "
            f"{o_name}, ratio {o_first['wall_ms'] / b_first['wall_ms']:.2f}"
        )
    for r in results:
        for name, v in r["views"].items():
            if "profile" in v:
                print()
                print(f"profile: {r['catalog']} catalog, {name} view, one refresh ({v['profile']['variant']}):")
                print(v["profile"]["text"])


#: fresh processes timed importing the console
IMPORT_RUNS = 3


def import_ms() -> float:
    """What ``ebb console`` spends importing before it creates the host and the app,
    timed in a fresh interpreter (this one has imported everything already)."""
    code = (
        "import time; began = time.perf_counter(); import console.app, console.cli.console_cmd; "
        "print((time.perf_counter() - began) * 1000)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(done.stdout)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10_000, help="synthetic partitions in all (default 10000)")
    parser.add_argument("--segments", type=int, default=100, help="segments per partition (default 100)")
    parser.add_argument("--topics", type=int, default=None, help="synthetic topics (default: partitions / 10)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic catalog (default 0)")
    parser.add_argument(
        "--catalog",
        type=Path,
        default=None,
        help="directory of the synthetic catalog, reused when complete, always kept "
        "(default: /tmp/ebb-bench-console-P-S-T-seed, removed unless --keep)",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep a synthetic catalog built under the default directory"
    )
    parser.add_argument("--refreshes", type=int, default=5, help="refreshes per view and variant (default 5)")
    parser.add_argument(
        "--traffic", type=float, default=5.0, help="seconds of demo traffic before measuring (default 5)"
    )
    parser.add_argument("--profile", action="store_true", help="profile every view's refresh, not only slow ones")
    parser.add_argument("--profile-lines", type=int, default=25, help="functions per profile listing (default 25)")
    parser.add_argument(
        "--first-paint-only", action="store_true", help="measure the first paint of each catalog, no view refreshes"
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON after the report")
    args = parser.parse_args()
    if args.topics is None:
        args.topics = max(1, args.partitions // 10)
    if args.partitions < 1 or args.segments < 1 or args.refreshes < 1 or not 1 <= args.topics <= args.partitions:
        parser.error("need --partitions, --segments, --refreshes >= 1 and 1 <= --topics <= --partitions")
    args.named_catalog = args.catalog is not None
    if args.catalog is None:
        args.catalog = Path(tempfile.gettempdir()) / (
            f"ebb-bench-console-{args.partitions}-{args.segments}-{args.topics}-{args.seed}"
        )
    return args


def main() -> None:
    args = parse_args()
    load_before = os.getloadavg()
    print(
        f"console bench: {TERMINAL[0]}x{TERMINAL[1]} headless, Textual {textual.__version__}, "
        f"{os.cpu_count()} CPUs; load average {fmt_load(load_before)}",
        flush=True,
    )
    workdir = Path(tempfile.mkdtemp(prefix="bench-console-"))
    built = False
    try:
        demo = demo_catalog(workdir, args.traffic)
        synthetic, built = synthetic_catalog(args)
        results = [asyncio.run(measure(subject, args, workdir / "settings.json")) for subject in (demo, synthetic)]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if built and not args.keep and not args.named_catalog:
            shutil.rmtree(args.catalog, ignore_errors=True)
    imports = statistics.median(import_ms() for _ in range(IMPORT_RUNS))
    report(results)
    print()
    print(
        f"a fresh process imports the console in {imports:.0f} ms (median of {IMPORT_RUNS}): launch -> first "
        + ", ".join(f"{r['catalog']} {imports + r['first_paint']['wall_ms']:.0f} ms" for r in results)
    )
    load_after = os.getloadavg()
    print()
    print(f"load average {fmt_load(load_before)} before, {fmt_load(load_after)} after")
    if args.json:
        print(json.dumps({"load_before": load_before, "load_after": load_after, "results": results}, indent=2))


if __name__ == "__main__":
    main()
