"""The campaign loop: rounds of children on one data directory, each round ended by
SIGKILL and followed by a full check (:mod:`tests.faults.campaign.invariants`).

Children are forked from this process, which has imported the engine already, so a
round costs milliseconds rather than an interpreter start; a fork killed with SIGKILL
dies like any process. Three kinds of round, chosen by the seed:

- ``random``: two producers, a consumer and a reference-model executor run for a
  random time, then every one is killed;
- ``fault``: the same, but the executor carries ``EBB_KILL_AT`` (engine/faults.py)
  and kills itself at that point of a cycle, deterministically; then the rest;
- ``engine``: every ``engine_every`` rounds, the real ``ebb engine`` (Spark planning:
  one JVM start per round, or on the Connect server ``spark_remote`` if given) runs;
  after its first cycle producers and a consumer join it, and all are killed at a
  random time.

The seed fixes every choice; the instants the kills land at are the OS's.
"""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

from engine.broker import Broker
from engine.faults import FAULT_POINTS, KILL_AT_ENV
from tests.faults.campaign.invariants import Checker, Tally
from tests.faults.campaign.workload import (
    consume_forever,
    produce_forever,
    prune_forever,
    run_child,
    setup,
    warm_up,
)
from tests.support.cli import REPO, ebb_command, subprocess_env

#: the campaign's length (rounds, each ended by SIGKILL) for the test and the CLI
KILLS_ENV = "EBB_CAMPAIGN_KILLS"
PRODUCERS = 2
#: how long a random round lets its children run, in seconds
ROUND_SECONDS = (0.05, 0.5)
#: how long a fault round waits for its executor to reach the fault point
FAULT_WAIT_SECONDS = 5.0
#: how long an engine round waits for the engine's first cycle (a JVM start)
ENGINE_START_SECONDS = 180.0
#: after its first cycle, the engine runs with the workers this long (seconds), a
#: few more cycles, then is killed
ENGINE_KILL_WITHIN = (0.5, 4.0)


@dataclass
class Summary:
    seed: int
    kills_survived: int = 0
    rounds: Counter = field(default_factory=Counter)
    processes_killed: int = 0
    fault_points_hit: Counter = field(default_factory=Counter)
    fault_points_missed: Counter = field(default_factory=Counter)
    checked: Tally = field(default_factory=Tally)
    violations: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return _plain(self)

    def text(self) -> str:
        c = self.checked
        cycles = ", ".join(f"{n} {status}" for status, n in sorted(c.cycles.items()))
        rounds = ", ".join(f"{n} {kind}" for kind, n in sorted(self.rounds.items()))
        lines = [
            (
                f"crash campaign, seed {self.seed}: {self.kills_survived} kills survived in {self.seconds:.1f} s "
                f"({rounds} rounds, {self.processes_killed} processes killed)"
            ),
            f"  cycles: {cycles or 'none'}",
            (
                f"  fault points hit: {dict(sorted(self.fault_points_hit.items()))}, "
                f"not reached in time: {dict(sorted(self.fault_points_missed.items()))}"
            ),
            (
                f"  checks: {c.checks}; acknowledged records checked: {c.acked_records_checked} (records read "
                f"{c.records_read}); deletions checked: {c.deletions_checked} (protected: "
                f"{c.protected_deletions_checked}); torn tails seen: {c.torn_tails}"
            ),
            f"  violations: {len(self.violations)}",
        ]
        lines += [f"    round {v['round']} ({v['kind']}): {v['message']}" for v in self.violations]
        return "\n".join(lines)


def _plain(value: Any) -> Any:
    """Dataclasses and counters as JSON values (``asdict`` would rebuild a Counter
    from its (key, count) pairs, counting the pairs)."""
    if is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    return dict(value) if isinstance(value, Counter) else value


def _fork(data_dir: Path, name: str, body: Callable[[], None], env: dict[str, str] | None = None) -> int:
    pid = os.fork()
    if pid == 0:  # the child: never returns into the campaign's stack
        try:
            os.environ.update(env or {})
            run_child(data_dir, name, body)
        finally:
            os._exit(1)
    return pid


def _kill(pids: list[int]) -> int:
    """SIGKILL each child still alive and reap all; returns how many the kill ended."""
    killed = 0
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for pid in pids:
        _pid, status = os.waitpid(pid, 0)
        killed += os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    return killed


