"""Load: producers in several processes, consumers and the prune engine on one data
directory for minutes; append throughput with prune cycles against without them.

What runs (each in a process of its own, on one data directory):

- ``--producers`` producer processes (default 2). Each appends batches of
  ``--batch`` records of ``--record-size`` bytes through ``Broker.append``, round-robin
  over the topic's ``--partitions`` partitions (so the producers contend for the same
  partition file locks and for the SQLite write lock), and logs every acknowledged
  append to a side file: when it returned, its latency, its partition and offsets,
  and how long it waited for the partition lock and for ``BEGIN IMMEDIATE``.
- ``--consumers`` consumer processes (default 1): ``Broker.consume`` in a loop, as a
  reader group (a second consumer is a subscriber group), committing as they go.
- the prune engine: with ``--engine spark`` (the default) ``ebb engine
  --prune-interval INTERVAL`` in a subprocess (one JVM, its logs in the data
  directory); with ``--engine executor`` a process that every ``--interval`` builds
  the same kind of cut (each partition back under ``--max-partition-size``, oldest
  sealed segments first) and applies it through the executor, without Spark.
- a CLI probe (``--cli-probe``): real ``ebb`` commands (``topic describe``, ``consume
  --max 5``, ``log``) every few seconds, so that what a user would see under this
  contention is checked too; and ``ebb pause`` / ``ebb resume`` at window changes.

The topic is capped by ``max_partition_size`` with small segments, so every cycle
that runs deletes segments while the producers append.

Windows. After the engine's first cycle is journaled (the JVM start and first plan
take 15-40 s on a busy machine; nothing is measured before), the run alternates
windows of ``--window`` seconds, the first ``--settle`` seconds of each left out:

- ``cycles``: the engine runs and deletes;
- ``paused``: ``ebb pause``: the engine still snapshots, plans (Spark) and journals a
  cycle every interval, but deletes nothing;
- ``stopped``: the engine process (its whole process group, JVM included) is frozen
  with SIGSTOP, after taking the data directory's prune lock so that it is never
  frozen while applying a plan (holding a partition lock or the catalog write lock).
  It uses no CPU and touches nothing. SIGCONT and the lock's release end the window.

``--baseline`` chooses the windows without cycles: ``both`` (default: cycles,
paused, cycles, stopped, ...), ``pause`` or ``stop``. Same processes, same data
shape, same duration per window, alternating in one run so that machine noise hits
both sides. Records/s of a side = records acknowledged in its measured windows over
their total length; the ratio is cycles over each baseline.

A watchdog fails the run (exit status 1) if a producer or a consumer acknowledges
nothing for ``--stall`` seconds, or the engine journals no cycle for that long while
it is not frozen (its Python stacks, for producers and consumers, are dumped to their
stderr with faulthandler). At the end: every acknowledged record must be readable or
below its partition's log start; the children's stderr must hold no error line
("database is locked", ``OperationalError``, a traceback, ``ebb: error``); the journal
must hold no failed cycle. Any of these fails the run. It never fails on a slow
result: throughput is only reported.

Children's stats: lock waits are measured by wrapping ``FileLock.acquire`` (and
counting its failed non-blocking ``flock`` attempts: the retries) and the catalog's
``write_transaction`` (the time ``BEGIN IMMEDIATE`` waits on the busy timeout;
SQLite's own retries are not visible from Python) in the producer processes only.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from engine.broker import Broker
from engine.store.batch import NewRecord
from engine.store.lock import FileLock

#: the children run from the repository root, as ``python -m bench.load`` does
REPO = Path(__file__).resolve().parent.parent

TOPIC = "load"
STOP_FILE = "STOP"
#: what must never appear in a child's stderr (or a CLI probe's output)
ERROR_PATTERN = re.compile(
    r"database is locked|database table is locked|OperationalError|Traceback|ebb: error|^ERROR|"
    r"Fatal Python error|Exception",
    re.MULTILINE,
)
VALUE_PREFIX = re.compile(rb"^P(\d+):(\d{12})\|")


# -- children -------------------------------------------------------------------------------


def _stop_requested(run_dir: Path) -> bool:
    return (run_dir / STOP_FILE).exists()


def _value(producer: int, seq: int, size: int) -> bytes:
    head = b"P%d:%012d|" % (producer, seq)
    return (head + b"." * size)[:size] if size >= len(head) else head


@dataclass
class _Waits:
    lock_s: float = 0.0
    lock_retries: int = 0
    db_s: float = 0.0


def _instrument(waits: _Waits) -> None:
    """Time the partition lock and ``BEGIN IMMEDIATE`` of this process's appends."""
    import fcntl

    import engine.catalog.catalog as catalog_module
    import engine.store.lock as lock_module

    real_flock = fcntl.flock

    class _CountingFcntl:
        def __getattr__(self, name: str) -> Any:
            return getattr(fcntl, name)

        @staticmethod
        def flock(fd: int, op: int) -> None:
            try:
                real_flock(fd, op)
            except BlockingIOError:
                waits.lock_retries += 1
                raise

    lock_module.fcntl = _CountingFcntl()  # type: ignore[assignment]
    real_acquire = lock_module.FileLock.acquire

    def acquire(self: Any, timeout: float | None) -> None:
        t = time.perf_counter()
        try:
            real_acquire(self, timeout)
        finally:
            waits.lock_s += time.perf_counter() - t

    lock_module.FileLock.acquire = acquire  # type: ignore[method-assign]
    real_write = catalog_module.write_transaction

    @contextmanager
    def write_transaction(db: Any) -> Iterator[Any]:
        t = time.perf_counter()
        with real_write(db) as handle:
            waits.db_s += time.perf_counter() - t
            yield handle

    catalog_module.write_transaction = write_transaction


