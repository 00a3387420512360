"""Group lag for the console's views: computed in the catalog (engine/catalog/lag.py),
where the metrics read it too."""

from engine.catalog.lag import GroupLag, PartitionLag, by_group, partition_lags

__all__ = ["GroupLag", "PartitionLag", "by_group", "partition_lags"]
