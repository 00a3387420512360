"""The shared Spark service (engine/prune/spark_service.py) through the CLI.

Two servers for the whole file: one started by ``ebb spark start`` and shared by the
tests below (its warm-up and plan desk observed as it runs; killed by the last of
them and replaced, stopped at the end), and one started by two racing ``ebb spark start``
that must end on its own after its short idle timeout. Every command runs without
``$EBB_SPARK_MASTER`` (which the rest of the suite sets, see conftest.py).
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.cli.prune import _explained
from console.cli.spark_cmd import Progress
from engine.broker import Broker
from engine.config import load_config
from engine.errors import InvalidInput, SparkUnavailable
from engine.prune import plan_desk, spark_service
from engine.prune.pruner import Pruner
from engine.prune.record_times import StoreRecordTimes
from engine.prune.session import MASTER_ENV, SparkEngine, classify_failure, spark_engine_for
from engine.prune.snapshot import build_snapshot
from engine.prune.spark_warmup import WARM_UP_PLANS, service_planner
from tests.support.cli import REPO, CliResult, ebb_command, run_main, subprocess_env

NOW = "2099-01-01T00:00:00Z"  # the produced records all older than retention_time
IDLE_TIMEOUT_S = 12
STOP_WAIT_S = 120.0
#: how often a test looks again at a file or process it waits for
_POLL_S = 0.1


def _env() -> dict[str, str]:
    return {k: v for k, v in subprocess_env().items() if k != MASTER_ENV}


def run_ebb(data: Path, *args: str, timeout: float = 300) -> CliResult:
    done = subprocess.run(
        ebb_command(data, *args), check=False, capture_output=True, timeout=timeout, cwd=REPO, env=_env()
    )
    return CliResult(done.returncode, done.stdout.decode(), done.stderr.decode())


def status(data: Path) -> dict:
    # In this process: it only reads the service's files and /proc (no Spark, no
    # server started), and an interpreter's start for each look would add up.
    result = run_main(["--data-dir", str(data), "spark", "status", "--json"])
    assert result.code == 0, result.err
    return json.loads(result.out)


def _gone(pid: int) -> bool:
    return not spark_service.pid_alive(pid) or spark_service._is_zombie(pid)


def _wait_gone(pids: list[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if all(_gone(pid) for pid in pids):
            return True
        time.sleep(_POLL_S)
    return False


def _make_topic(data: Path) -> None:
    with Broker(data) as broker:
        broker.create_topic("demo", 2, {"segment_size": "4 KiB", "retention_time": "1h"})
    result = run_ebb(data, "produce", "demo", "--count", "200", "--size", "100")
    assert result.code == 0, result.err


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A data directory with a small topic and its service running; stopped after."""
    data = tmp_path_factory.mktemp("service") / "data"
    _make_topic(data)
    started = run_ebb(data, "spark", "start")
    state = spark_service.ServiceDir(data).read_state()
    try:
        assert started.code == 0, started.err
        assert "started" in started.out and started.err == ""
        yield data
    finally:
        # The server running now: the first, or the replacement of a killed one.
        last = spark_service.ServiceDir(data).read_state()
        run_ebb(data, "spark", "stop")
        servers = [s for s in (state, last) if s is not None]
        assert _wait_gone([pid for s in servers for pid in (s.pid, s.supervisor_pid)], STOP_WAIT_S)


def test_status_reports_the_running_server(service: Path) -> None:
    shown = status(service)
    assert shown["state"] == "running" and shown["master"] == "local[*]"
    assert spark_service.pid_alive(shown["pid"]) and shown["address"] == f"sc://localhost:{shown['port']}"
    assert shown["uptime_s"] > 0 and shown["rss_bytes"] > 50 * 2**20
    assert isinstance(shown["plans_served"], int) and shown["idle_timeout_s"] == 900
    again = run_ebb(service, "spark", "start")
    assert again.code == 0 and "already running" in again.out and str(shown["pid"]) in again.out