def _report_error(role: str, error: BaseException) -> None:
    """An error a child met: on its stderr (which the parent scans), whole."""
    print(f"ERROR {role}: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
    traceback.print_exc(file=sys.stderr)
    sys.stderr.flush()


def child_producer(args: argparse.Namespace) -> int:
    run_dir = Path(args.run_dir)
    waits = _Waits()
    _instrument(waits)
    broker = Broker(Path(args.data))
    partitions = broker.catalog.topic(TOPIC).partitions
    seq = 0
    turn = args.id  # producers start on different partitions
    with open(run_dir / f"producer-{args.id}.acks", "w", buffering=1) as out:
        while not _stop_requested(run_dir):
            partition = turn % partitions
            turn += 1
            records = [NewRecord(_value(args.id, seq + i, args.record_size), None, None) for i in range(args.batch)]
            before = (waits.lock_s, waits.lock_retries, waits.db_s)
            t0 = time.monotonic()
            try:
                result = broker.append(TOPIC, partition, records)
            except Exception as error:  # noqa: BLE001 - reported; the run fails on it
                _report_error(f"producer {args.id}", error)
                time.sleep(0.1)
                continue
            t1 = time.monotonic()
            out.write(
                f"{t1:.6f} {(t1 - t0) * 1000:.3f} {partition} {result.base_offset} {result.next_offset} {seq} "
                f"{(waits.lock_s - before[0]) * 1000:.3f} {waits.lock_retries - before[1]} "
                f"{(waits.db_s - before[2]) * 1000:.3f}\n"
            )
            seq += args.batch
    broker.close()
    return 0


def child_consumer(args: argparse.Namespace) -> int:
    run_dir = Path(args.run_dir)
    broker = Broker(Path(args.data))
    group = f"load-c{args.id}"
    bad = 0
    with open(run_dir / f"consumer-{args.id}.log", "w", buffering=1) as out:
        while not _stop_requested(run_dir):
            t0 = time.monotonic()
            try:
                consumed = broker.consume(TOPIC, group, max_records=args.max)
            except Exception as error:  # noqa: BLE001
                _report_error(f"consumer {args.id}", error)
                time.sleep(0.1)
                continue
            for item in consumed:
                if not VALUE_PREFIX.match(item.record.value):
                    bad += 1
                    if bad <= 5:
                        print(
                            f"ERROR consumer {args.id}: malformed record at {item.partition}/{item.record.offset}",
                            file=sys.stderr,
                            flush=True,
                        )
            t1 = time.monotonic()
            out.write(f"{t1:.6f} {(t1 - t0) * 1000:.3f} {len(consumed)}\n")
            if len(consumed) < args.max:
                time.sleep(0.02)
    broker.close()
    return 0


def prune_once(broker: Broker, cap: int, actor: str = "load") -> Any:
    """One cycle through the executor, without Spark: each partition cut back under
    ``cap`` bytes, oldest sealed segments first (what ``max_partition_size`` plans)."""
    from engine.prune.executor import execute
    from engine.prune.operations import cut_work

    cuts = {}
    for row in broker.catalog.partitions(TOPIC):
        segments = broker.catalog.segments(TOPIC, row.partition)
        total = sum(s.size_bytes for s in segments)
        cut = row.log_start_offset
        for s in segments[:-1]:
            if total <= cap:
                break
            total -= s.size_bytes
            cut = s.next_offset
        cuts[row.partition] = cut
    work = cut_work(broker, TOPIC, cuts)
    return execute(broker, [work], now=broker.clock(), trigger="schedule", actor=actor)


def child_pruner(args: argparse.Namespace) -> int:
    """``--engine executor``: a cycle every interval, one line per cycle on stdout."""
    run_dir = Path(args.run_dir)
    broker = Broker(Path(args.data))
    stopping = False

    def on_term(_signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    while not stopping and not _stop_requested(run_dir):
        begun = time.monotonic()
        try:
            result = prune_once(broker, args.cap)
            print(
                json.dumps(
                    {
                        "cycle_id": result.cycle_id,
                        "status": result.status,
                        "applied": result.applied,
                        "planned": result.planned,
                        "skipped": result.skipped,
                        "failed": result.failed,
                    }
                ),
                flush=True,
            )
        except Exception as error:  # noqa: BLE001
            _report_error("pruner", error)
        time.sleep(max(0.0, begun + args.interval - time.monotonic()))
    broker.close()
    return 0


def child_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=("producer", "consumer", "pruner"))
    parser.add_argument("--data", required=True)
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--id", type=int, default=0)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--record-size", type=int, default=200)
    parser.add_argument("--max", type=int, default=1000)
    parser.add_argument("--cap", type=int, default=4 << 20)
    parser.add_argument("--interval", type=float, default=2.0)
    args = parser.parse_args(argv)
    # A watchdog's SIGUSR1 dumps every thread's stack to stderr (a stall's diagnosis).
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    return {"producer": child_producer, "consumer": child_consumer, "pruner": child_pruner}[args.role](args)


