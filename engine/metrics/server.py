"""Serves the metrics of a data directory over HTTP (Prometheus text format) from a
thread of the calling process: ``ebb engine`` and the console."""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client import start_http_server
from prometheus_client.registry import CollectorRegistry

from engine.errors import AddressInUse, InvalidInput
from engine.metrics.address import parse_address, url_address
from engine.metrics.collector import EbbCollector


class MetricsServer:
    """``/metrics`` of ``root`` on ``address`` (loopback ``HOST:PORT``) until :meth:`stop`."""

    def __init__(
        self, address: str, root: Path, config_path: Path | None, spark_state: Callable[[], str] | None = None
    ) -> None:
        self.host, self.port = parse_address(address)
        #: as a URL names it, whatever blanks or case the config wrote
        self.address = url_address(self.host, self.port)
        # Its names come with each scrape (topics come and go): a registry that supports
        # such a collector still filters a scrape by ``name[]``.
        self.registry = CollectorRegistry(auto_describe=False, support_collectors_without_names=True)
        self.registry.register(EbbCollector(root, config_path, spark_state))
        self._server: Any = None
        self._thread: Any = None

    def start(self) -> None:
        try:
            self._server, self._thread = start_http_server(self.port, self.host, registry=self.registry)
        except OSError as error:
            failed = AddressInUse if error.errno == errno.EADDRINUSE else InvalidInput
            raise failed(f"metrics address {self.address}: cannot listen ({error.strerror or error})") from None

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join()
            self._server = self._thread = None
