"""The data directory names the same files whatever the working directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.datadir import DataDir
from engine.store.reserve import RESERVE_NAME, Reserve


def test_a_relative_data_directory_is_made_absolute_where_it_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `ebb --data-dir data ...`: Spark is given file URIs under it (which cannot be
    # relative), and the shared service, started elsewhere, reads the same files.
    monkeypatch.chdir(tmp_path)
    data = DataDir(Path("data"))
    monkeypatch.chdir("/")
    assert data.root == tmp_path / "data"
    assert data.catalog_path == tmp_path / "data" / "catalog.db"


def test_a_directory_in_the_reserves_place_is_no_reserve(tmp_path: Path) -> None:
    """It held no room, yet counted as present; releasing it, on a full disk before a
    deletion, failed on unlinking a directory."""
    (tmp_path / RESERVE_NAME / "inside").mkdir(parents=True)
    reserve = Reserve(tmp_path)
    assert not reserve.present
    assert reserve.release() is False and (tmp_path / RESERVE_NAME / "inside").is_dir()
    assert reserve.ensure() is False  # no file can be made over it: `ebb verify --repair` moves it
