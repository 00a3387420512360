"""Shared fixtures: a fresh data directory, a broker on it, and the CLI run in-process
or as a real subprocess (for kills and for checking what reaches the terminal)."""

from __future__ import annotations

import compileall
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.broker import Broker
from engine.prune.session import MASTER_ENV
from tests.support.cli import REPO, CliResult, ebb_command, run_main, subprocess_env

# Commands that plan run Spark in their own process, as `--spark-master local[*]`
# would: the shared Spark service (a background server that outlives the command) is
# started only by the tests of that service (tests/prune/test_spark_service.py), which stop
# it. Subprocesses inherit it.
os.environ.setdefault(MASTER_ENV, "local[*]")

# gRPC (the Spark Connect client a test loads) restarts its poller thread in every
# forked child; once the child closes descriptors before its exec, that thread finds
# its epoll descriptor gone and aborts the child (SIGABRT, 1 fork in 150 here). The
# tests fork with grpc loaded (a preexec_fn, tests/support/forked_cli.py, the fault
# campaign), so its fork handlers are off for the whole run; ``ebb`` itself never
# forks a process that holds a Spark Connect client.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

# The session-scoped Spark engine and Spark Connect server, the console's fixed catalog,
# and the order the xdist workers get the tests in (the known-long ones first).
pytest_plugins = ["tests.support.spark_fixtures", "tests.support.console_fixtures", "tests.support.scheduling"]


def pytest_sessionstart(session: pytest.Session) -> None:
    """Where Python is told not to write bytecode (PYTHONDONTWRITEBYTECODE, set on this
    machine), compile the checkout once: Python still reads it, and every ``ebb``
    subprocess, Spark supervisor and warm-up would otherwise compile the engine from
    source as it starts (0.2 s of the 1 s an import-heavy start takes, measured)."""
    if sys.dont_write_bytecode and not hasattr(session.config, "workerinput"):
        for package in ("engine", "console", "tests"):
            compileall.compile_dir(REPO / package, quiet=1)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def broker(data_dir: Path) -> Iterator[Broker]:
    with Broker(data_dir) as b:
        yield b


@pytest.fixture
def ebb(data_dir: Path):
    """Run ``ebb --data-dir DATA ARGS...`` in-process; stdin may be given as text."""

    def run(*args: str, stdin: str = "") -> CliResult:
        return run_main(["--data-dir", str(data_dir), *args], stdin)

    return run


@pytest.fixture
def ebb_process(data_dir: Path):
    """Run ``ebb`` as a subprocess and wait for it."""

    def run(*args: str, stdin: bytes = b"", timeout: float = 120) -> CliResult:
        done = subprocess.run(
            ebb_command(data_dir, *args),
            input=stdin,
            capture_output=True,
            timeout=timeout,
            cwd=REPO,
            env=subprocess_env(),
        )
        return CliResult(done.returncode, done.stdout.decode(), done.stderr.decode())

    return run