def test_status_says_starting_while_another_command_starts_the_server(tmp_path: Path) -> None:
    """A start holds start.lock until the server is recorded (5-30 s): status said
    "stopped" meanwhile, and "the next plan starts it" while one was starting it."""
    data = tmp_path / "data"
    assert status(data)["state"] == "stopped"
    assert not (data / "spark").exists()  # a status creates nothing
    service = spark_service.ServiceDir(data)
    hold = (
        "import sys, time; from pathlib import Path; from engine.prune.spark_service import ServiceDir; "
        "lock = ServiceDir(Path(sys.argv[1])).start_lock(); lock.__enter__(); print('held', flush=True); time.sleep(60)"
    )
    holder = subprocess.Popen([sys.executable, "-c", hold, str(data)], stdout=subprocess.PIPE, cwd=REPO, env=_env())
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        assert status(data)["state"] == "starting"
        shown = run_main(["--data-dir", str(data), "spark", "status"])
        assert shown.code == 0 and shown.out.startswith("Spark service: starting"), shown.out
    finally:
        holder.kill()
        holder.wait()
    assert status(data)["state"] == "stopped" and not service.start_in_progress()


def test_files_are_private_and_server_listens_on_loopback_only(service: Path) -> None:
    root = service / "spark"
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    for name in ("token", "server.json", "server.conf"):
        assert stat.S_IMODE((root / name).stat().st_mode) == 0o600, name
    _listens_on_loopback_only(status(service)["port"])


def _listens_on_loopback_only(port: int) -> None:
    listening = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                listening.append(local.rsplit(":", 1)[0])
    # 127.0.0.1, maybe as the IPv4-mapped IPv6 address a JVM binds; nothing else
    assert listening and set(listening) <= {"0100007F", "0000000000000000FFFF00000100007F"}, listening


@pytest.mark.parametrize("token", [None, "not-the-token"])
def test_a_client_without_the_token_is_refused(service: Path, tmp_path: Path, token: str | None) -> None:
    port = status(service)["port"]
    address = f"sc://localhost:{port}" + (f"/;token={token}" if token else "")
    engine = SparkEngine(remote=address, log_dir=tmp_path / "logs")
    try:
        with pytest.raises(SparkUnavailable, match="refused this client's token") as refused:
            engine.session(timeout=120)
    finally:
        engine.stop()
    if token is not None:
        # shown in the top bar, journaled with each cycle, logged with each failure: never the token
        assert engine.description == f"sc://localhost:{port}/;token=<hidden>"
        assert token not in str(refused.value) and token not in engine.log_file.read_text()


def test_explain_on_the_service_is_the_local_plan(service: Path, spark_engine: SparkEngine) -> None:
    served = status(service)["plans_served"]
    result = run_ebb(service, "explain", "demo", "--now", NOW, "--json")
    assert result.code == 0 and result.err == "", result.err
    with Broker(service) as broker:
        local = Pruner(broker, spark_engine).plan(now=json.loads(result.out)["now"], topics=["demo"])
    assert json.loads(result.out)["segments"] == _explained(local, None)
    assert any(s["decision"] == "delete" for s in _explained(local, None))
    assert status(service)["plans_served"] == served + 1
    dry = run_ebb(service, "prune", "--dry-run", "--now", NOW, "--json")
    assert dry.code == 0 and dry.err == "", dry.err
    deleted = [a for a in json.loads(dry.out)["actions"] if a["action"] == "delete_segment"]
    assert len(deleted) == sum(s["decision"] == "delete" for s in _explained(local, None))


def test_an_unreachable_remote_is_one_line(service: Path) -> None:
    result = run_ebb(service, "explain", "demo", "--spark-remote", "sc://127.0.0.1:9")
    assert result.code == 2
    assert result.err.count("\n") == 1 and result.err.startswith("ebb: error: ")
    assert "no Spark Connect server at 127.0.0.1:9" in result.err and "spark.log" in result.err


