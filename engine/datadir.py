"""Where a data directory keeps its parts.

    <data dir>/
        ebb.toml                 config (optional)
        catalog.db               catalog and journal (SQLite, WAL)
        prune.lock               held by the process pruning (engine/prune/executor.py)
        topics/<topic>/<partition>/<base offset>.log|.index|.timeindex
        quarantine/<topic>/<partition>/   corrupt segments moved aside, each with a note

Everything is created readable by its owner only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from engine.errors import StoreError
from engine.names import check_topic_name

CONFIG_NAME = "ebb.toml"
PRUNE_LOCK_NAME = "prune.lock"


def default_data_dir() -> Path:
    """``$EBB_DATA_DIR``, else the per-user data directory (XDG)."""
    if os.environ.get("EBB_DATA_DIR"):
        return Path(os.environ["EBB_DATA_DIR"])
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "ebbtide"


@dataclass(frozen=True)
class DataDir:
    root: Path

    def __post_init__(self) -> None:
        # Absolute from the start: Spark is given file URIs under it, which cannot be
        # relative, and the shared service and its clients, started from different
        # working directories, must name the same files.
        object.__setattr__(self, "root", self.root.absolute())

    @property
    def catalog_path(self) -> Path:
        return self.root / "catalog.db"

    @property
    def config_path(self) -> Path:
        return self.root / CONFIG_NAME

    @property
    def topics_root(self) -> Path:
        return self.root / "topics"

    def topic_dir(self, topic: str) -> Path:
        # The name check is what keeps the path inside the data directory.
        return self.topics_root / check_topic_name(topic)

    def partition_dir(self, topic: str, partition: int) -> Path:
        return self.topic_dir(topic) / str(int(partition))

    @property
    def quarantine_root(self) -> Path:
        return self.root / "quarantine"

    def quarantine_dir(self, topic: str, partition: int) -> Path:
        return self.quarantine_root / check_topic_name(topic) / str(int(partition))

    def ensure(self) -> None:
        """Create the directory tree (owner-only) if it does not exist."""
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.topics_root.mkdir(mode=0o700, exist_ok=True)
        except OSError as error:
            if isinstance(error, FileExistsError):
                # mkdir's "File exists" would leave the operator to guess which file.
                path = self.root if not self.root.is_dir() else self.topics_root
                raise StoreError(f"cannot use data directory {self.root}: {path} is a file, not a directory") from None
            raise StoreError(f"cannot create data directory {self.root}: {error.strerror or error}") from None
        if not os.access(self.root, os.W_OK):
            raise StoreError(
                f"data directory {self.root} is not writable: ebb writes there even to read it "
                "(its catalog's write-ahead log); for a read-only copy, copy it somewhere writable first"
            )
