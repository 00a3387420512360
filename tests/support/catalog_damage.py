"""Ways to damage a data directory's ``catalog.db`` as a disk or an operator would, for
tests/faults/test_catalog_damage.py and tests/faults/test_catalog_rebuild.py. Every catalog
connection must be closed first (the CLI's are, when it returns): the damage is done
to the file, and a write-ahead log would still hold the pages."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

PAGE_GARBAGE = b"\xff" * 24


def table_root_page(catalog: Path, table: str) -> tuple[int, int]:
    """(root page number, page size) of ``table`` in the catalog."""
    conn = sqlite3.connect(catalog)
    try:
        (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()
        (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    finally:
        conn.close()
    return root, page_size


def corrupt_table(catalog: Path, table: str = "segments") -> None:
    """Overwrite the cell pointers of ``table``'s root page (a disk error in it)."""
    assert not Path(f"{catalog}-wal").exists() or Path(f"{catalog}-wal").stat().st_size == 0
    root, page_size = table_root_page(catalog, table)
    with open(catalog, "r+b") as f:
        # Past the 8-byte header of a leaf page (12 for an interior one): its cells.
        f.seek((root - 1) * page_size + 8)
        f.write(PAGE_GARBAGE)


def truncate(catalog: Path, fraction: float = 0.5) -> None:
    os.truncate(catalog, int(catalog.stat().st_size * fraction))


def delete(catalog: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{catalog}{suffix}").unlink(missing_ok=True)


def make_directory(catalog: Path) -> None:
    """A directory in the catalog's place (a mistaken restore, an operator's mkdir)."""
    delete(catalog)
    catalog.mkdir()


DAMAGES = {
    "corrupted": corrupt_table,
    "truncated": truncate,
    "emptied": lambda c: truncate(c, 0),
    "deleted": delete,
    "a directory": make_directory,
}