def test_two_starts_get_one_server_which_stops_when_idle(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "ebb.toml").write_text(f'[spark]\nidle_timeout = "{IDLE_TIMEOUT_S}s"\n')
    racers = [
        subprocess.Popen(
            ebb_command(data, "spark", "start"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, env=_env()
        )
        for _ in range(2)
    ]
    outs = [racer.communicate(timeout=300) for racer in racers]
    state = spark_service.ServiceDir(data).read_state()
    try:
        assert [r.returncode for r in racers] == [0, 0], outs
        said = sorted(out.decode().split(" on ")[0] for out, _ in outs)
        assert said == ["Spark service already running", "Spark service started"]
        assert state is not None and all(f"pid {state.pid}" in out.decode() for out, _ in outs)
        # Nobody attached, no plan: the supervisor stops the JVM after the timeout.
        assert _wait_gone([state.pid, state.supervisor_pid], IDLE_TIMEOUT_S + STOP_WAIT_S)
        assert status(data)["state"] == "stopped"
    finally:
        if state is not None and not _wait_gone([state.pid], 0):
            spark_service.stop(data)


def test_a_server_whose_record_is_damaged_stops_rather_than_outlive_it(tmp_path: Path) -> None:
    """Nothing finds a server without its record, and the next plan starts another;
    whose clients, on the same attach lock, would keep the first from ever idling."""
    data = tmp_path / "data"
    started = run_ebb(data, "spark", "start")
    state = spark_service.ServiceDir(data).read_state()
    try:
        assert started.code == 0 and state is not None, started.err
        (data / "spark" / spark_service.STATE_NAME).write_text("{not json")
        assert status(data)["state"] == "stopped"
        assert _wait_gone([state.pid, state.supervisor_pid], STOP_WAIT_S)
        said = (data / "logs" / "spark.log").read_text()
        assert "server.json no longer records this server (damaged or replaced): stopping it" in said
    finally:
        for pid in (state.supervisor_pid, state.pid) if state is not None else ():
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)


