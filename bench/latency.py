"""One-shot latency: ``ebb explain`` and ``ebb prune --dry-run``, cold against warm.

On a fresh data directory with one small topic (``--partitions``, ``--records``), each
command as a whole ``ebb`` process (what an operator waits for), ``--runs`` times:

- *cold*: nothing running (``ebb spark stop`` before each run): the command starts the
  data directory's Spark service and waits for it;
- *warm*: ``ebb engine`` running on the data directory (attached to the service, its
  first cycle done, and the service's own warm-up, engine/prune/spark_warmup.py,
  ended: a server as an operator finds it some seconds after it started); the
  command attaches to the warm server;
- *in-process*: ``--spark-master local[*]``, a JVM of the command's own (what every
  command did before the service), for reference.

Printed: each median (and min, max), warm / cold and warm / in-process, against the
targets of issue 13 (warm explain at most 0.2 of cold, and at most 1.5 s). Then where a
warm one-shot's time goes, from one instrumented run in a subprocess: Python start and
imports of the CLI, then (with the service's plan desk, engine/prune/plan_desk.py) the
snapshot and the plan at the desk, or (without) the import of the Spark Connect
client, attaching a session, the snapshot and the plan on Spark; and leaving.

The console (``--console-runs`` launches each way, headless at 120x40, its Spark and
schedule on, as ``ebb console`` runs them): seconds from launching its process to its
imports done, the dashboard showing the topics, its Spark session ready and its first
prune cycle journaled; cold (no server: the console starts it) against warm (the
server left up and warm by the engine above).

Run from the repository root: ``python bench/latency.py`` (about 5-10 minutes on the
2-core machine, most of it the cold runs), ``python bench/latency.py --runs 3``. The
machine's load average is printed before and after: other processes skew every
number. Every server and engine this starts, it stops. It only reports.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from engine.prune.plan_desk import read_desk
from engine.prune.session import MASTER_ENV
from engine.prune.spark_service import ServiceDir

REPO = Path(__file__).resolve().parent.parent
WARM_UP_WAIT_SECONDS = 600.0

#: the whole ``ebb`` process, instrumented; prints one JSON line of phase times (s)
_PHASES = """
import json, sys, time
from pathlib import Path
began = time.monotonic()
marks = {}
from console.cli.prune import _explained
from engine.broker import Broker
from engine.prune.pruner import Pruner
from engine.prune.session import spark_engine_for
marks["imports (CLI, engine, pyarrow)"] = time.monotonic()
with Broker(Path(sys.argv[1])) as broker:
    spark = spark_engine_for(broker.config, broker.data)
    pruner = Pruner(broker, spark)
    if pruner.use_desk():  # as `ebb explain` does: the service's plan desk, if it has one
        marks["find the service's plan desk"] = time.monotonic()
    else:
        import pyspark.sql.connect.session
        marks["import Spark Connect client"] = time.monotonic()
        spark.session()
        marks["attach session"] = time.monotonic()
    from engine.prune.record_times import StoreRecordTimes
    from engine.prune.snapshot import build_snapshot
    snapshot = build_snapshot(broker.catalog, StoreRecordTimes(broker.data), defaults=broker.config.policy_defaults,
                              now=broker.clock(), topics=["demo"], overrides=None)
    marks["snapshot (+pandas, pa.array)"] = time.monotonic()
    if pruner.desk is not None and (plan := pruner.desk.plan(snapshot)) is not None:
        marks["plan at the desk"] = time.monotonic()
    else:
        plan = pruner.planner.plan(snapshot)
        marks["plan on Spark"] = time.monotonic()
    _explained(plan, None)
    spark.stop()
    marks["leave"] = time.monotonic()
last, phases = began, {}
for name, at in marks.items():
    phases[name], last = at - last, at
print(json.dumps(phases))
"""

#: the console as ``ebb console`` runs it (headless, 120x40), its Spark and schedule
#: on; prints one JSON line: epoch seconds of each milestone
_CONSOLE = """
import time
marks = {"process started": time.time()}
import asyncio, json, os, sys
from pathlib import Path
os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
from textual.css.query import NoMatches
from console.app import EbbApp
from console.host import ConsoleHost
from console.settings import ConsoleSettings
from console.widgets.live_table import LiveTable
marks["imports"] = time.time()
host = ConsoleHost(Path(sys.argv[1]))
app = EbbApp(host, settings=ConsoleSettings(Path(sys.argv[2])))

