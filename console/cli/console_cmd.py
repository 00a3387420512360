"""``ebb console`` (and ``ebb`` alone): the Textual console over a data directory."""

from __future__ import annotations

import argparse
from contextlib import ExitStack

from console.cli.spark_flags import add_spark_flags
from engine.broker import Broker
from engine.errors import InvalidInput


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("console", help="the Textual console (also `ebb` with no command)")
    add_arguments(parser)
    parser.set_defaults(run=run_console)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--demo", action="store_true", help="seed demo topics and run producers and consumers")
    parser.add_argument("--read-only", action="store_true", help="hide and refuse every mutating action")
    parser.add_argument("--theme", default=None, help="ebbtide-dark, ebbtide-light or ebbtide-high-contrast")
    add_spark_flags(parser)


def refuse_conflicts(args: argparse.Namespace) -> None:
    """``--demo`` with ``--read-only`` (the console's or ``ebb --read-only``): the demo
    seeds topics and runs producers and consumers, and a read-only console never
    writes. Refused before anything is opened rather than either flag ignored."""
    if getattr(args, "read_only", False) and getattr(args, "demo", False):
        raise InvalidInput(
            "--read-only: the console's --demo writes to the data directory (it seeds demo topics and runs "
            "producers and consumers); leave out one of the two"
        )


def run_console(broker: Broker, args: argparse.Namespace) -> int:
    # Imported here: the CLI's other commands must not pay for Textual's import.
    from console.app import EbbApp
    from console.cli.metrics import serve_metrics
    from console.host import ConsoleHost
    from themes import theme_names

    theme = getattr(args, "theme", None)
    if theme is not None and theme not in theme_names():
        raise InvalidInput(f"unknown theme {theme!r}; choose one of {', '.join(theme_names())}")
    config = broker.config
    root, config_path = broker.data.root, broker.config_path
    # Served from here on: a scrape before the host is built finds no Spark session.
    host: ConsoleHost | None = None
    notices: list[str] = []  # shown once the console is up: what is printed now is drawn over
    metrics = serve_metrics(
        broker, None, lambda: host.observed_session() if host is not None else "off", notices.append
    )
    # Whatever fails from here on (a host, a demo or an app that cannot be built)
    # still stops what was started before it: the metrics port, the demo's threads.
    with ExitStack() as started:
        # stopped in reverse: the demo, then the metrics (a scrape reads the host), then the host
        started.callback(lambda: host.close() if host is not None else None)
        if metrics is not None:
            started.callback(metrics.stop)
        # The CLI's broker is done: the console opens its own, one per thread of work.
        broker.close()
        host = ConsoleHost(
            root,
            config_path if config_path.exists() else None,
            read_only=getattr(args, "read_only", False),
            spark_master=getattr(args, "spark_master", None),
            spark_remote=getattr(args, "spark_remote", None),
        )
        demo_failures = None
        if getattr(args, "demo", False):
            from engine.demo import DemoTraffic

            demo = DemoTraffic(root, config_path if config_path.exists() else None)
            started.callback(demo.stop)  # also what a start that failed part way began
            demo.start()  # seeds in its threads: a first paint never waits for it
            demo_failures = demo.new_failures
        EbbApp(
            host,
            theme=theme,
            config_theme=config.console_theme,
            refresh_seconds=config.console_refresh_ms / 1000,
            notices=notices,
            demo_failures=demo_failures,
        ).run()
    return 0
