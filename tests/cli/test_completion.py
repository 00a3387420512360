"""Shell completion (argcomplete): commands, flags, and topic and group names from
the data directory on the command line; nothing is created, nothing fails loudly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine.broker import Broker
from tests.support.cli import REPO, subprocess_env


def _complete(
    line: str, tmp_path: Path, env: dict[str, str] | None = None, point: int | None = None
) -> tuple[set[str], str]:
    """The completions the shell would get for ``line`` (cursor at ``point``, default
    its end), and stderr; after a blank, flags are offered too: those are left out."""
    point = len(line) if point is None else point
    out = tmp_path / "completions"
    done = subprocess.run(
        [sys.executable, "-m", "console.cli.main"],
        env=subprocess_env(
            _ARGCOMPLETE="1", _ARGCOMPLETE_SHELL="bash", COMP_LINE=line, COMP_POINT=str(point),
            _ARGCOMPLETE_STDOUT_FILENAME=str(out), _ARGCOMPLETE_IFS="\n", **(env or {}),
        ),
        cwd=REPO, capture_output=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    offered = {c.strip() for c in out.read_text().split("\n") if c.strip()}
    return {
        c for c in offered if line[:point].split()[-1].startswith("-") or not c.startswith("-")
    }, done.stderr.decode()


@pytest.fixture
def data(data_dir: Path) -> Path:
    with Broker(data_dir) as broker:
        broker.create_topic("orders", 2)
        broker.create_topic("audit-log", 1)
        broker.create_group("orders", "billing")
        broker.create_group("orders", "bi", "reader")
        broker.create_group("audit-log", "siem")
    return data_dir


def test_commands_and_flags(tmp_path: Path) -> None:
    commands, _ = _complete("ebb fo", tmp_path)
    assert commands == {"forecast"}
    flags, _ = _complete("ebb forecast --hor", tmp_path)
    assert flags == {"--horizon"}
    shells, _ = _complete("ebb completion ", tmp_path)
    assert shells == {"bash", "zsh", "fish"}


def test_topic_and_group_names_from_the_data_directory(data: Path, tmp_path: Path) -> None:
    topics, _ = _complete(f"ebb --data-dir {data} topic describe ", tmp_path)
    assert topics == {"orders", "audit-log"}
    some, _ = _complete(f"ebb --data-dir {data} explain or", tmp_path)
    assert some == {"orders"}
    groups, _ = _complete(f"ebb --data-dir {data} group delete orders ", tmp_path)
    assert groups == {"billing", "bi"}
    stalled, _ = _complete(f"ebb --data-dir {data} forecast audit-log --stalled ", tmp_path)
    assert stalled == {"siem"}
    from_env, _ = _complete("ebb consume orders --group b", tmp_path, {"EBB_DATA_DIR": str(data)})
    assert from_env == {"billing", "bi"}
    # a new name is not completed from the existing ones
    new, _ = _complete(f"ebb --data-dir {data} topic create ", tmp_path)
    assert new == set()


def test_values_of_a_known_few_are_completed_not_file_names(tmp_path: Path) -> None:
    """``log --action`` and ``--status`` and the policy's choice fields took any text,
    so the shell offered the files of the current directory."""
    actions, _ = _complete("ebb log --action delete_s", tmp_path)
    assert actions == {"delete_segment"}
    statuses, _ = _complete("ebb log --status rol", tmp_path)
    assert statuses == {"rolled_back"}
    granularity, _ = _complete("ebb topic alter orders --granularity ", tmp_path)
    assert granularity == {"segment", "message"}
    policies, _ = _complete("ebb forecast --backlog-policy ", tmp_path)
    assert policies == {"producer_request_hold", "producer_exception", "consumer_backlog_eviction"}


def test_no_data_directory_or_a_broken_one_completes_nothing_quietly(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    names, err = _complete(f"ebb --data-dir {missing} topic describe ", tmp_path)
    assert names == set() and err == ""
    assert not missing.exists(), "completion must not create a data directory"
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "catalog.db").write_bytes(b"not a database" * 100)
    names, err = _complete(f"ebb --data-dir {broken} topic describe ", tmp_path)
    assert names == set() and "Traceback" not in err


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_prints_the_script_without_a_data_directory(tmp_path: Path, shell: str) -> None:
    missing = tmp_path / "nowhere"
    done = subprocess.run(
        [sys.executable, "-m", "console.cli.main", "--data-dir", str(missing), "completion", shell],
        env=subprocess_env(), cwd=REPO, capture_output=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0 and done.stderr == b""
    assert b"ebb" in done.stdout and b"_ARGCOMPLETE" in done.stdout
    assert not missing.exists()
