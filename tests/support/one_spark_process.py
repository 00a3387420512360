"""Several ``ebb`` commands run one after another in one subprocess, sharing the Spark
engine the first of them builds, for tests of a Spark that is not the test process's
local session (a process holds one SparkContext, so these cannot run in the test's).

Each ``ebb`` subprocess of its own would start a Spark application of its own (a
driver JVM, and on a standalone cluster an executor JVM), 10-20 s each, where the
claim under test is about the plan, not the process boundary. The commands get one
engine as the ``shared_spark`` fixture gives in-process ones: built by the first
command's flags and configuration, kept across the commands (their ``stop`` is a
no-op), stopped when the last has run. Anything the child writes outside the
commands' own output (a JVM on the terminal) fails the test.

Run as ``python -m tests.support.one_spark_process RESULTS``: the commands (each
a full argv) as JSON on stdin, each one's ``CliResult`` fields as JSON in RESULTS.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.support.cli import REPO, CliResult, run_main, subprocess_env


def run_in_one_process(data_dir: Path, *commands: tuple[str, ...], timeout: float = 600) -> list[CliResult]:
    """``ebb --data-dir DATA_DIR COMMAND`` for each of ``commands``, in order, in one
    subprocess with one Spark engine."""
    with tempfile.TemporaryDirectory() as scratch:
        results = Path(scratch) / "results.json"
        argvs = [["--data-dir", str(data_dir), *command] for command in commands]
        done = subprocess.run(
            [sys.executable, "-m", __name__, str(results)],
            input=json.dumps(argvs).encode(),
            capture_output=True,
            timeout=timeout,
            cwd=REPO,
            env=subprocess_env(),
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, b"", b""), done.stderr.decode()
        return [CliResult(**fields) for fields in json.loads(results.read_text())]


def _main(results: Path) -> None:
    import engine.prune.session as session

    build = session.spark_engine_for
    shared: list[session.SparkEngine] = []

    def one_engine(*args: Any, **kwargs: Any) -> session.SparkEngine:
        if not shared:
            engine = build(*args, **kwargs)
            shared.append(engine)
            engine.stop = lambda: None  # type: ignore[method-assign]
        return shared[0]

    session.spark_engine_for = one_engine  # type: ignore[assignment]
    try:
        done = [dataclasses.asdict(run_main(argv)) for argv in json.loads(sys.stdin.read())]
    finally:
        for engine in shared:
            type(engine).stop(engine)
    results.write_text(json.dumps(done))


if __name__ == "__main__":
    _main(Path(sys.argv[1]))
