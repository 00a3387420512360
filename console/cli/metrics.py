"""``--metrics ADDR`` / ``[engine] metrics``: the Prometheus endpoint of ``ebb engine``
and the console (engine/metrics), started with the process and stopped with it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from engine.broker import Broker
from engine.errors import AddressInUse

if TYPE_CHECKING:
    from engine.metrics.server import MetricsServer


def serve_metrics(
    broker: Broker, address: str | None, spark_state: Callable[[], str] | None, warn: Callable[[str], None]
) -> MetricsServer | None:
    """Serve the data directory's metrics on ``address`` (default: the config's);
    None when neither names one. prometheus-client is imported only then.

    Where the configured address is in use already, ``warn`` is told and it is not
    served, rather than an error: every process of a data directory reads the config, and the one
    serving it (``ebb engine`` beside a console, the usual pair) serves the same
    figures, read from the same catalog. An address given (``--metrics``) must be
    served."""
    configured = address is None
    address = broker.config.metrics if configured else address
    if address is None:
        return None
    from engine.metrics.server import MetricsServer

    config_path = broker.config_path if broker.config_path.exists() else None
    server = MetricsServer(address, broker.data.root, config_path, spark_state)
    try:
        server.start()
    except AddressInUse as error:
        if not configured:
            raise
        warn(f"{error}: another process serves it (ebb engine or a console of this data directory?); not served here")
        return None
    return server
