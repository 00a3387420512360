"""``--metrics ADDR`` / ``[engine] metrics``: the Prometheus endpoint of ``ebb engine``
and the console (engine/metrics), started with the process and stopped with it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from engine.broker import Broker

if TYPE_CHECKING:
    from engine.metrics.server import MetricsServer


def serve_metrics(broker: Broker, address: str | None, spark_state: Callable[[], str] | None) -> MetricsServer | None:
    """Serve the data directory's metrics on ``address`` (default: the config's);
    None when neither names one. prometheus-client is imported only then."""
    address = address if address is not None else broker.config.metrics
    if address is None:
        return None
    from engine.metrics.server import MetricsServer

    config_path = broker.config_path if broker.config_path.exists() else None
    server = MetricsServer(address, broker.data.root, config_path, spark_state)
    server.start()
    return server
