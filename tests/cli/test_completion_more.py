"""Shell completion as an operator meets it, beyond tests/cli/test_completion.py: the
topic of ``group create``, the console's themes, a data directory written as the shell
has it before expanding it, and a tab press that never writes to the data directory."""

from __future__ import annotations

from pathlib import Path

import pytest

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
