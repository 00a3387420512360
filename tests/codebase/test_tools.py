"""The tree stays clean under the tools configured in pyproject.toml: ruff's lint and
format, and mypy on the packages, the reference model and the benchmarks (run with
this environment's executables, so the pinned versions of the ``test`` extra decide)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import REPO

#: the venv's bin/ (not resolved: a venv's python is a link to the base interpreter)
BIN = Path(sys.executable).parent


@pytest.mark.parametrize(
    "argv",
    [
        ["ruff", "check", "."],
        ["ruff", "format", "--check", "."],
        ["mypy"],  # the files of pyproject.toml's [tool.mypy]: the packages, the reference model
        # bench/ is no package (run as ``python -m bench.x`` from the root)
        ["mypy", "--explicit-package-bases", "bench"],
    ],
    ids=["ruff-check", "ruff-format", "mypy", "mypy-bench"],
)
def test_clean(argv: list[str]) -> None:
    done = subprocess.run(
        [str(BIN / argv[0]), *argv[1:]], cwd=REPO, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
