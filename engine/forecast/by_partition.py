"""Running maxima and searches within each partition's entries of arrays laid in
partition order (segments; a partition's entries one run), all partitions at once:
each run's values are ranked and shifted above the run's before it, so that one
numpy call over the whole array does what a loop would do per partition."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def running_max(group: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The running maximum of ``values`` within each run of equal ``group`` (sorted)."""
    if len(values) == 0:
        return values.copy()
    ranks, rank = np.unique(values, return_inverse=True)
    shift = group.astype(np.int64) * len(ranks)
    return ranks[np.maximum.accumulate(shift + rank) - shift]


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
        asked = np.asarray(query_group, np.int64) * (len(self.ranks) + 1) + np.searchsorted(self.ranks, query)
        found = np.searchsorted(self.keys, asked, side="left")
        # the first entry past the query's group is past every entry of it
        return np.where(found < np.searchsorted(self.group, query_group, side="right"), found, count)
