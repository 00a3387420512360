"""Shell completion as an operator meets it, beyond tests/cli/test_completion.py: the
topic of ``group create``, the console's themes, a data directory written as the shell
has it before expanding it, and a tab press that never writes to the data directory."""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

import pytest

from console.cli.main import build_parser
from engine.broker import Broker
from tests.cli.test_completion import _complete


@pytest.fixture
def data(data_dir: Path) -> Path:
    with Broker(data_dir) as broker:
        broker.create_topic("orders", 2)
        broker.create_topic("audit-log", 1)
        broker.create_group("orders", "billing")
    return data_dir


def test_group_create_completes_the_existing_topic_not_the_new_group(data: Path, tmp_path: Path) -> None:
    """``ebb group create TOPIC GROUP``: the topic exists (only the group is new), but
    both were suppressed because the sub-command is called ``create``."""
    topics, _ = _complete(f"ebb --data-dir {data} group create ", tmp_path)
    assert topics == {"orders", "audit-log"}
    new_group, _ = _complete(f"ebb --data-dir {data} group create orders ", tmp_path)
    assert new_group == set()


def test_console_themes_are_completed_not_file_names(tmp_path: Path) -> None:
    themes, _ = _complete("ebb console --theme ebbtide-", tmp_path)
    assert themes == {"ebbtide-dark", "ebbtide-light", "ebbtide-high-contrast"}


@pytest.mark.parametrize("written", ["~/data", "$HOME/data", "${HOME}/data"])
def test_a_data_directory_is_expanded_as_the_shell_will(data: Path, tmp_path: Path, written: str) -> None:
    """Bash hands the completer the command line as typed (COMP_LINE): ``~`` and
    ``$HOME`` are expanded only when the command runs, so they found no catalog."""
    assert data == tmp_path / "data"
    topics, err = _complete(f"ebb --data-dir {written} topic describe ", tmp_path, {"HOME": str(tmp_path)})
    assert topics == {"orders", "audit-log"} and err == ""


def _digests(root: Path) -> dict[str, str]:
    """Every file of ``root`` but SQLite's own -wal and -shm, which a reader may make."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith(("-wal", "-shm"))
    }


def test_a_tab_press_writes_nothing(data: Path, tmp_path: Path) -> None:
    """Completion opened the catalog as a command does, which creates its tables: an
    empty ``catalog.db`` (a data directory's creation interrupted, a ``touch``) was
    given the whole schema by pressing TAB."""
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "catalog.db").touch()
    names, err = _complete(f"ebb --data-dir {empty} topic describe ", tmp_path)
    assert names == set() and "Traceback" not in err
    assert (empty / "catalog.db").stat().st_size == 0
    before = _digests(data)
    names, _ = _complete(f"ebb --data-dir {data} group delete orders ", tmp_path)
    assert names == {"billing"}
    assert _digests(data) == before


def _leaf_commands() -> dict[str, argparse.ArgumentParser]:
    """``"group move"`` -> its parser, for every command that takes no sub-command."""
    leaves: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs and path:
            leaves[path] = parser
        for action in subs:
            for name, sub in action.choices.items():
                walk(sub, f"{path} {name}".strip())

    walk(build_parser(), "")
    return leaves


def test_every_command_completes_every_flag_of_its_own(tmp_path: Path) -> None:
    leaves = _leaf_commands()
    assert {"group move", "forecast", "engine", "spark status", "completion"} <= set(leaves)
    for path, parser in leaves.items():
        offered, err = _complete(f"ebb {path} -", tmp_path)
        assert offered == {o for a in parser._actions for o in a.option_strings}, path
        assert err == ""


def test_the_default_data_directory_is_not_created(tmp_path: Path) -> None:
    """No ``--data-dir`` and no ``$EBB_DATA_DIR``: the per-user directory, which
    completing a group name must not create either."""
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "XDG_DATA_HOME": "", "EBB_DATA_DIR": ""}
    for line in ("ebb group move ", "ebb group move orders ", "ebb forecast --stalled "):
        offered, err = _complete(line, tmp_path, env)
        assert offered == set() and err == "", line
    assert list(home.iterdir()) == []


def test_log_status_offers_what_the_listing_takes(tmp_path: Path) -> None:
    """``ebb log`` lists actions, ``--cycles`` cycles, and each refuses the other's
    statuses; both lists were offered to both."""
    actions, _ = _complete("ebb log --status ", tmp_path)
    assert actions == {"planned", "applied", "rolled_back", "skipped"}
    cycles, _ = _complete("ebb log --cycles --status ", tmp_path)
    assert cycles == {"running", "done", "failed", "interrupted", "dry_run", "paused"}


def test_forecast_completes_each_of_its_topics(data: Path, tmp_path: Path) -> None:
    """``forecast [TOPIC ...]``: a topic after a topic, as for the first."""
    first, _ = _complete(f"ebb --data-dir {data} forecast ", tmp_path)
    assert first == {"orders", "audit-log"}
    second, _ = _complete(f"ebb --data-dir {data} forecast orders a", tmp_path)
    assert second == {"audit-log"}
    stalled, _ = _complete(f"ebb --data-dir {data} forecast orders audit-log --stalled ", tmp_path)
    assert stalled == {"billing"}


@pytest.mark.parametrize("quoted", [False, True])
def test_a_hash_inside_a_data_directory_word_is_part_of_the_path(tmp_path: Path, quoted: bool) -> None:
    """Bash reads ``--data-dir /srv/a#b`` as one word (``#`` begins a comment only
    where a word begins); argcomplete's lexer took the rest of the line for a
    comment and offered the commands instead of the topics."""
    data = tmp_path / "a#b"
    with Broker(data) as broker:
        broker.create_topic("orders", 1)
    written = f"'{data}'" if quoted else str(data)
    topics, err = _complete(f"ebb --data-dir {written} topic describe ", tmp_path)
    assert topics == {"orders"} and err == ""
    # and with the cursor inside the line: the topic word is completed, not what follows
    line = f"ebb --data-dir {written} topic describe or --json"
    topics, err = _complete(line, tmp_path, point=line.index(" --json"))
    assert topics == {"orders"} and err == ""
