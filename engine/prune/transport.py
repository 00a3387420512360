"""How the snapshot reaches Spark: as files Spark reads, or as Arrow through the Spark API.

- ``files``: the planner's rows as a bucketed table's Parquet files
  (:mod:`engine.prune.bucketed`) in a scratch directory Spark can read: the data
  directory's ``snapshots/`` when Spark runs on this machine (a local master, a
  loopback Connect server), or a shared location the operator configures
  (``[spark] scratch = "URI"``: ``file://``, ``s3://``/``s3a://``, ``hdfs://``),
  written through ``pyarrow.fs``. Spark reads each partition's rows in one task and
  in order: no shuffle, no sort.
- ``arrow``: the rows as Arrow batches through the session (``createDataFrame``; on
  Spark Connect they travel in the plan request), read as temporary views. Nothing
  needs to be shared; Spark shuffles and sorts the rows by partition itself, with the
  same result.

``auto`` takes ``files`` when Spark can read the scratch directory and ``arrow``
otherwise, decided once per Spark session (:func:`unreadable_by`): a random token
written there must come back through Spark. A local master sharing a local scratch
directory is not asked: it is this machine.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from engine.errors import InvalidInput
from engine.prune.session import first_line

TRANSPORTS = ("auto", "files", "arrow")


@dataclass(frozen=True)
class Scratch:
    """A directory for input files: where this process writes it, and how Spark names it."""

    filesystem: pafs.FileSystem
    #: the directory in ``filesystem``
    path: str
    #: the same directory as Spark reads it (a path or a URI)
    location: str

    @classmethod
    def local(cls, directory: Path) -> Scratch:
        return cls(pafs.LocalFileSystem(), str(directory), str(directory))

    @classmethod
    def of_uri(cls, uri: str) -> Scratch:
        """The directory at ``uri``, which pyarrow writes and Spark reads as given.
        Spark's Hadoop connector names S3 ``s3a://``, which pyarrow calls ``s3://``."""
        scheme, _, rest = uri.partition("://")
        try:
            filesystem, path = pafs.FileSystem.from_uri(f"{'s3' if scheme == 's3a' else scheme}://{rest}")
        except (pa.ArrowException, OSError, ValueError) as error:
            raise InvalidInput(f"[spark] scratch {uri!r}: {first_line(error)}") from None
        return cls(filesystem, path.rstrip("/"), uri.rstrip("/"))

    @classmethod
    def configured(cls, uri: str | None, default: Path) -> Scratch:
        """``[spark] scratch`` if set, else ``default`` (the data directory's)."""
        return cls.local(default) if uri is None else cls.of_uri(uri)

    @property
    def is_local(self) -> bool:
        return isinstance(self.filesystem, pafs.LocalFileSystem)

    def child(self, name: str) -> Scratch:
        return Scratch(self.filesystem, f"{self.path}/{name}", f"{self.location}/{name}")


@contextmanager
def private_directory(scratch: Scratch) -> Iterator[Scratch]:
    """A directory of its own in ``scratch`` for one plan's files, removed after."""
    if scratch.is_local:
        # Owner-only, as the data directory it is in by default.
        os.makedirs(scratch.path, mode=0o700, exist_ok=True)
    else:
        scratch.filesystem.create_dir(scratch.path, recursive=True)
    directory = scratch.child(f"snapshot-{uuid.uuid4().hex}")
    directory.filesystem.create_dir(directory.path, recursive=False)
    try:
        yield directory
    finally:
        try:
            directory.filesystem.delete_dir(directory.path)
        except OSError:
            pass  # left behind, never read again: each plan's directory is new


def unreadable_by(spark: Any, scratch: Scratch) -> str | None:
    """None if ``spark`` reads back a marker written into ``scratch``; else why not.

    Read with a given schema, the marker is read by a task, on an executor: a
    cluster whose executors cannot see the directory fails here, not in a plan. A
    token, not only a file, because a remote machine may have the same path with
    other contents."""
    token = uuid.uuid4().hex
    try:
        with private_directory(scratch) as directory:
            marker = directory.child("marker.parquet")
            pq.write_table(pa.table({"token": [token]}), marker.path, filesystem=marker.filesystem)
            rows = spark.read.schema("token STRING").parquet(marker.location).collect()
    except Exception as error:  # noqa: BLE001 - whatever the reason, Spark cannot read it
        return first_line(error)
    if [row.token for row in rows] != [token]:
        return f"Spark read other contents at {scratch.location}"
    return None
