"""Input that Spark reads already partitioned and sorted: Parquet files laid out as
Spark's own bucketing writes them, registered as an external bucketed table.

The planner's windows need every row of a partition in one task, in order. Read
from plain files, Spark would shuffle and sort all rows in every plan: a fifth of a
warm plan's work (docs/SPARK_NOTES.md). A bucketed table's scan is not shuffled, one
task reads one bucket; so the rows are written here as such a table's files (each
row in the file of bucket ``pmod(hash(key), buckets)``, with Spark's own ``hash``;
one file per bucket, sorted) and registered in the session's catalog for one plan.
Given ``spark.sql.legacy.bucketedTableScan.outputOrdering`` (the engine sets it),
Spark also takes the files' declared order and sorts nothing.

Correctness rests on two claims the files must keep: each key's rows in its
bucket's file, and each file in the declared order. A row in another bucket would
split its partition between two tasks; so :func:`bucket_of` is tested against
Spark's ``hash``. A Spark with bucketing disabled shuffles and sorts as before.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

# Murmur3 x86 32-bit, as Spark's Murmur3_x86_32; Spark's ``hash`` seeds it with 42.
_SEED = 42
_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)

#: Declares the table; the name and location go as parameters. Interpolated are the
#: columns with their types, the key and the order (quoted identifiers, checked to be
#: the schema's) and the bucket count (an integer).
_CREATE = (
    "CREATE TABLE IDENTIFIER(:name) ({columns}) USING parquet"
    " CLUSTERED BY ({key}) SORTED BY ({order}) INTO {buckets} BUCKETS LOCATION :location"
)
_DROP = "DROP TABLE IF EXISTS IDENTIFIER(:name)"

#: Spark SQL types of the Arrow types the planner writes
SQL_TYPES = {pa.string(): "STRING", pa.int32(): "INT", pa.int64(): "BIGINT", pa.bool_(): "BOOLEAN"}


def _quoted(names: Sequence[str]) -> str:
    """Column names as quoted Spark identifiers (a backtick in a name is doubled)."""
    return ", ".join("`" + name.replace("`", "``") + "`" for name in names)


def ddl(schema: pa.Schema) -> str:
    """A Spark DDL column list for ``schema``."""
    return ", ".join(f"{_quoted([f.name])} {SQL_TYPES[f.type]}" for f in schema)


def _rotate(x: np.ndarray, bits: int) -> np.ndarray:
    return (x << np.uint32(bits)) | (x >> np.uint32(32 - bits))


def _mix(h: np.ndarray, k: np.ndarray) -> np.ndarray:
    k = _rotate(k * _C1, 15) * _C2
    return _rotate(h ^ k, 13) * np.uint32(5) + np.uint32(0xE6546B64)


def bucket_of(keys: np.ndarray, buckets: int) -> np.ndarray:
    """The bucket of each int64 key: Spark's ``pmod(hash(key), buckets)``, where the
    hash of a long is Murmur3 over its low, then its high 32-bit word."""
    words = keys.astype(np.int64).view(np.uint64)
    low = (words & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    high = (words >> np.uint64(32)).astype(np.uint32)
    with np.errstate(over="ignore"):  # the arithmetic is modulo 2**32 on purpose
        h = _mix(_mix(np.full(len(words), _SEED, dtype=np.uint32), low), high) ^ np.uint32(8)
        h ^= h >> np.uint32(16)
        h *= np.uint32(0x85EBCA6B)
        h ^= h >> np.uint32(13)
        h *= np.uint32(0xC2B2AE35)
        h ^= h >> np.uint32(16)
    return np.mod(h.view(np.int32).astype(np.int64), buckets)


def rows_by_bucket(keys: np.ndarray, buckets: int) -> list[np.ndarray]:
    """For each bucket, the indices of the rows whose ``keys`` fall in it, in their
    given order: rows given in the table's declared order, taken by these, are its
    files' rows."""
    bucket = bucket_of(keys, buckets)
    # A stable sort on the narrowest integer type is a radix sort: linear.
    order = np.argsort(bucket.astype(np.min_scalar_type(buckets - 1)), kind="stable")
    return np.split(order, np.cumsum(np.bincount(bucket, minlength=buckets))[:-1])


def write(filesystem: pafs.FileSystem, directory: str, buckets: int, rows_of: Callable[[int], pa.Table]) -> None:
    """Write the files of a bucketed table into ``directory`` of ``filesystem``: bucket
    ``i``'s file holds ``rows_of(i)`` (see :func:`rows_by_bucket`). Spark reads a
    file's bucket from the digits after the last ``_``.

    The buckets are built and written on parallel threads: Arrow and numpy release
    the GIL, and Spark has nothing to do until the files are there."""
    filesystem.create_dir(directory, recursive=False)

    def write_bucket(bucket: int) -> None:
        # Plain encoding: the files are read once, and dictionaries cost more to write
        # than they save (half the writing time, measured).
        path = f"{directory}/rows_{bucket:05d}.parquet"
        pq.write_table(rows_of(bucket), path, filesystem=filesystem, compression="none", use_dictionary=False)

    with ThreadPoolExecutor(max_workers=min(buckets, os.cpu_count() or 1)) as pool:
        for _ in pool.map(write_bucket, range(buckets)):  # each result, to raise a worker's error
            pass


@contextmanager
def registered(
    spark: Any, location: str, schema: pa.Schema, key: str, order: Sequence[str], buckets: int
) -> Iterator[Any]:
    """The files of :func:`write` at ``location`` (their directory as Spark names it)
    as a DataFrame of a bucketed table, registered in ``spark``'s catalog while the
    context lasts."""
    if key not in schema.names or not set(order) <= set(schema.names) or buckets < 1:
        raise ValueError(f"no bucketed table of {buckets} buckets by {key!r} in order {list(order)} of {schema.names}")
    name = f"ebbtide_plan_{uuid.uuid4().hex}"
    create = _CREATE.format(columns=ddl(schema), key=_quoted([key]), order=_quoted(order), buckets=int(buckets))
    spark.sql(create, args={"name": name, "location": location})
    try:
        yield spark.table(name)
    finally:
        # External: dropping it forgets the table and leaves the files to the caller.
        spark.sql(_DROP, args={"name": name})
