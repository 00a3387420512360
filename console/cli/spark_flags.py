"""Where a planning command plans: the ``--spark-master`` / ``--spark-remote`` flags
every command that plans takes (prune, explain, forecast, engine, console), and the
pruner they give. Spark is imported by :func:`planning_pruner` alone (see
console/cli/main.py)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from console.cli.spark_cmd import wait_for_spark
from engine.broker import Broker

if TYPE_CHECKING:
    from engine.prune.pruner import Pruner


def add_spark_flags(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--spark-master", metavar="MASTER",
        help="plan on a Spark in this process: local[*], local[N] or spark://HOST:PORT "
        "[default: config, else $EBB_SPARK_MASTER, else the shared Spark service]",
    )  # fmt: skip
    where.add_argument("--spark-remote", metavar="URL", help="Spark Connect server, sc://host:port")


def planning_pruner(broker: Broker, args: argparse.Namespace) -> Pruner:
    """The pruner on the Spark the flags chose, ready to plan: at the warm service's
    desk, or with this process's own session started."""
    from engine.prune.pruner import Pruner
    from engine.prune.session import spark_engine_for

    spark = spark_engine_for(broker.config, broker.data, master=args.spark_master, remote=args.spark_remote)
    pruner = Pruner(broker, spark)
    if pruner.use_desk():
        return pruner  # planned at the warm service's desk: no session of this process's own
    try:
        wait_for_spark(spark)
    except BaseException:
        spark.stop()
        raise
    return pruner