def test_the_warm_up_and_the_desk_plan_with_the_servers_settings(tmp_path: Path) -> None:
    """They are plain Connect clients of the server: they set our defaults over the
    operator's [spark.conf] (the desk then planned with 4 buckets where every other
    client used 3), and kept the client's ten minutes of retries on a server that died."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "ebb.toml").write_text('[spark.conf]\n"spark.sql.shuffle.partitions" = "3"\n')
    started = run_ebb(data, "spark", "start")
    state = spark_service.ServiceDir(data).read_state()
    try:
        assert started.code == 0 and state is not None, started.err
        found = service_planner(data / "spark", tmp_path / "logs")
        assert found is not None
        engine = found[2].engine
        try:
            spark = engine.session(timeout=STOP_WAIT_S)
            assert spark.conf.get("spark.sql.shuffle.partitions") == "3"
            assert len(spark.client.get_retry_policies()) == 1  # ours, not the client's default ones
            assert spark.client.get_retry_policies()[0].max_retries == 2
        finally:
            engine.stop()
    finally:
        spark_service.stop(data)


def test_the_test_suite_and_flags_choose_an_in_process_spark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Broker(tmp_path / "data") as broker:
        monkeypatch.setenv(MASTER_ENV, "local[2]")
        assert spark_engine_for(broker.config, broker.data).description == "local[2]"
        monkeypatch.delenv(MASTER_ENV)
        assert spark_engine_for(broker.config, broker.data).description == "service (local[*])"
        assert spark_engine_for(broker.config, broker.data, master="local[1]").description == "local[1]"
        remote = spark_engine_for(broker.config, broker.data, remote="sc://h:1")
        assert remote.description == "sc://h:1"
    assert not (tmp_path / "data" / "spark").exists()


def test_idle_timeout_is_a_config_key(tmp_path: Path) -> None:
    path = tmp_path / "ebb.toml"
    path.write_text('[spark]\nidle_timeout = "30s"\n')
    assert load_config(path).spark_idle_timeout_ms == 30_000
    path.write_text('[spark]\nidle_timeout = "0s"\n')
    with pytest.raises(InvalidInput, match="idle_timeout"):
        load_config(path)


def _spark_error(text: str) -> Exception:
    """An exception as the Connect client raises them (its class lives in pyspark)."""
    kind = type("SparkConnectGrpcException", (Exception,), {"__module__": "pyspark.errors.exceptions.connect"})
    return kind(text)


def test_a_raw_grpc_error_is_said_by_its_status_not_its_repr() -> None:
    """An audit: a server that died mid-request left the engine's cycle lines reading
    "Spark failed: <_MultiThreadedRendezvous of RPC that terminated with:"."""
    import grpc

    class Rendezvous(grpc.RpcError):  # the class grpc raises lives in grpc._channel
        __module__ = "grpc._channel"

        def __str__(self) -> str:
            return "<_MultiThreadedRendezvous of RPC that terminated with:\n\tstatus = StatusCode.UNKNOWN\n\t..."

        def code(self) -> grpc.StatusCode:
            return grpc.StatusCode.UNKNOWN

        def details(self) -> str:
            return "Application error processing RPC"

    assert classify_failure(Rendezvous()) == ("plan", "Spark failed: UNKNOWN: Application error processing RPC")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (
            "java.lang.OutOfMemoryError: Java heap space\n\tat org.apache...",
            'out of memory.*"spark.driver.memory".*`ebb spark stop`',
        ),
        (
            "StatusCode.UNAUTHENTICATED\n details = Invalid authentication token",
            "refused this client's token.*`ebb spark stop`",
        ),
        ("StatusCode.UNAVAILABLE: Socket closed", "cannot be reached.*the next plan starts a new Spark service"),
        (
            "[TABLE_OR_VIEW_NOT_FOUND] The table x cannot be found.\nJVM stacktrace:\n...",
            r"Spark failed: \[TABLE_OR_VIEW_NOT_FOUND\]",
        ),
    ],
)
def test_a_spark_failure_is_one_line_saying_what_to_do(tmp_path: Path, text: str, says: str) -> None:
    spec = spark_service.ServiceSpec(tmp_path / "data", {}, 60_000, tmp_path / "logs")
    engine = SparkEngine(log_dir=tmp_path / "logs", service=spec)
    engine._spark, engine._state = _AttachedSession(), "ready"  # as if attached: no server needed here
    engine._done.set()

    def fails(_spark: object) -> None:
        raise _spark_error(text)

    with pytest.raises(SparkUnavailable, match=says) as raised:
        engine.run(fails, "t")
    assert "\n" not in str(raised.value) and str(engine.log_file) in str(raised.value)
    assert "JVM stacktrace" not in str(raised.value)
    assert text.splitlines()[0] in engine.log_file.read_text()  # the details: in the log


class _AttachedSession:
    """What :meth:`SparkEngine.run` asks of a Connect session before and after a job."""

    def addTag(self, tag: str) -> None:
        pass

    def clearTags(self) -> None:
        pass

    def stop(self) -> None:
        pass


@pytest.mark.parametrize("tty", [True, False])
def test_progress_goes_to_a_terminal_only_once_a_second(monkeypatch: pytest.MonkeyPatch, tty: bool) -> None:
    stderr = io.StringIO()
    stderr.isatty = lambda: tty  # type: ignore[method-assign]
    monkeypatch.setattr(sys, "stderr", stderr)
    progress = Progress()
    for waited in (0.5, 1.0, 1.2, 2.0, 2.1):
        progress.show(waited)
    progress.clear()
    assert stderr.getvalue() == ("\rstarting Spark… 1 s\rstarting Spark… 2 s\r\033[K" if tty else "")


def test_the_service_warms_up_once_without_counting_its_plans(service: Path) -> None:
    """On the server the fixture started: its warm-up began after the first client's
    plan (the explain above), or after waiting for one."""
    deadline = time.monotonic() + 300
    while not spark_service.ServiceDir(service).warmed_up() and time.monotonic() < deadline:
        time.sleep(_POLL_S)
    assert status(service)["warmed_up"]
    outcome = (service / "spark" / "warmed-up").read_text()
    assert outcome.startswith(f"Spark service warmed up: {WARM_UP_PLANS} plans"), outcome
    # a plain client of the server: its plans are not the clients' plans served
    assert status(service)["plans_served"] < WARM_UP_PLANS
    # and it ends (its interpreter's exit takes a moment after the record)
    deadline = time.monotonic() + 60
    while (left := _warm_ups_of(service)) and time.monotonic() < deadline:
        time.sleep(_POLL_S)
    assert not left


def _warm_ups_of(service: Path) -> list[str]:
    return [pid for pid in os.listdir("/proc") if pid.isdigit() and _warm_up_of(int(pid)) == str(service / "spark")]


def test_once_warm_the_service_plans_one_shots_at_its_desk(
    service: Path, spark_engine: SparkEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs after the warm-up above: the service starts its plan desk once warm."""
    deadline = time.monotonic() + 300
    while (desk := plan_desk.read_desk(spark_service.ServiceDir(service))) is None and time.monotonic() < deadline:
        time.sleep(_POLL_S)
    assert desk is not None, "no plan desk once the service had warmed up"
    assert stat.S_IMODE((service / "spark" / plan_desk.DESK_NAME).stat().st_mode) == 0o600
    _listens_on_loopback_only(desk.port)

    served = status(service)["plans_served"]
    result = run_ebb(service, "explain", "demo", "--now", NOW, "--json")
    assert result.code == 0 and result.err == "", result.err
    now = json.loads(result.out)["now"]
    with Broker(service) as broker:
        local = Pruner(broker, spark_engine).plan(now=now, topics=["demo"])
        monkeypatch.delenv(MASTER_ENV)
        one_shot = spark_engine_for(broker.config, broker.data)
        monkeypatch.setattr(one_shot, "start", lambda: pytest.fail("a one-shot started a Spark session of its own"))
        pruner = Pruner(broker, one_shot)
        assert pruner.use_desk()
        at_desk = pruner.plan(now=now, topics=["demo"])
        snapshot = build_snapshot(broker.catalog, StoreRecordTimes(broker.data), defaults={}, now=now)
    assert json.loads(result.out)["segments"] == _explained(local, None) == _explained(at_desk, None)
    assert status(service)["plans_served"] == served + 2
    for token in ("", "not-the-token"):
        assert plan_desk.ask(desk.port, token, snapshot) is None
    assert status(service)["plans_served"] == served + 2


