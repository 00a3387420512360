"""Running ``ebb``: its result, the argv of a real subprocess, and the state a refused
command must leave as it was."""

from __future__ import annotations

import io
import os
import sqlite3
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

from console.cli.main import main

REPO = Path(__file__).resolve().parents[2]

#: The JIT of a Spark driver JVM that an ``ebb`` subprocess starts for a few plans and
#: stops: C1 alone. Such a JVM lives in the JIT's ramp, where C2's compiles take a
#: core (docs/SPARK_NOTES.md, "The JIT ramp"): a cold start and its first plans took
#: about 40% less time (an engine test of two cycles: 44 s against 70 s). C1 plans
#: take twice as long once C2 has settled, so the run's own JVMs, hundreds of plans
#: each (tests/support/spark_fixtures.py), keep the default. spark-submit reads the
#: variable; the commands under test are unchanged.
ONE_SHOT_JVM = "-XX:TieredStopAtLevel=1"


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment of an ``ebb`` subprocess: this checkout importable, and the
    JIT of :data:`ONE_SHOT_JVM` for the Spark driver it may start."""
    submit_opts = f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} {ONE_SHOT_JVM}".strip()
    return {**os.environ, "PYTHONPATH": str(REPO), "SPARK_SUBMIT_OPTS": submit_opts, **extra}


@dataclass
class CliResult:
    code: int
    out: str
    err: str


def run_main(argv: list[str], stdin: str = "") -> CliResult:
    """``ebb ARGV`` in this process, ``stdin`` its standard input (put back after)."""
    out, err = io.StringIO(), io.StringIO()
    saved, sys.stdin = sys.stdin, io.TextIOWrapper(io.BytesIO(stdin.encode()))
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else 1
    finally:
        sys.stdin = saved
    return CliResult(code, out.getvalue(), err.getvalue())


def ebb_command(data_dir: Path, *args: str) -> list[str]:
    """The argv of a real ``ebb`` subprocess on ``data_dir``."""
    return [sys.executable, "-m", "console.cli.main", "--data-dir", str(data_dir), *args]


def state_of(data_dir: Path) -> tuple:
    """Everything a refused command must leave untouched: files and catalog rows."""
    files = sorted(
        (str(p.relative_to(data_dir)), p.stat().st_size)
        for p in data_dir.rglob("*")
        if p.is_file() and not p.name.startswith("catalog.db")
    )
    conn = sqlite3.connect(data_dir / "catalog.db")
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
    rows = {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in tables}
    conn.close()
    return files, rows
