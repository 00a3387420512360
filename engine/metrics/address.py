"""Where the metrics are served: ``HOST:PORT`` on a loopback address only.

The metrics name every topic and group, and Prometheus' endpoint has no
authentication: like the Spark Connect server the tests start, it listens on
loopback, and a Prometheus on another host scrapes it through an agent or a proxy
that the operator secures (``[engine] metrics`` in README.md)."""

from __future__ import annotations

import ipaddress

from engine.digits import is_digits
from engine.errors import InvalidInput

#: what a host name may be besides a loopback IP address
LOCALHOST = "localhost"


def parse_address(text: str) -> tuple[str, int]:
    """``(host, port)`` of ``127.0.0.1:9464``, ``[::1]:9464`` or ``localhost:9464``."""
    host, sep, port_text = text.strip().rpartition(":")
    if not sep or not host:
        raise InvalidInput(f"metrics address {text!r}: expected HOST:PORT, e.g. 127.0.0.1:9464")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        # ``::1:9464`` could be an address with no port; a URL takes it in brackets.
        raise InvalidInput(f"metrics address {text!r}: write an IPv6 address in brackets, e.g. [::1]:9464")
    if host.lower() == LOCALHOST:
        host = LOCALHOST  # a host name is case-insensitive
    if not is_digits(port_text) or not 0 < int(port_text) < 65536:
        raise InvalidInput(f"metrics address {text!r}: the port must be 1-65535")
    if host != LOCALHOST:
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise InvalidInput(
                f"metrics address {text!r}: only a loopback address (127.0.0.1, [::1] or localhost) is served;"
                " put an agent or a proxy in front for other hosts"
            )
    return host, int(port_text)


def url_address(host: str, port: int) -> str:
    """``HOST:PORT`` as a URL names it (an IPv6 address in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
