"""Where Spark's logs and the planner's input files go: the data directory, unless its
filesystem is nearly full.

A prune cycle exists to free space, so it must not need space where there is none:
Spark's log file and warehouse, and the Parquet files the planner hands Spark, go to
the data directory while its filesystem has :data:`MIN_FREE` bytes free, and else to
a private directory of this user under the system's temporary directory (one per
data directory). The choice is made when Spark starts (its logs) and again before
every plan (the input files), so a long-running engine whose disk filled meanwhile
still plans. The console and the error messages name whichever file is in use.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from engine.store.reserve import free_bytes

#: below this much free space on the data directory's filesystem, scratch goes elsewhere
MIN_FREE = 64 * 1024 * 1024


def scratch_dir(root: Path, name: str) -> Path:
    """``root/name``, or its fallback outside ``root``'s filesystem when that is
    nearly full (see the module docstring)."""
    try:
        if free_bytes(root) < MIN_FREE:
            return fallback_dir(root) / name
    except OSError:
        pass  # nothing better to offer: the files fail where they are, with their own error
    return root / name


def fallback_dir(root: Path) -> Path:
    """This user's private directory for ``root`` under the temporary directory."""
    digest = hashlib.sha256(os.fsencode(root.resolve())).hexdigest()[:16]
    base = Path(tempfile.gettempdir()) / f"ebbtide-{os.getuid()}"
    base.mkdir(mode=0o700, exist_ok=True)
    if base.stat().st_uid != os.getuid() or base.is_symlink():
        raise PermissionError(f"{base} is not owned by this user")
    directory = base / digest
    directory.mkdir(mode=0o700, exist_ok=True)
    return directory