def dashboard() -> bool:
    try:
        return app.screen.query_one("#topics", LiveTable).row_count > 0
    except NoMatches:
        return False

async def until(what, condition):
    deadline = time.monotonic() + 600
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)
    marks[what] = time.time()

async def main():
    async with app.run_test(size=(120, 40)):
        await until("dashboard (topics shown)", dashboard)
        await until("Spark ready", lambda: host.engine_status().session in ("ready", "failed"))
        await until("first cycle journaled", lambda: host.engine_status().last_report is not None)
        report = host.engine_status().last_report
        if report.status != "done":
            raise SystemExit(f"the first cycle did not finish: {report.status} {report.error or ''}")

try:
    asyncio.run(main())
finally:
    host.close()
print(json.dumps(marks))
"""


def env() -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k != MASTER_ENV}, "PYTHONPATH": str(REPO)}


def ebb(data: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "console.cli.main", "--data-dir", str(data), *args]


def run(data: Path, *args: str) -> float:
    """Wall seconds of one ``ebb`` process; it must succeed."""
    began = time.monotonic()
    done = subprocess.run(ebb(data, *args), check=False, capture_output=True, env=env(), cwd=REPO)
    took = time.monotonic() - began
    if done.returncode != 0:
        raise SystemExit(f"`ebb {' '.join(args)}` failed: {done.stderr.decode().strip()}")
    return took


def make_topic(data: Path, partitions: int, records: int) -> None:
    run(data, "topic", "create", "demo", "--partitions", str(partitions), "--segment-size", "4 KiB",
        "--retention-time", "1h")  # fmt: skip
    run(data, "produce", "demo", "--count", str(records), "--size", "100")


def start_engine(data: Path) -> subprocess.Popen[bytes]:
    """``ebb engine`` attached to the service, once its first cycle is done."""
    engine = subprocess.Popen(
        ebb(data, "engine", "--prune-interval", "1h", "--json"), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env=env(), cwd=REPO,
    )  # fmt: skip
    assert engine.stdout is not None
    first = engine.stdout.readline()  # the first cycle's line
    if not first:
        raise SystemExit("`ebb engine` exited before its first cycle")
    return engine


def stop_engine(engine: subprocess.Popen[bytes]) -> None:
    engine.send_signal(signal.SIGTERM)
    try:
        engine.wait(60)
    except subprocess.TimeoutExpired:
        engine.kill()
        engine.wait()


def wait_warmed_up(data: Path) -> float:
    """Seconds until the service's warm-up (engine/prune/spark_warmup.py) has ended and
    its plan desk (engine/prune/plan_desk.py) listens."""
    began = time.monotonic()
    while not ServiceDir(data).warmed_up() or read_desk(ServiceDir(data)) is None:
        if time.monotonic() - began > WARM_UP_WAIT_SECONDS:
            raise SystemExit(f"the Spark service did not warm up within {WARM_UP_WAIT_SECONDS:g} s")
        time.sleep(0.5)
    return time.monotonic() - began


def console_milestones(data: Path, settings: Path) -> dict[str, float] | None:
    """Seconds from launching the console until each milestone of :data:`_CONSOLE`;
    None if it failed (said on stdout)."""
    # A file, not ``python -c``: pyspark's Connect client takes a main module without
    # a file for a doctest run, and the console failed silently under -c (measured).
    script = settings.parent / "console_milestones.py"
    script.write_text(_CONSOLE)
    began = time.time()
    done = subprocess.run(
        [sys.executable, str(script), str(data), str(settings)], check=False, capture_output=True, env=env(),
        cwd=REPO,
    )  # fmt: skip
    if done.returncode != 0:
        output = (done.stderr or done.stdout).decode().strip()[-500:]
        print(f"the console failed (status {done.returncode}), run not counted: {output}", flush=True)
        return None
    marks = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return {name: at - began for name, at in marks.items()}


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def stats(times: list[float]) -> str:
    return f"median {statistics.median(times):6.2f} s  (min {min(times):.2f}, max {max(times):.2f})"


def short(times: list[float]) -> str:
    return f"{statistics.median(times):.2f} ({min(times):.2f}, {max(times):.2f})"


COMMANDS = {"explain": ("explain", "demo"), "prune --dry-run": ("prune", "--dry-run")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--records", type=int, default=400)
    parser.add_argument("--console-runs", type=int, default=2, help="console launches, cold and warm (default 2)")
    parser.add_argument("--no-in-process", action="store_true", help="skip the --spark-master local[*] runs")
    args = parser.parse_args()
    print(f"load average before: {load()}")
    with tempfile.TemporaryDirectory(prefix="ebb-latency-") as tmp:
        data = Path(tmp) / "data"
        make_topic(data, args.partitions, args.records)
        settings = Path(tmp) / "console-settings.json"
        results: dict[str, dict[str, list[float]]] = {name: {} for name in COMMANDS}
        console: dict[str, list[dict[str, float]]] = {"cold": [], "warm": []}
        try:
            for name, command in COMMANDS.items():
                cold_times = []
                for _ in range(args.runs):
                    run(data, "spark", "stop")
                    cold_times.append(run(data, *command))
                results[name]["cold"] = cold_times
            for _ in range(args.console_runs):
                run(data, "spark", "stop")
                if (milestones := console_milestones(data, settings)) is not None:
                    console["cold"].append(milestones)
            run(data, "spark", "stop")
            engine = start_engine(data)
            try:
                warmed = wait_warmed_up(data)
                for name, command in COMMANDS.items():
                    run(data, *command)  # not counted: this command's first plan on the server
                    results[name]["warm"] = [run(data, *command) for _ in range(args.runs)]
                began = time.monotonic()
                done = subprocess.run(
                    [sys.executable, "-c", _PHASES, str(data)], check=False, capture_output=True, env=env(), cwd=REPO
                )
                wall = time.monotonic() - began
                phases = json.loads(done.stdout) if done.returncode == 0 else {"failed": done.stderr.decode()[-300:]}
                if done.returncode == 0:
                    phases = {"interpreter start and exit": wall - sum(phases.values()), **phases}
            finally:
                stop_engine(engine)
            # The engine gone, its server stays up, warm, for the console to attach to.
            for _ in range(args.console_runs):
                if (milestones := console_milestones(data, settings)) is not None:
                    console["warm"].append(milestones)
            if not args.no_in_process:
                for name, command in COMMANDS.items():
                    results[name]["in-process"] = [
                        run(data, *command, "--spark-master", "local[*]") for _ in range(args.runs)
                    ]
        finally:
            run(data, "spark", "stop")
    print(f"load average after:  {load()}")
    print(f"\n{args.partitions}-partition topic, {args.records} records; {args.runs} runs of each whole `ebb` process")
    for name, by_mode in results.items():
        print(f"\nebb {name}")
        for mode, times in by_mode.items():
            print(f"  {mode:<11} {stats(times)}")
        warm, cold = statistics.median(by_mode["warm"]), statistics.median(by_mode["cold"])
        line = f"  warm / cold {warm / cold:.3f} (target <= 0.2)"
        if "in-process" in by_mode:
            line += f"; warm / in-process {warm / statistics.median(by_mode['in-process']):.3f}"
        print(line + f"; warm {'<=' if warm <= 1.5 else '>'} 1.5 s")
    print(
        f"\n(warm runs began once the service's warm-up had ended and its plan desk listened, "
        f"{warmed:.1f} s after the engine's first cycle)"
    )
    print(f"\nthe console, launch to each milestone: median of {args.console_runs} (min, max)")
    print(f"  {'':<28}{'cold (no server)':>22}{'warm (server up)':>22}{'warm / cold':>13}")
    for milestone in console["cold"][0] if console["cold"] and console["warm"] else ():
        if milestone == "process started":
            continue
        cold_s = [m[milestone] for m in console["cold"]]
        warm_s = [m[milestone] for m in console["warm"]]
        print(
            f"  {milestone:<28}{short(cold_s):>22}{short(warm_s):>22}"
            f"{statistics.median(warm_s) / statistics.median(cold_s):>13.3f}"
        )
    print("\nwhere a warm one-shot explain's time goes (one instrumented process):")
    for phase, seconds in phases.items():
        print(f"  {phase:<32} {seconds:6.2f} s" if isinstance(seconds, float) else f"  {phase}: {seconds}")


if __name__ == "__main__":
    main()