def _wait_for_death(pid: int, seconds: float) -> bool:
    """Whether the child died of SIGKILL within ``seconds`` (it was reaped if so)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        time.sleep(0.005)
    return False


class Campaign:
    def __init__(
        self,
        data_dir: Path,
        *,
        seed: int,
        kills: int,
        engine_every: int,
        spark_remote: str | None,
        log: Callable[[str], None],
    ) -> None:
        self.data_dir = data_dir
        self.spark_where = ("--spark-remote", spark_remote) if spark_remote else ()
        self.rng = random.Random(seed)
        self.kills = kills
        self.engine_every = engine_every
        self.log = log
        self.summary = Summary(seed)

    def _workers(self, *, executor_env: dict[str, str] | None, executor: bool = True) -> list[int]:
        seeds = [self.rng.randrange(1 << 30) for _ in range(PRODUCERS + 2)]
        pids = [
            _fork(self.data_dir, f"producer{i}", lambda i=i: produce_forever(self.data_dir, i, seeds[i]))
            for i in range(PRODUCERS)
        ]
        pids.append(_fork(self.data_dir, "consumer", lambda: consume_forever(self.data_dir, seeds[-2])))
        if executor:
            pids.append(_fork(self.data_dir, "executor", lambda: prune_forever(self.data_dir, seeds[-1]), executor_env))
        return pids

    def _random_round(self) -> None:
        pids = self._workers(executor_env=None)
        time.sleep(self.rng.uniform(*ROUND_SECONDS))
        self.rng.shuffle(pids)
        self.summary.processes_killed += _kill(pids)

    def _fault_round(self) -> None:
        point = self.rng.choice(FAULT_POINTS)
        pids = self._workers(executor_env={KILL_AT_ENV: point})
        if _wait_for_death(pids[-1], FAULT_WAIT_SECONDS):
            self.summary.fault_points_hit[point] += 1
            self.summary.processes_killed += 1
            pids.pop()
        else:
            self.summary.fault_points_missed[point] += 1
        self.summary.processes_killed += _kill(pids)

    def _engine_round(self) -> None:
        engine = subprocess.Popen(
            ebb_command(self.data_dir, "engine", "--prune-interval", "1s", "--json", *self.spark_where),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=REPO,
            env=subprocess_env(),
            start_new_session=True,  # its JVM in its group, cleaned up with it
        )
        pids: list[int] = []
        try:
            # The workers start once the engine's first cycle is done: a JVM starting
            # on cores that producers keep busy takes minutes, not seconds.
            ready, _, _ = select.select([engine.stdout], [], [], ENGINE_START_SECONDS)
            if not ready or not engine.stdout.readline():  # type: ignore[union-attr]
                raise RuntimeError(f"ebb engine did not finish a first cycle in {ENGINE_START_SECONDS:g} s")
            pids = self._workers(executor_env=None, executor=False)
            time.sleep(self.rng.uniform(*ENGINE_KILL_WITHIN))
            engine.send_signal(signal.SIGKILL)
            self.summary.processes_killed += engine.wait() == -signal.SIGKILL
        finally:
            try:
                os.killpg(engine.pid, signal.SIGKILL)  # the JVM, if it outlived the engine
            except ProcessLookupError:
                pass
            engine.wait()
            engine.stdout.close()  # type: ignore[union-attr]
            self.summary.processes_killed += _kill(pids)

    def run(self) -> Summary:
        started = time.monotonic()
        with Broker(self.data_dir) as broker:
            setup(broker)
        warm_up()
        checker = Checker(self.data_dir)
        for round_ in range(1, self.kills + 1):
            if self.engine_every and round_ % self.engine_every == 0:
                kind = "engine"
            else:
                kind = self.rng.choice(("random", "random", "fault"))
            {"random": self._random_round, "fault": self._fault_round, "engine": self._engine_round}[kind]()
            self.summary.rounds[kind] += 1
            violations = checker.check()
            self.summary.violations += [{"round": round_, "kind": kind, "message": v} for v in violations]
            if violations:
                self.log(f"round {round_} ({kind}): {len(violations)} violation(s), stopping")
                break
            self.summary.kills_survived += 1
            if round_ % 25 == 0:
                self.log(f"round {round_}: ok ({time.monotonic() - started:.0f} s)")
        self.summary.checked = checker.tally
        self.summary.seconds = time.monotonic() - started
        return self.summary


def run_campaign(
    data_dir: Path,
    *,
    seed: int,
    kills: int,
    engine_every: int = 0,
    spark_remote: str | None = None,
    log: Callable[[str], None] | None = None,
) -> Summary:
    """Run a campaign of ``kills`` rounds on a new ``data_dir``; ``engine_every`` > 0
    makes every that-many-th round an ``ebb engine`` round, planning on the Connect
    server ``spark_remote`` if given (else on a local Spark of its own)."""
    return Campaign(
        data_dir,
        seed=seed,
        kills=kills,
        engine_every=engine_every,
        spark_remote=spark_remote,
        log=log or (lambda line: print(line, file=sys.stderr)),
    ).run()