# -- the parent ---------------------------------------------------------------------------------


def _child_env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(REPO) + (os.pathsep + path if path else "")}


def ebb_argv(data: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "console.cli.main", "--data-dir", str(data), *args]


@dataclass
class Child:
    name: str
    proc: subprocess.Popen
    stdout_path: Path
    stderr_path: Path
    #: where its progress shows (a file that grows); None: the journal's cycles
    progress_path: Path | None
    frozen: bool = False
    last_size: int = -1
    last_progress: float = field(default_factory=time.monotonic)


def spawn(name: str, argv: list[str], run_dir: Path, progress: Path | None, *, group: bool = False) -> Child:
    out = run_dir / f"{name}.stdout"
    err = run_dir / f"{name}.stderr"
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        proc = subprocess.Popen(
            argv,
            stdout=stdout,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            cwd=REPO,
            env=_child_env(),
            start_new_session=group,
        )
    return Child(name, proc, out, err, progress)


class Stalled(Exception):
    pass


@dataclass
class Window:
    mode: str
    #: measured span, monotonic seconds and epoch ms
    start: float
    end: float
    start_ms: int
    end_ms: int


@dataclass
class Ack:
    t: float
    latency_ms: float
    partition: int
    base: int
    next: int
    seq: int
    lock_ms: float
    retries: int
    db_ms: float


class WindowResult(TypedDict):
    """A window's line of the report."""

    mode: str
    seconds: float
    records: int
    appends: int
    records_per_s: float
    consumed: int
    cycles: int
    segments_deleted: int
    #: the window's acks, until its mode's numbers are drawn from them
    _acks: NotRequired[list[Ack]]


