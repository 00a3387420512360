"""How Spark is configured: the settings, logging and JVM options of a local session
and of the shared service's server. A leaf module: engine/prune/session.py builds
sessions from it and engine/prune/spark_service.py starts the server with it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

LOG_NAME = "spark.log"
LOG4J2_NAME = "log4j2.properties"

#: log4j2 config: everything from WARN up into one file, named by ``-Dspark.logfile``.
LOG4J2_PROPERTIES = """\
status = error
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = ${sys:spark.logfile}
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.parquet.name = org.apache.parquet.CorruptStatistics
logger.parquet.level = error
"""

#: Defaults for a local session (measured in docs/SPARK_NOTES.md); the config file's
#: ``spark`` table is applied on top.
LOCAL_DEFAULTS: dict[str, str] = {
    "spark.app.name": "ebbtide",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.driver.memory": "1g",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # The planner's rows come as a bucketed table, each bucket file sorted
    # (engine/prune/bucketed.py): read in that order, not sorted again.
    "spark.sql.legacy.bucketedTableScan.outputOrdering": "true",
    # The plan has no shuffle to adapt (its rows come bucketed) and broadcasts its
    # facts by hint; adaptive execution only re-optimises the query once the
    # broadcast is built: a tenth of a small plan's time and of a 1M-segment cycle's
    # (docs/SPARK_NOTES.md, "Adaptive execution").
    "spark.sql.adaptive.enabled": "false",
}

#: The local JVM's collector, unless the config's extraJavaOptions choose one: a plan
#: allocates short-lived rows at a high rate and pauses do not matter, so the
#: throughput collector does better than G1, whose concurrent marking takes one of
#: the two cores from the tasks (docs/SPARK_NOTES.md: about 15% less JVM CPU a plan).
LOCAL_COLLECTOR = "-XX:+UseParallelGC"
_CHOOSES_COLLECTOR = re.compile(r"-XX:\+Use\w+GC\b")

#: The subset a Connect client may set: runtime SQL settings of its server session.
CONNECT_DEFAULTS: dict[str, str] = {k: v for k, v in LOCAL_DEFAULTS.items() if k.startswith("spark.sql.")}


def spark_home() -> Path:
    """The pyspark package directory: the Spark distribution the wheel ships."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def write_log4j2_config(log_dir: Path) -> Path:
    """Write the log4j2 config into ``log_dir`` (created owner-only) and return its path."""
    log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = log_dir / LOG4J2_NAME
    path.write_text(LOG4J2_PROPERTIES)
    return path


def java_log_options(log_dir: Path) -> str:
    """``-D`` options that point a Spark JVM's log4j2 at ``log_dir/spark.log``."""
    log_dir = log_dir.absolute()  # a file URI cannot be relative
    config = write_log4j2_config(log_dir)
    # Quoted because Spark splits extraJavaOptions on whitespace and the data
    # directory may contain spaces.
    return f'"-Dlog4j2.configurationFile={config.as_uri()}" "-Dspark.logfile={log_dir / LOG_NAME}"'


def server_conf(log_dir: Path, conf: Mapping[str, str]) -> dict[str, str]:
    """The Spark settings of the shared service's server: a local session's, the
    config file's on top, and its log, warehouse and collector in ``log_dir``."""
    options = {**LOCAL_DEFAULTS, "spark.app.name": "ebbtide-service", **conf}
    options.pop("spark.master", None)  # the supervisor's --master
    options.setdefault("spark.sql.warehouse.dir", str(log_dir / "spark-warehouse"))
    options["spark.driver.extraJavaOptions"] = local_java_options(
        log_dir, conf.get("spark.driver.extraJavaOptions", "")
    )
    return options


def local_java_options(log_dir: Path, extra: str) -> str:
    """The local driver JVM's options: ours, then the config file's ``extra``. They
    are added to ours, not put in their place: ours are what keeps Spark's logging
    off the terminal. Ours choose the collector only if ``extra`` does not."""
    options = [java_log_options(log_dir)]
    if not _CHOOSES_COLLECTOR.search(extra):
        options.append(LOCAL_COLLECTOR)
    return " ".join([*options, extra] if extra else options)
