"""Arrays by partition: the partition row of each row of a table, and running maxima
and searches within each partition's entries of arrays laid in partition order
(segments; a partition's entries one run), all partitions at once: each run's values
are ranked and shifted above the run's before it, so that one numpy call over the
whole array does what a loop would do per partition."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def partition_rows(table: pa.Table, partitions: pa.Table) -> np.ndarray:
    """The row in ``partitions`` of each row of ``table`` (both with ``topic`` and
    ``partition``); -1 where there is none."""
    # One integer key per (topic, partition): the forecast asks this of millions of
    # rows, and joining strings per row cost more than the rest of building them.
    topics = pc.unique(partitions["topic"])
    numbers = [partitions["partition"].to_numpy(), table["partition"].to_numpy()]
    width = max((int(n.max()) + 1 for n in numbers if len(n)), default=1)

    def keys(of: pa.Table, number: np.ndarray) -> np.ndarray:
        topic = pc.index_in(of["topic"], value_set=topics).fill_null(-1).to_numpy()
        return np.where(topic >= 0, topic * width + number, -1)

    own, wanted = keys(partitions, numbers[0]), keys(table, numbers[1])
    if len(own) == 0:
        return np.full(len(wanted), -1, np.int64)
    order = np.argsort(own, kind="stable")
    at = np.minimum(np.searchsorted(own[order], wanted), len(own) - 1)
    return np.where((own[order][at] == wanted) & (wanted >= 0), order[at], -1)


def running_max(group: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The running maximum of ``values`` within each run of equal ``group`` (sorted)."""
    if len(values) == 0:
        return values.copy()
    ranks, rank = np.unique(values, return_inverse=True)
    shift = group.astype(np.int64) * len(ranks)
    return ranks[np.maximum.accumulate(shift + rank) - shift]


def sorted_search(haystack: np.ndarray, needles: np.ndarray, side: Literal["left", "right"] = "left") -> np.ndarray:
    """``np.searchsorted(haystack, needles)``, the needles searched in sorted order:
    numpy starts each search where the one before ended, and a forecast's million
    needles in random order over a million entries took four times as long."""
    flat = np.ravel(needles)
    order = np.argsort(flat)
    found = np.empty(len(flat), np.int64)
    found[order] = np.searchsorted(haystack, flat[order], side=side)
    return found.reshape(np.shape(needles))


@dataclass(frozen=True)
class Runs:
    """Entries in runs of equal ``group`` (sorted), their values nondecreasing within
    each run, laid out once for any number of searches: ``keys`` are the values'
    ranks (``ranks``: the distinct values), each run's above the run's before it."""

    group: np.ndarray
    ranks: np.ndarray
    keys: np.ndarray

    @classmethod
    def of(cls, group: np.ndarray, values: np.ndarray) -> Runs:
        ranks, rank = np.unique(values, return_inverse=True)
        # a query above every value ranks one past them
        return cls(group, ranks, group.astype(np.int64) * (len(ranks) + 1) + rank)

    def first_at_least(self, query_group: np.ndarray, query: np.ndarray) -> np.ndarray:
        """For each query (any shape), the index of the first entry of its group whose
        value is at least the query's; the number of entries where there is none."""
        count = len(self.group)
        if count == 0:
            return np.zeros(np.shape(query), np.int64)
        asked = np.asarray(query_group, np.int64) * (len(self.ranks) + 1) + sorted_search(self.ranks, query)
        found = sorted_search(self.keys, asked)
        # the first entry past the query's group is past every entry of it
        return np.where(found < sorted_search(self.group, query_group, side="right"), found, count)
