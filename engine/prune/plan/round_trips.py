"""The planning query in as few Spark Connect round trips as it needs: one.

On a Connect session the public calls analyse the plan's query three times before a
row comes back: ``SparkSession.sql`` sends it as a command, which the server parses
and analyses at once (to run it if it is a command); ``DataFrame.toArrow`` first asks
the server for the result's schema (a second analysis), then executes the query (a
third). On a warm server with a small topic those two extra analyses were half a
plan's time (docs/BENCHMARKS.md). So here the query goes to the server as a SQL
relation that is analysed only when it runs, and its Arrow result is taken as the
server sends it; the result is the same table either way
(``tests/prune/test_plan_round_trips.py``).

That needs the Connect client's own plan classes (``pyspark.sql.connect.plan.SQL``,
as ``SparkSession.sql`` builds it). A classic session is not a client: it analyses
once, and takes the public calls.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect client session (without importing the client)."""
    return type(spark).__module__.startswith("pyspark.sql.connect.")


def sql_frame(spark: Any, text: str, **frames: Any) -> Any:
    """``spark.sql(text, **frames)``, the DataFrames named in ``text`` as ``{name}``;
    on Connect, sent with the query that reads it instead of analysed on its own."""
    if not is_connect(spark):
        return spark.sql(text, **frames)
    from pyspark.sql.connect.dataframe import DataFrame
    from pyspark.sql.connect.plan import SQL, SubqueryAlias
    from pyspark.sql.connect.sql_formatter import SQLStringFormatter

    # As SparkSession.sql does: the formatter names each DataFrame as a view of the query.
    formatter = SQLStringFormatter(spark)
    query = formatter.format(text, **frames)
    views = [SubqueryAlias(frame._plan, name) for frame, name in formatter._temp_views]
    return DataFrame(SQL(query, [], {}, views), spark)


def to_arrow(frame: Any) -> pa.Table:
    """``frame.toArrow()``; on Connect without asking for its schema first."""
    if not is_connect(frame.sparkSession):
        return frame.toArrow()
    table, _schema = frame._to_table()
    return table
