"""The data directory names the same files whatever the working directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.datadir import DataDir


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