def test_a_server_that_stops_answering_is_one_error_not_a_wait_for_ever(
    service: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs after the desk test, on the shared server, frozen (SIGSTOP) and thawed:
    its JVM lives and the kernel accepts connections for it, but nothing answers.
    A one-shot (through the desk) and an engine of its own (not) each end in one
    error that says so, instead of waiting for ever; status and the metrics' gauge say
    it too, and an engine attached before stops without waiting for the server."""
    deadline = time.monotonic() + 300
    while plan_desk.read_desk(spark_service.ServiceDir(service)) is None and time.monotonic() < deadline:
        time.sleep(_POLL_S)
    state = spark_service.ServiceDir(service).read_state()
    assert state is not None and status(service)["answering"]
    monkeypatch.delenv(MASTER_ENV)
    with Broker(service) as broker:
        attached = spark_engine_for(broker.config, broker.data)  # as `ebb engine` or the console is
    assert attached.session(timeout=STOP_WAIT_S).range(3).count() == 3
    os.kill(state.pid, signal.SIGSTOP)
    try:
        assert not status(service)["answering"]
        assert attached.observed_state() == "not_answering"  # the metrics' gauge, before any plan
        # Its stop does not wait for a release the server will never answer (80 s, the keepalive).
        attached.stop()
        assert "the Spark Connect session was not closed within 10 s" in attached.log_file.read_text()
        shown = run_ebb(service, "spark", "status")
        assert shown.code == 0 and "does not answer: it is stopped or hung; `ebb spark stop` ends it" in shown.out

        result = run_ebb(service, "explain", "demo", "--now", NOW)
        assert result.code == 2 and result.out == "", result.out
        silent = (
            f"the Spark service's server (pid {state.pid}) does not answer: it is stopped or hung; `ebb spark stop`"
        )
        assert result.err.startswith(f"ebb: error: {silent}") and result.err.count("\n") == 1, result.err

        with Broker(service) as broker:
            engine = spark_engine_for(broker.config, broker.data)
        try:
            with pytest.raises(SparkUnavailable, match=re.escape(silent)):
                engine.session(timeout=STOP_WAIT_S)
        finally:
            engine.stop()
    finally:
        os.kill(state.pid, signal.SIGCONT)
    assert status(service)["answering"]
    assert spark_service.ServiceDir(service).read_state() == state  # not replaced: it was only frozen


def test_a_server_that_dies_is_one_error_then_replaced(service: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs last on the shared server: it kills it, then starts its replacement
    (stopped with the fixture)."""
    monkeypatch.delenv(MASTER_ENV)
    with Broker(service) as broker:
        engine = spark_engine_for(broker.config, broker.data)
    try:
        spark = engine.session(timeout=120)
        assert spark.range(3).count() == 3
        state = spark_service.ServiceDir(service).read_state()
        assert state is not None
        assert engine.observed_state() == "ready"
        os.kill(state.pid, signal.SIGKILL)
        assert _wait_gone([state.pid], 30)
        # Before a plan finds out, the metrics' gauge already says it (SparkEngine.observed_state).
        assert (engine.state, engine.observed_state()) == ("ready", "stopped")
        with pytest.raises(SparkUnavailable, match="cannot be reached.*the next plan starts a new Spark service"):
            engine.run(lambda s: s.range(3).count(), "after-kill")
        # The supervisor saw its JVM die: nothing recorded, nothing left.
        assert _wait_gone([state.supervisor_pid], 30)
        assert spark_service.ServiceDir(service).read_state() is None
        assert engine.state == "stopped"  # let go: the next use attaches again
    finally:
        engine.stop()
    replaced = run_ebb(service, "spark", "start")
    assert replaced.code == 0 and "Spark service started" in replaced.out, replaced.err


def _warm_up_of(pid: int) -> str | None:
    """The service directory of a warm-up process, None if ``pid`` is none."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return None
    return argv[3] if argv[1:3] == ["-m", "engine.prune.spark_warmup"] and len(argv) > 3 else None


def test_a_lock_file_the_system_refuses_is_spark_unavailable_in_one_line(tmp_path: Path) -> None:
    """A directory in the place of a lock file: every caller gets SparkUnavailable
    (one error line), where `ebb spark start` ended in IsADirectoryError."""
    service = spark_service.ServiceDir(tmp_path)
    for name in (spark_service.START_LOCK, spark_service.ATTACH_LOCK):
        (service.root / name).mkdir(parents=True)
    with pytest.raises(SparkUnavailable, match=r"start.lock cannot be opened: Is a directory \(EISDIR\)"):
        with service.start_lock():
            pass
    for take in (service.attach_lock, service.try_exclusive_attach):
        with pytest.raises(SparkUnavailable, match=r"attached.lock cannot be opened: Is a directory \(EISDIR\)"):
            take()


def test_stop_needs_no_readable_config(ebb, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ebb.toml broken while the service runs: every other command refuses it, and
    so did `spark stop`, leaving the operator to wait out the idle timeout or kill."""
    assert ebb("topic", "create", "t").code == 0
    (data_dir / "ebb.toml").write_text("[policy]\nretention_time = 'soon'\n")
    assert ebb("topic", "list").code == 2
    stopped: list[Path] = []
    monkeypatch.setattr(spark_service, "stop", lambda root: stopped.append(root))
    result = ebb("spark", "stop")
    assert (result.code, result.out, result.err) == (0, "Spark service was not running\n", "")
    assert stopped == [data_dir.absolute()]