def read_acks(path: Path) -> list[Ack]:
    acks = []
    for line in path.read_text().splitlines():
        f = line.split()
        if len(f) != 9:
            continue  # a line cut by the stop
        acks.append(
            Ack(
                float(f[0]),
                float(f[1]),
                int(f[2]),
                int(f[3]),
                int(f[4]),
                int(f[5]),
                float(f[6]),
                int(f[7]),
                float(f[8]),
            )
        )
    return acks


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def _group_members(pgid: int) -> list[str]:
    """The processes of a process group, as ``command(state)`` (Linux /proc)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        command, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
        if int(rest[2]) == pgid:
            members.append(f"{command}({rest[0]})")
    return sorted(members)


class Run:
    def __init__(self, args: argparse.Namespace, root: Path) -> None:
        self.args = args
        self.root = root
        self.data = root / "data"
        self.run_dir = root / "run"
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.children: list[Child] = []
        self.engine: Child | None = None
        self.windows: list[Window] = []
        self.events: list[str] = []
        self.cli_failures: list[str] = []
        self.cli_runs = 0
        self.prune_lock: FileLock | None = None
        self.broker: Broker | None = None
        self.frozen_logged = False
        self.wal_max = 0

    def log(self, text: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {text}"
        self.events.append(line)
        if not self.args.quiet:
            print(line, file=sys.stderr, flush=True)

    # -- setup -------------------------------------------------------------------------

    def setup(self) -> None:
        a = self.args
        with Broker(self.data) as broker:
            broker.create_topic(
                TOPIC,
                a.partitions,
                {"segment_size": a.segment_size, "max_partition_size": a.max_partition_size},
                actor="bench",
            )
            for c in range(a.consumers):
                broker.create_group(TOPIC, f"load-c{c}", "reader" if c % 2 == 0 else "subscriber", "earliest")
        self.broker = Broker(self.data)

    def child_argv(self, role: str, *extra: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "bench.load",
            "_child",
            role,
            "--data",
            str(self.data),
            "--run-dir",
            str(self.run_dir),
            *extra,
        ]

    def start_engine(self) -> None:
        a = self.args
        if a.engine == "spark":
            argv = ebb_argv(self.data, "engine", "--prune-interval", a.interval, "--json")
        else:
            from engine.policy.units import parse_duration, parse_size

            argv = self.child_argv(
                "pruner",
                "--interval",
                str((parse_duration(a.interval) or 0) / 1000),
                "--cap",
                str(parse_size(a.max_partition_size)),
            )
        self.engine = spawn("engine", argv, self.run_dir, None, group=True)
        self.children.append(self.engine)
        self.log(f"engine ({a.engine}) started, pid {self.engine.proc.pid}")

    def start_load(self) -> None:
        a = self.args
        for p in range(a.producers):
            self.children.append(
                spawn(
                    f"producer-{p}",
                    self.child_argv(
                        "producer", "--id", str(p), "--batch", str(a.batch), "--record-size", str(a.record_size)
                    ),
                    self.run_dir,
                    self.run_dir / f"producer-{p}.acks",
                )
            )
        for c in range(a.consumers):
            self.children.append(
                spawn(
                    f"consumer-{c}",
                    self.child_argv("consumer", "--id", str(c)),
                    self.run_dir,
                    self.run_dir / f"consumer-{c}.log",
                )
            )
        self.log(f"{a.producers} producer(s) and {a.consumers} consumer(s) started")

    def journaled_cycles(self) -> int:
        assert self.broker is not None
        row = self.broker.catalog.db.conn.execute("SELECT COUNT(*) FROM cycles WHERE trigger = 'schedule'").fetchone()
        return int(row[0])

    # -- the watchdog -------------------------------------------------------------------

    def check(self) -> None:
        """Fail on a dead child or one that made no progress for ``--stall`` s."""
        now = time.monotonic()
        try:
            self.wal_max = max(self.wal_max, (self.data / "catalog.db-wal").stat().st_size)
        except FileNotFoundError:
            pass
        for child in self.children:
            code = child.proc.poll()
            if code is not None:
                raise Stalled(f"{child.name} exited with status {code} during the run")
            if child.frozen:
                child.last_progress = now
                continue
            if child.progress_path is None:
                size = self.journaled_cycles()
            else:
                try:
                    size = child.progress_path.stat().st_size
                except FileNotFoundError:
                    size = -1
            if size != child.last_size:
                child.last_size = size
                child.last_progress = now
            elif now - child.last_progress > self.args.stall:
                for other in self.children:
                    if other is not self.engine and other.proc.poll() is None:
                        os.kill(other.proc.pid, signal.SIGUSR1)
                time.sleep(1)
                raise Stalled(
                    f"watchdog: {child.name} made no progress for {now - child.last_progress:.0f} s "
                    f"(stacks of the Python children in {self.run_dir}/*.stderr)"
                )

    def sleep(self, seconds: float) -> None:
        """Sleep, running the watchdog and the CLI probe meanwhile."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            self.check()
            if self.args.cli_probe and time.monotonic() >= self.next_probe:
                self.probe()
            time.sleep(min(0.25, left))

    # -- the CLI ------------------------------------------------------------------------

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        done = subprocess.run(
            ebb_argv(self.data, *args), capture_output=True, timeout=timeout, cwd=REPO, env=_child_env(), check=False
        )
        self.cli_runs += 1
        text = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
        if done.returncode != 0 or ERROR_PATTERN.search(done.stderr.decode(errors="replace")):
            self.cli_failures.append(f"`ebb {' '.join(args)}` exit {done.returncode}: {text.strip()[:500]}")
        return done

    next_probe = 0.0

    def probe(self) -> None:
        commands = (
            ("topic", "describe", TOPIC, "--json"),
            ("consume", TOPIC, "--group", "cli-probe", "--max", "5"),
            ("log", "--cycles", "--since", "1m"),
        )
        self.cli(*commands[self.cli_runs % len(commands)])
        self.next_probe = time.monotonic() + self.args.cli_probe

    # -- modes ----------------------------------------------------------------------------

    def freeze_engine(self) -> None:
        """Take the prune lock (the engine is then not applying a plan), then SIGSTOP
        the engine's process group."""
        from engine.datadir import PRUNE_LOCK_NAME

        assert self.engine is not None
        lock = FileLock(self.data / PRUNE_LOCK_NAME, what="the load bench's prune lock")
        deadline = time.monotonic() + self.args.stall
        while True:
            try:
                lock.acquire(0.5)
                break
            except Exception:  # noqa: BLE001 - a cycle is applying its plan: wait, watching
                if time.monotonic() > deadline:
                    raise Stalled("the engine held the prune lock for longer than --stall") from None
                self.check()
        self.prune_lock = lock
        os.killpg(self.engine.proc.pid, signal.SIGSTOP)
        self.engine.frozen = True
        if not self.frozen_logged:
            self.frozen_logged = True
            self.log("froze the engine's process group: " + ", ".join(_group_members(self.engine.proc.pid)))

    def thaw_engine(self) -> None:
        assert self.engine is not None
        if self.engine.frozen:
            os.killpg(self.engine.proc.pid, signal.SIGCONT)
            self.engine.frozen = False
            self.engine.last_progress = time.monotonic()
        if self.prune_lock is not None:
            self.prune_lock.release()
            self.prune_lock = None

    def enter(self, mode: str) -> None:
        if mode == "stopped":
            self.cli("resume")
            self.freeze_engine()
        else:
            self.thaw_engine()
            self.cli("pause" if mode == "paused" else "resume")

    # -- the run ---------------------------------------------------------------------------

    def wait_first_cycle(self) -> None:
        self.log("waiting for the engine's first journaled cycle")
        begun = time.monotonic()
        while self.journaled_cycles() == 0:
            assert self.engine is not None
            if self.engine.proc.poll() is not None:
                raise Stalled(f"the engine exited with status {self.engine.proc.returncode} before its first cycle")
            if time.monotonic() - begun > self.args.start_timeout:
                raise Stalled(f"no cycle journaled {self.args.start_timeout:g} s after the engine started")
            time.sleep(0.25)
        self.engine_ready_s = time.monotonic() - begun
        self.log(f"first cycle journaled {self.engine_ready_s:.1f} s after the engine started")

    def schedule(self) -> list[str]:
        pattern = {
            "both": ["cycles", "paused", "cycles", "stopped"],
            "pause": ["cycles", "paused"],
            "stop": ["cycles", "stopped"],
        }[self.args.baseline]
        count = max(len(pattern), round(self.args.duration / self.args.window))
        count += (-count) % 2  # as many windows with cycles as without
        return [pattern[i % len(pattern)] for i in range(count)]

    def run(self) -> None:
        a = self.args
        self.setup()
        self.start_engine()
        # The producers start with the engine, so that its first cycle has work.
        self.start_load()
        self.wait_first_cycle()
        for child in self.children:
            child.last_progress = time.monotonic()
        self.sleep(a.settle)
        for mode in self.schedule():
            self.enter(mode)
            self.sleep(a.settle)
            start, start_ms = time.monotonic(), int(time.time() * 1000)
            self.sleep(a.window - a.settle)
            self.windows.append(Window(mode, start, time.monotonic(), start_ms, int(time.time() * 1000)))
            self.log(f"window {len(self.windows)} ({mode}) measured")
        self.thaw_engine()
        self.cli("resume")

    def stop(self) -> None:
        """Stop every child (engine last, with SIGTERM: a clean stop)."""
        if self.engine is not None:
            try:
                self.thaw_engine()
            except ProcessLookupError:
                pass
        (self.run_dir / STOP_FILE).touch()
        for child in self.children:
            if child is self.engine:
                continue
            try:
                child.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.proc.kill()
                child.proc.wait()
        if self.engine is not None and self.engine.proc.poll() is None:
            self.engine.proc.send_signal(signal.SIGTERM)
            try:
                self.engine.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.engine.proc.pid, signal.SIGKILL)
                self.engine.proc.wait()
                self.log("engine did not stop within 60 s of SIGTERM: killed")
        if self.engine is not None:
            try:
                os.killpg(self.engine.proc.pid, signal.SIGKILL)  # leftovers of its group (the JVM)
            except ProcessLookupError:
                pass

    # -- results -------------------------------------------------------------------------

    def error_lines(self) -> list[str]:
        lines = []
        for child in self.children:
            for path in (child.stderr_path,) + ((child.stdout_path,) if child is not self.engine else ()):
                try:
                    text = path.read_text(errors="replace")
                except FileNotFoundError:
                    continue
                if path == child.stderr_path:
                    lines += [f"{child.name}: {line}" for line in text.splitlines() if line.strip()]
        return lines + self.cli_failures

    def verify(self) -> dict[str, int]:
        """Every acknowledged record readable (and whole, and the producer's) or below
        the log start."""
        assert self.broker is not None
        checked = below = missing = 0
        problems: list[str] = []
        for p_id in range(self.args.producers):
            for ack in read_acks(self.run_dir / f"producer-{p_id}.acks"):
                log_start = self.broker.catalog.partition(TOPIC, ack.partition).log_start_offset
                first = max(ack.base, log_start)
                below += min(first, ack.next) - ack.base
                if first >= ack.next:
                    continue
                # Every child is stopped: the log start no longer moves.
                records = self.broker.read(TOPIC, ack.partition, first, ack.next - first)
                got = [r.offset for r in records]
                if got != list(range(first, ack.next)):
                    missing += len(set(range(first, ack.next)) - set(got))
                    problems.append(
                        f"producer {p_id} partition {ack.partition} {ack.base}..{ack.next}: read {got[:3]}..."
                    )
                for r in records:
                    want = _value(p_id, ack.seq + r.offset - ack.base, self.args.record_size)
                    if r.value != want:
                        missing += 1
                        problems.append(f"producer {p_id} {ack.partition}/{r.offset}: wrong value {r.value[:24]!r}")
                    checked += 1
        self.verify_problems = problems[:10]
        return {"checked": checked, "below_log_start": below, "missing_or_wrong": missing}

    def journal_summary(self) -> dict[str, Any]:
        assert self.broker is not None
        conn = self.broker.catalog.db.conn
        statuses = dict(conn.execute("SELECT status, COUNT(*) FROM cycles WHERE trigger = 'schedule' GROUP BY status"))
        errors = [
            r[0]
            for r in conn.execute(
                "SELECT error FROM cycles WHERE error IS NOT NULL OR status IN ('failed', 'interrupted') LIMIT 10"
            )
        ]
        failed_topics = [
            r[0] for r in conn.execute("SELECT details FROM actions WHERE action = 'topic_failed' LIMIT 10")
        ]
        deleted = conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM actions"
            " WHERE action = 'delete_segment' AND status = 'applied'"
        ).fetchone()
        skipped = conn.execute("SELECT COUNT(*) FROM actions WHERE action = 'skipped'").fetchone()[0]
        return {
            "cycles": statuses,
            "segments_deleted": deleted[0],
            "bytes_freed": deleted[1],
            "stale_plan_skips": skipped,
            "cycle_errors": [e for e in errors if e],
            "topic_failures": failed_topics,
        }

    def window_cycles(self, w: Window) -> tuple[int, int]:
        assert self.broker is not None
        row = self.broker.catalog.db.conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(applied), 0) FROM cycles WHERE trigger = 'schedule' AND finished >= ? "
            "AND finished < ?",
            (w.start_ms, w.end_ms),
        ).fetchone()
        return int(row[0]), int(row[1])

    def results(self) -> dict[str, Any]:
        acks = [a for p in range(self.args.producers) for a in read_acks(self.run_dir / f"producer-{p}.acks")]
        consumed = []
        for c in range(self.args.consumers):
            path = self.run_dir / f"consumer-{c}.log"
            if path.exists():
                consumed += [
                    (float(f[0]), int(f[2]))
                    for f in (line.split() for line in path.read_text().splitlines())
                    if len(f) == 3
                ]
        per_window: list[WindowResult] = []
        for window in self.windows:
            mine = [a for a in acks if window.start <= a.t < window.end]
            seconds = window.end - window.start
            cycles, deleted = self.window_cycles(window)
            per_window.append(
                {
                    "mode": window.mode,
                    "seconds": round(seconds, 3),
                    "records": sum(a.next - a.base for a in mine),
                    "appends": len(mine),
                    "records_per_s": sum(a.next - a.base for a in mine) / seconds,
                    "consumed": sum(n for t, n in consumed if window.start <= t < window.end),
                    "cycles": cycles,
                    "segments_deleted": deleted,
                    "_acks": mine,
                }
            )
        modes: dict[str, Any] = {}
        for mode in ("cycles", "paused", "stopped"):
            ws = [w for w in per_window if w["mode"] == mode]
            if not ws:
                continue
            mine = [a for w in ws for a in w["_acks"]]
            seconds = sum(w["seconds"] for w in ws)
            lat = [a.latency_ms for a in mine]
            modes[mode] = {
                "windows": len(ws),
                "seconds": round(seconds, 1),
                "records": sum(w["records"] for w in ws),
                "records_per_s": sum(w["records"] for w in ws) / seconds,
                "window_records_per_s": [round(w["records_per_s"]) for w in ws],
                "median_window_records_per_s": statistics.median(w["records_per_s"] for w in ws),
                "appends": len(mine),
                "latency_ms_p50": percentile(lat, 50),
                "latency_ms_p99": percentile(lat, 99),
                "latency_ms_max": max(lat, default=float("nan")),
                "lock_wait_ms_p50": percentile([a.lock_ms for a in mine], 50),
                "lock_wait_ms_p99": percentile([a.lock_ms for a in mine], 99),
                "lock_retries": sum(a.retries for a in mine),
                "db_wait_ms_p50": percentile([a.db_ms for a in mine], 50),
                "db_wait_ms_p99": percentile([a.db_ms for a in mine], 99),
                "db_wait_ms_max": max((a.db_ms for a in mine), default=float("nan")),
                "cycles": sum(w["cycles"] for w in ws),
                "segments_deleted": sum(w["segments_deleted"] for w in ws),
                "consumed_per_s": sum(w["consumed"] for w in ws) / seconds,
            }
        for w in per_window:
            del w["_acks"]
        ratios = {
            f"cycles/{base}": modes["cycles"]["records_per_s"] / modes[base]["records_per_s"]
            for base in ("paused", "stopped")
            if base in modes and "cycles" in modes and modes[base]["records_per_s"]
        }
        # Paired: each window without cycles against the mean of the windows with
        # cycles right before and after it (machine noise drifts; neighbours share it).
        paired: dict[str, list[float]] = {}
        for i, w in enumerate(per_window):
            if w["mode"] == "cycles" or not w["records_per_s"]:
                continue
            near = [
                per_window[j]["records_per_s"]
                for j in (i - 1, i + 1)
                if 0 <= j < len(per_window) and per_window[j]["mode"] == "cycles"
            ]
            if near:
                paired.setdefault(f"cycles/{w['mode']}", []).append(statistics.mean(near) / w["records_per_s"])
        paired_ratios = {
            name: {"median": statistics.median(values), "each": [round(v, 2) for v in values]}
            for name, values in paired.items()
        }
        return {"modes": modes, "ratios": ratios, "paired_ratios": paired_ratios, "windows": per_window}


def print_report(report: dict[str, Any]) -> None:
    r = report
    print(f"\nload: {r['config']}")
    print(
        f"load average before/after: {r['load_before']} / {r['load_after']}; engine's first cycle after "
        f"{r['engine_ready_s']:.1f} s; {r['elapsed_s']:.0f} s in all"
    )
    print(
        f"{'windows':<10}{'n':>3}{'secs':>7}{'records/s':>11}{'median/win':>12}{'p50 ms':>8}{'p99 ms':>8}"
        f"{'lock p99':>9}{'retries':>8}{'db p99':>8}{'db max':>8}{'cycles':>7}{'deleted':>8}{'consumed/s':>11}"
    )
    for mode, m in r["modes"].items():
        print(
            f"{mode:<10}{m['windows']:>3}{m['seconds']:>7.0f}{m['records_per_s']:>11,.0f}"
            f"{m['median_window_records_per_s']:>12,.0f}{m['latency_ms_p50']:>8.1f}{m['latency_ms_p99']:>8.1f}"
            f"{m['lock_wait_ms_p99']:>9.1f}{m['lock_retries']:>8}{m['db_wait_ms_p99']:>8.1f}"
            f"{m['db_wait_ms_max']:>8.1f}{m['cycles']:>7}{m['segments_deleted']:>8}{m['consumed_per_s']:>11,.0f}"
        )
    for name, ratio in r["ratios"].items():
        pair = r["paired_ratios"].get(name)
        print(
            f"append throughput {name}: {ratio:.2f} over all its windows"
            + (f"; paired with the neighbouring windows: median {pair['median']:.2f} of {pair['each']}" if pair else "")
        )
    j = r["journal"]
    print(
        f"journal: scheduled cycles by status {j['cycles']}; {j['segments_deleted']} segments deleted "
        f"({j['bytes_freed'] / 1e6:.1f} MB); {j['stale_plan_skips']} stale-plan skips"
    )
    v = r["verify"]
    print(
        f"acknowledged records: {v['checked']:,} read back and checked, {v['below_log_start']:,} below the log "
        f"start, {v['missing_or_wrong']} missing or wrong"
    )
    print(
        "append latency max (ms): "
        + ", ".join(f"{k} {m['latency_ms_max']:.0f}" for k, m in r["modes"].items())
        + f"; largest catalog WAL seen: {r['wal_max_bytes'] / 1e6:.1f} MB"
    )
    print(f"CLI commands run meanwhile: {r['cli_runs']}")
    print(f"error lines in children's stderr / CLI output: {len(r['errors'])}")
    for line in r["errors"][:30]:
        print(f"  {line}")
    print("RESULT: " + ("ok" if r["ok"] else "FAILED: " + "; ".join(r["failures"])))


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=240, help="seconds of measured windows in all [240]")
    parser.add_argument("--window", type=float, default=15, help="seconds per window [15]")
    parser.add_argument("--settle", type=float, default=2, help="seconds left out at the start of each window [2]")
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--consumers", type=int, default=1)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--interval", default="2s", help="prune interval, a Go duration [2s]")
    parser.add_argument(
        "--engine",
        choices=("spark", "executor"),
        default="spark",
        help="spark: `ebb engine`; executor: cycles through the executor without Spark [spark]",
    )
    parser.add_argument(
        "--baseline",
        choices=("both", "pause", "stop"),
        default="both",
        help="windows without cycles: ebb pause, the engine frozen, or both in turn [both]",
    )
    parser.add_argument("--batch", type=int, default=100, help="records per append [100]")
    parser.add_argument("--record-size", type=int, default=200, help="bytes per record value [200]")
    parser.add_argument("--segment-size", default="512KiB")
    parser.add_argument("--max-partition-size", default="4MiB")
    parser.add_argument("--stall", type=float, default=60, help="watchdog: seconds without progress that fail [60]")
    parser.add_argument("--start-timeout", type=float, default=240, help="seconds to wait for the first cycle [240]")
    parser.add_argument("--cli-probe", type=float, default=5, help="seconds between CLI probes; 0: none [5]")
    parser.add_argument("--dir", type=Path, default=Path.cwd(), help="where to create the run directory [cwd]")
    parser.add_argument("--keep", action="store_true", help="keep the run directory")
    parser.add_argument("--json", action="store_true", help="print the report as JSON (last line)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args(argv)
    if args.settle >= args.window:
        parser.error("--settle must be shorter than --window")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_child":
        return child_main(argv[1:])
    args = parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix=".load-", dir=args.dir))
    run = Run(args, root)
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    failures: list[str] = []
    started = time.monotonic()
    run.engine_ready_s = float("nan")
    try:
        try:
            run.run()
        except Stalled as stalled:
            failures.append(str(stalled))
        finally:
            run.stop()
        load_after = " ".join(f"{x:.2f}" for x in os.getloadavg())
        results = run.results()
        verify = run.verify()
        journal = run.journal_summary()
        errors = run.error_lines()
        for child in run.children:
            if child.proc.returncode not in (0, None) and not (child is run.engine and child.proc.returncode < 0):
                failures.append(f"{child.name} exited with status {child.proc.returncode}")
        if errors:
            failures.append(f"{len(errors)} error line(s) in the children's stderr or CLI output")
        if verify["missing_or_wrong"]:
            failures.append(
                f"{verify['missing_or_wrong']} acknowledged record(s) missing or wrong: {run.verify_problems}"
            )
        if journal["cycle_errors"] or journal["topic_failures"] or journal["cycles"].get("failed"):
            failures.append(
                f"failed cycles or topics in the journal: {journal['cycle_errors']} {journal['topic_failures']}"
            )
        idle = [w for w in results["windows"] if w["records"] == 0]
        if idle:
            failures.append(f"{len(idle)} window(s) without a single acknowledged append")
        report = {
            "config": " ".join(["-m bench.load", *argv]),
            "root": str(root),
            "load_before": load_before,
            "load_after": load_after,
            "engine_ready_s": run.engine_ready_s,
            "elapsed_s": time.monotonic() - started,
            **results,
            "verify": verify,
            "journal": journal,
            "cli_runs": run.cli_runs,
            "errors": errors,
            "events": run.events,
            "wal_max_bytes": run.wal_max,
            "ok": not failures,
            "failures": failures,
        }
        print_report(report)
        if args.json:
            print(json.dumps(report, default=str))
        return 0 if not failures else 1
    finally:
        if run.broker is not None:
            run.broker.close()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
